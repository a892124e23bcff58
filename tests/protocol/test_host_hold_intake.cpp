// HostCore::hold_intake: back-pressure before the acknowledgement. While a peer's intake is held
// its new reliable messages are kept but neither delivered nor acknowledged, so the sender's
// own window stops it; on release they are acknowledged and delivered in order, at once.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

std::vector<std::uint32_t> received;

void record(Event& ev) {
  if (ev.type != EventType::receive) return;
  std::uint32_t seq = 0;
  std::memcpy(&seq, ev.packet.bytes().data(), 4);
  received.push_back(seq);
}

void send_seq(CorePair& pair, std::uint32_t seq, Delivery delivery = Delivery::reliable) {
  std::byte body[8]{};
  std::memcpy(body, &seq, 4);
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, delivery, std::span<const std::byte>(body)),
            SendResult::ok);
}

// A connected pair whose server records what it delivers in `received` (cleared).
std::unique_ptr<CorePair> recording_pair(const HostConfig& server) {
  received.clear();
  auto pair = std::make_unique<CorePair>(HostConfig{}, server);
  pair->on_server_event = record;
  pair->handshake();
  return pair;
}

class HoldIntake : public ::testing::Test {
 protected:
  void SetUp() override {
    HostConfig server;
    server.max_withheld = 16;
    pair_ = recording_pair(server);
  }
  std::unique_ptr<CorePair> pair_;
};

TEST_F(HoldIntake, HeldMessagesAreNeitherDeliveredNorAcknowledgedUntilRelease) {
  CorePair& p = *pair_;
  p.server.hold_intake(p.server_peer, true);
  EXPECT_TRUE(p.server.intake_held(p.server_peer));
  for (std::uint32_t i = 0; i < 10; ++i) send_seq(p, i);
  for (int i = 0; i < 20; ++i) p.step(1000);
  EXPECT_TRUE(received.empty()) << "a held message was delivered";
  EXPECT_EQ(p.server.counters().intake_withheld, 10u);
  // Unacknowledged: the client still has all ten in flight (and resent some).
  PeerStats stats;
  ASSERT_TRUE(p.client.peer_stats(p.client_peer, stats));
  EXPECT_GE(p.client.queued_bytes(p.client_peer), 10u * 8u);

  p.server.hold_intake(p.server_peer, false);
  p.drain();
  ASSERT_EQ(received.size(), 10u) << "release must deliver what was kept, at once";
  for (std::uint32_t i = 0; i < 10; ++i) EXPECT_EQ(received[i], i);
  p.step(1000);  // the acks go out
  EXPECT_EQ(p.client.queued_bytes(p.client_peer), 0u) << "release must acknowledge them";
  // Nothing more arrives (no duplicates from the retransmissions while held).
  for (int i = 0; i < 50; ++i) p.step(1000);
  EXPECT_EQ(received.size(), 10u);
}

TEST_F(HoldIntake, PastTheLimitMessagesAreNotKeptAndArriveLaterInOrder) {
  CorePair& p = *pair_;
  p.server.hold_intake(p.server_peer, true);
  for (std::uint32_t i = 0; i < 40; ++i) send_seq(p, i);
  for (int i = 0; i < 5; ++i) p.step(1000);
  EXPECT_EQ(p.server.counters().intake_withheld, 16u);
  EXPECT_GE(p.server.counters().intake_refused, 24u);
  EXPECT_TRUE(received.empty());
  p.server.hold_intake(p.server_peer, false);
  p.drain();
  EXPECT_EQ(received.size(), 16u);
  // The rest were never acknowledged, so the client resends them: all arrive, in order, once.
  for (int i = 0; i < 3000 && received.size() < 40; ++i) p.step(1000);
  ASSERT_EQ(received.size(), 40u);
  for (std::uint32_t i = 0; i < 40; ++i) EXPECT_EQ(received[i], i);
}

TEST_F(HoldIntake, UnreliableMessagesAndAcknowledgementsStillFlow) {
  CorePair& p = *pair_;
  p.server.hold_intake(p.server_peer, true);
  // The server's own reliable message to the client is acknowledged by the client as usual.
  std::byte body[4]{};
  ASSERT_EQ(p.server.send(p.server_peer, 0, Delivery::reliable, std::span<const std::byte>(body)),
            SendResult::ok);
  send_seq(p, 7, Delivery::unsequenced);
  for (int i = 0; i < 5; ++i) p.step(1000);
  ASSERT_EQ(received.size(), 1u) << "an unsequenced message is not held";
  EXPECT_EQ(received[0], 7u);
  EXPECT_EQ(p.server.queued_bytes(p.server_peer), 0u) << "the client's ack was not taken";
}

TEST_F(HoldIntake, ADisconnectWhileHeldLosesNothingAcknowledged) {
  CorePair& p = *pair_;
  p.server.hold_intake(p.server_peer, true);
  for (std::uint32_t i = 0; i < 5; ++i) send_seq(p, i);
  for (int i = 0; i < 5; ++i) p.step(1000);
  // Kept but never acknowledged: forgetting them with the peer breaks no promise, and the
  // client still counts them as in flight.
  EXPECT_GE(p.client.queued_bytes(p.client_peer), 5u * 8u);
  p.server.disconnect(p.server_peer, 0);
  for (int i = 0; i < 20; ++i) p.step(1000);
  EXPECT_TRUE(received.empty());
  EXPECT_EQ(p.server.peer_count(), 0u);
}

// HostConfig::intake_rate: metered before the acknowledgement. A burst larger than the bucket
// (one second's worth) gets only what the bucket pays for at once; the rest is left
// unacknowledged, resent by the sender, and delivered in order as the bucket refills. An
// unsequenced message over the rate is dropped and counted.
TEST(IntakeMeter, ReliableOverTheRateWaitsForTheSenderToResend) {
  HostConfig server;
  server.intake_rate = 10;
  const auto pair = recording_pair(server);
  CorePair& p = *pair;
  for (std::uint32_t i = 0; i < 30; ++i) send_seq(p, i);
  for (int i = 0; i < 5; ++i) p.step(1000);
  EXPECT_EQ(received.size(), 10u) << "the bucket holds 10";
  EXPECT_GE(p.server.counters().intake_over_limit, 20u);
  EXPECT_GE(p.client.queued_bytes(p.client_peer), 20u * 8u) << "the rest is unacknowledged";
  for (int i = 0; i < 5000 && received.size() < 30; ++i) p.step(1000);
  ASSERT_EQ(received.size(), 30u);
  for (std::uint32_t i = 0; i < 30; ++i) EXPECT_EQ(received[i], i);
  EXPECT_EQ(p.server.counters().drops[Drop::over_limit], 0u);
}

TEST(IntakeMeter, UnsequencedOverTheRateIsDropped) {
  HostConfig server;
  server.intake_rate = 10;
  const auto pair = recording_pair(server);
  CorePair& p = *pair;
  for (std::uint32_t i = 0; i < 30; ++i) send_seq(p, i, Delivery::unsequenced);
  for (int i = 0; i < 5; ++i) p.step(1000);
  EXPECT_EQ(received.size(), 10u);
  EXPECT_EQ(p.server.counters().drops[Drop::over_limit], 20u);
  // A second later the bucket is full again.
  p.step(1'000'000);
  send_seq(p, 99, Delivery::unsequenced);
  p.step(1000);
  ASSERT_EQ(received.size(), 11u);
  EXPECT_EQ(received.back(), 99u);
}

TEST(IntakeMeter, BandwidthCountsBytes) {
  HostConfig server;
  server.intake_bandwidth = 80;  // ten 8-byte messages a second
  const auto pair = recording_pair(server);
  CorePair& p = *pair;
  for (std::uint32_t i = 0; i < 30; ++i) send_seq(p, i, Delivery::unsequenced);
  for (int i = 0; i < 5; ++i) p.step(1000);
  EXPECT_EQ(received.size(), 10u);
}

}  // namespace
