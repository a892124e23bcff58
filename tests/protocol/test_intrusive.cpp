// The protocol core's containers. IntrusiveList: every operation keeps both ends and both
// directions of links consistent with a std::list doing the same. Pool: the recycler for
// queued commands and peer state. Every object handed out is distinct, aligned and
// constructed; put() destroys it and the next get() reuses the storage; and a pool that grows
// by thousands of chunks (a host under overload) stays correct (test_pool_growth.cpp: fast).
// RunPool: each owner's objects sit one after another, however the owners interleave; a run
// goes back once emptied and left behind, and what a host holds stays bounded by what is live.
#include "intrusive.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <list>
#include <random>
#include <unordered_set>
#include <vector>

namespace {

using tern::proto::IntrusiveList;
using tern::proto::Pool;
using tern::proto::RunPool;

struct Node {
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
  int id = 0;
};

// Walks the list both ways and compares it with the model.
void expect_same(const IntrusiveList<Node>& list, const std::list<Node*>& model) {
  ASSERT_EQ(list.empty(), model.empty());
  ASSERT_EQ(list.size(), model.size());
  if (model.empty()) {
    EXPECT_EQ(list.front(), nullptr);
    EXPECT_EQ(list.back(), nullptr);
    return;
  }
  EXPECT_EQ(list.front(), model.front());
  EXPECT_EQ(list.back(), model.back());
  auto it = model.begin();
  for (const Node* n = list.front(); n != nullptr; n = IntrusiveList<Node>::next(n), ++it) {
    ASSERT_EQ(n, *it);
  }
  auto rit = model.rbegin();
  for (const Node* n = list.back(); n != nullptr; n = IntrusiveList<Node>::prev(n), ++rit) {
    ASSERT_EQ(n, *rit);
  }
}

TEST(IntrusiveList, MatchesStdListUnderRandomOperations) {
  std::vector<Node> nodes(64);
  for (int i = 0; i < 64; ++i) nodes[i].id = i;
  std::vector<bool> linked(nodes.size(), false);
  IntrusiveList<Node> list;
  std::list<Node*> model;
  std::mt19937 rng(7);
  for (int step = 0; step < 20000; ++step) {
    Node* n = &nodes[rng() % nodes.size()];
    const std::size_t i = static_cast<std::size_t>(n->id);
    if (linked[i]) {
      if (rng() % 4 == 0 && !model.empty()) {
        Node* first = list.pop_front();
        ASSERT_EQ(first, model.front());
        model.pop_front();
        linked[static_cast<std::size_t>(first->id)] = false;
        EXPECT_EQ(first->prev_, nullptr);
        EXPECT_EQ(first->next_, nullptr);
      } else {
        list.remove(n);
        model.remove(n);
        linked[i] = false;
      }
    } else {
      switch (rng() % 3) {
        case 0:
          list.push_back(n);
          model.push_back(n);
          break;
        case 1:
          list.push_front(n);
          model.push_front(n);
          break;
        default: {
          // After a random linked node (or at the front when none is picked).
          auto pos = model.begin();
          std::advance(pos, model.empty() ? 0 : rng() % (model.size() + 1));
          Node* after = pos == model.begin() ? nullptr : *std::prev(pos);
          list.insert_after(after, n);
          model.insert(pos, n);
        }
      }
      linked[i] = true;
    }
    expect_same(list, model);
    if (HasFatalFailure()) return;
  }
}

TEST(IntrusiveList, PushBackLeavesTheFrontUntouched) {
  // The point of keeping the tail: appending must not write to (or need) the first node.
  Node a, b, c;
  IntrusiveList<Node> list;
  list.push_back(&a);
  list.push_back(&b);
  const Node before = a;
  list.push_back(&c);
  EXPECT_EQ(a.prev_, before.prev_);
  EXPECT_EQ(a.next_, before.next_);
  EXPECT_EQ(list.back(), &c);
  EXPECT_EQ(c.prev_, &b);
}

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

using Runs = RunPool<Tracked, 16>;

std::uintptr_t at(const Tracked* t) { return reinterpret_cast<std::uintptr_t>(t); }

TEST(RunPool, EachOwnersObjectsAreNeighboursHoweverTheOwnersInterleave) {
  // A relay's fan-out: each message queues one copy to every member in turn.
  Runs pool;
  constexpr int kOwners = 8;
  constexpr int kEach = 100;
  std::vector<Runs::Cursor> owners(kOwners);
  std::vector<std::vector<Tracked*>> got(kOwners);
  std::unordered_set<Tracked*> seen;
  for (int i = 0; i < kEach; ++i) {
    for (int o = 0; o < kOwners; ++o) {
      Tracked* t = pool.get(owners[o], static_cast<std::uint64_t>(o * kEach + i));
      ASSERT_EQ(at(t) % alignof(Tracked), 0u);
      ASSERT_TRUE(seen.insert(t).second) << "object handed out twice";
      got[o].push_back(t);
    }
  }
  for (int o = 0; o < kOwners; ++o) {
    std::size_t adjacent = 0;
    for (int i = 1; i < kEach; ++i) {
      EXPECT_EQ(got[o][i]->value, static_cast<std::uint64_t>(o * kEach + i));
      if (at(got[o][i]) == at(got[o][i - 1]) + sizeof(Tracked)) ++adjacent;
    }
    // Only the step from one full run to the next may jump.
    EXPECT_GE(adjacent, static_cast<std::size_t>(kEach - 1 - kEach / Runs::objects_per_run()))
        << "owner " << o;
  }
  EXPECT_EQ(pool.live(), static_cast<std::size_t>(kOwners * kEach));
  for (int o = 0; o < kOwners; ++o) {
    for (Tracked* t : got[o]) pool.put(owners[o], t);
    pool.release(owners[o]);
  }
  EXPECT_EQ(pool.live(), 0u);
  EXPECT_EQ(pool.runs_held(), 0u);
  EXPECT_EQ(Tracked::alive, 0);
}

TEST(RunPool, AnEmptiedRunIsWrittenAgainFromItsStart) {
  Runs pool;
  Runs::Cursor owner;
  Tracked* first = pool.get(owner, 1);
  Tracked* second = pool.get(owner, 2);
  pool.put(owner, first);
  pool.put(owner, second);
  EXPECT_EQ(pool.get(owner, 3), first);  // the same hot line, not the next one
  EXPECT_EQ(pool.runs_held(), 1u);
  pool.put(owner, first);
  pool.release(owner);
  EXPECT_EQ(pool.runs_held(), 0u);
}

TEST(RunPool, ARunLeftBehindGoesBackWithItsLastObject) {
  Runs pool;
  Runs::Cursor owner;
  std::vector<Tracked*> got;
  for (std::size_t i = 0; i < Runs::objects_per_run() + 1; ++i) got.push_back(pool.get(owner, i));
  EXPECT_EQ(pool.runs_held(), 2u);  // the first is full, the second current
  for (std::size_t i = 0; i + 1 < got.size(); ++i) {
    EXPECT_EQ(pool.runs_held(), 2u) << "a run went back while it held an object";
    pool.put(owner, got[i]);
  }
  EXPECT_EQ(pool.runs_held(), 1u);
  Runs::Cursor other;
  Tracked* reused = pool.get(other, 99);
  EXPECT_EQ(reused, got[0]);  // the returned run is the next one handed out
  pool.put(other, reused);
  pool.put(owner, got.back());
  pool.release(owner);
  pool.release(other);
  EXPECT_EQ(pool.runs_held(), 0u);
}

TEST(RunPool, RandomChurnNeverHandsOutALiveObjectAndHoldsAtMostARunPerObject) {
  Runs pool;
  std::mt19937_64 rng(11);
  constexpr std::size_t kOwners = 37;
  std::vector<Runs::Cursor> owners(kOwners);
  std::vector<std::vector<Tracked*>> live(kOwners);  // each owner's, oldest first
  std::unordered_set<Tracked*> live_set;
  std::size_t total = 0;
  for (int step = 0; step < 300'000; ++step) {
    const std::size_t o = rng() % kOwners;
    const bool growing = (step / 7000) % 2 == 0;
    const bool take = live[o].empty() || (growing ? rng() % 4 != 0 : rng() % 4 == 0);
    if (take) {
      Tracked* t = pool.get(owners[o], static_cast<std::uint64_t>(step));
      ASSERT_TRUE(live_set.insert(t).second) << "live object handed out again at step " << step;
      live[o].push_back(t);
      ++total;
    } else {
      // Mostly the oldest (acknowledged in order), sometimes any (a loss, a resend).
      const std::size_t i = rng() % 8 == 0 ? rng() % live[o].size() : 0;
      Tracked* t = live[o][i];
      ASSERT_EQ(live_set.erase(t), 1u);
      live[o].erase(live[o].begin() + static_cast<std::ptrdiff_t>(i));
      pool.put(owners[o], t);
      --total;
    }
    ASSERT_EQ(pool.live(), total);
    ASSERT_LE(pool.runs_held(), total + kOwners) << "step " << step;
  }
  for (std::size_t o = 0; o < kOwners; ++o) {
    for (Tracked* t : live[o]) pool.put(owners[o], t);
    pool.release(owners[o]);
  }
  EXPECT_EQ(pool.runs_held(), 0u);
  EXPECT_EQ(Tracked::alive, 0);
}

}  // namespace
