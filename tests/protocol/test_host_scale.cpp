// One server core holds far more connections than ENet's 4095 peer IDs, from IPv4 and IPv6
// addresses alike: a connection is named by address, port and peer ID together (the ID is its
// slot up to 4094, a free ID for its address beyond), so the 12-bit peer IDs on the wire repeat
// and must not get mixed up. One client socket may also hold many connections to one server,
// as in ENet.
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

namespace tern::proto {
namespace {

constexpr std::size_t kClients = 6000;

Endpoint client_address(std::size_t i) {
  if (i % 2 == 0) return Endpoint::v4(0x7f000000u | static_cast<std::uint32_t>(1 + i / 2), 40000);
  std::uint8_t a[16] = {0xfd, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  a[14] = static_cast<std::uint8_t>(i >> 8);
  a[15] = static_cast<std::uint8_t>(i);
  return Endpoint::v6(a, 40001);
}

struct Fleet {
  HostCore server;
  Endpoint server_address = Endpoint::v4(0x7f000001u, 7777);
  std::vector<std::unique_ptr<HostCore>> clients;
  std::vector<PeerHandle> client_peers;
  std::vector<OutDatagram> batch = std::vector<OutDatagram>(64);
  std::uint64_t now = 1'000'000;

  explicit Fleet(HostConfig server_config) : server(server_config) {
    for (std::size_t i = 0; i < kClients; ++i) {
      HostConfig c;
      c.random_seed = 1000 + i;
      clients.push_back(std::make_unique<HostCore>(c));
    }
  }

  // Delivers everything every host has to send, one round.
  void round() {
    for (std::size_t i = 0; i < kClients; ++i) {
      std::size_t n;
      while ((n = clients[i]->flush(now, batch)) > 0) {
        for (std::size_t k = 0; k < n; ++k) {
          ASSERT_EQ(batch[k].to, server_address);
          server.on_datagram(now, client_address(i), batch[k].view());
        }
        if (n < batch.size()) break;
      }
    }
    std::size_t n;
    while ((n = server.flush(now, batch)) > 0) {
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = index_of(batch[k].to);
        ASSERT_LT(i, kClients);
        clients[i]->on_datagram(now, server_address, batch[k].view());
      }
      if (n < batch.size()) break;
    }
    now += 5'000;
  }

  static std::size_t index_of(const Endpoint& e) {
    if (e.is_v4()) return (e.v4_host_order() & 0xffffffu) * 2 - 2;
    return (std::size_t{e.addr[14]} << 8) | e.addr[15];
  }
};

TEST(HostScale, SixThousandPeersFromIPv4AndIPv6Addresses) {
  HostConfig sc;
  sc.peer_limit = kClients;
  Fleet f(sc);
  for (std::size_t i = 0; i < kClients; ++i) {
    f.client_peers.push_back(
        f.clients[i]->connect(f.now, f.server_address, 2, static_cast<std::uint32_t>(i)));
  }
  for (int r = 0; r < 6; ++r) f.round();
  ASSERT_EQ(f.server.peer_count(), kClients);

  // Every connect event names its client by the connect data; each client then sends its own
  // index, which the server must see from that client's address and echo back.
  std::vector<PeerHandle> server_side(kClients);
  Event ev;
  std::size_t connects = 0;
  while (f.server.poll_event(ev)) {
    ASSERT_EQ(ev.type, EventType::connect);
    ASSERT_LT(ev.data, kClients);
    EXPECT_EQ(ev.address, client_address(ev.data));
    server_side[ev.data] = ev.peer;
    ++connects;
  }
  ASSERT_EQ(connects, kClients);
  for (std::size_t i = 0; i < kClients; ++i) {
    ASSERT_TRUE(f.clients[i]->poll_event(ev));
    ASSERT_EQ(ev.type, EventType::connect);
    std::uint32_t v = static_cast<std::uint32_t>(i);
    ASSERT_EQ(f.clients[i]->send(f.client_peers[i], 1, Delivery::reliable,
                                 std::as_bytes(std::span(&v, 1))),
              SendResult::ok);
  }
  f.round();
  std::size_t received = 0;
  while (f.server.poll_event(ev)) {
    ASSERT_EQ(ev.type, EventType::receive);
    std::uint32_t v;
    ASSERT_EQ(ev.packet.size(), sizeof v);
    std::memcpy(&v, ev.packet.bytes().data(), sizeof v);
    ASSERT_LT(v, kClients);
    EXPECT_EQ(ev.peer, server_side[v]) << "message " << v << " arrived on another connection";
    EXPECT_EQ(ev.address, client_address(v));
    ASSERT_EQ(f.server.send(ev.peer, ev.channel, ev.delivery, ev.packet), SendResult::ok);
    ++received;
  }
  EXPECT_EQ(received, kClients);
  for (int r = 0; r < 3; ++r) f.round();
  for (std::size_t i = 0; i < kClients; ++i) {
    ASSERT_TRUE(f.clients[i]->poll_event(ev)) << "client " << i << " got no echo";
    ASSERT_EQ(ev.type, EventType::receive);
    std::uint32_t v;
    std::memcpy(&v, ev.packet.bytes().data(), sizeof v);
    EXPECT_EQ(v, i);
    f.clients[i]->disconnect(f.client_peers[i], 9);
  }
  for (int r = 0; r < 6; ++r) f.round();
  std::size_t disconnects = 0;
  while (f.server.poll_event(ev)) {
    EXPECT_EQ(ev.type, EventType::disconnect);
    EXPECT_EQ(ev.reason, DisconnectReason::remote);
    EXPECT_EQ(ev.data, 9u);
    ++disconnects;
  }
  EXPECT_EQ(disconnects, kClients);
  EXPECT_EQ(f.server.peer_count(), 0u);
  EXPECT_EQ(f.server.counters().drops.total(), f.server.counters().drops[Drop::unexpected_ack]);
}

TEST(HostScale, PeerLimitRefusesTheNextConnect) {
  HostConfig sc;
  sc.peer_limit = 100;
  Fleet f(sc);
  for (std::size_t i = 0; i < kClients; ++i) {
    f.client_peers.push_back(f.clients[i]->connect(f.now, f.server_address, 1, 0));
  }
  for (int r = 0; r < 4; ++r) f.round();
  EXPECT_EQ(f.server.peer_count(), 100u);
  EXPECT_GE(f.server.counters().drops[Drop::peer_limit], kClients - 100);
}

// Moves every datagram between several client cores (each on its own socket) and one server
// core until all are quiet.
struct Crowd {
  HostCore& server;
  Endpoint server_ep;
  std::vector<std::pair<HostCore*, Endpoint>> clients;
  std::uint64_t now = 1'000'000;

  void pump(int rounds) {
    std::vector<OutDatagram> batch(64);
    for (int r = 0; r < rounds; ++r) {
      for (auto& [client, ep] : clients) {
        std::size_t n;
        while ((n = client->flush(now, batch)) > 0) {
          for (std::size_t k = 0; k < n; ++k) server.on_datagram(now, ep, batch[k].view());
          if (n < batch.size()) break;
        }
      }
      std::size_t n;
      while ((n = server.flush(now, batch)) > 0) {
        for (std::size_t k = 0; k < n; ++k) {
          for (auto& [client, ep] : clients) {
            if (ep == batch[k].to) client->on_datagram(now, server_ep, batch[k].view());
          }
        }
        if (n < batch.size()) break;
      }
      now += 5'000;
    }
  }
};

// Moves every datagram between one client core and one server core until both are quiet.
void pump(HostCore& client, const Endpoint& client_ep, HostCore& server, const Endpoint& server_ep,
          std::uint64_t& now, int rounds) {
  Crowd crowd{server, server_ep, {{&client, client_ep}}, now};
  crowd.pump(rounds);
  now = crowd.now;
}

// ENet lets one client socket hold several connections to the same server; they share the
// source address and port and differ only in peer ID. Messages must stay on their connection
// both ways.
TEST(HostScale, SeveralConnectionsFromOneSocket) {
  constexpr std::uint32_t kConnections = 300;
  HostCore server(HostConfig{});
  HostConfig cc;
  cc.random_seed = 77;
  HostCore client(cc);
  const Endpoint client_ep = Endpoint::v4(0x7f000002u, 40000);
  const Endpoint server_ep = Endpoint::v4(0x7f000001u, 7777);
  std::uint64_t now = 1'000'000;
  std::vector<PeerHandle> mine(kConnections);
  for (std::uint32_t i = 0; i < kConnections; ++i) {
    mine[i] = client.connect(now, server_ep, 1, i);
    ASSERT_TRUE(mine[i].valid());
  }
  pump(client, client_ep, server, server_ep, now, 4);
  ASSERT_EQ(server.peer_count(), kConnections);
  Event ev;
  std::vector<PeerHandle> theirs(kConnections);
  while (server.poll_event(ev)) {
    ASSERT_EQ(ev.type, EventType::connect);
    ASSERT_LT(ev.data, kConnections);
    EXPECT_EQ(ev.address, client_ep);
    theirs[ev.data] = ev.peer;
  }
  for (std::uint32_t i = 0; i < kConnections; ++i) {
    ASSERT_TRUE(theirs[i].valid()) << "connection " << i << " never arrived";
    ASSERT_EQ(client.peer_state(mine[i]), PeerState::connected);
    ASSERT_EQ(client.send(mine[i], 0, Delivery::reliable, std::as_bytes(std::span(&i, 1))),
              SendResult::ok);
  }
  while (client.poll_event(ev)) ASSERT_EQ(ev.type, EventType::connect);
  pump(client, client_ep, server, server_ep, now, 2);
  std::size_t echoed = 0;
  while (server.poll_event(ev)) {
    ASSERT_EQ(ev.type, EventType::receive);
    std::uint32_t v;
    std::memcpy(&v, ev.packet.bytes().data(), sizeof v);
    ASSERT_LT(v, kConnections);
    EXPECT_EQ(ev.peer, theirs[v]) << "message " << v << " arrived on another connection";
    ASSERT_EQ(server.send(ev.peer, 0, Delivery::reliable, ev.packet), SendResult::ok);
    ++echoed;
  }
  EXPECT_EQ(echoed, kConnections);
  pump(client, client_ep, server, server_ep, now, 2);
  std::size_t returned = 0;
  while (client.poll_event(ev)) {
    ASSERT_EQ(ev.type, EventType::receive);
    std::uint32_t v;
    std::memcpy(&v, ev.packet.bytes().data(), sizeof v);
    ASSERT_LT(v, kConnections);
    EXPECT_EQ(ev.peer, mine[v]) << "echo " << v << " came back on another connection";
    ++returned;
  }
  EXPECT_EQ(returned, kConnections);

  // The client restarts on the same socket: its new first connection reuses peer index 0
  // with a new connect ID, which tells the server the old connection with that index is over.
  HostConfig rc;
  rc.random_seed = 78;
  HostCore restarted(rc);
  ASSERT_TRUE(restarted.connect(now, server_ep, 1, 1000).valid());
  pump(restarted, client_ep, server, server_ep, now, 4);
  std::size_t replaced = 0;
  std::size_t connects = 0;
  while (server.poll_event(ev)) {
    if (ev.type == EventType::disconnect) {
      EXPECT_EQ(ev.reason, DisconnectReason::replaced);
      EXPECT_EQ(ev.peer, theirs[0]);
      ++replaced;
    }
    if (ev.type == EventType::connect) {
      EXPECT_EQ(ev.data, 1000u);
      ++connects;
    }
  }
  EXPECT_EQ(replaced, 1u);
  EXPECT_EQ(connects, 1u);
  EXPECT_EQ(server.peer_count(), kConnections);
}

// The peer ID a server hands out is the connection's slot while the 12-bit field can hold it;
// connections in later slots get a free ID for their address and are found by a keyed lookup.
// When slots below 4095 are freed and reused by a socket that already holds such an ID,
// neither connection may take the other's datagrams.
TEST(HostScale, PeerIdsStayDistinctWhenSlotsBeyondTheFieldAreInUse) {
  constexpr std::uint32_t kFirst = 4000;  // from socket A: server slots 0..3999
  constexpr std::uint32_t kSecond = 200;  // from socket B: slots 4000..4199, 105 beyond 4094
  HostConfig sc;
  sc.peer_limit = 5000;
  HostCore server(sc);
  HostConfig cc;
  cc.peer_limit = 5000;
  cc.random_seed = 11;
  HostCore a(cc);
  cc.random_seed = 12;
  HostCore b(cc);
  const Endpoint a_ep = Endpoint::v4(0x7f000002u, 40000);
  const Endpoint b_ep = Endpoint::v4(0x7f000003u, 40000);
  Crowd crowd{server, Endpoint::v4(0x7f000001u, 7777), {{&a, a_ep}, {&b, b_ep}}};

  // Connection k is named by connect data k on both sides: A's are 0..3999, B's from 10000.
  std::vector<std::pair<HostCore*, PeerHandle>> client_side;
  std::vector<std::uint32_t> names;
  auto open = [&](HostCore& c, std::uint32_t name) {
    const PeerHandle h = c.connect(crowd.now, crowd.server_ep, 1, name);
    ASSERT_TRUE(h.valid()) << name;
    client_side.emplace_back(&c, h);
    names.push_back(name);
  };
  for (std::uint32_t i = 0; i < kFirst; ++i) open(a, i);
  crowd.pump(4);
  for (std::uint32_t i = 0; i < kSecond; ++i) open(b, 10000 + i);
  crowd.pump(4);
  ASSERT_EQ(server.peer_count(), kFirst + kSecond);

  // A closes connections 95..199: their server slots are reused next, by B, whose connections
  // beyond slot 4094 asked for IDs 95..199 (their index on B).
  for (std::uint32_t i = 95; i < 200; ++i) a.disconnect(client_side[i].second, 0);
  crowd.pump(6);
  ASSERT_EQ(server.peer_count(), kFirst + kSecond - 105);
  for (std::uint32_t i = 0; i < 105; ++i) open(b, 20000 + i);
  crowd.pump(4);
  ASSERT_EQ(server.peer_count(), kFirst + kSecond);

  std::map<std::uint32_t, PeerHandle> server_side;
  Event ev;
  while (server.poll_event(ev)) {
    if (ev.type == EventType::connect) server_side[ev.data] = ev.peer;
    if (ev.type == EventType::disconnect) {
      std::erase_if(server_side, [&](const auto& entry) { return entry.second == ev.peer; });
    }
  }
  ASSERT_EQ(server_side.size(), std::size_t{kFirst + kSecond});
  while (a.poll_event(ev)) {
  }
  while (b.poll_event(ev)) {
  }

  // Every live connection sends its name; the server must get it on that connection, and the
  // echo must come back on the same one.
  std::size_t sent = 0;
  for (std::size_t k = 0; k < client_side.size(); ++k) {
    auto [core, h] = client_side[k];
    if (core->peer_state(h) != PeerState::connected) continue;
    const std::uint32_t name = names[k];
    ASSERT_EQ(core->send(h, 0, Delivery::reliable, std::as_bytes(std::span(&name, 1))),
              SendResult::ok);
    ++sent;
  }
  ASSERT_EQ(sent, std::size_t{kFirst + kSecond});
  crowd.pump(2);
  std::size_t echoed = 0;
  while (server.poll_event(ev)) {
    ASSERT_EQ(ev.type, EventType::receive);
    std::uint32_t v;
    std::memcpy(&v, ev.packet.bytes().data(), sizeof v);
    ASSERT_TRUE(server_side.count(v)) << v;
    EXPECT_EQ(ev.peer, server_side[v]) << "message " << v << " arrived on another connection";
    ASSERT_EQ(server.send(ev.peer, 0, Delivery::reliable, ev.packet), SendResult::ok);
    ++echoed;
  }
  EXPECT_EQ(echoed, sent);
  crowd.pump(2);
  std::size_t returned = 0;
  for (HostCore* core : {&a, &b}) {
    while (core->poll_event(ev)) {
      ASSERT_EQ(ev.type, EventType::receive);
      std::uint32_t v;
      std::memcpy(&v, ev.packet.bytes().data(), sizeof v);
      const auto it = std::find(names.begin(), names.end(), v);
      ASSERT_NE(it, names.end());
      const std::size_t k = static_cast<std::size_t>(it - names.begin());
      EXPECT_EQ(client_side[k].first, core) << "echo " << v << " came back to another socket";
      EXPECT_EQ(client_side[k].second, ev.peer) << "echo " << v << " on another connection";
      ++returned;
    }
  }
  EXPECT_EQ(returned, sent);
  EXPECT_EQ(server.counters().drops[Drop::unknown_peer], 0u);
}

}  // namespace
}  // namespace tern::proto
