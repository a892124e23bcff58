// Bandwidth limits: the handshake's bandwidth fields size the reliable window, BANDWIDTH_LIMIT
// shares a host's incoming bandwidth among its peers, and the once-a-second host throttle
// keeps what a host sends to a peer within what that peer said it can receive.
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace tern::proto {
namespace {

struct Net {
  std::vector<std::unique_ptr<HostCore>> hosts;
  std::vector<Endpoint> addresses;
  std::vector<OutDatagram> batch = std::vector<OutDatagram>(64);
  std::uint64_t now = 1'000'000;

  std::size_t add(const HostConfig& c) {
    hosts.push_back(std::make_unique<HostCore>(c));
    addresses.push_back(Endpoint::v4(0x7f000001u, static_cast<std::uint16_t>(9000 + hosts.size())));
    return hosts.size() - 1;
  }
  std::size_t index_of(const Endpoint& e) const {
    for (std::size_t i = 0; i < addresses.size(); ++i) {
      if (addresses[i] == e) return i;
    }
    return addresses.size();
  }
  // Moves every datagram to its destination with no delay, then advances time by `step_us`.
  void step(std::uint64_t step_us) {
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      std::size_t n;
      while ((n = hosts[i]->flush(now, batch)) > 0) {
        for (std::size_t k = 0; k < n; ++k) {
          const std::size_t to = index_of(batch[k].to);
          if (to < hosts.size()) hosts[to]->on_datagram(now, addresses[i], batch[k].view());
        }
        if (n < batch.size()) break;
      }
    }
    now += step_us;
  }
};

PeerHandle connect(Net& net, std::size_t client, std::size_t server, PeerHandle& server_side) {
  const PeerHandle c = net.hosts[client]->connect(net.now, net.addresses[server], 1, 0);
  for (int i = 0; i < 10; ++i) net.step(1000);
  Event ev;
  while (net.hosts[server]->poll_event(ev)) {
    if (ev.type == EventType::connect && ev.address == net.addresses[client]) server_side = ev.peer;
  }
  while (net.hosts[client]->poll_event(ev)) {
  }
  return c;
}

TEST(HostBandwidth, HandshakeSizesTheReliableWindow) {
  Net net;
  HostConfig server_config;
  server_config.outgoing_bandwidth = 256 * 1024;  // bytes/s: (256 KiB / 64 KiB) * 4096 = 16384
  const std::size_t server = net.add(server_config);
  const std::size_t client = net.add(HostConfig{});
  PeerHandle server_side;
  const PeerHandle c = connect(net, client, server, server_side);
  PeerStats s;
  ASSERT_TRUE(net.hosts[server]->peer_stats(server_side, s));
  EXPECT_EQ(s.window_size, 16384u);
  ASSERT_TRUE(net.hosts[client]->peer_stats(c, s));
  EXPECT_EQ(s.window_size, 65536u);  // unlimited client, and the server caps nothing it receives
}

TEST(HostBandwidth, IncomingBandwidthIsSharedAmongPeersByBandwidthLimit) {
  Net net;
  HostConfig server_config;
  server_config.incoming_bandwidth = 128 * 1024;
  const std::size_t server = net.add(server_config);
  // ENet hands a share only to peers that declare they could send more than it; peers that
  // declare nothing (0) are told 0, i.e. unlimited.
  HostConfig sender;
  sender.outgoing_bandwidth = 1024 * 1024;
  const std::size_t a = net.add(sender);
  const std::size_t b = net.add(sender);
  PeerHandle sa, sb;
  const PeerHandle ca = connect(net, a, server, sa);
  const PeerHandle cb = connect(net, b, server, sb);
  // The next throttle pass sends BANDWIDTH_LIMIT with a 64 KiB/s share to each client, whose
  // window for the server shrinks to (min(64 KiB, 1 MiB) / 64 KiB) * 4096.
  for (int i = 0; i < 300; ++i) net.step(10'000);
  PeerStats s;
  ASSERT_TRUE(net.hosts[a]->peer_stats(ca, s));
  EXPECT_EQ(s.window_size, 4096u);
  ASSERT_TRUE(net.hosts[b]->peer_stats(cb, s));
  EXPECT_EQ(s.window_size, 4096u);
}

TEST(HostBandwidth, ThrottleKeepsUnreliableTrafficWithinTheReceiversBandwidth) {
  Net net;
  // The server declares what it can send: ENet's bandwidth pass on the client only hands its
  // 16 KiB/s to a peer that declares more than that (an undeclared 0 would be told 0).
  HostConfig server_config;
  server_config.outgoing_bandwidth = 1024 * 1024;
  const std::size_t server = net.add(server_config);
  HostConfig slow;
  slow.incoming_bandwidth = 16 * 1024;  // the client says it can take 16 KiB/s
  const std::size_t client = net.add(slow);
  PeerHandle server_side;
  const PeerHandle c = connect(net, client, server, server_side);
  ASSERT_TRUE(c.valid());

  // The server offers 100 KiB/s of unreliable 1000-byte messages for 6 simulated seconds.
  std::vector<std::byte> payload(1000, std::byte{0x5a});
  std::size_t received_late = 0;
  Event ev;
  for (int ms = 0; ms < 6000; ++ms) {
    if (ms % 10 == 0) {
      ASSERT_EQ(net.hosts[server]->send(server_side, 0, Delivery::unreliable, payload),
                SendResult::ok);
    }
    net.step(1000);
    while (net.hosts[client]->poll_event(ev)) {
      if (ev.type == EventType::receive && ms >= 3000) received_late += ev.packet.size();
    }
  }
  PeerStats s;
  ASSERT_TRUE(net.hosts[server]->peer_stats(server_side, s));
  EXPECT_LT(s.packet_throttle_limit, kPacketThrottleScale);
  EXPECT_GT(net.hosts[server]->counters().drops[Drop::throttled], 0u);
  // Without the throttle the last 3 s would carry ~300 KB; the limit is 16 KiB/s. Allow for
  // the throttle's coarse steps (1/32) and the protocol overhead it counts.
  EXPECT_LT(received_late, 3u * 2 * 16 * 1024) << "bytes delivered in the last 3 s";
  EXPECT_GT(received_late, 0u);
}

}  // namespace
}  // namespace tern::proto
