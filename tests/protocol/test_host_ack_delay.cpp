// HostConfig::ack_delay_ms: acknowledgements for a connected peer with nothing else queued wait
// up to the delay for a message to ride with; ENet's behaviour (0) sends them at once.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

HostConfig delayed(std::uint32_t ms) {
  HostConfig c;
  c.ack_delay_ms = ms;
  return c;
}

class HostAckDelay : public ::testing::Test {
 protected:
  // The client delays its acks by 5 ms; the server is plain.
  HostAckDelay() : pair(delayed(5), HostConfig{}) {}

  void SetUp() override {
    pair.on_client_event = [this](Event& ev) {
      if (ev.type == EventType::receive)
        received.push_back(tern::test::payload_index(ev.packet.bytes()));
    };
    pair.on_server_event = [this](Event& ev) {
      if (ev.type == EventType::receive)
        server_received.push_back(tern::test::payload_index(ev.packet.bytes()));
    };
    pair.handshake(1);
  }

  // The server sends one reliable message and the client receives it; nothing is flushed back.
  void server_sends(std::uint32_t index) {
    ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                               tern::test::numbered_payload(index, 16)),
              SendResult::ok);
    for (const auto& d : pair.take_server_output())
      pair.client.on_datagram(pair.now_us, pair.server_ep, d);
    pair.drain();
  }

  // What the client flushes at the current time, handed to the server.
  std::size_t client_flush() {
    const std::size_t n = pair.client.flush(pair.now_us, out);
    for (std::size_t i = 0; i < n; ++i)
      pair.server.on_datagram(pair.now_us, pair.client_ep, out[i].view());
    pair.drain();
    return n;
  }

  std::uint32_t server_in_transit() {
    PeerStats s;
    EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, s));
    return s.reliable_in_transit;
  }

  CorePair pair;
  std::vector<OutDatagram> out = std::vector<OutDatagram>(8);
  std::vector<std::uint32_t> received;
  std::vector<std::uint32_t> server_received;
};

TEST_F(HostAckDelay, AnAckRidesWithTheNextMessage) {
  server_sends(1);
  ASSERT_EQ(received, std::vector<std::uint32_t>{1});
  EXPECT_EQ(client_flush(), 0u) << "the ack left on its own";
  EXPECT_GT(server_in_transit(), 0u);
  // The client's own message 2 ms later takes the ack along: one datagram for both.
  pair.now_us += 2000;
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable,
                             tern::test::numbered_payload(7, 16)),
            SendResult::ok);
  EXPECT_EQ(client_flush(), 1u);
  EXPECT_EQ(server_in_transit(), 0u) << "the message's datagram did not carry the ack";
  EXPECT_EQ(server_received, std::vector<std::uint32_t>{7});
}

TEST_F(HostAckDelay, AHeldAckLeavesWhenTheDelayIsUp) {
  server_sends(1);
  EXPECT_EQ(client_flush(), 0u);
  // A sleeping runtime must wake for it: the deadline is at most the delay away.
  EXPECT_LE(pair.client.next_deadline_us(), pair.now_us + 5000);
  pair.now_us += 4000;
  EXPECT_EQ(client_flush(), 0u) << "left before the delay was up";
  EXPECT_GT(server_in_transit(), 0u);
  pair.now_us += 1000;
  EXPECT_EQ(client_flush(), 1u);
  EXPECT_EQ(server_in_transit(), 0u);
  EXPECT_EQ(pair.server.counters().retransmits, 0u);
  // Nothing more is owed: the next flush is empty.
  pair.now_us += 5000;
  EXPECT_EQ(client_flush(), 0u);
}

TEST_F(HostAckDelay, AcksOfSeveralMessagesShareOneDatagram) {
  for (std::uint32_t i = 1; i <= 5; ++i) {
    server_sends(i);
    pair.now_us += 500;
    EXPECT_EQ(client_flush(), 0u);
  }
  EXPECT_EQ(received, (std::vector<std::uint32_t>{1, 2, 3, 4, 5}));
  // The first ack's deadline counts, not the last one's.
  pair.now_us = pair.now_us - 2500 + 5000;
  EXPECT_EQ(client_flush(), 1u);
  EXPECT_EQ(server_in_transit(), 0u);
}

// A client holding its acks for 20 ms, acknowledging with selective-ack ranges, against a
// server sending a message every millisecond: each range's RTT sample must include the hold
// (the oldest datagram's sent time), or the server's timeout undercuts it and it resends
// every message though each arrived. Until the first range arrives the server knows only
// the handshake's RTT, so what it sent in those first 20 ms may go twice, as with ENet's
// own acks; after that, nothing may.
TEST(HostAckDelayRanges, TheRttSampleCoversTheHoldSoNothingIsResent) {
  CorePair pair(delayed(20), HostConfig{});
  pair.handshake(1);
  std::size_t received = 0;
  pair.on_client_event = [&](Event& ev) { received += ev.type == EventType::receive; };
  std::uint64_t retransmits_at_start = 0;
  for (std::uint32_t i = 0; i < 300; ++i) {
    ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                               tern::test::numbered_payload(i, 16)),
              SendResult::ok);
    pair.step(1000);
    if (i == 50) retransmits_at_start = pair.server.counters().retransmits;
  }
  for (int i = 0; i < 50; ++i) pair.step(1000);
  EXPECT_EQ(received, 300u);
  PeerStats s;
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, s));
  EXPECT_TRUE(s.selective_acks);
  EXPECT_EQ(s.reliable_in_transit, 0u);
  EXPECT_GE(s.rtt_ms, 10u) << "the samples missed the 20 ms hold";
  EXPECT_LE(retransmits_at_start, 25u);
  EXPECT_EQ(pair.server.counters().retransmits, retransmits_at_start)
      << "resent after the RTT had seen the hold";
}

TEST(HostAckDelayOff, ENetSendsTheAckAtOnce) {
  CorePair pair;
  pair.handshake(1);
  ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                             tern::test::numbered_payload(1, 16)),
            SendResult::ok);
  for (const auto& d : pair.take_server_output())
    pair.client.on_datagram(pair.now_us, pair.server_ep, d);
  std::vector<OutDatagram> out(8);
  EXPECT_EQ(pair.client.flush(pair.now_us, out), 1u);
}

}  // namespace
