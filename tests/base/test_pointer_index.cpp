// PointerIndex against std::unordered_map under random inserts, replacements, erases and
// lookups, with keys shaped like the protocol core's (slot, channel, sequence number).
#include "pointer_index.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <unordered_map>
#include <vector>

namespace tern::base {
namespace {

std::uint64_t key(std::uint32_t slot, std::uint8_t channel, std::uint16_t seq) {
  return std::uint64_t{slot} << 24 | std::uint64_t{channel} << 16 | seq;
}

TEST(PointerIndex, FindsWhatWasInsertedAndNothingElse) {
  PointerIndex<int> index(16);
  int a = 1, b = 2;
  EXPECT_EQ(index.find(key(0, 0, 1)), nullptr);
  index.insert(key(0, 0, 1), &a);
  index.insert(key(0, 1, 1), &b);
  EXPECT_EQ(index.find(key(0, 0, 1)), &a);
  EXPECT_EQ(index.find(key(0, 1, 1)), &b);
  EXPECT_EQ(index.find(key(1, 0, 1)), nullptr);
  index.insert(key(0, 0, 1), &b);  // replaces
  EXPECT_EQ(index.find(key(0, 0, 1)), &b);
  EXPECT_EQ(index.size(), 2u);
  EXPECT_TRUE(index.erase(key(0, 0, 1)));
  EXPECT_FALSE(index.erase(key(0, 0, 1)));
  EXPECT_EQ(index.find(key(0, 0, 1)), nullptr);
  EXPECT_EQ(index.find(key(0, 1, 1)), &b);
  EXPECT_EQ(index.size(), 1u);
}

TEST(PointerIndex, AgreesWithAReferenceMapUnderChurn) {
  PointerIndex<std::uint64_t> index(16);
  std::unordered_map<std::uint64_t, std::uint64_t*> reference;
  std::vector<std::uint64_t> storage(4096);
  std::mt19937_64 rng(12345);
  // Sliding windows of sequence numbers on a few hundred peers: inserts at the front of each
  // peer's window, erases mostly at the back (acknowledged in order), sometimes in the middle.
  std::vector<std::uint16_t> next(300, 0), oldest(300, 0);
  for (int step = 0; step < 400'000; ++step) {
    const auto slot = static_cast<std::uint32_t>(rng() % next.size());
    const int op = static_cast<int>(rng() % 10);
    if (op < 5 && static_cast<std::uint16_t>(next[slot] - oldest[slot]) < 200) {
      const std::uint64_t k = key(slot, static_cast<std::uint8_t>(slot % 3), next[slot]++);
      std::uint64_t* v = &storage[rng() % storage.size()];
      index.insert(k, v);
      reference[k] = v;
    } else if (op < 8 && oldest[slot] != next[slot]) {
      const std::uint64_t k = key(slot, static_cast<std::uint8_t>(slot % 3), oldest[slot]++);
      ASSERT_EQ(index.erase(k), reference.erase(k) == 1) << "step " << step;
    } else {
      // Any sequence number in or around the window, as an acknowledgement might name.
      const auto seq = static_cast<std::uint16_t>(oldest[slot] + rng() % 260);
      const std::uint64_t k = key(slot, static_cast<std::uint8_t>(slot % 3), seq);
      if (op == 9) {
        ASSERT_EQ(index.erase(k), reference.erase(k) == 1) << "step " << step;
      } else {
        const auto it = reference.find(k);
        ASSERT_EQ(index.find(k), it == reference.end() ? nullptr : it->second) << "step " << step;
      }
    }
    ASSERT_EQ(index.size(), reference.size());
  }
  for (const auto& [k, v] : reference) ASSERT_EQ(index.find(k), v);
  // Never more than half full.
  EXPECT_LE(index.size() * 2, index.capacity());
}

}  // namespace
}  // namespace tern::base
