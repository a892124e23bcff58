// tern::Host with the KCP personality over real loopback sockets: the same connect / receive /
// disconnect events as an ENet host, sessions instead of connections.
#include <tern/host.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace tern;
using namespace std::chrono_literals;

std::vector<std::byte> numbered(std::uint32_t i, std::size_t size) {
  std::vector<std::byte> m(size);
  for (std::size_t j = 0; j < size; ++j) m[j] = std::byte((i * 31 + j) & 0xff);
  std::memcpy(m.data(), &i, 4);
  return m;
}

TEST(HostKcp, EchoSessionThenIdleTimeout) {
  HostOptions options;
  options.personality = Personality::kcp;
  options.kcp.idle_timeout_ms = 1500;
  std::string error;
  auto server = Host::listen(options, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(server, nullptr) << error;
  auto client = Host::listen(options, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(client, nullptr) << error;
  const Endpoint to = Endpoint::v4(0x7f000001, server->local_endpoint().port);
  const PeerHandle c = client->connect(to, 1, 0xabcdef);
  ASSERT_TRUE(c.valid());

  // Sends may start before the connect event: KCP has no handshake.
  constexpr std::uint32_t kMessages = 2000;
  std::vector<std::vector<std::byte>> sent, echoed;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    sent.push_back(numbered(i, i % 100 == 0 ? 4000 : 16 + i % 200));  // some fragment
    ASSERT_EQ(client->send(c, 0, Delivery::reliable, sent.back()), SendResult::ok);
  }
  bool server_connected = false, client_connected = false;
  std::uint32_t conv = 0;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  Event ev;
  while (echoed.size() < kMessages && std::chrono::steady_clock::now() < give_up) {
    while (server->service(ev, 0us)) {
      if (ev.type == EventType::connect) {
        server_connected = true;
        conv = ev.data;
      }
      if (ev.type == EventType::receive) {
        ASSERT_EQ(server->send(ev.peer, 0, Delivery::reliable, ev.payload()), SendResult::ok);
      }
    }
    while (client->service(ev, 1ms)) {
      if (ev.type == EventType::connect) client_connected = true;
      if (ev.type == EventType::receive) {
        auto p = ev.payload();
        echoed.emplace_back(p.begin(), p.end());
      }
    }
  }
  EXPECT_TRUE(server_connected);
  EXPECT_TRUE(client_connected);
  EXPECT_EQ(conv, 0xabcdefu);
  ASSERT_EQ(echoed, sent);
  EXPECT_EQ(server->peer_count(), 1u);
  EXPECT_EQ(server->stats().messages_in, kMessages);

  // KCP has no goodbye: the client forgets the session, the server times it out.
  client->disconnect(c);
  EXPECT_EQ(client->peer_count(), 0u);
  bool timed_out = false;
  const auto give_up2 = std::chrono::steady_clock::now() + 30s;
  while (!timed_out && std::chrono::steady_clock::now() < give_up2) {
    if (server->service(ev, 50ms) && ev.type == EventType::disconnect) {
      EXPECT_EQ(ev.reason, DisconnectReason::timeout);
      EXPECT_EQ(ev.data, 0xabcdefu);
      timed_out = true;
    }
  }
  EXPECT_TRUE(timed_out);
  EXPECT_EQ(server->peer_count(), 0u);
}

}  // namespace
