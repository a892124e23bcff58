// SpscRing throughput: one thread playing both sides (the cost of the ring operations alone),
// and a producer thread feeding the benchmark thread (the cost including cache-line transfer).
#include "spsc_ring.hpp"

#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>

namespace {

using tern::rt::SpscRing;

// The shape of a cross-shard message: destination, length, buffer reference.
struct Desc {
  std::uint32_t peer;
  std::uint32_t len;
  std::uint64_t buf;
};

using Ring = SpscRing<Desc, 4096>;

void BM_SpscRing_SingleThreadOne(benchmark::State& state) {
  auto ring = std::make_unique<Ring>();
  Desc in{1, 2, 0};
  Desc out{};
  for (auto _ : state) {
    ++in.buf;
    ring->try_push(in);
    ring->try_pop(out);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}
BENCHMARK(BM_SpscRing_SingleThreadOne);

void BM_SpscRing_SingleThreadBatch(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  auto ring = std::make_unique<Ring>();
  std::array<Desc, 256> in{};
  std::array<Desc, 256> out{};
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = Desc{1, 64, i};
  for (auto _ : state) {
    ring->push_batch(std::span<const Desc>(in).first(batch));
    benchmark::DoNotOptimize(ring->pop_batch(std::span<Desc>(out).first(batch)));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch));
}
BENCHMARK(BM_SpscRing_SingleThreadBatch)->Arg(8)->Arg(32)->Arg(256);

// The benchmark thread consumes; a helper thread produces until told to stop. Both sides yield
// when blocked, so the figure stays meaningful (if poor) when pinned to a single core.
void BM_SpscRing_CrossThread(benchmark::State& state) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  auto ring = std::make_unique<Ring>();
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    std::array<Desc, 256> in{};
    std::uint64_t seq = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      for (std::size_t i = 0; i < batch; ++i) in[i] = Desc{1, 64, seq + i};
      const std::size_t n = ring->push_batch(std::span<const Desc>(in).first(batch));
      seq += n;
      if (n == 0) std::this_thread::yield();
    }
  });
  std::array<Desc, 256> out{};
  std::int64_t items = 0;
  for (auto _ : state) {
    std::size_t n;
    while ((n = ring->pop_batch(std::span<Desc>(out).first(batch))) == 0) std::this_thread::yield();
    items += static_cast<std::int64_t>(n);
    benchmark::DoNotOptimize(out);
  }
  stop.store(true, std::memory_order_relaxed);
  producer.join();
  state.SetItemsProcessed(items);
}
BENCHMARK(BM_SpscRing_CrossThread)->Arg(1)->Arg(32)->UseRealTime();

}  // namespace
