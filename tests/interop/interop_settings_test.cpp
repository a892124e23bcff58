// Tern's per-peer settings and offline discovery against Debian's libenet, over loopback:
// Host::set_peer_throttle reaches a libenet client as THROTTLE_CONFIGURE (libenet adopts it),
// and a discovery ping to a libenet server gets no answer and costs it nothing (a libenet
// client still connects and is echoed). Both hosts are serviced from this thread; the waits
// are bounded by a generous budget only so a broken build fails instead of hanging.
#include <enet/enet.h>
#include <gtest/gtest.h>

#include <tern/host.hpp>

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <string>

namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
constexpr auto kBudget = 20s;

class InteropSettings : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(enet_initialize(), 0); }
  static void TearDownTestSuite() { enet_deinitialize(); }
};

TEST_F(InteropSettings, ThrottleConfigureReachesALibenetClient) {
  std::string error;
  auto server =
      tern::Host::listen(tern::HostOptions{}, *tern::Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(server, nullptr) << error;
  ENetHost* client = enet_host_create(nullptr, 1, 2, 0, 0);
  ASSERT_NE(client, nullptr);
  ENetAddress to{};
  to.host = htonl(0x7f000001u);
  to.port = server->local_endpoint().port;
  ENetPeer* peer = enet_host_connect(client, &to, 2, 0);
  ASSERT_NE(peer, nullptr);
  tern::PeerHandle at_server;
  bool client_up = false;
  const auto end = SteadyClock::now() + kBudget;
  while ((!client_up || !at_server.valid()) && SteadyClock::now() < end) {
    tern::Event ev;
    if (server->service(ev, 1ms) && ev.type == tern::EventType::connect) at_server = ev.peer;
    ENetEvent e;
    if (enet_host_service(client, &e, 1) > 0 && e.type == ENET_EVENT_TYPE_CONNECT) client_up = true;
  }
  ASSERT_TRUE(client_up && at_server.valid());
  ASSERT_NE(peer->packetThrottleInterval, 1234u);
  server->set_peer_throttle(at_server, 1234, 3, 4);
  server->set_peer_timeout(at_server, 8, 2000, 9000);
  while (peer->packetThrottleInterval != 1234 && SteadyClock::now() < end) {
    tern::Event ev;
    server->service(ev, 1ms);
    ENetEvent e;
    enet_host_service(client, &e, 1);
  }
  EXPECT_EQ(peer->packetThrottleInterval, 1234u);
  EXPECT_EQ(peer->packetThrottleAcceleration, 3u);
  EXPECT_EQ(peer->packetThrottleDeceleration, 4u);
  tern::PeerStats st;
  ASSERT_TRUE(server->peer_stats(at_server, st));
  EXPECT_EQ(st.throttle_interval_ms, 1234u);
  EXPECT_EQ(st.timeout_limit, 8u);
  EXPECT_EQ(st.timeout_maximum_ms, 9000u);
  enet_host_destroy(client);
}

TEST_F(InteropSettings, ALibenetServerIgnoresADiscoveryPing) {
  ENetAddress bind{};
  bind.host = htonl(0x7f000001u);
  bind.port = 0;
  ENetHost* server = enet_host_create(&bind, 4, 2, 0, 0);
  ASSERT_NE(server, nullptr);
  ENetAddress actual{};
  ASSERT_EQ(enet_socket_get_address(server->socket, &actual), 0);
  std::string error;
  auto pinger =
      tern::Host::listen(tern::HostOptions{}, *tern::Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(pinger, nullptr) << error;
  const tern::Endpoint at = tern::Endpoint::v4(0x7f000001u, actual.port);
  for (int i = 0; i < 20; ++i) ASSERT_NE(pinger->discover(at, 1000), 0u);
  // A libenet client connects and is echoed while the pings are read.
  ENetHost* client = enet_host_create(nullptr, 1, 2, 0, 0);
  ASSERT_NE(client, nullptr);
  ENetAddress to = actual;
  to.host = htonl(0x7f000001u);
  enet_host_connect(client, &to, 2, 0);
  bool echoed = false;
  const auto end = SteadyClock::now() + kBudget;
  while (!echoed && SteadyClock::now() < end) {
    ENetEvent e;
    while (enet_host_service(server, &e, 1) > 0) {
      if (e.type == ENET_EVENT_TYPE_RECEIVE) {
        enet_peer_send(
            e.peer, e.channelID,
            enet_packet_create(e.packet->data, e.packet->dataLength, ENET_PACKET_FLAG_RELIABLE));
        enet_packet_destroy(e.packet);
      }
    }
    while (enet_host_service(client, &e, 1) > 0) {
      if (e.type == ENET_EVENT_TYPE_CONNECT) {
        enet_peer_send(e.peer, 0, enet_packet_create("hi", 2, ENET_PACKET_FLAG_RELIABLE));
      } else if (e.type == ENET_EVENT_TYPE_RECEIVE) {
        echoed = e.packet->dataLength == 2 && std::memcmp(e.packet->data, "hi", 2) == 0;
        enet_packet_destroy(e.packet);
      }
    }
    tern::Event ev;
    pinger->service(ev, 0us);
  }
  EXPECT_TRUE(echoed);
  tern::DiscoveryAnswer a;
  EXPECT_FALSE(pinger->poll_discovery(a));
  EXPECT_EQ(pinger->stats().discovery_pings_out, 20u);
  EXPECT_EQ(pinger->stats().datagrams_in, 0u);  // the server never answered anything
  EXPECT_EQ(server->connectedPeers, 1u);        // the client only: a ping made no peer
  enet_host_destroy(client);
  enet_host_destroy(server);
}

}  // namespace
