// TimerWheel costs on simulated time: schedule+cancel with a populated wheel, and advance()
// with 100,000 pending timers, both busy (a timer due every tick) and idle (all parked far out).
#include "timer_wheel.hpp"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>

namespace {

using tern::base::TimerNode;
using tern::base::TimerWheel;

constexpr std::size_t kPending = 100'000;

// Spread like RTO/ping/timeout timers: mostly within seconds, some minutes out.
std::uint64_t spread_delay(std::mt19937_64& rng) {
  return rng() % 4 == 0 ? 1 + rng() % 600'000 : 1 + rng() % 5'000;
}

void BM_TimerWheel_ScheduleCancel(benchmark::State& state) {
  TimerWheel wheel;
  std::mt19937_64 rng(1);
  auto background = std::make_unique<TimerNode[]>(kPending);
  for (std::size_t i = 0; i < kPending; ++i) wheel.schedule(background[i], spread_delay(rng));
  constexpr std::size_t kDelays = 1024;
  std::uint64_t delays[kDelays];
  for (auto& d : delays) d = spread_delay(rng);
  TimerNode node;
  std::size_t i = 0;
  for (auto _ : state) {
    wheel.schedule(node, delays[i++ % kDelays]);
    benchmark::DoNotOptimize(wheel.cancel(node));
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_TimerWheel_ScheduleCancel);

// Every fired timer is rearmed, so the population stays at 100,000 and each 1 ms advance fires
// about kPending / mean-delay timers, cascading as time passes boundaries.
void BM_TimerWheel_AdvanceBusy(benchmark::State& state) {
  TimerWheel wheel;
  std::mt19937_64 rng(2);
  auto nodes = std::make_unique<TimerNode[]>(kPending);
  for (std::size_t i = 0; i < kPending; ++i) wheel.schedule(nodes[i], spread_delay(rng));
  std::uint64_t now = 0;
  std::int64_t fired = 0;
  for (auto _ : state) {
    fired += static_cast<std::int64_t>(wheel.advance(
        ++now, [&](TimerNode& n) { wheel.schedule(n, n.expiry + spread_delay(rng)); }));
  }
  state.counters["timers_per_tick"] =
      benchmark::Counter(static_cast<double>(fired), benchmark::Counter::kAvgIterations);
  state.SetItemsProcessed(fired);
}
BENCHMARK(BM_TimerWheel_AdvanceBusy);

void BM_TimerWheel_AdvanceIdle(benchmark::State& state) {
  TimerWheel wheel;
  auto nodes = std::make_unique<TimerNode[]>(kPending);
  for (std::size_t i = 0; i < kPending; ++i) wheel.schedule(nodes[i], 3'600'000'000 + i);
  std::uint64_t now = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(wheel.advance(++now, [](TimerNode&) {}));
    benchmark::DoNotOptimize(wheel.next_expiry());
  }
}
BENCHMARK(BM_TimerWheel_AdvanceIdle);

}  // namespace
