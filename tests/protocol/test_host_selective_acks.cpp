// Tern's selective acks (WIRE.md, "Extensions"): two Tern cores agree on them in the
// handshake and acknowledge reliable commands in ranges; a core with the extension off (a
// stand-in for a plain ENet peer, which ignores the hello) keeps ENet's one ack per command.
#include "core_pair.hpp"
#include "host_core.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

struct AckCount {
  std::size_t plain = 0;    // ENet acknowledge commands for application channels
  std::size_t ranges = 0;   // ack_range commands
  std::size_t covered = 0;  // sequence numbers the ranges acknowledge
};

AckCount count_acks(const std::vector<std::vector<std::byte>>& datagrams) {
  AckCount n;
  for (const auto& d : datagrams) {
    DecodedHeader dh;
    Drop why = Drop::count_;
    EXPECT_TRUE(decode_header(d, false, dh, why));
    CommandDecoder dec(d, dh.size);
    Command c;
    while (dec.next(c, why)) {
      if (c.type() == Cmd::acknowledge && c.channel_id != kSystemChannel) ++n.plain;
      if (c.type() == Cmd::ack_range) {
        ++n.ranges;
        n.covered += 1 + static_cast<std::size_t>(std::popcount(c.ack_range.bits));
      }
    }
  }
  return n;
}

HostConfig with_selective_acks(bool on) {
  HostConfig c;
  c.selective_acks = on;
  return c;
}

class SelectiveAcks : public ::testing::Test {
 protected:
  void connect(bool client_on, bool server_on) {
    pair =
        std::make_unique<CorePair>(with_selective_acks(client_on), with_selective_acks(server_on));
    pair->on_server_event = [this](Event& ev) {
      if (ev.type == EventType::receive)
        received.push_back(tern::test::payload_index(ev.packet.bytes()));
    };
    pair->handshake(2);
  }

  // The client sends `n` reliable messages on channel 1; returns its datagrams, undelivered.
  std::vector<std::vector<std::byte>> client_sends(std::uint32_t first, std::uint32_t n) {
    for (std::uint32_t i = first; i < first + n; ++i) {
      EXPECT_EQ(pair->client.send(pair->client_peer, 1, Delivery::reliable,
                                  tern::test::numbered_payload(i, 24)),
                SendResult::ok);
    }
    std::vector<std::vector<std::byte>> out;
    std::vector<OutDatagram> batch(16);
    for (;;) {
      const std::size_t k = pair->client.flush(pair->now_us, batch);
      for (std::size_t i = 0; i < k; ++i)
        out.emplace_back(batch[i].view().begin(), batch[i].view().end());
      if (k < batch.size()) return out;
    }
  }

  void to_server(const std::vector<std::byte>& d) {
    pair->server.on_datagram(pair->now_us, pair->client_ep, d);
    pair->drain();
  }

  PeerStats client_stats() {
    PeerStats s;
    EXPECT_TRUE(pair->client.peer_stats(pair->client_peer, s));
    return s;
  }

  std::unique_ptr<CorePair> pair;
  std::vector<std::uint32_t> received;
};

TEST_F(SelectiveAcks, TwoTernHostsAgreeAndAckInRanges) {
  connect(true, true);
  EXPECT_TRUE(client_stats().selective_acks);
  PeerStats s;
  ASSERT_TRUE(pair->server.peer_stats(pair->server_peer, s));
  EXPECT_TRUE(s.selective_acks);

  for (const auto& d : client_sends(0, 200)) to_server(d);
  const AckCount acks = count_acks(pair->server_output_to_client());
  EXPECT_EQ(acks.plain, 0u);
  EXPECT_EQ(acks.covered, 200u);
  EXPECT_LE(acks.ranges, 200u / 33 + 2);  // 33 per range, plus one per datagram boundary
  EXPECT_EQ(client_stats().reliable_in_transit, 0u) << "the ranges did not free the commands";
  std::vector<std::uint32_t> want(200);
  for (std::uint32_t i = 0; i < 200; ++i) want[i] = i;
  EXPECT_EQ(received, want);
}

TEST_F(SelectiveAcks, HolesAreResentAndNothingElse) {
  connect(true, true);
  auto datagrams = client_sends(0, 300);
  ASSERT_GE(datagrams.size(), 4u);
  // Lose the second and the fourth datagram: the ranges skip their sequence numbers.
  for (std::size_t i = 0; i < datagrams.size(); ++i) {
    if (i != 1 && i != 3) to_server(datagrams[i]);
  }
  pair->exchange();  // the ranges reach the client
  EXPECT_GT(client_stats().reliable_in_transit, 0u);
  for (int i = 0; i < 200 && received.size() < 300; ++i) pair->step(20'000);
  ASSERT_EQ(received.size(), 300u);
  for (std::uint32_t i = 0; i < 300; ++i) ASSERT_EQ(received[i], i);
  EXPECT_EQ(client_stats().reliable_in_transit, 0u);
  // Only the lost datagrams' commands went again (each at most a few times with backoff).
  const std::uint64_t retransmits = pair->client.counters().retransmits;
  EXPECT_GT(retransmits, 0u);
  EXPECT_LT(retransmits, 150u);
}

TEST(SelectiveAcksHandshake, AClientThatMissedTheHelloStillTakesRanges) {
  // The server's hello is cut from its VERIFY_CONNECT datagram: the client connects without
  // knowing the server agreed, so it acknowledges in plain ENet, while the server sends it
  // ranges, which the client (having offered them) must take.
  CorePair pair;
  pair.client_peer = pair.client.connect(pair.now_us, pair.server_ep, 2, 0);
  std::vector<OutDatagram> out(8);
  std::size_t cut = 0;
  for (int round = 0; round < 10; ++round) {
    pair.now_us += 1000;
    for (std::size_t i = 0, n = pair.client.flush(pair.now_us, out); i < n; ++i)
      pair.server.on_datagram(pair.now_us, pair.client_ep, out[i].view());
    for (auto d : pair.take_server_output()) {
      if (d.size() >= kHelloSize + 4 && static_cast<Cmd>(std::to_integer<std::uint8_t>(
                                            d[d.size() - kHelloSize])) == Cmd::tern_hello) {
        d.resize(d.size() - kHelloSize);
        ++cut;
      }
      pair.client.on_datagram(pair.now_us, pair.server_ep, d);
    }
    pair.drain();
  }
  ASSERT_GT(cut, 0u) << "the server sent no hello";
  ASSERT_EQ(pair.client.peer_state(pair.client_peer), PeerState::connected);
  PeerStats c;
  ASSERT_TRUE(pair.client.peer_stats(pair.client_peer, c));
  EXPECT_FALSE(c.selective_acks);
  for (std::uint32_t i = 0; i < 40; ++i) {
    ASSERT_EQ(pair.client.send(pair.client_peer, 1, Delivery::reliable,
                               tern::test::numbered_payload(i, 16)),
              SendResult::ok);
  }
  for (int i = 0; i < 5; ++i) pair.step(1000);
  ASSERT_TRUE(pair.client.peer_stats(pair.client_peer, c));
  EXPECT_EQ(c.reliable_in_transit, 0u);
  EXPECT_EQ(pair.client.counters().drops[Drop::extension_not_agreed], 0u);
  EXPECT_EQ(pair.client.counters().retransmits, 0u);
}

TEST_F(SelectiveAcks, OneSideOffKeepsENetAcks) {
  for (const auto& [client_on, server_on] : {std::pair{true, false}, std::pair{false, true}}) {
    SCOPED_TRACE(std::string("client ") + (client_on ? "on" : "off") + ", server " +
                 (server_on ? "on" : "off"));
    received.clear();
    connect(client_on, server_on);
    EXPECT_FALSE(client_stats().selective_acks);
    for (const auto& d : client_sends(0, 50)) to_server(d);
    const AckCount acks = count_acks(pair->server_output_to_client());
    EXPECT_EQ(acks.ranges, 0u);
    EXPECT_EQ(acks.plain, 50u);
    EXPECT_EQ(client_stats().reliable_in_transit, 0u);
    EXPECT_EQ(received.size(), 50u);
  }
}

}  // namespace
