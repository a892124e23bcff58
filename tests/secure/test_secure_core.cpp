// Secure sessions in the protocol core (WIRE.md, "Secure sessions"): real HostCores on
// simulated time whose datagrams the test carries, so it can replay, flip, redirect or drop
// any of them. Tokens are minted as an issuer would (secure.hpp).
#include "drop.hpp"
#include "host_core.hpp"
#include "secure/secure.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tern::proto {
namespace {

struct Wire {
  Endpoint to;
  Endpoint from;
  std::vector<std::byte> bytes;
};

constexpr std::uint64_t kUnixNow = 1'800'000'000;
const sec::TokenKey kKey{7, [] {
                           sec::Key k;
                           k.fill(0x5a);
                           return k;
                         }()};

struct Token {
  std::array<std::uint8_t, sec::kTokenBytes> sealed{};
  sec::Key c2s{};
  sec::Key s2c{};
};

class SecureCore : public ::testing::Test {
 protected:
  const Endpoint server_ep = Endpoint::v4(0x0a000001, 7777);
  std::uint64_t now_us = 1'000'000;
  std::vector<OutDatagram> batch = std::vector<OutDatagram>(32);
  std::unique_ptr<HostCore> server;
  std::size_t sent_to_client = 0;  // bytes the server sent to the client's address
  std::size_t received_from_client = 0;
  bool server_aes = true;  // HostConfig::secure_aes of the next server and clients made
  bool client_aes = true;
  bool client_lend = false;  // HostConfig::lend_payloads of the next clients made

  struct Client {
    std::unique_ptr<HostCore> core;
    Endpoint ep;
    PeerHandle peer;
  };

  void make_server(Security policy, std::initializer_list<sec::TokenKey> keys = {kKey}) {
    HostConfig c;
    c.security = policy;
    for (const auto& k : keys) c.token_keys.keys[c.token_keys.count++] = k;
    c.secure_addresses[0] = server_ep;
    c.secure_address_count = 1;
    c.random_seed = 99;
    c.secure_aes = server_aes;
    server = std::make_unique<HostCore>(c);
    server->set_unix_time(now_us, kUnixNow);
  }

  static Token mint(const sec::TokenKey& key = kKey, std::uint64_t expire = kUnixNow + 30,
                    Endpoint listed = Endpoint::v4(0x0a000001, 7777)) {
    Token t;
    sec::TokenContents c;
    c.client_id = 4242;
    c.timeout_s = 10;
    c.server_count = 1;
    c.servers[0] = listed;
    c.client_to_server.fill(0x11);
    c.server_to_client.fill(0x22);
    const std::string room = "room=alpha";
    c.user_data_len = static_cast<std::uint16_t>(room.size());
    std::memcpy(c.user_data.data(), room.data(), room.size());
    sec::mint_token(key, kUnixNow, expire, c, t.sealed);
    t.c2s = c.client_to_server;
    t.s2c = c.server_to_client;
    return t;
  }

  Client client(std::uint32_t addr, std::uint16_t port, std::uint64_t seed) {
    HostConfig c;
    c.random_seed = seed;
    c.secure_aes = client_aes;
    c.lend_payloads = client_lend;
    return Client{std::make_unique<HostCore>(c), Endpoint::v4(addr, port), {}};
  }

  void connect_secure(Client& c, const Token& t, std::uint8_t salt_byte = 1) {
    std::array<std::uint8_t, 16> salt{};
    salt.fill(salt_byte);
    c.peer = c.core->connect_secure(now_us, server_ep, 2, 77, t.sealed, t.c2s, t.s2c, salt);
    ASSERT_TRUE(c.peer.valid());
  }

  std::vector<Wire> drain(HostCore& h, const Endpoint& from) {
    std::vector<Wire> out;
    for (;;) {
      const std::size_t n = h.flush(now_us, batch);
      for (std::size_t i = 0; i < n; ++i) {
        const auto v = batch[i].view();
        out.push_back({batch[i].to, from, {v.begin(), v.end()}});
      }
      if (n < batch.size()) return out;
    }
  }

  // Carries datagrams both ways for `rounds` steps of 5 ms; `keep` sees (and may change or
  // drop) every datagram from either side; `log` gets a copy of each delivered one.
  void pump(std::vector<Client*> clients, int rounds,
            const std::function<bool(Wire&)>& keep = nullptr, std::vector<Wire>* log = nullptr) {
    for (int r = 0; r < rounds; ++r) {
      for (Client* c : clients) {
        for (Wire& w : drain(*c->core, c->ep)) {
          if (keep && !keep(w)) continue;
          if (log) log->push_back(w);
          received_from_client += w.bytes.size();
          server->on_datagram(now_us, w.from, w.bytes);
        }
      }
      for (Wire& w : drain(*server, server_ep)) {
        if (keep && !keep(w)) continue;
        if (log) log->push_back(w);
        for (Client* c : clients) {
          if (c->ep == w.to) {
            sent_to_client += w.bytes.size();
            c->core->on_datagram(now_us, server_ep, w.bytes);
          }
        }
      }
      now_us += 5'000;
    }
  }

  struct Seen {
    std::size_t connects = 0;
    std::vector<std::string> messages;
    PeerHandle last_peer;
  };
  static Seen events(HostCore& h) {
    Seen s;
    Event ev;
    while (h.poll_event(ev)) {
      if (ev.type == EventType::connect) {
        ++s.connects;
        s.last_peer = ev.peer;
      }
      if (ev.type == EventType::receive) {
        const auto p = ev.payload();
        s.messages.emplace_back(reinterpret_cast<const char*>(p.data()), p.size());
      }
    }
    return s;
  }

  std::uint64_t drops(Drop d) const { return server->counters().drops[d]; }
};

bool sealed(const Wire& w) {
  return !w.bytes.empty() && (std::to_integer<std::uint8_t>(w.bytes[0]) & 0x40) != 0;
}

bool contains(const Wire& w, const std::string& s) {
  return std::search(w.bytes.begin(), w.bytes.end(), s.begin(), s.end(), [](std::byte a, char b) {
           return a == static_cast<std::byte>(b);
         }) != w.bytes.end();
}

TEST_F(SecureCore, ConnectSealsEverythingBothWays) {
  make_server(Security::required);
  Client c = client(0x0a000002, 5000, 1);
  connect_secure(c, mint());
  std::vector<Wire> log;
  pump({&c}, 10, nullptr, &log);
  ASSERT_EQ(c.core->peer_state(c.peer), PeerState::connected);
  const Seen s = events(*server);
  ASSERT_EQ(s.connects, 1u);
  const PeerHandle sp = s.last_peer;
  EXPECT_TRUE(server->peer_secure(sp));
  EXPECT_TRUE(c.core->peer_secure(c.peer));
  EXPECT_EQ(server->peer_client_id(sp), 4242u);
  const auto ud = server->peer_user_data(sp);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(ud.data()), ud.size()), "room=alpha");
  EXPECT_EQ(server->peer_connect_data(sp), 77u);

  const std::string small = "SECRET-small-" + std::string(51, 'x');
  const std::string large = "SECRET-large-" + std::string(5000, 'y');
  ASSERT_EQ(c.core->send(c.peer, 0, Delivery::reliable,
                         std::as_bytes(std::span(small.data(), small.size()))),
            SendResult::ok);
  ASSERT_EQ(c.core->send(c.peer, 1, Delivery::reliable,
                         std::as_bytes(std::span(large.data(), large.size()))),
            SendResult::ok);
  ASSERT_EQ(server->send(sp, 0, Delivery::unreliable,
                         std::as_bytes(std::span(small.data(), small.size()))),
            SendResult::ok);
  pump({&c}, 20, nullptr, &log);
  const Seen at_server = events(*server);
  const Seen at_client = events(*c.core);
  ASSERT_EQ(at_server.messages.size(), 2u);
  EXPECT_EQ(at_server.messages[0], small);
  EXPECT_EQ(at_server.messages[1], large);
  ASSERT_EQ(at_client.messages.size(), 1u);
  EXPECT_EQ(at_client.messages[0], small);
  // Only the client's CONNECTs travel in clear; no payload byte is ever visible.
  std::size_t clear = 0;
  for (const Wire& w : log) {
    EXPECT_FALSE(contains(w, "SECRET"));
    if (!sealed(w)) {
      ++clear;
      EXPECT_EQ(w.to, server_ep);
    }
  }
  EXPECT_GE(clear, 1u);
  EXPECT_GT(log.size(), clear + 5);
  EXPECT_EQ(server->counters().tokens_accepted, 1u);
  EXPECT_GT(server->counters().opened_in, 3u);
  EXPECT_EQ(drops(Drop::bad_seal), 0u);
}

// AES-256-GCM seals the session only when the client offered it and the server took it, and
// both sides agree on which; either way messages go both ways.
TEST_F(SecureCore, AesOnlyWhenBothSidesWantIt) {
  struct Case {
    bool server, client;
  };
  for (const Case k : {Case{true, true}, Case{false, true}, Case{true, false}}) {
    SCOPED_TRACE(std::string("server ") + (k.server ? "aes" : "no aes") + ", client " +
                 (k.client ? "aes" : "no aes"));
    server_aes = k.server;
    client_aes = k.client;
    make_server(Security::required);
    Client c = client(0x0a000002, 5000, 1);
    connect_secure(c, mint());
    pump({&c}, 10);
    ASSERT_EQ(c.core->peer_state(c.peer), PeerState::connected);
    const Seen s = events(*server);
    ASSERT_EQ(s.connects, 1u);
    const bool want = k.server && k.client && sec::aes_available();
    EXPECT_EQ(server->peer_secure_aes(s.last_peer), want);
    EXPECT_EQ(c.core->peer_secure_aes(c.peer), want);
    const std::string up = "up-" + std::string(900, 'u');
    const std::string down = "down";
    ASSERT_EQ(
        c.core->send(c.peer, 0, Delivery::reliable, std::as_bytes(std::span(up.data(), up.size()))),
        SendResult::ok);
    ASSERT_EQ(server->send(s.last_peer, 1, Delivery::reliable,
                           std::as_bytes(std::span(down.data(), down.size()))),
              SendResult::ok);
    pump({&c}, 10);
    const Seen at_server = events(*server);
    const Seen at_client = events(*c.core);
    ASSERT_EQ(at_server.messages.size(), 1u);
    EXPECT_EQ(at_server.messages[0], up);
    ASSERT_EQ(at_client.messages.size(), 1u);
    EXPECT_EQ(at_client.messages[0], down);
    EXPECT_EQ(drops(Drop::bad_seal), 0u);
    EXPECT_EQ(c.core->counters().drops[Drop::bad_seal], 0u);
  }
}

// Each refusal: no reply at all to the CONNECT, counted by name.
struct Refusal {
  const char* name;
  std::function<Token()> token;
  Drop drop;
};

TEST_F(SecureCore, BadTokensGetNoReply) {
  const sec::TokenKey other{8, [] {
                              sec::Key k;
                              k.fill(0x01);
                              return k;
                            }()};
  const std::vector<Refusal> cases = {
      {"expired", [] { return mint(kKey, kUnixNow); }, Drop::bad_token},
      {"unknown key", [&] { return mint(other); }, Drop::bad_token},
      {"forged",
       [] {
         Token t = mint();
         t.sealed[200] ^= 1;
         return t;
       },
       Drop::bad_token},
      {"wrong server", [] { return mint(kKey, kUnixNow + 30, Endpoint::v4(0x0a000001, 7778)); },
       Drop::bad_token},
  };
  std::uint16_t port = 6000;
  for (const Refusal& r : cases) {
    SCOPED_TRACE(r.name);
    make_server(Security::required);
    sent_to_client = 0;
    Client c = client(0x0a000002, port++, 2);
    connect_secure(c, r.token());
    pump({&c}, 40);
    EXPECT_EQ(sent_to_client, 0u);
    EXPECT_NE(c.core->peer_state(c.peer), PeerState::connected);
    EXPECT_GT(drops(r.drop), 0u);
    EXPECT_GT(server->counters().tokens_refused, 0u);
    EXPECT_EQ(server->counters().half_open_created, 0u);
    EXPECT_EQ(events(*server).connects, 0u);
  }
}

TEST_F(SecureCore, TruncatedTokenGetsNoReply) {
  make_server(Security::required);
  Client c = client(0x0a000002, 5000, 3);
  connect_secure(c, mint());
  // Cut the token short inside the datagram (its length field is then past the end).
  pump({&c}, 20, [](Wire& w) {
    if (w.to == Endpoint::v4(0x0a000001, 7777) && !sealed(w)) w.bytes.resize(w.bytes.size() - 40);
    return true;
  });
  EXPECT_EQ(sent_to_client, 0u);
  EXPECT_EQ(server->counters().half_open_created, 0u);
}

TEST_F(SecureCore, RotationAcceptsTheOldKey) {
  const sec::TokenKey next{8, [] {
                             sec::Key k;
                             k.fill(0x77);
                             return k;
                           }()};
  make_server(Security::required, {next, kKey});
  Client a = client(0x0a000002, 5000, 4);
  Client b = client(0x0a000003, 5000, 5);
  connect_secure(a, mint(kKey));
  connect_secure(b, mint(next));
  pump({&a, &b}, 10);
  EXPECT_EQ(a.core->peer_state(a.peer), PeerState::connected);
  EXPECT_EQ(b.core->peer_state(b.peer), PeerState::connected);
  EXPECT_EQ(events(*server).connects, 2u);
}

TEST_F(SecureCore, TokenReusedFromAnotherAddressIsRefused) {
  make_server(Security::required);
  const Token t = mint();
  Client c = client(0x0a000002, 5000, 6);
  connect_secure(c, t);
  // The first CONNECT, seen on the path and replayed from elsewhere first.
  std::vector<Wire> captured;
  Client thief = client(0x0a000009, 6666, 7);
  {
    std::vector<Wire> first = drain(*c.core, c.ep);
    ASSERT_FALSE(first.empty());
    server->on_datagram(now_us, thief.ep, first[0].bytes);
    server->on_datagram(now_us, c.ep, first[0].bytes);
  }
  const auto replies = drain(*server, server_ep);
  ASSERT_EQ(replies.size(), 1u);
  EXPECT_EQ(replies[0].to, thief.ep);  // the first use binds the token to its address
  EXPECT_EQ(drops(Drop::token_reused), 1u);
  // The honest client's resent CONNECTs: refused too while the token lives (it must get a
  // new one).
  pump({&c}, 400);
  EXPECT_NE(c.core->peer_state(c.peer), PeerState::connected);
  EXPECT_GT(drops(Drop::token_reused), 1u);
  // And the thief, holding no keys, cannot answer the sealed VERIFY_CONNECT.
  EXPECT_EQ(events(*server).connects, 0u);
}

TEST_F(SecureCore, RequiredRefusesPlainClientsOptionalTakesBoth) {
  make_server(Security::required);
  Client plain = client(0x0a000002, 5000, 8);
  plain.peer = plain.core->connect(now_us, server_ep, 2, 0);
  pump({&plain}, 20);
  EXPECT_EQ(sent_to_client, 0u);
  EXPECT_GT(drops(Drop::token_required), 0u);
  EXPECT_NE(plain.core->peer_state(plain.peer), PeerState::connected);

  make_server(Security::optional);
  Client p2 = client(0x0a000002, 5001, 9);
  Client s2 = client(0x0a000003, 5001, 10);
  p2.peer = p2.core->connect(now_us, server_ep, 2, 0);
  connect_secure(s2, mint());
  std::vector<Wire> log;
  pump({&p2, &s2}, 10, nullptr, &log);
  ASSERT_EQ(p2.core->peer_state(p2.peer), PeerState::connected);
  ASSERT_EQ(s2.core->peer_state(s2.peer), PeerState::connected);
  EXPECT_FALSE(p2.core->peer_secure(p2.peer));
  EXPECT_TRUE(s2.core->peer_secure(s2.peer));
  for (const Wire& w : log) {
    if (w.to == p2.ep || w.from == p2.ep) {
      EXPECT_FALSE(sealed(w));
    }
  }
}

TEST_F(SecureCore, PlainServerIgnoresTokenAndClientRefusesClearAnswer) {
  make_server(Security::plain);
  Client c = client(0x0a000002, 5000, 11);
  connect_secure(c, mint());
  pump({&c}, 40);
  EXPECT_GT(sent_to_client, 0u);  // the server answered in clear, as to any ENet client
  EXPECT_NE(c.core->peer_state(c.peer), PeerState::connected);
  EXPECT_EQ(events(*server).connects, 0u);
  EXPECT_GT(c.core->counters().drops[Drop::bad_seal], 0u);
}

TEST_F(SecureCore, ReplayedAndFlippedDatagramsAreDropped) {
  make_server(Security::required);
  Client c = client(0x0a000002, 5000, 12);
  connect_secure(c, mint());
  pump({&c}, 10);
  ASSERT_EQ(c.core->peer_state(c.peer), PeerState::connected);
  events(*server);
  const std::string msg = "once";
  ASSERT_EQ(c.core->send(c.peer, 0, Delivery::unsequenced,
                         std::as_bytes(std::span(msg.data(), msg.size()))),
            SendResult::ok);
  const auto out = drain(*c.core, c.ep);
  ASSERT_EQ(out.size(), 1u);
  const Wire w = out[0];
  ASSERT_TRUE(sealed(w));
  // Every single-bit flip: refused, nothing delivered, the window not moved.
  for (std::size_t i = 0; i < w.bytes.size(); ++i) {
    Wire bad = w;
    bad.bytes[i] ^= std::byte{0x10};
    server->on_datagram(now_us, c.ep, bad.bytes);
  }
  EXPECT_EQ(events(*server).messages.size(), 0u);
  const auto flipped = drops(Drop::bad_seal) + drops(Drop::replayed) + drops(Drop::unknown_peer) +
                       drops(Drop::bad_session) + drops(Drop::truncated_header);
  EXPECT_GE(flipped, w.bytes.size());
  server->on_datagram(now_us, c.ep, w.bytes);
  server->on_datagram(now_us, c.ep, w.bytes);
  const Seen s = events(*server);
  ASSERT_EQ(s.messages.size(), 1u);
  EXPECT_EQ(s.messages[0], "once");
  EXPECT_EQ(drops(Drop::replayed), 1u);
}

TEST_F(SecureCore, NoReplyLargerThanItsRequestBeforeProof) {
  // Clients that never answer (spoofed sources): each CONNECT with a token gets one sealed
  // VERIFY_CONNECT, smaller than the CONNECT, and the lost-ack probes stay within budget.
  make_server(Security::required);
  for (std::uint16_t i = 0; i < 50; ++i) {
    Client c = client(0x0a100000 + i, 4000, 100 + i);
    connect_secure(c, mint(), static_cast<std::uint8_t>(i));
    const auto connects = drain(*c.core, c.ep);
    ASSERT_EQ(connects.size(), 1u);
    server->on_datagram(now_us, c.ep, connects[0].bytes);
    const auto replies = drain(*server, server_ep);
    ASSERT_EQ(replies.size(), 1u);
    EXPECT_TRUE(sealed(replies[0]));
    EXPECT_LT(replies[0].bytes.size(), connects[0].bytes.size());
    EXPECT_LT(replies[0].bytes.size(), 130u);
  }
  EXPECT_LE(server->counters().unverified_bytes_out, server->counters().unverified_bytes_in);
  EXPECT_EQ(server->peer_count(), 0u);
}

TEST_F(SecureCore, ClientThatLostItsAckConnectsThroughTheSealedProbe) {
  make_server(Security::required);
  Client c = client(0x0a000002, 5000, 13);
  connect_secure(c, mint());
  int lost = 0;
  // Lose the client's first sealed datagram (its acknowledgement of the VERIFY_CONNECT).
  pump({&c}, 200, [&](Wire& w) {
    if (w.from == c.ep && sealed(w) && lost == 0) {
      ++lost;
      return false;
    }
    return true;
  });
  EXPECT_EQ(lost, 1);
  EXPECT_EQ(c.core->peer_state(c.peer), PeerState::connected);
  EXPECT_EQ(events(*server).connects, 1u);
}

TEST_F(SecureCore, ResentConnectsEachGetTheirOwnVerify) {
  // The first VERIFY_CONNECT lost: the client resends its CONNECT and adopts the second, and
  // the two were sealed at different sequence numbers (no nonce reuse under one key).
  make_server(Security::required);
  Client c = client(0x0a000002, 5000, 14);
  connect_secure(c, mint());
  std::vector<Wire> verifies;
  pump({&c}, 400, [&](Wire& w) {
    if (w.to == c.ep && sealed(w) && verifies.size() < 2) {
      verifies.push_back(w);
      return verifies.size() == 2;  // the first is lost
    }
    return true;
  });
  ASSERT_EQ(verifies.size(), 2u);
  EXPECT_EQ(c.core->peer_state(c.peer), PeerState::connected);
  const std::size_t hsize = 4;  // peer word + sent time
  EXPECT_NE(std::memcmp(verifies[0].bytes.data() + hsize, verifies[1].bytes.data() + hsize, 8), 0);
  EXPECT_EQ(events(*server).connects, 1u);
}

// A lending receiver gets the messages of sealed datagrams as views too: several messages in
// one sealed datagram, and several datagrams opened before the events are taken, each view
// still holding its own message when the events are read. Past the core's open buffer the
// rest come as Packets, in order, nothing lost or doubled.
TEST_F(SecureCore, LendingReceiverGetsViewsOfSealedDatagrams) {
  make_server(Security::required);
  client_lend = true;
  Client c = client(0x0a000002, 5000, 21);
  connect_secure(c, mint());
  pump({&c}, 10);
  ASSERT_EQ(c.core->peer_state(c.peer), PeerState::connected);
  const PeerHandle sp = events(*server).last_peer;
  (void)events(*c.core);
  const auto message = [](std::size_t i, std::size_t size) {
    std::string m = "m" + std::to_string(i) + "-";
    m.resize(size, static_cast<char>('a' + i % 26));
    return m;
  };
  const auto send_down = [&](std::size_t from, std::size_t count, std::size_t size) {
    for (std::size_t i = from; i < from + count; ++i) {
      const std::string m = message(i, size);
      ASSERT_EQ(
          server->send(sp, 0, Delivery::reliable, std::as_bytes(std::span(m.data(), m.size()))),
          SendResult::ok);
    }
  };
  struct Got {
    std::vector<std::string> messages;
    std::size_t lent = 0;
    std::size_t packets = 0;
  };
  const auto take = [&] {
    Got g;
    Event ev;
    while (c.core->poll_event(ev)) {
      if (ev.type != EventType::receive) continue;
      (ev.packet ? g.packets : g.lent) += 1;
      const auto p = ev.payload();
      g.messages.emplace_back(reinterpret_cast<const char*>(p.data()), p.size());
    }
    return g;
  };
  // 12 messages of 300 bytes: several to a datagram, several datagrams, all opened (pump
  // rounds) before any event is taken.
  const std::uint64_t datagrams_before = c.core->counters().opened_in;
  send_down(0, 12, 300);
  pump({&c}, 4);
  const std::uint64_t opened = c.core->counters().opened_in - datagrams_before;
  const Got first = take();
  ASSERT_EQ(first.messages.size(), 12u);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(first.messages[i], message(i, 300)) << i;
  EXPECT_EQ(first.lent, 12u);
  EXPECT_EQ(first.packets, 0u);
  EXPECT_GE(opened, 3u);       // more than one datagram's views held at once
  EXPECT_LT(opened, 12u + 4);  // and several messages shared a datagram
  EXPECT_EQ(c.core->counters().buffered_bytes, 0u);

  // Far more than the open buffer holds before the events are taken: those past it come as
  // Packets of their own, all in order.
  constexpr std::size_t kMany = 400;
  const std::uint64_t in_before = c.core->counters().messages_in;
  send_down(100, kMany, 1000);
  for (int r = 0; r < 4000 && c.core->counters().messages_in < in_before + kMany; ++r) {
    pump({&c}, 1);
  }
  const Got second = take();
  ASSERT_EQ(second.messages.size(), kMany);
  for (std::size_t i = 0; i < kMany; ++i) {
    EXPECT_EQ(second.messages[i], message(100 + i, 1000)) << i;
  }
  EXPECT_GT(second.lent, 0u);
  EXPECT_GT(second.packets, 0u);
  EXPECT_EQ(c.core->counters().drops[Drop::bad_seal], 0u);
  EXPECT_EQ(c.core->counters().buffered_bytes, 0u);

  // Taken: the next datagrams open at the start again and are lent.
  send_down(1000, 3, 300);
  pump({&c}, 4);
  const Got third = take();
  ASSERT_EQ(third.messages.size(), 3u);
  EXPECT_EQ(third.lent, 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(third.messages[i], message(1000 + i, 300));
}

}  // namespace
}  // namespace tern::proto
