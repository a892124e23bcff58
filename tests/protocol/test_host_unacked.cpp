// Finding the command an acknowledgement names: a channel keeps its recent commands in flight
// in slots by sequence number (32, then 1,024 wide slots once those collide), and the ones
// whose slots are both taken (a backlog deeper than that) go to the host-wide index.
// Acknowledgements that arrive in any order, for commands in any of the three places, must
// each free exactly their command, and a command stuck at the front while hundreds behind it
// are acknowledged must still be found when its own acknowledgement comes.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

// Channel 1 carries two thirds: 1,600 in flight, more than its 32 + 1,024 slots hold. Small
// messages, so that all of them fit ENet's largest send window (64 KiB) at once.
constexpr std::uint32_t kMessages = 2400;
constexpr std::size_t kPayload = 24;

struct Received {
  std::vector<std::uint32_t> on_channel[2];
};

void count_into(Received& r, Event& ev) {
  if (ev.type != EventType::receive) return;
  const auto b = ev.packet.bytes();
  const std::uint32_t index =
      std::to_integer<std::uint32_t>(b[0]) << 24 | std::to_integer<std::uint32_t>(b[1]) << 16 |
      std::to_integer<std::uint32_t>(b[2]) << 8 | std::to_integer<std::uint32_t>(b[3]);
  if (ev.channel < 2) r.on_channel[ev.channel].push_back(index);
}

// Everything the server has in flight on both channels, sent but not yet delivered.
std::vector<std::vector<std::byte>> send_burst(CorePair& pair) {
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    const std::uint8_t channel = i % 3 == 0 ? 0 : 1;
    EXPECT_EQ(pair.server.send(pair.server_peer, channel, Delivery::reliable,
                               tern::test::numbered_payload(i, kPayload)),
              SendResult::ok);
  }
  auto datagrams = pair.take_server_output();
  PeerStats stats;
  EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
  EXPECT_EQ(stats.reliable_in_transit, kMessages * kPayload);  // all of it in flight at once
  return datagrams;
}

void expect_all_in_order(const Received& r) {
  std::vector<std::uint32_t> want[2];
  for (std::uint32_t i = 0; i < kMessages; ++i) want[i % 3 == 0 ? 0 : 1].push_back(i);
  EXPECT_EQ(r.on_channel[0], want[0]);
  EXPECT_EQ(r.on_channel[1], want[1]);
}

void expect_nothing_in_flight(CorePair& pair) {
  PeerStats stats;
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
  EXPECT_EQ(stats.reliable_in_transit, 0u);
  EXPECT_EQ(stats.queued_outgoing, 0u);
}

// A connected pair on two channels; the client's receive events are collected in `got`.
class HostUnacked : public ::testing::Test {
 protected:
  void SetUp() override {
    pair.on_client_event = [this](Event& ev) { count_into(got, ev); };
    pair.handshake(2);
  }

  CorePair pair;
  Received got;
};

TEST_F(HostUnacked, AcknowledgementsInAnyOrderFreeEveryCommand) {
  auto datagrams = send_burst(pair);
  ASSERT_GT(datagrams.size(), 4u);
  std::mt19937 rng(7);
  std::shuffle(datagrams.begin(), datagrams.end(), rng);
  for (const auto& d : datagrams) pair.client.on_datagram(pair.now_us, pair.server_ep, d);
  pair.exchange();  // the client's acknowledgements, in the order it received the commands
  pair.drain();

  expect_all_in_order(got);
  expect_nothing_in_flight(pair);
  PeerStats stats;
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
  EXPECT_EQ(stats.reliable_retransmits, 0u);
  // Acknowledged commands stay gone: a resent acknowledgement frees nothing twice.
  for (int i = 0; i < 10; ++i) pair.step(1000);
  expect_nothing_in_flight(pair);
}

TEST_F(HostUnacked, ACommandStuckAtTheFrontIsFoundWhenItsAcknowledgementComes) {
  // The first datagram (the oldest commands on both channels) is lost; the rest arrive and are
  // acknowledged, so hundreds of commands behind the lost ones come and go meanwhile.
  const auto datagrams = send_burst(pair);
  ASSERT_GT(datagrams.size(), 4u);
  for (std::size_t i = 1; i < datagrams.size(); ++i)
    pair.client.on_datagram(pair.now_us, pair.server_ep, datagrams[i]);
  pair.exchange();
  EXPECT_TRUE(got.on_channel[0].empty());  // held back behind the lost ones
  PeerStats stats;
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
  EXPECT_GT(stats.reliable_in_transit, 0u);

  // The lost commands are resent on their timeout and acknowledged: nothing is left.
  for (int i = 0; i < 3000 && got.on_channel[1].size() + got.on_channel[0].size() < kMessages;
       ++i) {
    pair.step(1000);
  }
  pair.step(1000);
  expect_all_in_order(got);
  expect_nothing_in_flight(pair);
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
  EXPECT_GT(stats.reliable_retransmits, 0u);
}

}  // namespace
