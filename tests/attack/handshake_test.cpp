// The handshake under attack (DESIGN §5, WIRE.md "Handshake under attack"): a CONNECT makes
// no peer until its source acknowledges our VERIFY_CONNECT from the same address and port,
// and no source that has not is sent more bytes than it sent. Server and clients are real
// HostCores; the test carries their datagrams by hand, so it can lose, redirect, replay or
// forge any of them, and checks what each source was sent against what it sent.
#include "drop.hpp"
#include "half_open.hpp"
#include "host_core.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

namespace tern::proto {
namespace {

struct Wire {
  Endpoint to;
  Endpoint from;
  std::vector<std::byte> bytes;
};

class Handshake : public ::testing::Test {
 protected:
  const Endpoint server_ep = Endpoint::v4(0x0a000001, 7777);

  static HostConfig server_config() {
    HostConfig c;
    c.half_open_capacity = 1024;
    c.half_open_timeout_ms = 2000;
    return c;
  }

  HostCore server{server_config()};
  std::uint64_t now_us = 1'000'000;
  std::vector<OutDatagram> batch = std::vector<OutDatagram>(32);
  // What the server sent to each address, and what each sent it.
  std::map<std::pair<std::uint32_t, std::uint16_t>, std::size_t> sent_to, received_from;

  static std::pair<std::uint32_t, std::uint16_t> key(const Endpoint& e) {
    return {e.v4_host_order(), e.port};
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

  void to_server(const Endpoint& from, std::span<const std::byte> bytes) {
    received_from[key(from)] += bytes.size();
    server.on_datagram(now_us, from, bytes);
  }

  // Server datagrams, recorded per destination.
  std::vector<Wire> from_server() {
    std::vector<Wire> out = drain(server, server_ep);
    for (const Wire& w : out) sent_to[key(w.to)] += w.bytes.size();
    return out;
  }

  struct Client {
    std::unique_ptr<HostCore> core;
    Endpoint ep;
    PeerHandle peer;
  };

  Client client(std::uint32_t addr, std::uint16_t port, std::uint64_t seed) {
    HostConfig c;
    c.random_seed = seed;
    Client cl{std::make_unique<HostCore>(c), Endpoint::v4(addr, port), {}};
    return cl;
  }

  // Carries datagrams both ways for `rounds` steps of 5 ms; `keep` may drop or alter any
  // datagram from a client (return false to lose it).
  void pump(std::vector<Client*> clients, int rounds,
            const std::function<bool(const Client&, Wire&)>& keep = nullptr) {
    for (int r = 0; r < rounds; ++r) {
      for (Client* c : clients) {
        for (Wire& w : drain(*c->core, c->ep)) {
          if (keep && !keep(*c, w)) continue;
          to_server(w.from, w.bytes);
        }
      }
      for (const Wire& w : from_server()) {
        for (Client* c : clients) {
          if (c->ep == w.to) c->core->on_datagram(now_us, server_ep, w.bytes);
        }
      }
      now_us += 5'000;
    }
  }

  std::size_t server_connects() {
    std::size_t n = 0;
    Event ev;
    while (server.poll_event(ev)) n += ev.type == EventType::connect ? 1 : 0;
    return n;
  }

  static bool client_connected(Client& c) {
    return c.core->peer_state(c.peer) == PeerState::connected;
  }

  // A CONNECT as libenet sends it, from a source that never reads.
  static std::vector<std::byte> forged_connect(std::uint32_t i) {
    Header h;
    h.has_sent_time = true;
    h.sent_time = static_cast<std::uint16_t>(i);
    std::vector<std::byte> out(80);
    std::size_t n = encode_header(out, h, false);
    Command c;
    c.command = static_cast<std::uint8_t>(Cmd::connect) | kFlagAcknowledge;
    c.channel_id = kSystemChannel;
    c.reliable_seq = 1;
    c.connect = Connect{0,
                        0xFF,
                        0xFF,
                        1400,
                        kMaxWindowSize,
                        2,
                        0,
                        0,
                        kPacketThrottleInterval,
                        kPacketThrottleAcceleration,
                        kPacketThrottleDeceleration,
                        i * 2654435761u,
                        0};
    n += encode_command(std::span<std::byte>(out).subspan(n), c);
    out.resize(n);
    return out;
  }

  // Where the client's acknowledgement of the VERIFY_CONNECT (system channel, sequence 1)
  // sits in its datagram, or 0.
  static std::size_t verify_ack_at(const Wire& w) {
    std::size_t pos = header_size(true, false);
    while (pos + kCommandHeaderSize <= w.bytes.size()) {
      const auto type = static_cast<Cmd>(std::to_integer<std::uint8_t>(w.bytes[pos]) & 0x0F);
      const std::size_t size = command_size(type);
      if (size == 0 || pos + size > w.bytes.size()) return 0;
      if (type == Cmd::acknowledge && std::to_integer<std::uint8_t>(w.bytes[pos + 1]) == 0xFF &&
          std::to_integer<std::uint8_t>(w.bytes[pos + 4]) == 0 &&
          std::to_integer<std::uint8_t>(w.bytes[pos + 5]) == 1) {
        return pos;
      }
      pos += size;
    }
    return 0;
  }
};

TEST_F(Handshake, ConnectMakesNoPeerUntilTheAckArrives) {
  Client c = client(0x0a000002, 40001, 21);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  std::vector<Wire> held;
  pump({&c}, 1);  // CONNECT in, VERIFY_CONNECT out, client connected, ack waiting
  EXPECT_EQ(server.peer_count(), 0u);
  EXPECT_EQ(server.counters().half_open, 1u);
  EXPECT_EQ(server.counters().cookies_sent, 1u);
  EXPECT_TRUE(client_connected(c));
  pump({&c}, 1);
  EXPECT_EQ(server.peer_count(), 1u);
  EXPECT_EQ(server.counters().peers_promoted, 1u);
  EXPECT_EQ(server.counters().half_open, 0u);
  EXPECT_EQ(server_connects(), 1u);
}

TEST_F(Handshake, AckFromAnotherPortOrAddressIsRefused) {
  Client c = client(0x0a000002, 40001, 22);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  pump({&c}, 1);
  ASSERT_TRUE(client_connected(c));
  std::vector<Wire> acks = drain(*c.core, c.ep);
  ASSERT_EQ(acks.size(), 1u);
  to_server(Endpoint::v4(0x0a000002, 40002), acks[0].bytes);
  to_server(Endpoint::v4(0x0a000003, 40001), acks[0].bytes);
  EXPECT_EQ(server.peer_count(), 0u);
  EXPECT_EQ(server.counters().drops[Drop::unknown_peer], 2u);
  to_server(c.ep, acks[0].bytes);
  EXPECT_EQ(server.peer_count(), 1u);
}

TEST_F(Handshake, ForgedAckWithTheWrongCookieIsRefused) {
  Client c = client(0x0a000002, 40001, 23);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  pump({&c}, 1);
  std::vector<Wire> acks = drain(*c.core, c.ep);
  ASSERT_EQ(acks.size(), 1u);
  const std::size_t at = verify_ack_at(acks[0]);
  ASSERT_NE(at, 0u);
  // The echoed sent time (the cookie) is the ACK's last two bytes.
  std::vector<std::byte> forged = acks[0].bytes;
  forged[at + 7] ^= std::byte{0x5a};
  to_server(c.ep, forged);
  EXPECT_EQ(server.peer_count(), 0u);
  EXPECT_EQ(server.counters().cookies_invalid, 1u);
  EXPECT_EQ(server.counters().drops[Drop::invalid_cookie], 1u);
  to_server(c.ep, acks[0].bytes);  // the real one still works
  EXPECT_EQ(server.peer_count(), 1u);
}

TEST_F(Handshake, ReplayedAckMakesNoSecondPeer) {
  Client c = client(0x0a000002, 40001, 24);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  pump({&c}, 1);
  std::vector<Wire> acks = drain(*c.core, c.ep);
  ASSERT_EQ(acks.size(), 1u);
  to_server(c.ep, acks[0].bytes);
  to_server(c.ep, acks[0].bytes);
  to_server(Endpoint::v4(0x0a000009, 40001), acks[0].bytes);
  EXPECT_EQ(server.peer_count(), 1u);
  EXPECT_EQ(server.counters().peers_promoted, 1u);
  EXPECT_EQ(server_connects(), 1u);
}

TEST_F(Handshake, AckAfterTheTimeoutIsRefused) {
  Client c = client(0x0a000002, 40001, 25);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  pump({&c}, 1);
  std::vector<Wire> acks = drain(*c.core, c.ep);
  ASSERT_EQ(acks.size(), 1u);
  now_us += (server_config().half_open_timeout_ms + 1) * 1000;
  to_server(c.ep, acks[0].bytes);
  EXPECT_EQ(server.peer_count(), 0u);
  EXPECT_EQ(server.counters().cookies_expired, 1u);
  EXPECT_EQ(server.counters().half_open, 0u);
}

// A handshake left unacknowledged past its timeout, then a new CONNECT from the same source
// (a restarted client on the same port): the new handshake takes the expired one's place, so
// its acknowledgement finds it and not the expired entry.
TEST_F(Handshake, AConnectAfterItsEntryExpiredTakesItsPlace) {
  Client first = client(0x0a000002, 40001, 27);
  first.peer = first.core->connect(now_us, server_ep, 2, 7);
  pump({&first}, 1);
  ASSERT_EQ(drain(*first.core, first.ep).size(), 1u);  // its acknowledgement, lost
  ASSERT_EQ(server.counters().half_open, 1u);
  now_us += (server_config().half_open_timeout_ms + 1) * 1000;
  Client again = client(0x0a000002, 40001, 28);
  again.peer = again.core->connect(now_us, server_ep, 2, 7);
  for (const Wire& w : drain(*again.core, again.ep)) to_server(w.from, w.bytes);
  EXPECT_EQ(server.counters().half_open, 1u);
  EXPECT_EQ(server.counters().half_open_created, 2u);
  pump({&again}, 4);
  EXPECT_TRUE(client_connected(again));
  EXPECT_EQ(server.peer_count(), 1u);
  EXPECT_EQ(server_connects(), 1u);
  EXPECT_EQ(server.counters().cookies_expired, 0u);
  EXPECT_EQ(server.counters().half_open, 0u);
}

// The client's ack is lost; it is connected and sends a message with the peer ID and session
// it was given. The server answers with a PING carrying the cookie (no larger than the
// datagram that prompted it), the client acknowledges it, and its message, resent, arrives.
TEST_F(Handshake, LostAckStillConnects) {
  Client c = client(0x0a000002, 40001, 26);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  pump({&c}, 1);
  ASSERT_TRUE(client_connected(c));
  int lost = 0;
  pump({&c}, 1, [&](const Client&, Wire& w) {
    if (verify_ack_at(w) == 0) return true;
    ++lost;
    return false;
  });
  ASSERT_EQ(lost, 1);
  const std::vector<std::byte> msg(40, std::byte{7});
  ASSERT_EQ(c.core->send(c.peer, 0, Delivery::reliable, msg), SendResult::ok);
  bool delivered = false;
  for (int r = 0; r < 400 && !delivered; ++r) {
    pump({&c}, 1);
    Event ev;
    while (server.poll_event(ev)) delivered |= ev.type == EventType::receive;
  }
  EXPECT_TRUE(delivered);
  EXPECT_EQ(server.peer_count(), 1u);
  EXPECT_GE(server.counters().cookies_sent, 2u);
  EXPECT_EQ(server.counters().amplification_capped, 0u);
  EXPECT_LE(server.counters().unverified_bytes_out, server.counters().unverified_bytes_in);
  EXPECT_EQ(c.core->peer_state(c.peer), PeerState::connected);
}

// A restarted client (same socket, same index, new connect ID) replaces its old connection
// only once it acknowledges; a CONNECT alone, as a forger could send, ends nothing.
TEST_F(Handshake, ForgedReconnectDoesNotEndAnEstablishedPeer) {
  Client c = client(0x0a000002, 40001, 27);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  pump({&c}, 2);
  ASSERT_EQ(server.peer_count(), 1u);
  ASSERT_EQ(server_connects(), 1u);
  for (std::uint32_t i = 0; i < 10; ++i) to_server(c.ep, forged_connect(i + 100));
  from_server();
  Event ev;
  while (server.poll_event(ev)) EXPECT_NE(ev.type, EventType::disconnect);
  EXPECT_EQ(server.peer_count(), 1u);
  const std::vector<std::byte> msg(10, std::byte{1});
  ASSERT_EQ(c.core->send(c.peer, 0, Delivery::reliable, msg), SendResult::ok);
  bool delivered = false;
  for (int r = 0; r < 20 && !delivered; ++r) {
    pump({&c}, 1);
    while (server.poll_event(ev)) delivered |= ev.type == EventType::receive;
  }
  EXPECT_TRUE(delivered);
}

// Many more forged CONNECTs than the table holds, from sources that never answer, while an
// established client talks and new clients connect: no forged source gets a peer, the table
// stays at its capacity, each source is sent at most what it sent, and every client connects.
TEST_F(Handshake, FloodOfForgedConnectsTakesNoPeerAndAmplifiesNothing) {
  Client old = client(0x0a000002, 40001, 31);
  old.peer = old.core->connect(now_us, server_ep, 2, 1);
  pump({&old}, 2);
  ASSERT_EQ(server.peer_count(), 1u);
  std::vector<Client> fresh;
  for (std::uint32_t i = 0; i < 20; ++i) fresh.push_back(client(0x0b000000 + i, 50000, 40 + i));
  std::size_t next_fresh = 0;
  std::size_t old_received = 0;
  constexpr std::uint32_t kForged = 50'000;
  for (std::uint32_t i = 0; i < kForged; ++i) {
    // Sources across 10.128.0.0/9, several ports each.
    const Endpoint src = Endpoint::v4(0x0a800000 + (i * 7919u) % 0x800000, 1024 + i % 7);
    to_server(src, forged_connect(i));
    if (i % 256 == 255) from_server();  // a server flushes after each receive batch
    if (i % 2500 == 0) {
      std::vector<Client*> all{&old};
      if (next_fresh < fresh.size()) {
        Client& f = fresh[next_fresh++];
        f.peer = f.core->connect(now_us, server_ep, 2, 1000);
      }
      for (std::size_t k = 0; k < next_fresh; ++k) all.push_back(&fresh[k]);
      const std::vector<std::byte> msg(30, std::byte{9});
      ASSERT_EQ(old.core->send(old.peer, 0, Delivery::reliable, msg), SendResult::ok);
      pump(all, 3);
    }
    EXPECT_LE(server.counters().half_open, 1024u);
  }
  std::vector<Client*> all{&old};
  for (Client& f : fresh) all.push_back(&f);
  pump(all, 20);
  Event ev;
  std::size_t disconnects = 0;
  while (server.poll_event(ev)) {
    if (ev.type == EventType::receive) ++old_received;
    if (ev.type == EventType::disconnect) ++disconnects;
  }
  EXPECT_EQ(disconnects, 0u);
  EXPECT_EQ(old_received, kForged / 2500);
  for (Client& f : fresh) EXPECT_TRUE(client_connected(f));
  EXPECT_EQ(server.peer_count(), 1 + fresh.size());  // no forged source owns a slot
  EXPECT_EQ(server.counters().peers_promoted, 1 + fresh.size());
  EXPECT_GT(server.counters().half_open_evicted, 0u);
  EXPECT_EQ(old.core->peer_state(old.peer), PeerState::connected);
  // Amplification: per forged source, bytes out <= bytes in.
  std::size_t forged_sources = 0;
  for (const auto& [src, out] : sent_to) {
    if (src.first < 0x0a800000) continue;
    ++forged_sources;
    EXPECT_LE(out, received_from[src]) << std::hex << src.first << ":" << std::dec << src.second;
  }
  EXPECT_GT(forged_sources, 1000u);
  EXPECT_LE(server.counters().unverified_bytes_out, server.counters().unverified_bytes_in);
}

// The old behaviour stays available (HostConfig::verify_before_peer = false).
TEST_F(Handshake, EnetHandshakeWhenDisabled) {
  HostConfig sc = server_config();
  sc.verify_before_peer = false;
  HostCore plain(sc);
  plain.on_datagram(now_us, Endpoint::v4(0x0a000005, 1), forged_connect(1));
  EXPECT_EQ(plain.peer_count(), 1u);
  EXPECT_EQ(plain.counters().half_open_created, 0u);
}

// HostConfig::connect_rate_per_address: a source over its bucket is not answered; another
// source is, and the first is again once its bucket refills.
TEST_F(Handshake, ConnectRatePerAddress) {
  HostConfig sc = server_config();
  sc.connect_rate_per_address = 10;
  sc.connect_burst_per_address = 4;
  HostCore limited(sc);
  const Endpoint a = Endpoint::v4(0x0a000005, 1000);
  for (std::uint32_t i = 0; i < 10; ++i) {
    limited.on_datagram(now_us, Endpoint::v4(0x0a000005, static_cast<std::uint16_t>(1000 + i)),
                        forged_connect(i));
  }
  EXPECT_EQ(limited.counters().half_open_created, 4u);
  EXPECT_EQ(limited.counters().connects_rate_limited, 6u);
  EXPECT_EQ(limited.counters().drops[Drop::rate_limited], 6u);
  limited.on_datagram(now_us, Endpoint::v4(0x0a010005, 1000), forged_connect(50));
  EXPECT_EQ(limited.counters().half_open_created, 5u);
  limited.on_datagram(now_us + 200'000, a, forged_connect(51));  // 0.2 s: two tokens back
  EXPECT_EQ(limited.counters().half_open_created, 6u);
}

// HostCore::shed_connects (a shard reading far behind its input): every CONNECT goes
// unanswered and is counted while it is on; a handshake already answered still completes, and
// the client that resends its CONNECT afterwards connects.
TEST_F(Handshake, ShedConnectsLeavesConnectsUnansweredUntilItEnds) {
  Client answered = client(0x0a000002, 40001, 31);
  answered.peer = answered.core->connect(now_us, server_ep, 2, 7);
  pump({&answered}, 1);  // its CONNECT in, VERIFY_CONNECT out; its ack not yet read
  EXPECT_EQ(server.counters().cookies_sent, 1u);

  server.shed_connects(true);
  for (std::uint32_t i = 0; i < 20; ++i) {
    server.on_datagram(now_us, Endpoint::v4(0x0a000100 + i, 5000), forged_connect(i));
  }
  EXPECT_EQ(server.counters().connects_shed, 20u);
  EXPECT_EQ(server.counters().drops[Drop::connect_shed], 20u);
  EXPECT_EQ(server.counters().half_open_created, 1u);
  EXPECT_TRUE(drain(server, server_ep).empty()) << "a shed CONNECT was answered";
  Client later = client(0x0a000003, 40002, 32);
  later.peer = later.core->connect(now_us, server_ep, 2, 8);
  pump({&answered, &later}, 1);  // the answered one's ack promotes it; the new CONNECT is shed
  EXPECT_EQ(server.peer_count(), 1u);
  EXPECT_EQ(server.counters().connects_shed, 21u);
  EXPECT_FALSE(client_connected(later));

  server.shed_connects(false);
  now_us += 1'100'000;  // past the client's first retransmission of its CONNECT
  pump({&answered, &later}, 3);
  EXPECT_TRUE(client_connected(later));
  EXPECT_EQ(server.peer_count(), 2u);
  EXPECT_EQ(server.counters().connects_shed, 21u);
}

// HostConfig::connect_rate_per_prefix: many addresses of one /24 share a bucket.
TEST_F(Handshake, ConnectRatePerPrefix) {
  HostConfig sc = server_config();
  sc.connect_rate_per_prefix = 10;
  sc.connect_burst_per_prefix = 20;
  HostCore limited(sc);
  for (std::uint32_t i = 0; i < 100; ++i) {
    limited.on_datagram(now_us, Endpoint::v4(0x0a000100 + i, 1000), forged_connect(i));
  }
  EXPECT_EQ(limited.counters().half_open_created, 20u);
  EXPECT_EQ(limited.counters().connects_rate_limited, 80u);
  limited.on_datagram(now_us, Endpoint::v4(0x0a000200, 1000), forged_connect(200));
  EXPECT_EQ(limited.counters().half_open_created, 21u);  // the next /24
}

// HostCore::ban: a banned address's CONNECTs (any port) and handshake answers are dropped
// until the ban ends; an established connection from it is not touched.
TEST_F(Handshake, BannedSourceIsNotAnsweredUntilTheBanEnds) {
  Client c = client(0x0a000002, 40001, 61);
  c.peer = c.core->connect(now_us, server_ep, 2, 7);
  pump({&c}, 2);
  ASSERT_EQ(server.peer_count(), 1u);
  server.ban(Endpoint::v4(0x0a000002, 0), now_us + 1'000'000);
  EXPECT_TRUE(server.banned(Endpoint::v4(0x0a000002, 5), now_us));
  Client d = client(0x0a000002, 40002, 62);
  d.peer = d.core->connect(now_us, server_ep, 2, 8);
  pump({&c, &d}, 10);
  EXPECT_EQ(server.peer_count(), 1u);
  EXPECT_GT(server.counters().connects_banned, 0u);
  EXPECT_GT(server.counters().drops[Drop::banned], 0u);
  EXPECT_EQ(server.counters().cookies_sent, 1u);  // only the first client's
  EXPECT_EQ(c.core->peer_state(c.peer), PeerState::connected);
  now_us += 1'000'000;
  EXPECT_FALSE(server.banned(Endpoint::v4(0x0a000002, 5), now_us));
  for (int r = 0; r < 2000 && server.peer_count() < 2; ++r) pump({&c, &d}, 1);
  EXPECT_EQ(server.peer_count(), 2u);  // d's resent CONNECT is answered now
  server.ban(Endpoint::v4(0x0a000003, 0), now_us + 1'000'000);
  server.unban(Endpoint::v4(0x0a000003, 0));
  EXPECT_FALSE(server.banned(Endpoint::v4(0x0a000003, 0), now_us));
}

// A prefix ban covers every address in it and nothing outside; the listing names the prefix,
// and lifting it readmits the prefix's sources.
TEST_F(Handshake, PrefixBanCoversItsAddressesOnly) {
  server.ban(Endpoint::v4(0x0a010000, 0), now_us + 5'000'000, 96 + 16);  // 10.1.0.0/16
  server.ban(Endpoint::v4(0x0a020003, 0), now_us + 5'000'000);           // 10.2.0.3
  EXPECT_TRUE(server.banned(Endpoint::v4(0x0a01ff07, 9), now_us));
  EXPECT_FALSE(server.banned(Endpoint::v4(0x0a020007, 9), now_us));
  EXPECT_TRUE(server.banned(Endpoint::v4(0x0a020003, 9), now_us));
  for (std::uint32_t i = 0; i < 10; ++i) {
    server.on_datagram(now_us, Endpoint::v4(0x0a010000 + i * 257, 1000), forged_connect(i));
  }
  server.on_datagram(now_us, Endpoint::v4(0x0a030001, 1000), forged_connect(50));
  EXPECT_EQ(server.counters().connects_banned, 10u);
  EXPECT_EQ(server.counters().half_open_created, 1u);
  const auto listed = server.bans(now_us);
  ASSERT_EQ(listed.size(), 2u);
  bool saw_prefix = false;
  for (const auto& b : listed) {
    if (b.prefix_bits == 112) {
      saw_prefix = true;
      EXPECT_EQ(b.address, Endpoint::v4(0x0a010000, 0));
    }
  }
  EXPECT_TRUE(saw_prefix);
  server.unban(Endpoint::v4(0x0a010000, 0), 112);
  EXPECT_FALSE(server.banned(Endpoint::v4(0x0a01ff07, 9), now_us));
  EXPECT_TRUE(server.banned(Endpoint::v4(0x0a020003, 9), now_us));
  EXPECT_TRUE(server.bans(now_us + 5'000'000).empty());  // both end then

  // A full table says when a running ban had to make room; banning again is no displacement.
  HostConfig small = server_config();
  small.ban_capacity = 16;  // one set
  HostCore tight(small);
  for (std::uint32_t i = 0; i < 16; ++i) {
    EXPECT_TRUE(tight.ban(Endpoint::v4(0x0c000000 + i, 0), now_us + 1'000'000 + i));
  }
  EXPECT_TRUE(tight.ban(Endpoint::v4(0x0c000003, 0), now_us + 9'000'000));
  EXPECT_FALSE(tight.ban(Endpoint::v4(0x0d000001, 0), now_us + 9'000'000));
  EXPECT_FALSE(tight.banned(Endpoint::v4(0x0c000000, 0), now_us));  // the soonest-ending went
  EXPECT_TRUE(tight.banned(Endpoint::v4(0x0d000001, 0), now_us));
}

// A burst of genuine handshakes, all pending at once (20,000 clients reconnecting to a shard
// that fell behind): at 2.4 per set on average, one set per handshake overflows a dozen of the
// 8,192 sets of 8 and evicts handshakes whose clients already hold their VERIFY_CONNECT. With
// two candidate sets none is evicted, and every one is found again.
TEST(HalfOpenTable, ABurstOfGenuineHandshakesEvictsNone) {
  HalfOpenTable table;
  table.allocate(65536);
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> hashes(20'000);
  std::size_t evictions = 0;
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    hashes[i] = rng();
    bool evicted = false;
    HalfOpen& e = table.claim(hashes[i], 1 + i / 100, evicted);
    evictions += evicted ? 1 : 0;
    e = HalfOpen{};
    e.peer_id = static_cast<std::uint16_t>(i);
    e.address = Endpoint::v4(0x0a000000u + static_cast<std::uint32_t>(i), 1024);
    e.created_ms = 1 + i / 100;
  }
  EXPECT_EQ(evictions, 0u);
  EXPECT_EQ(table.size(), hashes.size());
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    const HalfOpen* e = table.find(hashes[i], [&](const HalfOpen& h) {
      return h.used() &&
             h.address == Endpoint::v4(0x0a000000u + static_cast<std::uint32_t>(i), 1024);
    });
    ASSERT_NE(e, nullptr) << "handshake " << i << " not found";
    EXPECT_EQ(e->peer_id, static_cast<std::uint16_t>(i));
  }
}

// Past what both sets hold, a claim evicts an entry older than itself, and the table stays
// consistent: what it holds is what find() returns.
TEST(HalfOpenTable, BothSetsFullAClaimEvictsAnOlderEntryAndTheTableStaysConsistent) {
  HalfOpenTable table;
  table.allocate(8 * 4);  // 4 sets: every hash's two sets fill quickly
  std::mt19937_64 rng(9);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> live;  // hash, created
  std::size_t evictions = 0;
  for (std::uint64_t t = 1; t <= 2'000; ++t) {
    const std::uint64_t h = rng();
    bool evicted = false;
    HalfOpen& e = table.claim(h, t, evicted);
    if (evicted) {
      ++evictions;
      // It replaced an entry older than itself.
      EXPECT_LT(e.created_ms, t);
      std::erase_if(live, [&](const auto& x) { return x.second == e.created_ms; });
    }
    e = HalfOpen{};
    e.created_ms = t;
    live.emplace_back(h, t);
  }
  EXPECT_GT(evictions, 1'000u);
  EXPECT_EQ(table.size(), 32u);
  EXPECT_EQ(live.size(), 32u);
  for (const auto& [h, t] : live) {
    EXPECT_NE(table.find(h, [&](const HalfOpen& x) { return x.created_ms == t; }), nullptr);
  }
}

// The half-open table at its full default size, kept full by a flood that goes on (400,000
// CONNECTs/s of simulated time, each from a new source): a legitimate client still connects.
// Entries are evicted oldest-of-two-sets, so a handshake survives about capacity / rate seconds,
// far longer than its round trip; a client whose entry went resends its CONNECT.
TEST_F(Handshake, LegitClientConnectsThroughAFullHalfOpenTable) {
  const HostConfig sc;
  ASSERT_EQ(sc.half_open_capacity, 65536u);
  HostCore big(sc);
  std::uint32_t next = 0;
  auto flood = [&](std::uint32_t n) {
    for (std::uint32_t i = 0; i < n; ++i, ++next) {
      big.on_datagram(now_us, Endpoint::v4(0x0b000000u + next, 1024), forged_connect(next));
    }
    drain(big, server_ep);  // the cookies go out (and are never answered)
  };
  flood(200'000);
  // Sets are chosen by hash: nearly every entry is taken, each set full or close to it.
  EXPECT_GT(big.counters().half_open, sc.half_open_capacity * 95 / 100);
  EXPECT_GT(big.counters().half_open_evicted, 100'000u);
  Client c = client(0x0a000009, 40009, 91);
  c.peer = c.core->connect(now_us, server_ep, 2, 9);
  std::size_t connects = 0;
  for (int r = 0; r < 2000 && connects == 0; ++r) {  // 10 s of simulated time at most
    flood(2'000);
    for (Wire& w : drain(*c.core, c.ep)) big.on_datagram(now_us, c.ep, w.bytes);
    for (Wire& w : drain(big, server_ep)) {
      if (w.to == c.ep) c.core->on_datagram(now_us, server_ep, w.bytes);
    }
    Event ev;
    while (big.poll_event(ev)) connects += ev.type == EventType::connect ? 1 : 0;
    now_us += 5'000;
  }
  EXPECT_EQ(connects, 1u);
  EXPECT_TRUE(client_connected(c));
  EXPECT_EQ(big.peer_count(), 1u);  // no flood source holds a peer
  EXPECT_LE(big.counters().half_open, sc.half_open_capacity);
}

}  // namespace
}  // namespace tern::proto
