// Pool: the protocol core's recycler for queued commands and peer state. Every object handed
// out is distinct, aligned and constructed; put() destroys it and the next get() reuses the
// storage; and a pool that grows by thousands of chunks (a host under overload) stays correct
// and fast.
#include "intrusive.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <random>
#include <unordered_set>
#include <vector>

namespace {

using tern::proto::Pool;

struct alignas(64) Tracked {
  static inline int alive = 0;
  explicit Tracked(std::uint64_t v = 0) : value(v) { ++alive; }
  ~Tracked() { --alive; }
  std::uint64_t value;
  unsigned char pad[56] = {};
};

TEST(Pool, HandsOutDistinctAlignedConstructedObjects) {
  Pool<Tracked> pool;
  std::vector<Tracked*> got;
  std::unordered_set<Tracked*> seen;
  for (std::uint64_t i = 0; i < 10'000; ++i) {  // 40 chunks
    Tracked* t = pool.get(i);
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(t) % 64, 0u);
    ASSERT_TRUE(seen.insert(t).second) << "object " << i << " handed out twice";
    EXPECT_EQ(t->value, i);
    got.push_back(t);
  }
  EXPECT_EQ(pool.live(), 10'000u);
  EXPECT_EQ(Tracked::alive, 10'000);
  for (Tracked* t : got) pool.put(t);
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_EQ(Tracked::alive, 0);
}

TEST(Pool, ReusesTheStorageLastPut) {
  Pool<Tracked> pool;
  Tracked* a = pool.get(1);
  Tracked* b = pool.get(2);
  pool.put(a);
  pool.put(b);
  Tracked* c = pool.get(3);
  Tracked* d = pool.get(4);
  EXPECT_EQ(c, b);  // the hot one first
  EXPECT_EQ(d, a);
  EXPECT_EQ(Tracked::alive, 2);
  pool.put(c);
  pool.put(d);
}

TEST(Pool, RandomChurnNeverHandsOutALiveObject) {
  Pool<Tracked> pool;
  std::mt19937_64 rng(7);
  std::vector<Tracked*> live;
  std::unordered_set<Tracked*> live_set;
  for (int step = 0; step < 200'000; ++step) {
    // Drifts up and down between bursts of gets and bursts of puts, as a relay's
    // fan-out and acknowledgements do.
    const bool growing = (step / 5000) % 2 == 0;
    const bool take = live.empty() || (growing ? rng() % 4 != 0 : rng() % 4 == 0);
    if (take) {
      Tracked* t = pool.get(static_cast<std::uint64_t>(step));
      ASSERT_TRUE(live_set.insert(t).second) << "live object handed out again at step " << step;
      live.push_back(t);
    } else {
      const std::size_t i = rng() % live.size();
      Tracked* t = live[i];
      ASSERT_EQ(live_set.erase(t), 1u);
      live[i] = live.back();
      live.pop_back();
      pool.put(t);
    }
    ASSERT_EQ(pool.live(), live.size());
  }
  for (Tracked* t : live) pool.put(t);
  EXPECT_EQ(Tracked::alive, 0);
}

TEST(Pool, GrowsByThousandsOfChunksInLinearTime) {
  // A million objects is ~3,900 chunks. Re-sizing the free stack for every chunk would
  // copy and clear ~2 billion pointers here; doubling keeps it to a few million.
  Pool<Tracked> pool;
  std::vector<Tracked*> got;
  got.reserve(1'000'000);
  const auto start = std::chrono::steady_clock::now();
  for (std::uint64_t i = 0; i < 1'000'000; ++i) got.push_back(pool.get(i));
  for (Tracked* t : got) pool.put(t);
  for (std::uint64_t i = 0; i < 1'000'000; ++i) got[i] = pool.get(i);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  for (Tracked* t : got) pool.put(t);
  EXPECT_EQ(Tracked::alive, 0);
  // Linear work takes tens of milliseconds even under sanitizers; quadratic takes seconds.
  EXPECT_LT(elapsed, std::chrono::seconds(3));
}

}  // namespace
