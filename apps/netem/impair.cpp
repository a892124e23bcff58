#include "impair.hpp"

#include <algorithm>
#include <cmath>

namespace tern::netem {

namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Whether this datagram is lost, advancing the Gilbert-Elliott chain after the decision so the
// first datagram of a run sees the state the previous one left.
bool lose(const Impairment& imp, DirState& s) {
  if (!imp.ge.on) return s.rng.chance(imp.loss);
  const bool lost = s.rng.chance(s.ge_bad ? imp.ge.loss_bad : imp.ge.loss_good);
  if (s.ge_bad) {
    if (s.rng.chance(imp.ge.r)) s.ge_bad = false;
  } else {
    if (s.rng.chance(imp.ge.p)) s.ge_bad = true;
  }
  return lost;
}

// Delay plus jitter, never negative.
std::uint64_t delay_sample(const Impairment& imp, DirState& s) {
  if (imp.jitter_ns == 0) return imp.delay_ns;
  const double j = static_cast<double>(imp.jitter_ns);
  const double offset = imp.jitter_dist == JitterDist::uniform ? (2.0 * s.rng.uniform() - 1.0) * j
                                                               : s.rng.normal() * j;
  const double d = static_cast<double>(imp.delay_ns) + offset;
  return d <= 0.0 ? 0 : static_cast<std::uint64_t>(d);
}

}  // namespace

void Rng::seed(std::uint64_t s) {
  for (auto& w : s_) w = splitmix64(s);
}

std::uint64_t Rng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  // 1 - uniform() is in (0, 1], so the logarithm is finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::uint64_t stream_seed(std::uint64_t global_seed, std::uint64_t flow_index, int direction) {
  std::uint64_t x = global_seed;
  std::uint64_t h = splitmix64(x);
  x = h ^ (flow_index * 2 + static_cast<std::uint64_t>(direction));
  return splitmix64(x);
}

Plan plan_datagram(const Impairment& imp, DirState& s, DirCounters& c, std::uint64_t now_ns,
                   std::size_t bytes) {
  Plan plan;
  ++c.in;
  c.in_bytes += bytes;
  if (imp.mtu != 0 && bytes > imp.mtu) {
    ++c.drop_mtu;
    return plan;
  }
  const bool lost = lose(imp, s);
  if (lost) {
    ++c.drop_loss;
    if (!s.last_lost) ++c.loss_bursts;
  }
  s.last_lost = lost;
  if (lost) return plan;

  int copies = 1;
  if (s.rng.chance(imp.duplicate)) {
    ++copies;
    ++c.duplicated;
  }
  for (int i = 0; i < copies; ++i) {
    if (s.held >= imp.queue) {
      ++c.drop_queue;
      continue;
    }
    std::uint64_t t = now_ns;
    if (imp.rate != 0) {
      // The copy waits for the link, then occupies it for its serialisation time; the
      // propagation delay below starts when its last byte is on the wire.
      const std::uint64_t start = std::max(now_ns, s.link_free_ns);
      const std::uint64_t wire_ns = static_cast<std::uint64_t>(static_cast<double>(bytes) * 1e9 /
                                                               static_cast<double>(imp.rate));
      s.link_free_ns = start + wire_ns;
      t = s.link_free_ns;
    }
    std::uint64_t release;
    if (s.rng.chance(imp.reorder)) {
      release = t;
      ++c.reordered;
    } else {
      release = t + delay_sample(imp, s);
      if (!imp.jitter_reorder) release = std::max(release, s.last_release_ns);
      s.last_release_ns = release;
    }
    plan.release_ns[plan.copies++] = release;
    ++s.held;
    ++c.queued;
    c.queued_peak = std::max<std::uint64_t>(c.queued_peak, s.held);
  }
  return plan;
}

}  // namespace tern::netem
