// The protocol core's containers. IntrusiveList: every operation keeps both ends and both
// directions of links consistent with a std::list doing the same. Pool: the recycler for
// queued commands and peer state. Every object handed out is distinct, aligned and
// constructed; put() destroys it and the next get() reuses the storage; and a pool that grows
// by thousands of chunks (a host under overload) stays correct (test_pool_growth.cpp: fast).
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

}  // namespace
