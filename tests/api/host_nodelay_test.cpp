// HostOptions::nodelay over the simulated network: what the hello agrees, KCP's resend rule
// and backoff (visible in HostStats), the channels it covers, and exact delivery under loss,
// reordering and duplication. Several client/server pairs share one network, on virtual time.
#include "sim_pairs.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

using namespace tern::apitest;
using tern::Delivery;
using tern::EventType;
using tern::HostOptions;
using tern::HostStats;
using tern::SendResult;

class Nodelay : public SimPairs {};

HostOptions with_nodelay(bool on = true) {
  HostOptions o;
  o.nodelay = on;
  return o;
}

// Who asked for it does not matter: a connection where either side runs nodelay acknowledges
// at once both ways. Without a hello (a plain ENet client) nothing is agreed.
TEST_F(Nodelay, TheHelloAgreesItWhenEitherSideAsks) {
  Pair& client_asks = add_pair(HostOptions{}, with_nodelay());
  Pair& server_asks = add_pair(with_nodelay(), HostOptions{});
  Pair& neither = add_pair(HostOptions{}, HostOptions{});
  HostOptions plain;
  plain.selective_acks = false;  // a Tern client that behaves exactly as ENet: no hello
  plain.delivery_modes = false;
  plain.blocks = false;
  plain.congestion_control = false;
  Pair& plain_client = add_pair(with_nodelay(), plain);
  connect_all();
  EXPECT_TRUE(agreed(*client_asks.client, client_asks.at_client));
  EXPECT_TRUE(agreed(*client_asks.server, client_asks.at_server));
  EXPECT_TRUE(agreed(*server_asks.client, server_asks.at_client));
  EXPECT_TRUE(agreed(*server_asks.server, server_asks.at_server));
  EXPECT_FALSE(agreed(*neither.client, neither.at_client));
  EXPECT_FALSE(agreed(*neither.server, neither.at_server));
  EXPECT_FALSE(agreed(*plain_client.client, plain_client.at_client));
  EXPECT_FALSE(agreed(*plain_client.server, plain_client.at_server));
}

// A stream of 64-byte messages, one every 2 ms (several in flight per 10 ms round trip), over a
// link that loses one datagram in ten each way. With nodelay a lost message goes again once two
// later ones are acknowledged; the plain sender (fast retransmit off too, as ENet) waits for its
// timeout. nodelay_channels limits the rule: a sender whose nodelay covers only channel 1 sends
// channel 0 as ENet does.
TEST_F(Nodelay, ALossIsResentAfterLaterAcksOnTheChannelsItCovers) {
  HostOptions enet;
  enet.fast_retransmit = false;
  HostOptions nodelay = enet;
  nodelay.nodelay = true;
  HostOptions other_channel = nodelay;
  other_channel.nodelay_channels[0] = 1u << 1;
  Pair& plain = add_pair(HostOptions{}, enet);
  Pair& fast = add_pair(HostOptions{}, nodelay);
  Pair& elsewhere = add_pair(HostOptions{}, other_channel);
  connect_all();
  net_.set_default_link({.loss = 0.1, .latency_us = kOneWayLatencyUs});

  constexpr std::uint32_t kMessages = 300;
  std::vector<std::uint64_t> sent_at(kMessages);
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    sent_at[i] = net_.now_us();
    for (Pair* p : {&plain, &fast, &elsewhere}) {
      ASSERT_EQ(p->client->send(p->at_client, 0, Delivery::reliable, numbered(i, 64)),
                SendResult::ok);
    }
    run_for(2'000);
  }
  ASSERT_TRUE(run_until(
      [&] {
        return received(plain, 0).size() == kMessages && received(fast, 0).size() == kMessages &&
               received(elsewhere, 0).size() == kMessages;
      },
      60'000'000));
  for (Pair* p : {&plain, &fast, &elsewhere}) {
    EXPECT_EQ(received(*p, 0), first_n(kMessages));
    EXPECT_EQ(find(p->client_events, EventType::disconnect), nullptr);
  }
  const HostStats plain_stats = plain.client->stats();
  const HostStats fast_stats = fast.client->stats();
  const HostStats elsewhere_stats = elsewhere.client->stats();
  EXPECT_GT(plain_stats.retransmits, 0u);
  EXPECT_EQ(plain_stats.fast_retransmits, 0u);
  EXPECT_GT(fast_stats.nodelay_resends, 0u);
  EXPECT_EQ(fast_stats.nodelay_resends, fast_stats.fast_retransmits);
  EXPECT_GT(elsewhere_stats.retransmits, 0u);
  EXPECT_EQ(elsewhere_stats.nodelay_resends, 0u);
  EXPECT_EQ(elsewhere_stats.fast_retransmits, 0u);
  std::printf(
      "[nodelay] 10%% loss, 10 ms RTT, 300 messages: resent %llu (%llu after later acks), "
      "ENet's rules %llu\n",
      static_cast<unsigned long long>(fast_stats.retransmits),
      static_cast<unsigned long long>(fast_stats.nodelay_resends),
      static_cast<unsigned long long>(plain_stats.retransmits));
}

// A link that is down for 4 s: nodelay's timeouts grow x1.5, ENet's x2, so nodelay tries more
// often during the outage and is first to get through after it. Both deliver once it is up.
TEST_F(Nodelay, TimeoutsGrowByHalfNotDouble) {
  HostOptions enet;
  enet.fast_retransmit = false;
  HostOptions nodelay = enet;
  nodelay.nodelay = true;
  Pair& plain = add_pair(HostOptions{}, enet);
  Pair& fast = add_pair(HostOptions{}, nodelay);
  connect_all();
  tern::drv::LinkConditions down;
  down.down = true;
  for (Pair* p : {&plain, &fast}) net_.set_link(p->client_at, p->server_at, down);
  const HostStats plain_before = plain.client->stats();
  const HostStats fast_before = fast.client->stats();
  for (Pair* p : {&plain, &fast}) {
    ASSERT_EQ(p->client->send(p->at_client, 1, Delivery::reliable, numbered(7, 64)),
              SendResult::ok);
  }
  run_for(4'000'000);
  const std::uint64_t plain_tries = plain.client->stats().retransmits - plain_before.retransmits;
  const std::uint64_t fast_tries = fast.client->stats().retransmits - fast_before.retransmits;
  tern::drv::LinkConditions up;
  up.latency_us = kOneWayLatencyUs;
  for (Pair* p : {&plain, &fast}) net_.set_link(p->client_at, p->server_at, up);
  ASSERT_TRUE(run_until(
      [&] { return received(plain, 1).size() == 1 && received(fast, 1).size() == 1; }, 30'000'000));
  EXPECT_EQ(received(plain, 1), std::vector<std::uint32_t>{7});
  EXPECT_EQ(received(fast, 1), std::vector<std::uint32_t>{7});
  // ~15 ms doubling to 4 s is 8 tries; growing by half, 12.
  EXPECT_GE(fast_tries, plain_tries + 2)
      << "nodelay " << fast_tries << " tries in the outage, ENet " << plain_tries;
  std::printf("[nodelay] 4 s outage: %llu tries (ENet's backoff: %llu)\n",
              static_cast<unsigned long long>(fast_tries),
              static_cast<unsigned long long>(plain_tries));
}

// Between two nodelay hosts, both ways, two channels: 20% loss, reordering and duplication,
// and every reliable message arrives exactly once, in order per channel.
TEST_F(Nodelay, ExactDeliveryUnderLossReorderingAndDuplication) {
  Pair& p = add_pair(with_nodelay(), with_nodelay());
  connect_all();
  net_.set_default_link(hostile_link(2000, 15'000));
  constexpr std::uint32_t kMessages = 400;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    const auto ch = static_cast<std::uint8_t>(i % 2);
    ASSERT_EQ(p.client->send(p.at_client, ch, Delivery::reliable, numbered(i / 2, 200 + i % 900)),
              SendResult::ok);
    if (i % 4 == 3) run_for(16'000);
  }
  ASSERT_TRUE(run_until([&] { return received(p, 0).size() + received(p, 1).size() == kMessages; },
                        60'000'000))
      << received(p, 0).size() + received(p, 1).size() << " of " << kMessages << " received; "
      << (find(p.client_events, EventType::disconnect) ? "disconnected" : "connected");
  EXPECT_EQ(received(p, 0), first_n(kMessages / 2));
  EXPECT_EQ(received(p, 1), first_n(kMessages / 2));
  EXPECT_GT(net_.stats().lost, 0u);
  EXPECT_GT(net_.stats().duplicated, 0u);
  EXPECT_GT(net_.stats().reordered, 0u);
  EXPECT_GT(p.client->stats().nodelay_resends, 0u);
  run_for(1'000'000);
  EXPECT_EQ(count(p.server_events, EventType::receive), kMessages) << "a duplicate delivered";
}

}  // namespace
