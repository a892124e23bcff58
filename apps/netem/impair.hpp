// The impairments of one direction of one flow, as pure functions of time and a seeded PRNG.
//
// No sockets and no clock here (time is an argument, STYLE habit 1), so the statistics of
// every impairment are tested on simulated time (tests/apps/netem/test_impair.cpp) and the
// proxy loop only has to carry out the plan.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tern::netem {

// Gilbert-Elliott two-state loss: `p` good→bad and `r` bad→good per datagram; a datagram is
// lost with `loss_bad` in the bad state and `loss_good` in the good one (netem's gemodel
// p r 1-h 1-k). With loss_bad = 1 and loss_good = 0 loss bursts last 1/r datagrams on
// average and the long-run loss is p / (p + r).
struct GilbertElliott {
  bool on = false;
  double p = 0.0;
  double r = 1.0;
  double loss_bad = 1.0;
  double loss_good = 0.0;
};

enum class JitterDist : std::uint8_t { uniform, normal };

// One direction's configuration ([up] or [down]; every key in apps/netem/README.md).
struct Impairment {
  double loss = 0.0;  // random loss probability (exclusive with ge)
  GilbertElliott ge;
  std::uint64_t delay_ns = 0;
  std::uint64_t jitter_ns = 0;  // uniform: ±jitter; normal: standard deviation
  JitterDist jitter_dist = JitterDist::uniform;
  bool jitter_reorder = false;  // false: a jittered datagram never overtakes an earlier one
  double duplicate = 0.0;       // probability a datagram is sent twice
  double reorder = 0.0;         // probability a datagram skips the delay (netem's reorder)
  std::uint64_t rate = 0;       // bytes per second; 0: unlimited
  std::uint32_t queue = 1000;   // datagrams one flow may hold in this direction at once
  std::uint32_t mtu = 0;        // larger datagrams are dropped; 0: no limit
};

// xoshiro256** seeded through splitmix64: small state, fast, and the same sequence on every
// platform, so a seed reproduces a run.
class Rng {
 public:
  Rng() { seed(0); }
  explicit Rng(std::uint64_t s) { seed(s); }
  void seed(std::uint64_t s);
  std::uint64_t next();
  double uniform();  // [0, 1)
  double normal();   // standard normal (Box-Muller)
  bool chance(double p) { return p > 0.0 && uniform() < p; }

 private:
  std::uint64_t s_[4];
};

// One PRNG per direction per flow: the flow's creation index and the direction pick a stream
// of the global seed, so what happens to one flow does not depend on the others' traffic.
std::uint64_t stream_seed(std::uint64_t global_seed, std::uint64_t flow_index, int direction);

// What the impairments remember between datagrams of one direction of one flow.
struct DirState {
  Rng rng;
  bool ge_bad = false;
  bool last_lost = false;
  std::uint64_t link_free_ns = 0;     // when the rate-limited link finishes its last datagram
  std::uint64_t last_release_ns = 0;  // latest release so far (jitter that keeps order)
  std::uint32_t held = 0;             // datagrams planned and not yet sent
};

// Counters of one direction, summed over flows. Every drop has its own reason.
struct DirCounters {
  std::uint64_t in = 0;
  std::uint64_t in_bytes = 0;
  std::uint64_t out = 0;
  std::uint64_t out_bytes = 0;
  std::uint64_t drop_mtu = 0;       // larger than the direction's mtu
  std::uint64_t drop_loss = 0;      // random or Gilbert-Elliott loss
  std::uint64_t loss_bursts = 0;    // runs of consecutive lost datagrams (per flow)
  std::uint64_t drop_queue = 0;     // tail drop: the flow already held `queue` datagrams
  std::uint64_t drop_oversize = 0;  // larger than the proxy's slot_bytes
  std::uint64_t drop_pool = 0;      // every buffer of the pool in use
  std::uint64_t drop_send = 0;      // the kernel refused the send
  std::uint64_t drop_kernel = 0;    // lost in a full receive buffer before the proxy read it
  std::uint64_t duplicated = 0;     // extra copies made
  std::uint64_t reordered = 0;      // copies sent without the delay
  std::uint64_t queued = 0;         // held now
  std::uint64_t queued_peak = 0;    // most held by one flow at once
};

// The fate of one received datagram: up to two copies, each released at its time.
struct Plan {
  int copies = 0;  // 0: dropped (the counters say why)
  std::uint64_t release_ns[2] = {0, 0};
};

// Plans one datagram of `bytes` received at `now_ns`, updates `state` and `counters` (`held`
// and `queued` grow by the copies planned; the caller calls `released` as each leaves).
Plan plan_datagram(const Impairment& imp, DirState& state, DirCounters& counters,
                   std::uint64_t now_ns, std::size_t bytes);

// A planned copy has left (sent, or refused by the kernel).
inline void released(DirState& state, DirCounters& counters) {
  --state.held;
  --counters.queued;
}

}  // namespace tern::netem
