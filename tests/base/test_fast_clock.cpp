// FastClock against steady_clock: on the same epoch, close to it, never backwards, re-anchored
// as time passes; and steady_clock alone where the counter is not to be trusted. The closeness
// bound brackets each reading between two steady_clock readings, so a preemption between them
// widens the bracket instead of failing the test.
#include "fast_clock.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <thread>

namespace {

using tern::base::FastClock;

// How far a counter reading may stray outside its steady_clock bracket: the extrapolation
// error over one anchor interval is well under a microsecond at a rate measured over 2 ms.
constexpr std::uint64_t kToleranceNs = 20'000;

// Reads `clock` bracketed by steady_clock for `duration_ns`; checks each reading lies in its
// bracket (within the tolerance) and none goes backwards. Returns the readings taken.
std::uint64_t check_tracks_steady(FastClock& clock, std::uint64_t duration_ns) {
  const std::uint64_t end = FastClock::steady_ns() + duration_ns;
  std::uint64_t last = 0, readings = 0, worst_ns = 0;
  for (;;) {
    const std::uint64_t before = FastClock::steady_ns();
    const std::uint64_t now = clock.now_ns();
    const std::uint64_t after = FastClock::steady_ns();
    ++readings;
    EXPECT_GE(now, last) << "reading " << readings << " went backwards";
    EXPECT_GE(now + kToleranceNs, before) << "reading " << readings << " early by " << before - now;
    EXPECT_LE(now, after + kToleranceNs) << "reading " << readings << " late by " << now - after;
    if (now < before) worst_ns = std::max(worst_ns, before - now);
    if (now > after) worst_ns = std::max(worst_ns, now - after);
    last = now;
    if (::testing::Test::HasFailure() || after >= end) break;
  }
  std::printf("%llu readings over %llu ms, furthest outside the steady_clock bracket: %llu ns\n",
              static_cast<unsigned long long>(readings),
              static_cast<unsigned long long>(duration_ns / 1'000'000),
              static_cast<unsigned long long>(worst_ns));
  return readings;
}

TEST(FastClock, TracksSteadyClockAcrossCalibrationAndAnchors) {
  FastClock clock;
  if (!clock.uses_counter()) {
    std::printf("the kernel does not keep time with the TSC here: checking steady_clock only\n");
  }
  // 30 anchor intervals, calibration included.
  EXPECT_GT(check_tracks_steady(clock, 30 * FastClock::kAnchorNs), 1000u);
  if (clock.uses_counter()) {
    const double hz = clock.counter_hz();
    std::printf("counter measured at %.1f MHz\n", hz / 1e6);
    EXPECT_GT(hz, 1e8);
    EXPECT_LT(hz, 1e10);
  }
}

TEST(FastClock, CounterUsedWhereTheKernelUsesIt) {
  FastClock clock;
  EXPECT_EQ(clock.uses_counter(), FastClock::tsc_usable());
  EXPECT_FALSE(FastClock(FastClock::Source::steady).uses_counter());
}

TEST(FastClock, SteadySourceReadsSteadyClock) {
  FastClock clock(FastClock::Source::steady);
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t before = FastClock::steady_ns();
    const std::uint64_t now = clock.now_ns();
    const std::uint64_t after = FastClock::steady_ns();
    ASSERT_LE(before, now);
    ASSERT_LE(now, after);
  }
  EXPECT_EQ(clock.counter_hz(), 0.0);
}

// A thread that sleeps far past the anchor interval (a descheduled shard) comes back on time.
TEST(FastClock, ComesBackOnTimeAfterSleeping) {
  FastClock clock;
  check_tracks_steady(clock, 5'000'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  check_tracks_steady(clock, 5'000'000);
  const std::uint64_t before = FastClock::steady_ns();
  const std::uint64_t now_us = clock.now_us();
  EXPECT_GE(now_us * 1000 + kToleranceNs + 1000, before);
}

}  // namespace
