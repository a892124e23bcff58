// Delivery::reliable_unordered and reliable_sequenced over the simulated network: agreed in
// the hello, sent as plain reliable (and said so) to a peer that did not agree, and under 20%
// loss, reordering and duplication: unordered messages all arrive exactly once without
// waiting for earlier ones; sequenced ones never go backwards and the newest always arrives;
// in-order messages on the same channel keep their order; fragmented ones too.
#include "sim_pairs.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <vector>

namespace {

using namespace tern::apitest;
using tern::Delivery;
using tern::Event;
using tern::EventType;
using tern::HostOptions;
using tern::PeerStats;
using tern::SendResult;

class DeliveryModes : public SimPairs {
 protected:
  void go_bad() { net_.set_default_link(hostile_link(3000, 20'000)); }

  // The server's receive events for one delivery, as message indexes in arrival order.
  static std::vector<std::uint32_t> arrivals(const Pair& p, Delivery d) {
    std::vector<std::uint32_t> out;
    for (const Event& e : p.server_events) {
      if (e.type == EventType::receive && e.delivery == d) out.push_back(index_of(e.payload()));
    }
    return out;
  }

  static std::uint64_t drops(const tern::HostStats& s, const char* reason) {
    for (const auto& [name, n] : s.drops_by_reason) {
      if (std::string_view(name) == reason) return n;
    }
    return 0;
  }
};

bool modes(const tern::Host& host, tern::PeerHandle peer) {
  PeerStats s;
  EXPECT_TRUE(host.peer_stats(peer, s));
  return s.delivery_modes;
}

TEST_F(DeliveryModes, AgreedBetweenTernPeersAndPlainReliableOtherwise) {
  Pair& both = add_pair(HostOptions{}, HostOptions{});
  HostOptions off;
  off.delivery_modes = false;
  Pair& one = add_pair(HostOptions{}, off);
  connect_all();
  EXPECT_TRUE(modes(*both.client, both.at_client));
  EXPECT_TRUE(modes(*both.server, both.at_server));
  EXPECT_FALSE(modes(*one.client, one.at_client));
  EXPECT_FALSE(modes(*one.server, one.at_server));
  for (Pair* p : {&both, &one}) {
    ASSERT_EQ(p->client->send(p->at_client, 0, Delivery::reliable_unordered, numbered(1, 32)),
              SendResult::ok);
    ASSERT_EQ(p->client->send(p->at_client, 0, Delivery::reliable_sequenced, numbered(2, 32)),
              SendResult::ok);
  }
  ASSERT_TRUE(run_until(
      [&] {
        return count(both.server_events, EventType::receive) == 2 &&
               count(one.server_events, EventType::receive) == 2;
      },
      5'000'000));
  EXPECT_EQ(arrivals(both, Delivery::reliable_unordered), std::vector<std::uint32_t>{1});
  EXPECT_EQ(arrivals(both, Delivery::reliable_sequenced), std::vector<std::uint32_t>{2});
  // Without the agreement they travel, and arrive, as ENet's reliable messages.
  EXPECT_EQ(arrivals(one, Delivery::reliable), (std::vector<std::uint32_t>{1, 2}));
}

// One channel carries in-order, unordered and sequenced messages interleaved.
TEST_F(DeliveryModes, UnderLossReorderingAndDuplicationEachModeKeepsItsPromise) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  go_bad();
  constexpr std::uint32_t kEach = 300;
  for (std::uint32_t i = 0; i < kEach; ++i) {
    ASSERT_EQ(p.client->send(p.at_client, 1, Delivery::reliable, numbered(i, 100)), SendResult::ok);
    ASSERT_EQ(p.client->send(p.at_client, 1, Delivery::reliable_unordered, numbered(i, 120)),
              SendResult::ok);
    ASSERT_EQ(p.client->send(p.at_client, 1, Delivery::reliable_sequenced, numbered(i, 140)),
              SendResult::ok);
    run_for(4000);
  }
  ASSERT_TRUE(run_until(
      [&] {
        const auto seq = arrivals(p, Delivery::reliable_sequenced);
        return arrivals(p, Delivery::reliable).size() == kEach &&
               arrivals(p, Delivery::reliable_unordered).size() == kEach && !seq.empty() &&
               seq.back() == kEach - 1;
      },
      60'000'000))
      << arrivals(p, Delivery::reliable).size() << " in order, "
      << arrivals(p, Delivery::reliable_unordered).size() << " unordered";
  run_for(2'000'000);  // late duplicates would show now

  EXPECT_EQ(arrivals(p, Delivery::reliable), first_n(kEach));

  const auto unordered = arrivals(p, Delivery::reliable_unordered);
  EXPECT_EQ(std::set<std::uint32_t>(unordered.begin(), unordered.end()).size(), kEach)
      << "an unordered message lost or delivered twice";
  std::size_t overtaking = 0;  // delivered before an earlier one: nothing waited for it
  for (std::size_t i = 1; i < unordered.size(); ++i) overtaking += unordered[i] < unordered[i - 1];
  EXPECT_GT(overtaking, 0u);

  const auto sequenced = arrivals(p, Delivery::reliable_sequenced);
  for (std::size_t i = 1; i < sequenced.size(); ++i) {
    ASSERT_LT(sequenced[i - 1], sequenced[i]) << "sequenced went backwards or repeated";
  }
  EXPECT_EQ(sequenced.back(), kEach - 1);
  EXPECT_LT(sequenced.size(), kEach) << "no stale sequenced message under 20% loss";
  EXPECT_EQ(drops(p.server->stats(), "stale_sequenced"), kEach - sequenced.size());
  EXPECT_GT(net_.stats().lost, 0u);
  EXPECT_GT(net_.stats().duplicated, 0u);
  EXPECT_GT(net_.stats().reordered, 0u);
  std::printf(
      "[delivery modes] 20%% loss: %zu unordered overtook an earlier one; %zu of %u "
      "sequenced delivered\n",
      overtaking, sequenced.size(), kEach);
}

// Messages above the MTU travel as fragment sets: an unordered set is delivered as soon as it
// is complete, exactly once, intact; a sequenced one only if newer than any delivered.
TEST_F(DeliveryModes, FragmentedMessagesToo) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  go_bad();
  constexpr std::uint32_t kEach = 60;
  for (std::uint32_t i = 0; i < kEach; ++i) {
    ASSERT_EQ(p.client->send(p.at_client, 0, Delivery::reliable_unordered, numbered(i, 4000)),
              SendResult::ok);
    ASSERT_EQ(p.client->send(p.at_client, 0, Delivery::reliable_sequenced, numbered(i, 3000)),
              SendResult::ok);
    run_for(8000);
  }
  ASSERT_TRUE(run_until(
      [&] {
        const auto seq = arrivals(p, Delivery::reliable_sequenced);
        return arrivals(p, Delivery::reliable_unordered).size() == kEach && !seq.empty() &&
               seq.back() == kEach - 1;
      },
      60'000'000));
  run_for(2'000'000);
  std::set<std::uint32_t> seen;
  for (const Event& e : p.server_events) {
    if (e.type != EventType::receive) continue;
    const auto bytes = e.payload();
    const std::uint32_t i = index_of(bytes);
    const auto want = numbered(i, e.delivery == Delivery::reliable_unordered ? 4000 : 3000);
    ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), want.begin(), want.end()))
        << to_string(e.delivery) << " message " << i << " corrupt";
    if (e.delivery == Delivery::reliable_unordered) {
      EXPECT_TRUE(seen.insert(i).second) << "unordered " << i << " twice";
    }
  }
  EXPECT_EQ(seen.size(), kEach);
  const auto sequenced = arrivals(p, Delivery::reliable_sequenced);
  for (std::size_t i = 1; i < sequenced.size(); ++i) ASSERT_LT(sequenced[i - 1], sequenced[i]);
}

}  // namespace
