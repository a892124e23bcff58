// TimerWheel on simulated time (STYLE habit 9): exact firing ticks, cancellation at every
// level, rescheduling from callbacks, a seeded model test against std::multimap, and the
// counters that show idle timers cost nothing per tick.
#include "timer_wheel.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace {

using tern::base::TimerNode;
using tern::base::TimerWheel;

// Delays that land in each level and in the overflow list, measured from time 0.
constexpr std::uint64_t kLevelDelays[] = {10, 1'000, 100'000, 20'000'000, 5'000'000'000};

TEST(TimerWheel, FiresAtExactTickNeverEarly) {
  for (const std::uint64_t delay : kLevelDelays) {
    for (const std::uint64_t start : {0ull, 255ull, 65'535ull, 123'456'789ull}) {
      TimerWheel wheel(start);
      TimerNode node;
      const std::uint64_t at = start + delay;
      wheel.schedule(node, at);
      EXPECT_LE(wheel.next_expiry(), at);
      std::uint64_t fired_at = 0;
      auto record = [&](TimerNode& n) {
        EXPECT_EQ(&n, &node);
        fired_at = wheel.now();
      };
      // Walk up to the expiry in uneven steps, checking nothing fires early.
      std::uint64_t now = start;
      while (now + 1 < at) {
        now = std::min(at - 1, now + 1 + (at - now) / 3);
        ASSERT_EQ(wheel.advance(now, record), 0u) << "early at " << now << " for " << at;
        ASSERT_LE(wheel.next_expiry(), at);
        ASSERT_GT(wheel.next_expiry(), now);
      }
      EXPECT_EQ(wheel.advance(at, record), 1u);
      EXPECT_EQ(fired_at, at);
      EXPECT_FALSE(TimerWheel::scheduled(node));
      EXPECT_EQ(wheel.next_expiry(), TimerWheel::kNever);
      EXPECT_EQ(wheel.advance(at + 10'000'000'000ull, record), 0u);
    }
  }
}

TEST(TimerWheel, PastExpiryFiresOnNextAdvance) {
  TimerWheel wheel(1000);
  TimerNode node;
  wheel.schedule(node, 400);
  EXPECT_LE(wheel.next_expiry(), 1000u);
  int fired = 0;
  EXPECT_EQ(wheel.advance(1000, [&](TimerNode&) { ++fired; }), 1u);
  EXPECT_EQ(fired, 1);
}

TEST(TimerWheel, FarJumpFiresEachOnceInOrder) {
  TimerWheel wheel;
  std::vector<TimerNode> nodes(std::size(kLevelDelays) * 3);
  for (std::size_t i = 0; i < nodes.size(); ++i)
    wheel.schedule(nodes[i], kLevelDelays[i % std::size(kLevelDelays)] + i);
  std::vector<std::uint64_t> order;
  EXPECT_EQ(wheel.advance(1ull << 40, [&](TimerNode& n) { order.push_back(n.expiry); }),
            nodes.size());
  ASSERT_EQ(order.size(), nodes.size());
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  EXPECT_TRUE(wheel.empty());
}

TEST(TimerWheel, CancelWorksFromEveryLevel) {
  for (const std::uint64_t delay : kLevelDelays) {
    TimerWheel wheel(77);
    TimerNode doomed;
    TimerNode kept;
    wheel.schedule(doomed, 77 + delay);
    wheel.schedule(kept, 77 + delay);
    // Let part of the path pass so a higher-level timer may already have cascaded.
    wheel.advance(77 + delay / 2, [](TimerNode&) { FAIL() << "early"; });
    EXPECT_TRUE(wheel.cancel(doomed));
    EXPECT_FALSE(wheel.cancel(doomed));
    EXPECT_FALSE(TimerWheel::scheduled(doomed));
    std::vector<TimerNode*> fired;
    wheel.advance(77 + delay * 2, [&](TimerNode& n) { fired.push_back(&n); });
    ASSERT_EQ(fired.size(), 1u);
    EXPECT_EQ(fired[0], &kept);
    EXPECT_EQ(wheel.next_expiry(), TimerWheel::kNever);
  }
}

TEST(TimerWheel, CallbackReschedulesItselfAndOthers) {
  TimerWheel wheel;
  TimerNode periodic;
  TimerNode victim;
  TimerNode late;
  wheel.schedule(periodic, 5);
  wheel.schedule(victim, 12);
  std::vector<std::uint64_t> ticks;
  auto on_expire = [&](TimerNode& n) {
    if (&n != &periodic) return;
    ticks.push_back(wheel.now());
    if (ticks.size() < 4) wheel.schedule(periodic, n.expiry + 5);
    if (ticks.size() == 2) {
      wheel.cancel(victim);
      wheel.schedule(late, wheel.now());  // already due: fires in this same advance
    }
  };
  std::size_t fired = wheel.advance(100, on_expire);
  EXPECT_EQ(fired, 5u);  // periodic x4 + late
  EXPECT_EQ(ticks, (std::vector<std::uint64_t>{5, 10, 15, 20}));
  EXPECT_FALSE(TimerWheel::scheduled(victim));
  EXPECT_TRUE(wheel.empty());
}

TEST(TimerWheel, RescheduleMovesPendingTimer) {
  TimerWheel wheel;
  TimerNode node;
  wheel.schedule(node, 1'000'000);
  wheel.schedule(node, 30);
  EXPECT_EQ(wheel.size(), 1u);
  EXPECT_EQ(wheel.next_expiry(), 30u);
  EXPECT_EQ(wheel.advance(29, [](TimerNode&) {}), 0u);
  EXPECT_EQ(wheel.advance(30, [](TimerNode&) {}), 1u);
  EXPECT_EQ(wheel.advance(2'000'000, [](TimerNode&) {}), 0u);
}

// Seeded model test: the wheel against a multimap of (expiry -> id), with callbacks that
// reschedule and cancel, delays from 0 to beyond the wheel's 2^32 ms range, and time jumps.
TEST(TimerWheel, MatchesMultimapModel) {
  const std::uint64_t seed = 0x7133'2026;
  std::printf("seed 0x%llx\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  constexpr std::size_t kNodes = 2048;
  constexpr int kOps = 100'000;

  TimerWheel wheel(1'000);
  std::vector<TimerNode> nodes(kNodes);
  std::multimap<std::uint64_t, std::size_t> model;
  std::vector<std::multimap<std::uint64_t, std::size_t>::iterator> where(kNodes, model.end());
  for (std::size_t i = 0; i < kNodes; ++i) nodes[i].kind = static_cast<std::uint32_t>(i);

  auto random_delay = [&]() -> std::uint64_t {
    switch (rng() % 8) {
      case 0: return 0;
      case 1: return rng() % 4;
      case 2: return rng() % 256;
      case 3: return rng() % 70'000;
      case 4: return rng() % 20'000'000;
      case 5: return rng() % 5'000'000'000ull;
      case 6: return rng() % 40'000'000'000ull;
      default: return rng() % 1'000;
    }
  };
  auto model_schedule = [&](std::size_t id, std::uint64_t at) {
    if (where[id] != model.end()) model.erase(where[id]);
    where[id] = model.emplace(at, id);
    wheel.schedule(nodes[id], at);
  };
  auto model_cancel = [&](std::size_t id) {
    const bool pending = where[id] != model.end();
    if (pending) model.erase(where[id]);
    where[id] = model.end();
    ASSERT_EQ(wheel.cancel(nodes[id]), pending);
  };

  for (int op = 0; op < kOps; ++op) {
    const std::size_t id = rng() % kNodes;
    const unsigned kind = rng() % 10;
    if (kind < 5) {
      model_schedule(id, wheel.now() + random_delay());
    } else if (kind < 7) {
      model_cancel(id);
    } else {
      const std::uint64_t target = wheel.now() + (rng() % 16 == 0 ? random_delay() : rng() % 64);
      std::uint64_t last_expiry = 0;
      std::size_t callbacks = 0;
      const std::size_t fired = wheel.advance(target, [&](TimerNode& n) {
        ++callbacks;
        const std::size_t fid = n.kind;
        ASSERT_NE(where[fid], model.end()) << "fired a timer the model does not hold";
        ASSERT_EQ(where[fid]->first, n.expiry);
        ASSERT_LE(n.expiry, target) << "fired early";
        ASSERT_GE(n.expiry, last_expiry) << "fired out of order";
        last_expiry = n.expiry;
        model.erase(where[fid]);
        where[fid] = model.end();
        // Callbacks change the wheel too: reschedule self into the future, cancel another.
        const unsigned action = rng() % 8;
        if (action == 0) model_schedule(fid, n.expiry + 1 + rng() % 300);
        if (action == 1) model_cancel(rng() % kNodes);
      });
      ASSERT_EQ(fired, callbacks);
      ASSERT_EQ(wheel.now(), target);
      // Nothing due may remain: the model's earliest timer must be in the future.
      if (!model.empty()) {
        ASSERT_GT(model.begin()->first, target) << "timer left unfired";
      }
    }
    ASSERT_EQ(wheel.size(), model.size());
    const std::uint64_t next = wheel.next_expiry();
    if (model.empty()) {
      ASSERT_EQ(next, TimerWheel::kNever);
    } else {
      ASSERT_LE(next, model.begin()->first) << "next_expiry late";
    }
  }
  // Drain everything: each remaining timer fires exactly once.
  const std::size_t remaining = model.size();
  std::vector<int> seen(kNodes, 0);
  EXPECT_EQ(wheel.advance(TimerWheel::kNever / 2, [&](TimerNode& n) { ++seen[n.kind]; }),
            remaining);
  for (std::size_t i = 0; i < kNodes; ++i) EXPECT_EQ(seen[i], where[i] != model.end() ? 1 : 0);
}

// 100,000 timers parked far out must not make per-tick advances any more expensive: the slot
// visit counter grows with elapsed ticks that have work, never with the number of timers.
TEST(TimerWheel, IdleTimersCostNothingPerTick) {
  constexpr std::size_t kIdle = 100'000;
  constexpr std::uint64_t kTicks = 20'000;
  TimerWheel wheel;
  auto nodes = std::make_unique<TimerNode[]>(kIdle);
  for (std::size_t i = 0; i < kIdle; ++i) wheel.schedule(nodes[i], 100'000'000 + i * 7'919);
  TimerNode periodic;
  wheel.schedule(periodic, 1);

  const auto before = wheel.stats();
  std::size_t fired = 0;
  for (std::uint64_t t = 1; t <= kTicks; ++t) {
    const auto visits = wheel.stats().slots_visited;
    fired += wheel.advance(t, [&](TimerNode& n) {
      ASSERT_EQ(&n, &periodic);
      wheel.schedule(periodic, n.expiry + 1);
    });
    // One level-0 slot, plus at most one cascade per level at a boundary.
    ASSERT_LE(wheel.stats().slots_visited - visits, 4u);
  }
  const auto after = wheel.stats();
  EXPECT_EQ(fired, kTicks);
  EXPECT_EQ(after.timers_fired - before.timers_fired, kTicks);
  EXPECT_LE(after.slots_visited - before.slots_visited, 2 * kTicks);
  // Only the periodic timer ever moved between levels.
  EXPECT_LE(after.cascades - before.cascades, kTicks / 128);
  EXPECT_EQ(wheel.size(), kIdle + 1);

  // Without the periodic timer a long idle stretch visits no slot at all.
  wheel.cancel(periodic);
  const auto idle_before = wheel.stats();
  for (std::uint64_t t = kTicks + 1; t <= 2 * kTicks; ++t) wheel.advance(t, [](TimerNode&) {});
  EXPECT_EQ(wheel.stats().slots_visited, idle_before.slots_visited);
  EXPECT_EQ(wheel.stats().cascades, idle_before.cascades);
  EXPECT_LE(wheel.next_expiry(), 100'000'000u);
}

}  // namespace
