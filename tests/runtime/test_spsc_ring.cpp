// SpscRing: single-thread semantics, then a two-thread ordered-delivery run whose items carry
// their own sequence numbers (STYLE habit 9).
#include "spsc_ring.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

namespace {

using tern::rt::SpscRing;

struct Desc {
  std::uint32_t shard;
  std::uint32_t len;
  std::uint64_t seq;
};

TEST(SpscRing, StartsEmpty) {
  SpscRing<std::uint64_t, 8> ring;
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.size_approx(), 0u);
  std::uint64_t v = 99;
  EXPECT_FALSE(ring.try_pop(v));
  EXPECT_EQ(v, 99u);
  std::array<std::uint64_t, 4> out{};
  EXPECT_EQ(ring.pop_batch(out), 0u);
}

TEST(SpscRing, FillsToCapacityThenRefuses) {
  SpscRing<std::uint64_t, 8> ring;
  for (std::uint64_t i = 0; i < 8; ++i) ASSERT_TRUE(ring.try_push(i));
  EXPECT_EQ(ring.size_approx(), 8u);
  EXPECT_FALSE(ring.try_push(100));
  const std::array<std::uint64_t, 2> more{1, 2};
  EXPECT_EQ(ring.push_batch(more), 0u);
  std::uint64_t v = 0;
  ASSERT_TRUE(ring.try_pop(v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(ring.try_push(8));
  for (std::uint64_t i = 1; i <= 8; ++i) {
    ASSERT_TRUE(ring.try_pop(v));
    EXPECT_EQ(v, i);
  }
  EXPECT_TRUE(ring.empty());
}

TEST(SpscRing, WrapsAroundManyLaps) {
  SpscRing<Desc, 16> ring;
  std::uint64_t next_in = 0;
  std::uint64_t next_out = 0;
  // Odd fill levels make every lap start at a different offset, so all wrap points get hit.
  for (int lap = 0; lap < 10'000; ++lap) {
    const int fill = 1 + lap % 15;
    for (int i = 0; i < fill; ++i) ASSERT_TRUE(ring.try_push(Desc{3, 7, next_in++}));
    Desc d{};
    for (int i = 0; i < fill; ++i) {
      ASSERT_TRUE(ring.try_pop(d));
      ASSERT_EQ(d.seq, next_out++);
      ASSERT_EQ(d.shard, 3u);
    }
  }
  EXPECT_TRUE(ring.empty());
  EXPECT_GT(next_out, 16u * 1000);
}

TEST(SpscRing, BatchesArePartialWhenShort) {
  SpscRing<std::uint64_t, 8> ring;
  std::vector<std::uint64_t> in(11);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = i;
  EXPECT_EQ(ring.push_batch(std::span<const std::uint64_t>(in).first(5)), 5u);
  // Only three slots left.
  EXPECT_EQ(ring.push_batch(std::span<const std::uint64_t>(in).subspan(5)), 3u);
  EXPECT_EQ(ring.size_approx(), 8u);

  std::array<std::uint64_t, 6> out{};
  EXPECT_EQ(ring.pop_batch(out), 6u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(out[i], i);
  // This batch wraps past the end of the slot array.
  EXPECT_EQ(ring.push_batch(std::span<const std::uint64_t>(in).subspan(8)), 3u);
  EXPECT_EQ(ring.pop_batch(out), 5u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(out[i], 6 + i);
  EXPECT_EQ(ring.pop_batch(out), 0u);
  EXPECT_EQ(ring.push_batch(std::span<const std::uint64_t>()), 0u);
}

TEST(SpscRing, BatchWraparoundMatchesModel) {
  std::mt19937_64 rng(0x5eed);
  std::printf("seed 0x5eed\n");
  SpscRing<std::uint64_t, 32> ring;
  std::uint64_t next_in = 0;
  std::uint64_t next_out = 0;
  std::vector<std::uint64_t> buf(40);
  for (int step = 0; step < 100'000; ++step) {
    const std::size_t n = rng() % 40;
    if (rng() % 2) {
      for (std::size_t i = 0; i < n; ++i) buf[i] = next_in + i;
      const std::size_t expect = std::min<std::size_t>(n, 32 - (next_in - next_out));
      ASSERT_EQ(ring.push_batch(std::span<const std::uint64_t>(buf).first(n)), expect);
      next_in += expect;
    } else {
      const std::size_t expect = std::min<std::size_t>(n, next_in - next_out);
      ASSERT_EQ(ring.pop_batch(std::span<std::uint64_t>(buf).first(n)), expect);
      for (std::size_t i = 0; i < expect; ++i) ASSERT_EQ(buf[i], next_out++);
    }
    ASSERT_EQ(ring.size_approx(), next_in - next_out);
  }
}

TEST(SpscRing, TwoThreadsDeliverEverySequenceOnceInOrder) {
  constexpr std::uint64_t kItems = 10'000'000;
  using Ring = SpscRing<std::uint64_t, 1024>;
  auto ring = std::make_unique<Ring>();
  // A stuck side gives up instead of hanging the suite; the limit is far above any healthy run,
  // even under ThreadSanitizer, so this is a liveness guard, not a speed assertion.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(240);
  std::atomic<bool> abort{false};

  std::thread producer([&] {
    std::array<std::uint64_t, 64> batch{};
    std::uint64_t next = 0;
    std::size_t spins = 0;
    while (next < kItems && !abort.load(std::memory_order_relaxed)) {
      // Batch sizes vary so publishes land at every offset.
      const std::size_t want = std::min<std::uint64_t>(1 + next % 64, kItems - next);
      for (std::size_t i = 0; i < want; ++i) batch[i] = next + i;
      const std::size_t n = ring->push_batch(std::span<const std::uint64_t>(batch).first(want));
      next += n;
      if (n == 0 && ++spins % 64 == 0) std::this_thread::yield();
    }
  });

  std::array<std::uint64_t, 48> out{};
  std::uint64_t expected = 0;
  bool in_order = true;
  std::size_t spins = 0;
  while (expected < kItems) {
    const std::size_t n =
        (expected % 3 == 0) ? ring->pop_batch(out) : (ring->try_pop(out[0]) ? 1 : 0);
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i] != expected) in_order = false;
      ++expected;
    }
    if (!in_order) break;
    if (n == 0 && ++spins % 64 == 0) {
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
    }
  }
  abort.store(true, std::memory_order_relaxed);
  producer.join();

  EXPECT_TRUE(in_order) << "out of order at " << expected;
  EXPECT_EQ(expected, kItems);
  EXPECT_TRUE(ring->empty());
}

}  // namespace
