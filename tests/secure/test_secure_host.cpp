// Secure sessions through the public API over loopback sockets: tern::mint_token, a server
// whose security is required, a client with Host::connect_secure; a client without a token
// gets nowhere. Waits are bounded by conditions (generous deadlines), never by sleeps.
#include <tern/host.hpp>
#include <tern/secure.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace {

using namespace std::chrono_literals;

std::uint64_t unix_now() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
}

TEST(SecureHost, TokenClientTalksPlainClientRefused) {
  const tern::TokenKey key = tern::generate_token_key(3);
  tern::HostOptions so;
  so.security = tern::Security::required;
  so.token_keys = {key};
  std::string error;
  auto server = tern::Host::listen(so, *tern::Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(server, nullptr) << error;
  const tern::Endpoint addr = server->local_endpoint();

  tern::TokenRequest req;
  req.client_id = 9;
  req.servers = {addr};
  req.user_data = "room=blue";
  req.now_s = unix_now();
  req.expire_s = req.now_s + 60;
  tern::ConnectToken token;
  ASSERT_TRUE(tern::mint_token(key, req, token, error)) << error;

  auto client = tern::Host::listen({}, *tern::Endpoint::parse("127.0.0.1:0"), error);
  auto plain = tern::Host::listen({}, *tern::Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(client, nullptr);
  ASSERT_NE(plain, nullptr);
  const tern::PeerHandle cp = client->connect_secure(addr, 2, 5, token);
  const tern::PeerHandle pp = plain->connect(addr, 2, 6);
  ASSERT_TRUE(cp.valid());

  tern::PeerHandle at_server;
  bool client_up = false;
  std::string echoed;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  const std::string msg = "hello over a sealed channel";
  while (echoed.empty() && std::chrono::steady_clock::now() < deadline) {
    tern::Event ev;
    while (server->service(ev, 1ms)) {
      if (ev.type == tern::EventType::connect) {
        at_server = ev.peer;
        EXPECT_TRUE(server->peer_secure(ev.peer));
        const auto ud = server->peer_user_data(ev.peer);
        EXPECT_EQ(std::string(reinterpret_cast<const char*>(ud.data()), ud.size()), "room=blue");
        EXPECT_EQ(ev.data, 5u);
      }
      if (ev.type == tern::EventType::receive) {
        server->send(ev.peer, ev.channel, ev.delivery, ev.payload());
      }
    }
    while (client->service(ev, 1ms)) {
      if (ev.type == tern::EventType::connect && !client_up) {
        client_up = true;
        EXPECT_TRUE(client->peer_secure(cp));
        client->send(cp, 0, tern::Delivery::reliable,
                     std::as_bytes(std::span(msg.data(), msg.size())));
      }
      if (ev.type == tern::EventType::receive) {
        const auto p = ev.payload();
        echoed.assign(reinterpret_cast<const char*>(p.data()), p.size());
      }
    }
    while (plain->service(ev, 0ms)) {
      EXPECT_NE(ev.type, tern::EventType::connect) << "a client without a token connected";
    }
  }
  EXPECT_TRUE(client_up);
  EXPECT_EQ(echoed, msg);
  EXPECT_NE(plain->peer_state(pp), tern::PeerState::connected);
  EXPECT_TRUE(at_server.valid());
}

}  // namespace
