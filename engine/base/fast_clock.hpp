// tern::base::FastClock: steady_clock time read from the CPU's timestamp counter.
//
// A busy-polling shard reads the time a few times per loop iteration, millions of times a
// second. clock_gettime(CLOCK_MONOTONIC) costs ~21 ns on the machines we measure (its vDSO path
// orders RDTSC against the instructions around it); a bare RDTSC costs ~9 ns and lets the
// pipeline run on. FastClock turns counter ticks into steady_clock nanoseconds with a rate it
// measures against steady_clock itself and re-anchors every kAnchorNs, so a reading stays
// within about a microsecond of steady_clock (the same epoch: values mix with steady_clock's)
// and never runs backwards.
//
// The counter is trusted only where the kernel keeps time with it (clocksource "tsc": the
// kernel checked that it is invariant and synchronised across CPUs). Anywhere else, and before
// the first rate is measured (the first kCalibrateNs), every reading is steady_clock's.
//
// Not thread-safe: one instance per thread (it remembers its last reading to stay monotonic).
#pragma once

#include <chrono>
#include <cstdint>
#include <fstream>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define TERN_FAST_CLOCK_HAVE_TSC 1
#else
#define TERN_FAST_CLOCK_HAVE_TSC 0
#endif

namespace tern::base {

class FastClock {
 public:
  enum class Source : std::uint8_t {
    automatic,  // the counter where the kernel uses it, else steady_clock
    steady,     // always steady_clock
  };

  // Counter time is extrapolated at most this long from a steady_clock reading.
  static constexpr std::uint64_t kAnchorNs = 10'000'000;
  // The first rate is measured over at least this long.
  static constexpr std::uint64_t kCalibrateNs = 2'000'000;

  explicit FastClock(Source source = Source::automatic)
      : use_tsc_(source == Source::automatic && tsc_usable()) {
#if TERN_FAST_CLOCK_HAVE_TSC
    if (use_tsc_) anchor();
#endif
  }

  std::uint64_t now_ns() {
#if TERN_FAST_CLOCK_HAVE_TSC
    if (use_tsc_) {
      const std::uint64_t ticks = __rdtsc() - anchor_ticks_;
      // Also catches a counter behind the anchor (unsigned wrap): re-anchoring heals it.
      if (ticks >= ticks_per_anchor_) return reanchor();
      return monotonic(anchor_ns_ + ((ticks * ns_per_tick_q32_) >> 32));
    }
#endif
    return steady_ns();
  }

  std::uint64_t now_us() { return now_ns() / 1000; }

  // False when every reading is steady_clock's (no usable counter, or Source::steady).
  bool uses_counter() const { return use_tsc_; }
  // Counter ticks per second as last measured; 0 while not (yet) measured.
  double counter_hz() const {
    return ns_per_tick_q32_ == 0 ? 0.0 : 1e9 * 4294967296.0 / static_cast<double>(ns_per_tick_q32_);
  }

  static std::uint64_t steady_ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }

  // Whether this machine's kernel keeps time with the timestamp counter.
  static bool tsc_usable() {
#if TERN_FAST_CLOCK_HAVE_TSC
    static const bool usable = [] {
      std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
      std::string source;
      return static_cast<bool>(f >> source) && source == "tsc";
    }();
    return usable;
#else
    return false;
#endif
  }

 private:
  std::uint64_t monotonic(std::uint64_t ns) {
    if (ns < last_ns_) return last_ns_;
    last_ns_ = ns;
    return ns;
  }

#if TERN_FAST_CLOCK_HAVE_TSC
  // A steady_clock reading paired with the counter. A pair the thread was preempted inside
  // (the counter moved more than ~20 µs around the steady_clock read) is taken again.
  void paired_reading(std::uint64_t& ticks, std::uint64_t& ns) {
    for (int attempt = 0;; ++attempt) {
      const std::uint64_t before = __rdtsc();
      ns = steady_ns();
      const std::uint64_t after = __rdtsc();
      ticks = before + (after - before) / 2;
      if (after - before < 50'000 || attempt == 3) return;
    }
  }

  void anchor() {
    paired_reading(anchor_ticks_, anchor_ns_);
    // Not yet calibrated: reanchor() measures the rate once kCalibrateNs have passed. Until
    // then every reading goes there, which reads steady_clock.
    ticks_per_anchor_ = 0;
  }

  std::uint64_t reanchor() {
    std::uint64_t ticks, ns;
    paired_reading(ticks, ns);
    if (ns <= anchor_ns_ || ticks <= anchor_ticks_) {
      // The counter went backwards (or no time passed): measure from here instead.
      anchor_ticks_ = ticks;
      anchor_ns_ = ns;
      return monotonic(ns);
    }
    const std::uint64_t elapsed_ns = ns - anchor_ns_;
    // Before the first rate, keep the anchor until the interval is long enough to measure.
    if (ns_per_tick_q32_ == 0 && elapsed_ns < kCalibrateNs) return monotonic(ns);
    // 32.32 fixed point. An interval of 4 s or more (a long preemption) only re-anchors.
    if (elapsed_ns < (std::uint64_t{1} << 32)) {
      const std::uint64_t rate = (elapsed_ns << 32) / (ticks - anchor_ticks_);
      if (rate != 0) {
        ns_per_tick_q32_ = rate;
        ticks_per_anchor_ = (kAnchorNs << 32) / rate;
      }
    }
    anchor_ticks_ = ticks;
    anchor_ns_ = ns;
    return monotonic(ns);
  }
#endif

  bool use_tsc_;
  std::uint64_t anchor_ticks_ = 0;
  std::uint64_t anchor_ns_ = 0;
  std::uint64_t ns_per_tick_q32_ = 0;   // 0: not measured yet
  std::uint64_t ticks_per_anchor_ = 0;  // 0 until measured: every reading re-anchors
  std::uint64_t last_ns_ = 0;
};

}  // namespace tern::base
