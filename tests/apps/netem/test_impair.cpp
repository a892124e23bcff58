// tern-netem's impairments on simulated time: each one's statistics over a seeded run, the
// bounds that must hold for every datagram, and the value parsers shared by flags and file.
#include "impair.hpp"
#include "options.hpp"

#include <gtest/gtest.h>

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace tern::netem {
namespace {

constexpr std::uint64_t kSeed = 20261126;
constexpr std::uint64_t kMs = 1000000;

struct Trace {
  std::vector<int> copies;             // per datagram
  std::vector<std::uint64_t> release;  // every planned copy, in plan order
  std::vector<std::uint64_t> arrival;  // the arrival of each copy's datagram
  DirCounters counters;
};

// n datagrams of `bytes`, one every `gap_ns`, none released (so `held` only grows) unless
// `release_each` says so.
Trace drive(const Impairment& imp, int n, std::size_t bytes, std::uint64_t gap_ns,
            bool release_each = true, std::uint64_t seed = kSeed) {
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  Trace run;
  DirState s;
  s.rng.seed(stream_seed(seed, 0, 0));
  for (int i = 0; i < n; ++i) {
    const std::uint64_t now = 1000 * kMs + std::uint64_t(i) * gap_ns;
    const Plan p = plan_datagram(imp, s, run.counters, now, bytes);
    run.copies.push_back(p.copies);
    for (int c = 0; c < p.copies; ++c) {
      run.release.push_back(p.release_ns[c]);
      run.arrival.push_back(now);
      if (release_each) released(s, run.counters);
    }
  }
  return run;
}

TEST(NetemImpair, RandomLossNearItsProbability) {
  Impairment imp;
  imp.loss = 0.05;
  const Trace r = drive(imp, 20000, 100, kMs);
  const double rate = double(r.counters.drop_loss) / 20000;
  EXPECT_GT(rate, 0.04);
  EXPECT_LT(rate, 0.06);
  EXPECT_EQ(r.counters.in, 20000u);
  EXPECT_EQ(r.release.size() + r.counters.drop_loss, 20000u);
}

TEST(NetemImpair, GilbertElliottBurstsLastAboutOneOverR) {
  Impairment imp;
  imp.ge = *parse_ge("1%,25%");
  const Trace r = drive(imp, 20000, 100, kMs);
  // Runs of consecutive losses, counted from the plans themselves.
  std::uint64_t bursts = 0, lost = 0;
  for (std::size_t i = 0; i < r.copies.size(); ++i) {
    if (r.copies[i] != 0) continue;
    ++lost;
    if (i == 0 || r.copies[i - 1] != 0) ++bursts;
  }
  ASSERT_GT(bursts, 50u);
  EXPECT_EQ(bursts, r.counters.loss_bursts);
  EXPECT_EQ(lost, r.counters.drop_loss);
  const double mean_burst = double(lost) / double(bursts);
  EXPECT_GT(mean_burst, 3.2);  // 1 / r = 4
  EXPECT_LT(mean_burst, 4.8);
  const double rate = double(lost) / 20000;  // p / (p + r) = 3.85%
  EXPECT_GT(rate, 0.025);
  EXPECT_LT(rate, 0.055);
}

TEST(NetemImpair, GilbertElliottGoodStateLossAndPartialBadLoss) {
  Impairment imp;
  imp.ge = *parse_ge("0%,100%,100%,10%");  // never bad: only the good state's 10%
  const Trace r = drive(imp, 20000, 100, kMs);
  const double rate = double(r.counters.drop_loss) / 20000;
  EXPECT_GT(rate, 0.08);
  EXPECT_LT(rate, 0.12);
}

TEST(NetemImpair, DelayIsALowerBoundAndJitterStaysInItsBand) {
  Impairment imp;
  imp.delay_ns = 25 * kMs;
  imp.jitter_ns = 5 * kMs;
  imp.jitter_reorder = true;
  const Trace r = drive(imp, 5000, 100, kMs);
  std::vector<std::uint64_t> d;
  for (std::size_t i = 0; i < r.release.size(); ++i) d.push_back(r.release[i] - r.arrival[i]);
  EXPECT_GE(*std::min_element(d.begin(), d.end()), 20 * kMs);
  EXPECT_LE(*std::max_element(d.begin(), d.end()), 30 * kMs);
  std::sort(d.begin(), d.end());
  EXPECT_NEAR(double(d[d.size() / 2]), 25.0 * kMs, 0.5 * kMs);
  // Uniform: about a tenth in each tenth of the band.
  const auto low = std::count_if(d.begin(), d.end(), [](auto v) { return v < 21 * kMs; });
  EXPECT_GT(low, 5000 / 10 * 7 / 10);
  EXPECT_LT(low, 5000 / 10 * 13 / 10);
}

TEST(NetemImpair, NormalJitterHasItsStandardDeviation) {
  Impairment imp;
  imp.delay_ns = 50 * kMs;
  imp.jitter_ns = 4 * kMs;
  imp.jitter_dist = JitterDist::normal;
  imp.jitter_reorder = true;
  const Trace r = drive(imp, 20000, 100, kMs);
  double sum = 0, sq = 0;
  for (std::size_t i = 0; i < r.release.size(); ++i) {
    const double v = double(r.release[i] - r.arrival[i]) / kMs;
    sum += v;
    sq += v * v;
  }
  const double n = double(r.release.size());
  const double mean = sum / n;
  const double sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 50.0, 0.2);
  EXPECT_NEAR(sd, 4.0, 0.2);
}

TEST(NetemImpair, JitterKeepsOrderUnlessAllowedToReorder) {
  Impairment imp;
  imp.delay_ns = 10 * kMs;
  imp.jitter_ns = 8 * kMs;
  const Trace kept = drive(imp, 5000, 100, kMs / 10);
  EXPECT_TRUE(std::is_sorted(kept.release.begin(), kept.release.end()));
  imp.jitter_reorder = true;
  const Trace loose = drive(imp, 5000, 100, kMs / 10);
  EXPECT_FALSE(std::is_sorted(loose.release.begin(), loose.release.end()));
}

TEST(NetemImpair, DuplicationNearItsProbability) {
  Impairment imp;
  imp.duplicate = 0.1;
  const Trace r = drive(imp, 20000, 100, kMs);
  EXPECT_GT(r.counters.duplicated, 1600u);
  EXPECT_LT(r.counters.duplicated, 2400u);
  EXPECT_EQ(r.release.size(), 20000u + r.counters.duplicated);
}

TEST(NetemImpair, ReorderSendsAShareImmediately) {
  Impairment imp;
  imp.delay_ns = 10 * kMs;
  imp.reorder = 0.2;
  const Trace r = drive(imp, 20000, 100, kMs / 10);
  EXPECT_GT(r.counters.reordered, 3600u);
  EXPECT_LT(r.counters.reordered, 4400u);
  std::uint64_t immediate = 0;
  for (std::size_t i = 0; i < r.release.size(); ++i) {
    if (r.release[i] == r.arrival[i])
      ++immediate;
    else
      EXPECT_EQ(r.release[i] - r.arrival[i], 10 * kMs);
  }
  EXPECT_EQ(immediate, r.counters.reordered);
  EXPECT_FALSE(std::is_sorted(r.release.begin(), r.release.end()));
}

TEST(NetemImpair, RateSpacesDatagramsAndTheQueueTailDrops) {
  Impairment imp;
  imp.rate = 100000;  // bytes/s: a 1000-byte datagram takes 10 ms
  imp.queue = 50;
  // 200 datagrams arriving together, none leaving: 50 fit, 150 are tail-dropped.
  const Trace r = drive(imp, 200, 1000, 0, /*release_each=*/false);
  EXPECT_EQ(r.release.size(), 50u);
  EXPECT_EQ(r.counters.drop_queue, 150u);
  EXPECT_EQ(r.counters.queued_peak, 50u);
  EXPECT_EQ(r.counters.queued, 50u);
  for (std::size_t i = 0; i < r.release.size(); ++i) {
    EXPECT_EQ(r.release[i] - r.arrival[i], (i + 1) * 10 * kMs) << i;
  }
}

TEST(NetemImpair, MtuDropsExactlyTheLargerOnes) {
  Impairment imp;
  imp.mtu = 500;
  DirState s;
  DirCounters c;
  for (std::size_t bytes : {400, 500, 501, 1200, 499}) {
    const Plan p = plan_datagram(imp, s, c, 0, bytes);
    EXPECT_EQ(p.copies, bytes > 500 ? 0 : 1) << bytes;
  }
  EXPECT_EQ(c.drop_mtu, 2u);
}

TEST(NetemImpair, SameSeedSamePlansOtherSeedOtherPlans) {
  Impairment imp;
  imp.loss = 0.1;
  imp.duplicate = 0.05;
  imp.delay_ns = 5 * kMs;
  imp.jitter_ns = 2 * kMs;
  const Trace a = drive(imp, 5000, 100, kMs, true, 42);
  const Trace b = drive(imp, 5000, 100, kMs, true, 42);
  const Trace c = drive(imp, 5000, 100, kMs, true, 43);
  EXPECT_EQ(a.copies, b.copies);
  EXPECT_EQ(a.release, b.release);
  EXPECT_NE(a.copies, c.copies);
  // Streams of one seed differ per flow and per direction.
  EXPECT_NE(stream_seed(42, 0, 0), stream_seed(42, 0, 1));
  EXPECT_NE(stream_seed(42, 0, 1), stream_seed(42, 1, 0));
}

TEST(NetemParse, Values) {
  EXPECT_DOUBLE_EQ(*parse_probability("5%"), 0.05);
  EXPECT_DOUBLE_EQ(*parse_probability("0.25"), 0.25);
  EXPECT_DOUBLE_EQ(*parse_probability("100%"), 1.0);
  for (const char* bad : {"5", "101%", "-1%", "", "%", "0.5x", "1e-2"}) {
    EXPECT_FALSE(parse_probability(bad)) << bad;
  }
  EXPECT_EQ(*parse_duration_ns("25ms"), 25 * kMs);
  EXPECT_EQ(*parse_duration_ns("1.5s"), 1500 * kMs);
  EXPECT_EQ(*parse_duration_ns("300us"), 300000u);
  EXPECT_EQ(*parse_duration_ns("0"), 0u);
  for (const char* bad : {"25", "ms", "-5ms", "2h", "5 ms"})
    EXPECT_FALSE(parse_duration_ns(bad)) << bad;
  EXPECT_EQ(*parse_rate("1mbit"), 125000u);
  EXPECT_EQ(*parse_rate("500kbit"), 62500u);
  EXPECT_EQ(*parse_rate("2mbps"), 2000000u);
  EXPECT_EQ(*parse_rate("1500"), 1500u);
  EXPECT_EQ(*parse_rate("8bit"), 1u);
  for (const char* bad : {"1bit", "fast", "1 mbit", "-3", "mbit"})
    EXPECT_FALSE(parse_rate(bad)) << bad;
  const auto ge = parse_ge("1%,30%,90%,0.01");
  ASSERT_TRUE(ge);
  EXPECT_TRUE(ge->on);
  EXPECT_DOUBLE_EQ(ge->p, 0.01);
  EXPECT_DOUBLE_EQ(ge->r, 0.3);
  EXPECT_DOUBLE_EQ(ge->loss_bad, 0.9);
  EXPECT_DOUBLE_EQ(ge->loss_good, 0.01);
  const auto ge2 = parse_ge("1%,30%");
  ASSERT_TRUE(ge2);
  EXPECT_DOUBLE_EQ(ge2->loss_bad, 1.0);
  EXPECT_DOUBLE_EQ(ge2->loss_good, 0.0);
  for (const char* bad : {"1%", "1%,2%,3%,4%,5%", "1%,,2%", "a,b"})
    EXPECT_FALSE(parse_ge(bad)) << bad;
}

}  // namespace
}  // namespace tern::netem

namespace tern::netem {
namespace {

// A file's values, then flags over them: both-ways flags first, per-direction ones last.
TEST(NetemConfig, FileThenFlags) {
  char path[] = "/tmp/netem-config-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text =
      "listen = \"127.0.0.1:7000\"\nupstream = \"127.0.0.1:7777\"\nseed = 9\nmax_flows = 10\n"
      "idle_timeout = \"2s\"\npool = 100\nslot_bytes = 1500\n"
      "[up]\nloss = \"5%\"\ndelay = 25\njitter = \"3ms\"\njitter_dist = \"normal\"\n"
      "jitter_reorder = true\nduplicate = 0.5\nrate = \"1mbit\"\nqueue = 7\nmtu = 1200\n"
      "[down]\nge = \"1%,30%\"\ndelay = \"10ms\"\nreorder = \"20%\"\nrate = 3000\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);

  const char* argv[] = {"tern-netem", "--config",   path, "--dup",  "1%", "--down-delay",
                        "5ms",        "--up-queue", "8",  "--seed", "11"};
  Config c;
  std::string error;
  ASSERT_EQ(parse_config(11, argv, c, error), ParseResult::ok) << error;
  unlink(path);
  EXPECT_EQ(c.listen.to_string(), "127.0.0.1:7000");
  EXPECT_EQ(c.upstream.to_string(), "127.0.0.1:7777");
  EXPECT_EQ(c.seed, 11u);
  EXPECT_EQ(c.max_flows, 10u);
  EXPECT_EQ(c.idle_timeout_ms, 2000u);
  EXPECT_EQ(c.pool, 100u);
  EXPECT_EQ(c.slot_bytes, 1500u);
  const Impairment& up = c.dir[kUp];
  EXPECT_DOUBLE_EQ(up.loss, 0.05);
  EXPECT_EQ(up.delay_ns, 25 * kMs);
  EXPECT_EQ(up.jitter_ns, 3 * kMs);
  EXPECT_EQ(up.jitter_dist, JitterDist::normal);
  EXPECT_TRUE(up.jitter_reorder);
  EXPECT_DOUBLE_EQ(up.duplicate, 0.01);  // --dup over the file
  EXPECT_EQ(up.rate, 125000u);
  EXPECT_EQ(up.queue, 8u);  // --up-queue over the file
  EXPECT_EQ(up.mtu, 1200u);
  const Impairment& down = c.dir[kDown];
  EXPECT_TRUE(down.ge.on);
  EXPECT_DOUBLE_EQ(down.ge.r, 0.3);
  EXPECT_EQ(down.delay_ns, 5 * kMs);  // --down-delay over the file
  EXPECT_DOUBLE_EQ(down.reorder, 0.2);
  EXPECT_EQ(down.rate, 3000u);
  EXPECT_DOUBLE_EQ(down.duplicate, 0.01);
  EXPECT_EQ(down.queue, 1000u);
}

}  // namespace
}  // namespace tern::netem
