// Host::send_with_receipt over the simulated network: a receipt event for each reliable
// message once the peer has acknowledged all of it (fragments too), exactly once, never before
// the peer has the message; with a plain ENet peer as well; refused for unreliable deliveries;
// none for a message the connection ended before acknowledging.
#include "sim_pairs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

namespace {

using namespace tern::apitest;
using tern::Delivery;
using tern::Event;
using tern::EventType;
using tern::HostOptions;
using tern::Packet;
using tern::SendResult;

class Receipts : public SimPairs {
 protected:
  static std::vector<std::uint32_t> receipts(const Pair& p) {
    std::vector<std::uint32_t> out;
    for (const Event& e : p.client_events) {
      if (e.type == EventType::receipt) out.push_back(e.data);
    }
    return out;
  }
};

// Under 20% loss each way, a mix of small and fragmented messages in two reliable modes, to a
// Tern peer and to one that behaves as plain ENet: every receipt comes once, and every message
// with a receipt is delivered. (A receipt says the peer's host has the message: one held there
// behind an earlier, lost one is acknowledged before the application sees it.)
TEST_F(Receipts, EachReliableMessageOnceAckedWholeUnderLoss) {
  HostOptions plain;
  plain.selective_acks = false;
  plain.congestion_control = false;
  plain.delivery_modes = false;
  plain.blocks = false;
  Pair& tern_peer = add_pair(HostOptions{}, HostOptions{});
  Pair& enet_like = add_pair(plain, plain);
  connect_all();
  net_.set_default_link(
      {.loss = 0.2, .reorder = 0.05, .latency_us = kOneWayLatencyUs, .reorder_delay_us = 10'000});

  constexpr std::uint32_t kMessages = 120;
  std::map<const Pair*, std::set<std::uint32_t>> early;  // receipts before the delivery
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    const std::size_t size = i % 10 == 0 ? 5000 : 100;  // every tenth in fragments
    const Delivery d = i % 3 == 0 ? Delivery::reliable_unordered : Delivery::reliable;
    for (Pair* p : {&tern_peer, &enet_like}) {
      ASSERT_EQ(p->client->send_with_receipt(p->at_client, static_cast<std::uint8_t>(i % 2), d,
                                             Packet::copy_of(numbered(i, size)), 1000 + i),
                SendResult::ok);
    }
    run_for(5000);
  }
  auto server_has = [](const Pair& p, std::uint32_t index) {
    for (const Event& e : p.server_events) {
      if (e.type == EventType::receive && index_of(e.payload()) == index) return true;
    }
    return false;
  };
  // Counted as the receipts arrive (printed): held messages are acknowledged early.
  std::map<const Pair*, std::size_t> seen;
  ASSERT_TRUE(run_until(
      [&] {
        for (Pair* p : {&tern_peer, &enet_like}) {
          const auto r = receipts(*p);
          for (std::size_t k = seen[p]; k < r.size(); ++k) {
            if (!server_has(*p, r[k] - 1000)) early[p].insert(r[k]);
          }
          seen[p] = r.size();
        }
        return receipts(tern_peer).size() >= kMessages && receipts(enet_like).size() >= kMessages;
      },
      60'000'000))
      << receipts(tern_peer).size() << " and " << receipts(enet_like).size() << " receipts";
  run_for(2'000'000);
  for (Pair* p : {&tern_peer, &enet_like}) {
    const auto r = receipts(*p);
    EXPECT_EQ(r.size(), kMessages) << "a receipt twice";
    EXPECT_EQ(std::set<std::uint32_t>(r.begin(), r.end()).size(), kMessages);
    EXPECT_EQ(*std::min_element(r.begin(), r.end()), 1000u);
    EXPECT_EQ(*std::max_element(r.begin(), r.end()), 1000u + kMessages - 1);
    EXPECT_EQ(count(p->server_events, EventType::receive), kMessages);
    for (std::uint32_t id : r) EXPECT_TRUE(server_has(*p, id - 1000)) << "receipt " << id;
    std::printf("[receipts] %zu of %u came while the message was held for ordering\n",
                early[p].size(), kMessages);
  }
  for (const Event& e : tern_peer.client_events) {
    if (e.type == EventType::receipt) {
      EXPECT_EQ(e.channel, (e.data - 1000) % 2);
    }
  }
}

TEST_F(Receipts, OnlyForReliableDeliveries) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  for (Delivery d : {Delivery::unreliable, Delivery::unsequenced}) {
    EXPECT_EQ(p.client->send_with_receipt(p.at_client, 0, d, Packet::copy_of(numbered(1, 10)), 7),
              SendResult::not_reliable);
  }
  EXPECT_EQ(p.client->send_with_receipt(p.at_client, 0, Delivery::reliable_sequenced,
                                        Packet::copy_of(numbered(2, 10)), 8),
            SendResult::ok);
  ASSERT_TRUE(run_until([&] { return !receipts(p).empty(); }, 5'000'000));
  run_for(1'000'000);
  EXPECT_EQ(receipts(p), std::vector<std::uint32_t>{8});
}

// A message the peer never acknowledged gets no receipt: the connection's end says so.
TEST_F(Receipts, NoneForAMessageTheConnectionEndedWithout) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  tern::drv::LinkConditions down;
  down.down = true;
  net_.set_link(p.client_at, p.server_at, down);
  ASSERT_EQ(p.client->send_with_receipt(p.at_client, 0, Delivery::reliable,
                                        Packet::copy_of(numbered(3, 10)), 9),
            SendResult::ok);
  run_for(200'000);
  p.client->disconnect_now(p.at_client);
  run_for(5'000'000);
  EXPECT_TRUE(receipts(p).empty());
  EXPECT_EQ(count(p.server_events, EventType::receive), 0u);
}

}  // namespace
