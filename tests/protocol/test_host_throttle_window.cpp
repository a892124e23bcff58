// HostConfig::throttle_reliable_window: ENet's packet throttle falls by 2/32 for every
// acknowledgement whose RTT exceeds the last interval's lowest by two variances, and with it
// the reliable send window, down to one MTU in flight. A receiver that falls behind (its acks
// come back late) then gets one MTU per round trip, less than is being sent to it, and the
// sender's queue grows for as long as the RTT stays up. With the option off the window stays
// the negotiated one (the throttle still answers for unreliable messages).
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

constexpr std::uint32_t kPerMs = 4;         // 64-byte reliable messages the server sends per ms
constexpr std::uint32_t kSettleMs = 11000;  // two throttle intervals on the settled path
constexpr std::uint32_t kSlowMs = 1000;     // then the client's acks take kAckDelayMs longer
// Each way. ENet's throttle only moves once a whole interval's lowest RTT exceeds the RTT
// variance (3 ms, where ENet's integer smoothing leaves it), so the path is not instant.
constexpr std::uint32_t kPathMs = 5;
constexpr std::uint32_t kAckDelayMs = 20;

struct Outcome {
  std::uint32_t throttle_at_end = 0;  // PeerStats::packet_throttle after the slow phase
  std::uint32_t most_in_transit = 0;  // bytes, in the second half of the slow phase
  std::uint32_t queued_at_end = 0;    // messages waiting for the window
  std::uint32_t delivered = 0;        // of kPerMs * (kSettleMs + kSlowMs) sent
  std::uint32_t mtu = 0;
  bool in_order = true;
};

Outcome run(bool throttle_reliable_window) {
  HostConfig server;
  server.congestion_control = false;  // ENet's throttle is what is measured
  server.throttle_reliable_window = throttle_reliable_window;
  // Only the throttle is under test: no timeouts from the longer RTT, no congestion window.
  server.min_rto_ms = 200;
  server.congestion_window = false;
  CorePair pair(HostConfig{}, server);
  pair.handshake(1);
  Outcome o;
  pair.on_client_event = [&](Event& ev) {
    if (ev.type != EventType::receive) return;
    o.in_order = o.in_order && tern::test::payload_index(ev.packet.bytes()) == o.delivered;
    ++o.delivered;
  };
  std::vector<OutDatagram> out(32);
  // Client-to-server datagrams in flight: (delivery time in ms, bytes). The path takes
  // kPathMs each way at first (an RTT above its variance, so ENet's throttle is live), then
  // the client's datagrams take kAckDelayMs more: it has fallen behind.
  std::deque<std::pair<std::uint64_t, std::vector<std::byte>>> to_server;
  std::deque<std::pair<std::uint64_t, std::vector<std::byte>>> to_client;
  auto carry = [&](HostCore& from, std::uint64_t at_ms, auto& path) {
    for (std::size_t n = out.size(); n == out.size();) {
      n = from.flush(pair.now_us, out);
      for (std::size_t d = 0; d < n; ++d) {
        const auto bytes = out[d].view();
        path.emplace_back(at_ms, std::vector<std::byte>(bytes.begin(), bytes.end()));
      }
    }
  };
  auto arrive = [&](HostCore& to, const Endpoint& from, std::uint64_t now_ms, auto& path) {
    while (!path.empty() && path.front().first <= now_ms) {
      to.on_datagram(pair.now_us, from, path.front().second);
      path.pop_front();
    }
  };
  std::uint32_t index = 0;
  for (std::uint32_t ms = 0; ms < kSettleMs + kSlowMs; ++ms) {
    const bool slow = ms >= kSettleMs;
    for (std::uint32_t i = 0; i < kPerMs; ++i) {
      EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                                 tern::test::numbered_payload(index++, 64)),
                SendResult::ok);
    }
    pair.now_us += 1000;
    const std::uint64_t now_ms = pair.now_us / 1000;
    carry(pair.server, now_ms + kPathMs, to_client);
    carry(pair.client, now_ms + kPathMs + (slow ? kAckDelayMs : 0), to_server);
    arrive(pair.client, pair.server_ep, now_ms, to_client);
    arrive(pair.server, pair.client_ep, now_ms, to_server);
    pair.drain();
    if (ms >= kSettleMs + kSlowMs / 2) {  // once the throttle has had its say
      PeerStats s;
      EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, s));
      o.most_in_transit = std::max(o.most_in_transit, s.reliable_in_transit);
    }
  }
  PeerStats s;
  EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, s));
  o.throttle_at_end = s.packet_throttle;
  o.queued_at_end = s.queued_outgoing;
  o.mtu = s.mtu;
  return o;
}

TEST(HostThrottleWindow, EnetsThrottleHoldsASlowReceiverToOneMtuPerRoundTrip) {
  const Outcome o = run(true);
  EXPECT_TRUE(o.in_order);
  EXPECT_EQ(o.throttle_at_end, 0u);
  // One MTU of payload in flight (the check lets the last message that fits cross it).
  EXPECT_LE(o.most_in_transit, o.mtu + 64);
  // 256 B of payload per ms offered, one MTU per 30 ms round trip (~45 B per ms) let
  // through: most of a second's worth piles up.
  EXPECT_GE(o.queued_at_end, kPerMs * kSlowMs / 2);
  std::printf(
      "[throttle window] on: throttle %u, at most %u B in flight, %u messages queued "
      "after %u ms at a %u ms longer RTT\n",
      o.throttle_at_end, o.most_in_transit, o.queued_at_end, kSlowMs, kAckDelayMs);
}

TEST(HostThrottleWindow, WithoutItTheWindowCarriesWhatIsSent) {
  const Outcome o = run(false);
  EXPECT_TRUE(o.in_order);
  // The throttle itself still falls (it still governs unreliable messages)...
  EXPECT_EQ(o.throttle_at_end, 0u);
  // ...but the reliable window does not: a round trip of messages in flight (30 ms of
  // 256 B), none waiting beyond the current millisecond's.
  EXPECT_GT(o.most_in_transit, 4 * o.mtu);
  EXPECT_LE(o.queued_at_end, kPerMs);
  // Everything sent up to the last ack delay has arrived.
  EXPECT_GE(o.delivered, kPerMs * (kSettleMs + kSlowMs - kAckDelayMs - 2 * kPathMs - 2));
  std::printf("[throttle window] off: throttle %u, at most %u B in flight, %u messages queued\n",
              o.throttle_at_end, o.most_in_transit, o.queued_at_end);
}

}  // namespace
