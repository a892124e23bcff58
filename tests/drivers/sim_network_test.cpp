// SimNetwork/SimDriver: the link conditioner's statistics and its determinism. Everything runs
// on virtual time; seeds are fixed and printed so a failure replays exactly.
#include "sim_network.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace tern::drv {
namespace {

const Endpoint kA = Endpoint::v4(0x0a000001, 1000);  // 10.0.0.1:1000
const Endpoint kB = Endpoint::v4(0x0a000002, 2000);  // 10.0.0.2:2000

// Payloads carry their sequence number and send time, so receivers check them without any
// bookkeeping shared with the sender.
struct Stamp {
  std::uint32_t seq = 0;
  std::uint64_t sent_us = 0;
};

std::vector<std::byte> payload(std::uint32_t seq, std::uint64_t sent_us, std::size_t size = 32) {
  std::vector<std::byte> b(std::max(size, sizeof(Stamp)));
  const Stamp s{seq, sent_us};
  std::memcpy(b.data(), &s, sizeof s);
  return b;
}

Stamp stamp_of(std::span<const std::byte> bytes) {
  Stamp s;
  EXPECT_GE(bytes.size(), sizeof s);
  std::memcpy(&s, bytes.data(), sizeof s);
  return s;
}

void send(SimDriver& d, const Endpoint& to, std::uint32_t seq, std::uint64_t now,
          std::size_t size = 32) {
  const auto bytes = payload(seq, now, size);
  const rt::TxFrame f{to, bytes};
  ASSERT_EQ(d.tx_burst({&f, 1}), 1u);
}

struct Arrival {
  std::uint64_t at_us;
  Endpoint from;
  Endpoint to;
  std::uint32_t seq;
  std::uint64_t sent_us;
  friend bool operator==(const Arrival&, const Arrival&) = default;
};

void collect(SimNetwork& net, SimDriver& d, std::vector<Arrival>& into) {
  std::vector<rt::RxFrame> rx(16);
  for (std::size_t n; (n = d.rx_burst(rx)) > 0;) {
    for (std::size_t i = 0; i < n; ++i) {
      const Stamp s = stamp_of(rx[i].bytes);
      into.push_back({net.now_us(), rx[i].from, d.local_endpoint(), s.seq, s.sent_us});
    }
  }
}

// Steps virtual time from one delivery to the next until nothing is in flight.
void drain(SimNetwork& net, std::vector<SimDriver*> drivers, std::vector<Arrival>& into) {
  for (auto d : drivers) collect(net, *d, into);
  while (net.next_delivery_us() != UINT64_MAX) {
    net.advance_to(net.next_delivery_us());
    for (auto d : drivers) collect(net, *d, into);
  }
}

// Advances to `t`, stopping at every delivery on the way so arrivals are stamped exactly.
void run_until(SimNetwork& net, std::uint64_t t, std::vector<SimDriver*> drivers,
               std::vector<Arrival>& into) {
  while (net.next_delivery_us() <= t) {
    net.advance_to(net.next_delivery_us());
    for (auto d : drivers) collect(net, *d, into);
  }
  net.advance_to(t);
  for (auto d : drivers) collect(net, *d, into);
}

// A busy two-way exchange over a link that uses every impairment at once.
std::vector<Arrival> scenario(std::uint64_t seed) {
  SimNetwork net(seed);
  LinkConditions c;
  c.loss = 0.1;
  c.duplicate = 0.1;
  c.reorder = 0.1;
  c.latency_us = 2000;
  c.jitter_us = 700;
  c.reorder_delay_us = 3000;
  c.bandwidth_bytes_per_s = 2'000'000;
  c.queue_limit_bytes = 4000;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  std::vector<Arrival> trace;
  for (std::uint32_t i = 0; i < 2000; ++i) {
    const std::uint64_t now = i * 150;
    run_until(net, now, {a.get(), b.get()}, trace);
    send(*a, kB, i, now, 100 + i % 200);
    if (i % 3 == 0) send(*b, kA, i, now, 400);
  }
  drain(net, {a.get(), b.get()}, trace);
  return trace;
}

TEST(SimNetwork, SameSeedSameTraceOtherSeedDiffers) {
  constexpr std::uint64_t kSeed = 0x5eed;
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  const auto first = scenario(kSeed);
  const auto second = scenario(kSeed);
  ASSERT_GT(first.size(), 1000u);
  EXPECT_TRUE(first == second);
  const auto other = scenario(kSeed + 1);
  EXPECT_FALSE(first == other);
}

TEST(SimNetwork, LossRateWithinBounds) {
  constexpr std::uint64_t kSeed = 7;
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  SimNetwork net(kSeed);
  LinkConditions c;
  c.loss = 0.2;
  c.latency_us = 100;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  std::vector<Arrival> got;
  for (std::uint32_t i = 0; i < 10000; ++i) {
    net.advance_to(i * 10);
    send(*a, kB, i, net.now_us());
  }
  drain(net, {b.get()}, got);
  // 20% of 10,000 has a standard deviation of 40; +-300 is beyond any honest fluke.
  EXPECT_GE(net.stats().lost, 1700u);
  EXPECT_LE(net.stats().lost, 2300u);
  EXPECT_EQ(got.size() + net.stats().lost, 10000u);
  EXPECT_EQ(net.stats().sent, 10000u);
  EXPECT_EQ(net.stats().delivered, got.size());
}

TEST(SimNetwork, DuplicationDeliversSomeTwice) {
  constexpr std::uint64_t kSeed = 11;
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  SimNetwork net(kSeed);
  LinkConditions c;
  c.duplicate = 0.3;
  c.latency_us = 500;
  c.jitter_us = 100;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  std::vector<Arrival> got;
  for (std::uint32_t i = 0; i < 10000; ++i) {
    net.advance_to(i * 10);
    send(*a, kB, i, net.now_us());
  }
  drain(net, {b.get()}, got);
  std::map<std::uint32_t, int> copies;
  for (const Arrival& x : got) ++copies[x.seq];
  EXPECT_EQ(copies.size(), 10000u);  // nothing lost
  std::uint64_t twice = 0;
  for (const auto& [seq, n] : copies) {
    EXPECT_LE(n, 2) << seq;
    if (n == 2) ++twice;
  }
  EXPECT_EQ(twice, net.stats().duplicated);
  EXPECT_EQ(got.size(), 10000u + twice);
  EXPECT_GE(twice, 2700u);
  EXPECT_LE(twice, 3300u);
}

TEST(SimNetwork, ReorderingActuallyReorders) {
  constexpr std::uint64_t kSeed = 13;
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  SimNetwork net(kSeed);
  LinkConditions c;
  c.reorder = 0.1;
  c.latency_us = 1000;
  c.reorder_delay_us = 5000;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  std::vector<Arrival> got;
  for (std::uint32_t i = 0; i < 2000; ++i) {
    run_until(net, i * 100, {b.get()}, got);
    send(*a, kB, i, net.now_us());
  }
  drain(net, {b.get()}, got);
  ASSERT_EQ(got.size(), 2000u);
  std::uint64_t late = 0;  // arrivals behind a later-sent datagram
  std::uint32_t highest = 0;
  for (const Arrival& x : got) {
    if (x.seq < highest) ++late;
    highest = std::max(highest, x.seq);
  }
  EXPECT_GT(net.stats().reordered, 100u);
  EXPECT_LT(net.stats().reordered, 300u);
  // With no jitter only the held-back ones arrive out of order, and each does (5 ms extra
  // covers 50 later sends) unless nothing later overtook it: possible only at the very end.
  EXPECT_LE(late, net.stats().reordered);
  EXPECT_GE(late + 5, net.stats().reordered);
  for (const Arrival& x : got) {
    const std::uint64_t delay = x.at_us - x.sent_us;
    EXPECT_TRUE(delay == 1000 || delay == 6000) << delay;
  }
}

TEST(SimNetwork, LatencyAndJitterBoundsRespected) {
  constexpr std::uint64_t kSeed = 17;
  SCOPED_TRACE("seed " + std::to_string(kSeed));
  SimNetwork net(kSeed);
  LinkConditions c;
  c.latency_us = 10000;
  c.jitter_us = 2000;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  std::vector<Arrival> got;
  for (std::uint32_t i = 0; i < 5000; ++i) {
    run_until(net, i * 37, {b.get()}, got);
    send(*a, kB, i, net.now_us());
  }
  drain(net, {b.get()}, got);
  ASSERT_EQ(got.size(), 5000u);
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (const Arrival& x : got) {
    const std::uint64_t delay = x.at_us - x.sent_us;
    lo = std::min(lo, delay);
    hi = std::max(hi, delay);
    EXPECT_GE(delay, 10000u);
    EXPECT_LE(delay, 12000u);
  }
  // The jitter is really drawn across its whole range, not pinned at one end.
  EXPECT_LT(lo, 10100u);
  EXPECT_GT(hi, 11900u);
}

TEST(SimNetwork, LinksAreOneDirectional) {
  SimNetwork net(19);
  LinkConditions slow;
  slow.latency_us = 5000;
  net.set_link(kA, kB, slow);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  send(*a, kB, 1, 0);
  send(*b, kA, 2, 0);
  std::vector<Arrival> got;
  drain(net, {a.get(), b.get()}, got);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].seq, 2u);  // default link: immediate
  EXPECT_EQ(got[0].at_us, 0u);
  EXPECT_EQ(got[1].seq, 1u);
  EXPECT_EQ(got[1].at_us, 5000u);
}

TEST(SimNetwork, BandwidthLimitSpacesDeliveries) {
  SimNetwork net(23);
  LinkConditions c;
  c.bandwidth_bytes_per_s = 1'000'000;  // 1 byte per microsecond
  c.latency_us = 300;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  for (std::uint32_t i = 0; i < 10; ++i) send(*a, kB, i, 0, 1000);
  std::vector<Arrival> got;
  drain(net, {b.get()}, got);
  ASSERT_EQ(got.size(), 10u);
  for (std::uint32_t i = 0; i < 10; ++i) {
    EXPECT_EQ(got[i].seq, i);
    EXPECT_EQ(got[i].at_us, (i + 1) * 1000 + 300);
  }
  // An idle link starts fresh: the next datagram waits only for itself.
  net.advance_to(50000);
  send(*a, kB, 99, net.now_us(), 500);
  got.clear();
  drain(net, {b.get()}, got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].at_us, 50000u + 500 + 300);
}

TEST(SimNetwork, QueueLimitTailDrops) {
  SimNetwork net(29);
  LinkConditions c;
  c.bandwidth_bytes_per_s = 1'000'000;
  c.queue_limit_bytes = 5000;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  for (std::uint32_t i = 0; i < 10; ++i) send(*a, kB, i, 0, 1000);
  EXPECT_EQ(net.stats().queue_dropped, 5u);
  // Once the queue has drained a little there is room again.
  net.advance_to(2000);
  send(*a, kB, 10, net.now_us(), 1000);
  EXPECT_EQ(net.stats().queue_dropped, 5u);
  std::vector<Arrival> got;
  drain(net, {b.get()}, got);
  ASSERT_EQ(got.size(), 6u);
  for (std::uint32_t i = 0; i < 5; ++i) EXPECT_EQ(got[i].seq, i);  // the tail was dropped
  EXPECT_EQ(got[5].seq, 10u);
  EXPECT_EQ(got[5].at_us, 6000u);
}

TEST(SimNetwork, DownLinkDropsEverything) {
  SimNetwork net(31);
  LinkConditions dead;
  dead.down = true;
  net.set_link(kA, kB, dead);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  for (std::uint32_t i = 0; i < 100; ++i) send(*a, kB, i, 0);
  send(*b, kA, 7, 0);
  std::vector<Arrival> got;
  drain(net, {a.get(), b.get()}, got);
  ASSERT_EQ(got.size(), 1u);  // only the other direction
  EXPECT_EQ(got[0].to, kA);
  EXPECT_EQ(net.stats().lost, 100u);

  net.set_link(kA, kB, LinkConditions{});  // link back up
  send(*a, kB, 200, net.now_us());
  got.clear();
  drain(net, {b.get()}, got);
  EXPECT_EQ(got.size(), 1u);
}

TEST(SimNetwork, UnroutableCounted) {
  SimNetwork net(37);
  LinkConditions c;
  c.latency_us = 1000;
  net.set_default_link(c);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  send(*a, Endpoint::v4(0x0a000063, 9), 1, 0);  // nobody there
  send(*a, kB, 2, 0);                           // in flight when b goes away
  net.advance_to(500);
  b.reset();
  net.advance_to(2000);
  EXPECT_EQ(net.stats().unroutable, 2u);

  // Arrived but never read when the host detached: also unroutable.
  auto b2 = net.attach(kB);
  send(*a, kB, 3, net.now_us());
  net.advance_to(5000);
  b2.reset();
  EXPECT_EQ(net.stats().unroutable, 3u);
  EXPECT_EQ(net.stats().delivered, 0u);
}

TEST(SimNetwork, AttachAssignsPortsAndRefusesDuplicates) {
  SimNetwork net(41);
  auto a = net.attach(Endpoint::v4(0x7f000001, 0));
  auto b = net.attach(Endpoint::v4(0x7f000001, 0));
  EXPECT_NE(a->local_endpoint().port, 0);
  EXPECT_NE(a->local_endpoint(), b->local_endpoint());
  EXPECT_THROW(net.attach(a->local_endpoint()), std::invalid_argument);
  EXPECT_FALSE(a->caps().waitable);
  EXPECT_EQ(a->name(), "sim");
  // Detaching frees the address for the next host.
  const Endpoint freed = a->local_endpoint();
  a.reset();
  EXPECT_NO_THROW(a = net.attach(freed));
}

TEST(SimNetwork, Ipv6AddressesRoute) {
  SimNetwork net(43);
  const Endpoint v6 = Endpoint::parse("[2001:db8::1]:4000").value();
  auto a = net.attach(kA);
  auto b = net.attach(v6);
  send(*a, v6, 5, 0);
  std::vector<Arrival> got;
  drain(net, {b.get()}, got);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from, kA);
}

TEST(SimNetwork, FramesStayValidUntilNextRxBurst) {
  SimNetwork net(47);
  auto a = net.attach(kA);
  auto b = net.attach(kB);
  for (std::uint32_t i = 0; i < 20; ++i) send(*a, kB, i, 0);
  std::vector<rt::RxFrame> rx(20);
  ASSERT_EQ(b->rx_burst(rx), 20u);
  for (std::uint32_t i = 0; i < 20; ++i) EXPECT_EQ(stamp_of(rx[i].bytes).seq, i);
  EXPECT_EQ(b->rx_burst(rx), 0u);
  EXPECT_EQ(b->stats().rx_datagrams, 20u);
  EXPECT_EQ(a->stats().tx_datagrams, 20u);
}

TEST(SimNetwork, DriverOutlivingNetworkIsInert) {
  std::unique_ptr<SimDriver> a;
  {
    SimNetwork net(53);
    a = net.attach(kA);
  }
  const auto bytes = payload(1, 0);
  const rt::TxFrame f{kB, bytes};
  EXPECT_EQ(a->tx_burst({&f, 1}), 0u);
  EXPECT_EQ(a->stats().tx_dropped, 1u);
  std::vector<rt::RxFrame> rx(4);
  EXPECT_EQ(a->rx_burst(rx), 0u);
}

TEST(SimNetwork, VirtualTimeNeverMovesBackwards) {
  SimNetwork net(59);
  net.advance_to(1000);
  net.advance_to(500);
  EXPECT_EQ(net.now_us(), 1000u);
  EXPECT_EQ(net.next_delivery_us(), UINT64_MAX);
  EXPECT_EQ(net.seed(), 59u);
}

}  // namespace
}  // namespace tern::drv
