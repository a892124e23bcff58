// The mechanism behind every layer's drop reasons (engine/base/drop_reasons.hpp), on a list of
// its own: names and descriptions in enum order, plain counters, and the relay's kind (one
// writer, readers on other threads). The layers' own lists are checked by their suites
// (protocol: test_wire.cpp; net: test_net_frame.cpp; the relay through /metrics).
#include "drop_reasons.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string_view>
#include <thread>

namespace tern::test {

#define TEST_DROPS(X)                   \
  X(too_short, "shorter than a header") \
  X(too_long, "longer than the MTU")    \
  X(bad_sum, "checksum mismatch")

enum class TestDrop : std::uint8_t { TEST_DROPS(TERN_DROP_ENUMERATOR) count_ };
inline constexpr std::array kTestDropReasons{TEST_DROPS(TERN_DROP_REASON)};
constexpr const auto& drop_reasons(TestDrop) { return kTestDropReasons; }

namespace {

using base::drop_description;
using base::drop_name;

static_assert(base::kDropReasons<TestDrop> == 3);
static_assert(std::string_view(drop_name(TestDrop::too_long)) == "too_long");

TEST(DropReasons, NamesAndDescriptionsFollowTheList) {
  EXPECT_STREQ(drop_name(TestDrop::too_short), "too_short");
  EXPECT_STREQ(drop_name(TestDrop::bad_sum), "bad_sum");
  EXPECT_STREQ(drop_description(TestDrop::too_long), "longer than the MTU");
  // count_ is what callers use for "nothing dropped yet".
  EXPECT_STREQ(drop_name(TestDrop::count_), "unknown");
  EXPECT_STREQ(drop_description(TestDrop::count_), "unknown");
}

TEST(DropReasons, PlainCountersCountByReason) {
  base::DropCounters<TestDrop> c;
  EXPECT_EQ(c.total(), 0u);
  c.add(TestDrop::bad_sum);
  c.add(TestDrop::bad_sum);
  c.add(TestDrop::too_short, 5);
  EXPECT_EQ(c[TestDrop::bad_sum], 2u);
  EXPECT_EQ(c[TestDrop::too_short], 5u);
  EXPECT_EQ(c[TestDrop::too_long], 0u);
  EXPECT_EQ(c.by_reason[static_cast<std::size_t>(TestDrop::bad_sum)], 2u);
  EXPECT_EQ(c.total(), 7u);
}

// One writer, one reader at the same time, as a relay shard and its /metrics reader: the reader
// sees the count grow and the final figure exactly (ThreadSanitizer checks the sharing).
TEST(DropReasons, SharedCountersHaveOneWriterAndAnyReaders) {
  base::DropCounters<TestDrop, std::atomic<std::uint64_t>> c;
  constexpr std::uint64_t kAdds = 100'000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint64_t i = 0; i < kAdds; ++i) c.add(TestDrop::too_long);
    c.add(TestDrop::bad_sum, 3);
    done = true;
  });
  std::uint64_t last = 0;
  while (!done) {
    const std::uint64_t now = c[TestDrop::too_long];
    EXPECT_GE(now, last);
    last = now;
  }
  writer.join();
  EXPECT_EQ(c[TestDrop::too_long], kAdds);
  EXPECT_EQ(c.total(), kAdds + 3);
}

}  // namespace
}  // namespace tern::test
