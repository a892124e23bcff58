// HostConfig::congestion_window: after a stall's retransmission timeout a connection sends one
// MTU of reliable data and regrows its window as acknowledgements return. ENet (false) resends
// all that timed out, every time its timeout passes.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

constexpr std::uint32_t kMessages = 300;
constexpr std::size_t kPayload = 100;

HostConfig with_window(bool on) {
  HostConfig c;
  c.congestion_window = on;
  c.congestion_control = false;  // the stall window under ENet's window (congestion_control's
                                 // own tests: tests/api/host_congestion_test.cpp)
  return c;
}

struct StallResult {
  std::uint64_t retransmits = 0;
  std::size_t delivered = 0;
  std::size_t distinct = 0;
  std::uint32_t in_transit_after = 0;
};

// The server sends kMessages at once; the client's side of the path then holds everything for
// `stall_ms` (delay, not loss: each datagram arrives in the end, in order), while the server
// keeps running its timers. Afterwards the two exchange freely until all is acknowledged.
// `channel`: the one the messages go on; `switched_off`: the channels whose congestion window
// is off (HostConfig::channels).
StallResult stall(bool congestion_window, std::uint32_t stall_ms, std::uint8_t channel = 0,
                  ChannelSet switched_off = {}) {
  HostConfig config = with_window(congestion_window);
  config.channels.no_congestion_window = switched_off;
  CorePair pair(HostConfig{}, config);
  pair.handshake(static_cast<std::size_t>(channel) + 1);
  for (int i = 0; i < 20; ++i) pair.step(1000);  // a few pings: an RTT of about 0 ms
  StallResult r;
  std::set<std::uint32_t> seen;
  pair.on_client_event = [&](Event& ev) {
    if (ev.type != EventType::receive) return;
    ++r.delivered;
    seen.insert(tern::test::payload_index(ev.packet.bytes()));
  };
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    EXPECT_EQ(pair.server.send(pair.server_peer, channel, Delivery::reliable,
                               tern::test::numbered_payload(i, kPayload)),
              SendResult::ok);
  }
  std::vector<std::vector<std::byte>> held = pair.take_server_output();
  for (std::uint32_t ms = 0; ms < stall_ms; ++ms) {
    pair.now_us += 1000;
    for (auto& d : pair.take_server_output()) held.push_back(std::move(d));
  }
  for (const auto& d : held) pair.client.on_datagram(pair.now_us, pair.server_ep, d);
  pair.drain();
  for (int i = 0; i < 400; ++i) pair.step(1000);
  r.retransmits = pair.server.counters().retransmits;
  r.distinct = seen.size();
  PeerStats s;
  EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, s));
  r.in_transit_after = s.reliable_in_transit;
  return r;
}

TEST(HostCongestion, AStallOfDelayCostsAboutAnMtuOfResendsNotTheWholeFlight) {
  const StallResult enet = stall(false, 100);
  const StallResult tern = stall(true, 100);
  // Both deliver everything exactly once (duplicates from resends are discarded).
  EXPECT_EQ(enet.delivered, kMessages);
  EXPECT_EQ(enet.distinct, kMessages);
  EXPECT_EQ(tern.delivered, kMessages);
  EXPECT_EQ(tern.distinct, kMessages);
  EXPECT_EQ(tern.in_transit_after, 0u);
  // ENet resent every message at least once, several times over as its timeouts doubled.
  EXPECT_GE(enet.retransmits, kMessages);
  // With the window, each timeout lets an MTU (about 12 of these messages) go again.
  EXPECT_LT(tern.retransmits * 5, enet.retransmits)
      << "tern " << tern.retransmits << " against enet " << enet.retransmits;
  std::printf(
      "[stall] 100 ms of delay, %u messages in flight: %llu resends with the congestion "
      "window, %llu without\n",
      kMessages, static_cast<unsigned long long>(tern.retransmits),
      static_cast<unsigned long long>(enet.retransmits));
}

// The per-channel switch: the window on, but off for channel 1. A stall of channel 1's
// messages costs what it costs ENet; channel 0's, with the same configuration, an MTU.
TEST(HostCongestion, AChannelWithTheWindowOffResendsAsEnet) {
  const ChannelSet off_on_1 = {std::uint64_t{1} << 1, 0, 0, 0};
  const StallResult on_1 = stall(true, 100, 1, off_on_1);
  const StallResult on_0 = stall(true, 100, 0, off_on_1);
  for (const StallResult* r : {&on_1, &on_0}) {
    EXPECT_EQ(r->delivered, kMessages);
    EXPECT_EQ(r->distinct, kMessages);
    EXPECT_EQ(r->in_transit_after, 0u);
  }
  EXPECT_GE(on_1.retransmits, kMessages);
  EXPECT_LT(on_0.retransmits * 5, on_1.retransmits)
      << "channel 0 " << on_0.retransmits << " against channel 1 " << on_1.retransmits;
}

// Real loss: one datagram in three from the server is dropped for a while. Everything still
// arrives, and afterwards the window has regrown so a burst leaves as fast as without it.
TEST(HostCongestion, AfterLossTheWindowRegrows) {
  CorePair pair(HostConfig{}, with_window(true));
  pair.handshake(1);
  std::size_t delivered = 0;
  pair.on_client_event = [&](Event& ev) { delivered += ev.type == EventType::receive; };
  std::uint32_t n = 0;
  for (int round = 0; round < 200; ++round) {
    for (int k = 0; k < 5; ++k) {
      ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                                 tern::test::numbered_payload(n++, kPayload)),
                SendResult::ok);
    }
    pair.now_us += 1000;
    int i = 0;
    for (const auto& d : pair.take_server_output()) {
      if (round < 100 && i++ % 3 == 0) continue;  // lost
      pair.client.on_datagram(pair.now_us, pair.server_ep, d);
    }
    pair.exchange();
  }
  for (int i = 0; i < 2000; ++i) pair.step(1000);
  EXPECT_EQ(delivered, n);
  EXPECT_GT(pair.server.counters().retransmits, 0u);
  // A burst of 40 KB now goes out in one flush: the window is back above it.
  for (std::uint32_t i = 0; i < 400; ++i) {
    ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                               tern::test::numbered_payload(n++, kPayload)),
              SendResult::ok);
  }
  pair.take_server_output();
  PeerStats s;
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, s));
  EXPECT_GE(s.reliable_in_transit, 400u * kPayload);
}

}  // namespace
