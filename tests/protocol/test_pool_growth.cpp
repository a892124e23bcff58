// A Pool that grows by thousands of chunks (a host under overload) does so in linear time.
// The bound is wall-clock time against a quadratic growth's seconds, so this runs in the
// serial 'timing' suite, apart from the rest of test_intrusive.cpp.
#include "intrusive.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
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
