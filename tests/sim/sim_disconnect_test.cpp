// Every way a connection ends, from either side, and what each side then sees:
//   disconnect        local side: reason local after the ack; remote: reason remote + data
//   disconnect_later  the same, once everything queued before it was delivered
//   disconnect_now    local side: nothing; remote: reason remote + data
//   reset             local side: nothing; remote: reason timeout, within ENet's limits
//   a dead link       both sides: reason timeout, within ENet's limits
#include "delivery_checker.hpp"
#include "scenario.hpp"
#include "sim_harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

namespace tern::simtest {
namespace {

drv::LinkConditions mild_link() {
  drv::LinkConditions c;
  c.loss = 0.05;
  c.duplicate = 0.01;
  c.reorder = 0.02;
  c.latency_us = 15 * kMs;
  c.jitter_us = 5 * kMs;
  c.reorder_delay_us = 5 * kMs;
  return c;
}

drv::LinkConditions clean_link() {
  drv::LinkConditions c;
  c.latency_us = 10 * kMs;
  return c;
}

// The simulated-time window in which ENet 1.3 declares a silent peer dead, for a link cut (or
// a peer vanishing) at `cut_us`:
//  - not before timeout_minimum: the oldest unacknowledged command may have been sent up to
//    one round trip before the cut, so the bound allows for that round trip;
//  - not after timeout_maximum plus one maximum RTO: the check runs when a retransmission
//    timer expires, and libenet 1.3.17 caps a command's RTO at timeout_limit times its first
//    one (rtt + 4 * variance).
struct TimeoutWindow {
  std::uint64_t earliest_us;
  std::uint64_t latest_us;
};

TimeoutWindow enet_timeout_window(std::uint64_t cut_us, const PeerStats& st,
                                  const proto::HostConfig& cfg, std::uint64_t link_rtt_us) {
  const std::uint64_t first_rto_us = (std::uint64_t{st.rtt_ms} + 4 * st.rtt_variance_ms) * kMs;
  const std::uint64_t max_rto_us = std::max<std::uint64_t>(cfg.timeout_limit * first_rto_us, kSec);
  TimeoutWindow w;
  w.earliest_us = cut_us + cfg.timeout_minimum_ms * kMs - link_rtt_us - kMs;
  w.latest_us = cut_us + cfg.timeout_maximum_ms * kMs + max_rto_us;
  return w;
}

std::string timing(const LoggedEvent* e, std::uint64_t cut_us, const TimeoutWindow& w) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "event %.3f s after the cut; allowed [%.3f, %.3f] s",
                e != nullptr ? static_cast<double>(e->at_us - cut_us) / 1e6 : -1.0,
                static_cast<double>(w.earliest_us - cut_us) / 1e6,
                static_cast<double>(w.latest_us - cut_us) / 1e6);
  return buf;
}

struct Pair {
  SimHarness h;
  SimHost* server = nullptr;
  SimHost* client = nullptr;
  Connection conn;
  bool up = false;

  Pair(std::uint64_t seed, const char* label, const drv::LinkConditions& link,
       const proto::HostConfig& cfg = proto::HostConfig{})
      : Pair(seed, label, link, cfg, cfg) {}
  Pair(std::uint64_t seed, const char* label, const drv::LinkConditions& link,
       const proto::HostConfig& server_cfg, const proto::HostConfig& client_cfg)
      : h(seed, label) {
    h.net().set_default_link(link);
    server = &h.add_host("server", server_cfg);
    client = &h.add_host("client", client_cfg);
    if (auto c = h.connect(*client, *server, 2, 0xC0)) {
      conn = *c;
      up = true;
    }
  }

  SimHost& side(bool from_client) { return from_client ? *client : *server; }
  PeerHandle handle(bool from_client) const { return from_client ? conn.client : conn.server; }
  // The side that acts (local) and the other, with their handles for the connection.
  struct Ends {
    SimHost& local;
    SimHost& remote;
    PeerHandle lh;
    PeerHandle rh;
  };
  Ends ends(bool from_client) {
    return {side(from_client), side(!from_client), handle(from_client), handle(!from_client)};
  }

  bool both_gone() const {
    return client->first(EventType::disconnect, conn.client) != nullptr &&
           server->first(EventType::disconnect, conn.server) != nullptr;
  }
};

// Graceful disconnect: an ack-confirmed DISCONNECT, reason local here and remote there.
void graceful(bool from_client, std::uint64_t seed) {
  Pair p(seed, from_client ? "disconnect_client" : "disconnect_server", mild_link());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  p.h.run_for(1 * kSec);
  auto [local, remote, lh, rh] = p.ends(from_client);
  local.core->disconnect(lh, 0xD15C0001);
  EXPECT_NE(local.core->send(lh, 0, Delivery::reliable,
                             make_payload(Tag{9, 0, Delivery::reliable, 0, 32})),
            SendResult::ok)
      << "send accepted after disconnect";
  ASSERT_TRUE(p.h.run_until([&] { return p.both_gone(); }, 60 * kSec)) << p.h.seed_note();
  p.h.run_for(35 * kSec);  // nothing more may happen: no timeout, no second event
  p.h.print_summary();

  const auto* l = local.first(EventType::disconnect, lh);
  const auto* r = remote.first(EventType::disconnect, rh);
  EXPECT_EQ(l->event.reason, DisconnectReason::local) << p.h.seed_note();
  EXPECT_EQ(r->event.reason, DisconnectReason::remote) << p.h.seed_note();
  EXPECT_EQ(r->event.data, 0xD15C0001u) << p.h.seed_note();
  EXPECT_EQ(local.count(EventType::disconnect, lh), 1u) << p.h.seed_note();
  EXPECT_EQ(remote.count(EventType::disconnect, rh), 1u) << p.h.seed_note();
  EXPECT_EQ(local.core->peer_state(lh), PeerState::disconnected);
  EXPECT_EQ(remote.core->peer_state(rh), PeerState::disconnected);
  EXPECT_EQ(local.core->peer_count(), 0u);
  EXPECT_EQ(remote.core->peer_count(), 0u);
  EXPECT_EQ(local.core->counters().timeouts + remote.core->counters().timeouts, 0u);
}

TEST(SimDisconnect, GracefulFromClient) { graceful(true, 0xD001); }
TEST(SimDisconnect, GracefulFromServer) { graceful(false, 0xD002); }

// disconnect_later: everything queued before it arrives, in order, before the remote's
// disconnect event; the local side gets reason local.
void later(bool from_client, std::uint64_t seed) {
  Pair p(seed, from_client ? "disconnect_later_client" : "disconnect_later_server", mild_link());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  auto [local, remote, lh, rh] = p.ends(from_client);

  DeliveryChecker at_remote(remote.name);
  bool gone = false;
  remote.on_event = [&](SimHost&, const Event& ev) {
    if (ev.peer != rh) return;
    if (ev.type == EventType::disconnect) gone = true;
    if (ev.type == EventType::receive) {
      if (gone) at_remote.fail("message delivered after the disconnect event");
      at_remote.on_receive(ev);
    }
  };
  // Queued in one go, so nearly all of it is still unsent when disconnect_later is called;
  // a few fragmented messages make the queue long in datagrams, not just in messages.
  constexpr std::uint32_t kMessages = 400;
  std::array<std::uint32_t, 2> seq{};
  std::uniform_int_distribution<std::uint32_t> size(kTagSize, 3000);
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    const auto ch = static_cast<std::uint8_t>(i % 2);
    const std::uint32_t bytes = i % 100 == 50 ? 100000 : size(p.h.rng());
    const Tag t{5, ch, Delivery::reliable, seq[ch]++, bytes};
    ASSERT_EQ(local.core->send(lh, ch, Delivery::reliable, make_payload(t)), SendResult::ok);
  }
  local.core->disconnect_later(lh, 0x1A7E0002);
  EXPECT_NE(local.core->send(lh, 0, Delivery::reliable,
                             make_payload(Tag{5, 0, Delivery::reliable, 999, 40})),
            SendResult::ok)
      << "send accepted after disconnect_later";
  ASSERT_TRUE(p.h.run_until([&] { return p.both_gone(); }, 120 * kSec))
      << "remote received " << at_remote.total() << "/" << kMessages << "; " << p.h.seed_note();
  p.h.run_for(35 * kSec);
  p.h.print_summary();

  EXPECT_TRUE(at_remote.ok()) << at_remote.report() << "\n" << p.h.seed_note();
  EXPECT_EQ(at_remote.total(), kMessages) << p.h.seed_note();
  EXPECT_EQ(at_remote.next_reliable(5, 0), kMessages / 2);
  EXPECT_EQ(at_remote.next_reliable(5, 1), kMessages / 2);
  const auto* l = local.first(EventType::disconnect, lh);
  const auto* r = remote.first(EventType::disconnect, rh);
  EXPECT_EQ(l->event.reason, DisconnectReason::local) << p.h.seed_note();
  EXPECT_EQ(r->event.reason, DisconnectReason::remote) << p.h.seed_note();
  EXPECT_EQ(r->event.data, 0x1A7E0002u) << p.h.seed_note();
  EXPECT_EQ(local.count(EventType::disconnect, lh), 1u);
  EXPECT_EQ(remote.count(EventType::disconnect, rh), 1u);
  EXPECT_EQ(local.core->peer_count(), 0u);
  EXPECT_EQ(remote.core->peer_count(), 0u);
}

TEST(SimDisconnect, LaterFromClientDeliversQueuedData) { later(true, 0xD003); }
TEST(SimDisconnect, LaterFromServerDeliversQueuedData) { later(false, 0xD004); }

// Graceful disconnect discards what is still queued: the remote sees an in-order prefix.
TEST(SimDisconnect, GracefulWithDataQueuedDeliversAPrefix) {
  Pair p(0xD005, "disconnect_with_queue", mild_link());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  DeliveryChecker at_server("server");
  p.server->on_event = [&](SimHost&, const Event& ev) {
    if (ev.type == EventType::receive) at_server.on_receive(ev);
  };
  for (std::uint32_t i = 0; i < 300; ++i) {
    const Tag t{6, 0, Delivery::reliable, i, 1000};
    ASSERT_EQ(p.client->core->send(p.conn.client, 0, Delivery::reliable, make_payload(t)),
              SendResult::ok);
  }
  p.h.run_for(30 * kMs);  // some of it on the wire, most still queued
  p.client->core->disconnect(p.conn.client, 0xD15C0005);
  ASSERT_TRUE(p.h.run_until([&] { return p.both_gone(); }, 60 * kSec)) << p.h.seed_note();
  p.h.run_for(5 * kSec);
  p.h.print_summary();
  std::printf("[sim] disconnect_with_queue: server received %llu/300 before the disconnect\n",
              static_cast<unsigned long long>(at_server.total()));
  EXPECT_TRUE(at_server.ok()) << at_server.report() << "\n" << p.h.seed_note();
  EXPECT_EQ(p.client->first(EventType::disconnect, p.conn.client)->event.reason,
            DisconnectReason::local);
  const auto* r = p.server->first(EventType::disconnect, p.conn.server);
  EXPECT_EQ(r->event.reason, DisconnectReason::remote);
  EXPECT_EQ(r->event.data, 0xD15C0005u);
}

// The acknowledgement of a DISCONNECT is lost: the remote already ended the connection, so
// the resent DISCONNECT names nothing there. It is acknowledged again from what the remote
// remembers of the goodbye, and the local side completes with reason local, not a timeout.
void lost_disconnect_ack(bool from_client, std::uint64_t seed) {
  Pair p(seed, from_client ? "disconnect_ack_lost_client" : "disconnect_ack_lost_server",
         clean_link());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  p.h.run_for(1 * kSec);
  auto [local, remote, lh, rh] = p.ends(from_client);
  drv::LinkConditions black_hole = clean_link();
  black_hole.loss = 1.0;
  p.h.net().set_link(remote.address, local.address, black_hole);
  local.core->disconnect(lh, 0xD15C0008);
  ASSERT_TRUE(
      p.h.run_until([&] { return remote.first(EventType::disconnect, rh) != nullptr; }, 5 * kSec))
      << p.h.seed_note();
  p.h.run_for(20 * kMs);  // the remote's ack went into the black hole
  EXPECT_EQ(remote.core->peer_count(), 0u);
  EXPECT_EQ(local.count(EventType::disconnect, lh), 0u);
  p.h.net().set_link(remote.address, local.address, clean_link());
  ASSERT_TRUE(
      p.h.run_until([&] { return local.first(EventType::disconnect, lh) != nullptr; }, 60 * kSec))
      << p.h.seed_note();
  p.h.print_summary();
  EXPECT_EQ(local.first(EventType::disconnect, lh)->event.reason, DisconnectReason::local)
      << p.h.seed_note();
  EXPECT_GE(remote.core->counters().disconnects_reacknowledged, 1u);
  EXPECT_EQ(remote.count(EventType::disconnect, rh), 1u);
  EXPECT_EQ(local.core->counters().timeouts + remote.core->counters().timeouts, 0u);
}

TEST(SimDisconnect, GracefulAckLostFromClient) { lost_disconnect_ack(true, 0xD00A); }
TEST(SimDisconnect, GracefulAckLostFromServer) { lost_disconnect_ack(false, 0xD00B); }

// disconnect_now: one unreliable DISCONNECT, no local event. A clean link, since losing that
// single datagram legitimately turns the remote's view into a timeout.
void now(bool from_client, std::uint64_t seed) {
  Pair p(seed, from_client ? "disconnect_now_client" : "disconnect_now_server", clean_link());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  p.h.run_for(1 * kSec);
  auto [local, remote, lh, rh] = p.ends(from_client);
  local.core->disconnect_now(lh, 0xD15C0006);
  EXPECT_EQ(local.core->peer_state(lh), PeerState::disconnected);
  ASSERT_TRUE(
      p.h.run_until([&] { return remote.first(EventType::disconnect, rh) != nullptr; }, 5 * kSec))
      << p.h.seed_note();
  p.h.run_for(40 * kSec);  // the local side must stay silent, the remote must not time out
  p.h.print_summary();

  const auto* r = remote.first(EventType::disconnect, rh);
  EXPECT_EQ(r->event.reason, DisconnectReason::remote) << p.h.seed_note();
  EXPECT_EQ(r->event.data, 0xD15C0006u) << p.h.seed_note();
  EXPECT_EQ(remote.count(EventType::disconnect, rh), 1u);
  EXPECT_EQ(local.count(EventType::disconnect, lh), 0u) << "disconnect_now produced a local event";
  EXPECT_EQ(local.core->peer_count(), 0u);
  EXPECT_EQ(remote.core->peer_count(), 0u);
  EXPECT_EQ(local.core->counters().timeouts + remote.core->counters().timeouts, 0u);
}

TEST(SimDisconnect, NowFromClient) { now(true, 0xD006); }
TEST(SimDisconnect, NowFromServer) { now(false, 0xD007); }

// reset: silence on both sides of the wire; the remote notices through its own timeouts.
void reset(bool from_client, std::uint64_t seed) {
  const proto::HostConfig cfg;
  Pair p(seed, from_client ? "reset_client" : "reset_server", clean_link(), cfg);
  ASSERT_TRUE(p.up) << p.h.seed_note();
  p.h.run_for(3 * kSec);  // a few pings: the RTT estimate settles somewhat
  auto [local, remote, lh, rh] = p.ends(from_client);
  PeerStats st;
  ASSERT_TRUE(remote.core->peer_stats(rh, st));
  const std::uint64_t cut = p.h.now();
  local.core->reset(lh);
  EXPECT_EQ(local.core->peer_state(lh), PeerState::disconnected);
  const auto w = enet_timeout_window(cut, st, cfg, 2 * clean_link().latency_us);
  p.h.run_until([&] { return remote.first(EventType::disconnect, rh) != nullptr; },
                w.latest_us + kSec - cut);
  p.h.run_for(5 * kSec);
  p.h.print_summary();

  const auto* r = remote.first(EventType::disconnect, rh);
  ASSERT_NE(r, nullptr) << "remote never timed out; " << p.h.seed_note();
  EXPECT_EQ(r->event.reason, DisconnectReason::timeout) << p.h.seed_note();
  EXPECT_GE(r->at_us, w.earliest_us) << timing(r, cut, w) << "; " << p.h.seed_note();
  EXPECT_LE(r->at_us, w.latest_us) << timing(r, cut, w) << "; " << p.h.seed_note();
  std::printf("[sim] %s: remote timed out, %s\n", from_client ? "reset_client" : "reset_server",
              timing(r, cut, w).c_str());
  EXPECT_EQ(local.count(EventType::disconnect, lh), 0u) << "reset produced a local event";
  EXPECT_EQ(local.core->peer_count(), 0u);
  EXPECT_EQ(remote.core->peer_count(), 0u);
}

TEST(SimDisconnect, ResetFromClientRemoteTimesOut) { reset(true, 0xD008); }
TEST(SimDisconnect, ResetFromServerRemoteTimesOut) { reset(false, 0xD009); }

// A link that dies after the handshake: both sides time out, reason timeout, within ENet's
// window. With reliable data queued (the sender's retransmissions drive its timeout) and with
// both sides idle (the pings do), between Tern peers (idle pings agreed) and at ENet's ping
// interval.
void dead_link(bool with_traffic, std::uint64_t seed, std::uint32_t idle_ping_intervals = 4) {
  proto::HostConfig cfg;
  cfg.idle_ping_intervals = idle_ping_intervals;
  const char* label = with_traffic              ? "dead_link_busy"
                      : idle_ping_intervals > 1 ? "dead_link_idle"
                                                : "dead_link_idle_enet_interval";
  Pair p(seed, label, clean_link(), cfg);
  ASSERT_TRUE(p.up) << p.h.seed_note();
  if (with_traffic) {
    for (std::uint32_t i = 0; i < 200; ++i) {
      const Tag t{8, 0, Delivery::reliable, i, 500};
      ASSERT_EQ(p.client->core->send(p.conn.client, 0, Delivery::reliable, make_payload(t)),
                SendResult::ok);
    }
  }
  p.h.run_for(3 * kSec);
  if (with_traffic) {
    for (std::uint32_t i = 200; i < 400; ++i) {
      const Tag t{8, 0, Delivery::reliable, i, 500};
      ASSERT_EQ(p.client->core->send(p.conn.client, 0, Delivery::reliable, make_payload(t)),
                SendResult::ok);
    }
  }
  PeerStats client_st, server_st;
  ASSERT_TRUE(p.client->core->peer_stats(p.conn.client, client_st));
  ASSERT_TRUE(p.server->core->peer_stats(p.conn.server, server_st));
  drv::LinkConditions down = clean_link();
  down.down = true;
  p.h.net().set_default_link(down);
  const std::uint64_t cut = p.h.now();
  const std::uint64_t rtt = 2 * clean_link().latency_us;
  const auto wc = enet_timeout_window(cut, client_st, cfg, rtt);
  const auto ws = enet_timeout_window(cut, server_st, cfg, rtt);
  p.h.run_until([&] { return p.both_gone(); }, std::max(wc.latest_us, ws.latest_us) + kSec - cut);
  p.h.print_summary();

  const auto* c = p.client->first(EventType::disconnect, p.conn.client);
  const auto* s = p.server->first(EventType::disconnect, p.conn.server);
  ASSERT_NE(c, nullptr) << "client never timed out; " << p.h.seed_note();
  ASSERT_NE(s, nullptr) << "server never timed out; " << p.h.seed_note();
  std::printf("[sim] %s: client %s\n[sim] %s: server %s\n", label, timing(c, cut, wc).c_str(),
              label, timing(s, cut, ws).c_str());
  EXPECT_EQ(c->event.reason, DisconnectReason::timeout) << p.h.seed_note();
  EXPECT_EQ(s->event.reason, DisconnectReason::timeout) << p.h.seed_note();
  EXPECT_GE(c->at_us, wc.earliest_us) << "client " << timing(c, cut, wc);
  EXPECT_LE(c->at_us, wc.latest_us) << "client " << timing(c, cut, wc);
  EXPECT_GE(s->at_us, ws.earliest_us) << "server " << timing(s, cut, ws);
  EXPECT_LE(s->at_us, ws.latest_us) << "server " << timing(s, cut, ws);
  EXPECT_EQ(p.client->core->peer_count(), 0u);
  EXPECT_EQ(p.server->core->peer_count(), 0u);
  EXPECT_EQ(p.client->core->counters().timeouts, 1u);
  EXPECT_EQ(p.server->core->counters().timeouts, 1u);
}

TEST(SimTimeout, DeadLinkWithReliableTrafficPending) { dead_link(true, 0xDEAD1); }
TEST(SimTimeout, DeadLinkWithIdlePeers) { dead_link(false, 0xDEAD2); }
TEST(SimTimeout, DeadLinkWithIdlePeersAtEnetsPingInterval) { dead_link(false, 0xDEAD3, 1); }

proto::HostConfig enet_ping_interval() {
  proto::HostConfig cfg;
  cfg.idle_ping_intervals = 1;
  return cfg;
}

// Keep-alive: the connecting side pings after each silence of a ping interval, as ENet does;
// the accepting side answers those pings and adds its own only every few intervals, in the
// datagram of an answer, to keep its RTT estimate fed: 3 datagrams per client ping instead of
// 4 when both sides ping. Idle pings off, as with a plain ENet peer on the other side.
TEST(SimPing, TheClientPingsAndTheServerOnlyRefreshesItsRtt) {
  Pair p(0xB1A6, "client_pings", clean_link(), enet_ping_interval());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  const std::uint64_t client_before = p.client->core->counters().pings_out;
  const std::uint64_t server_before = p.server->core->counters().pings_out;
  const std::uint64_t server_out_before = p.server->core->counters().datagrams_out;
  p.h.run_for(20 * kSec);
  p.h.print_summary();
  const std::uint64_t client_pings = p.client->core->counters().pings_out - client_before;
  const std::uint64_t server_pings = p.server->core->counters().pings_out - server_before;
  const std::uint64_t server_out = p.server->core->counters().datagrams_out - server_out_before;
  std::printf(
      "[sim] client_pings: 20 s idle, client pings %llu, server pings %llu, server "
      "datagrams out %llu\n",
      static_cast<unsigned long long>(client_pings), static_cast<unsigned long long>(server_pings),
      static_cast<unsigned long long>(server_out));
  // One ping per interval plus a round trip (520 ms here): 38 in 20 s.
  EXPECT_GE(client_pings, 35u);
  EXPECT_LE(client_pings, 41u);
  // Every third answer carries a ping of the server's.
  EXPECT_GE(server_pings, client_pings / 4);
  EXPECT_LE(server_pings, client_pings / 3 + 1);
  EXPECT_EQ(server_out, client_pings) << "the server's pings ride with its answers";
  PeerStats st;
  ASSERT_TRUE(p.client->core->peer_stats(p.conn.client, st));
  EXPECT_GE(st.rtt_ms, 15u) << "the client's pings keep its RTT estimate fed";
  EXPECT_LE(st.rtt_ms, 30u);
  EXPECT_EQ(p.client->count(EventType::disconnect, p.conn.client), 0u);
  EXPECT_EQ(p.server->count(EventType::disconnect, p.conn.server), 0u);
}

// A client that stops pinging (its own interval set far out) still hears from the server,
// which pings after 4 intervals without an acknowledgement; nobody times out.
TEST(SimPing, TheServerPingsWhenTheClientIsSilent) {
  Pair p(0xB1A7, "server_pings", clean_link(), enet_ping_interval());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  p.client->core->set_ping_interval(p.conn.client, 60'000);
  p.h.run_for(1 * kSec);
  const std::uint64_t server_before = p.server->core->counters().pings_out;
  p.h.run_for(20 * kSec);
  p.h.print_summary();
  const std::uint64_t server_pings = p.server->core->counters().pings_out - server_before;
  std::printf("[sim] server_pings: 20 s with a silent client, server pings %llu\n",
              static_cast<unsigned long long>(server_pings));
  // Every 4 intervals plus a round trip (2.02 s): 10 in 20 s.
  EXPECT_GE(server_pings, 9u);
  EXPECT_LE(server_pings, 11u);
  EXPECT_EQ(p.client->count(EventType::disconnect, p.conn.client), 0u);
  EXPECT_EQ(p.server->count(EventType::disconnect, p.conn.server), 0u);
}

// Idle pings agreed (the default between Tern peers): the client pings after 4 intervals of
// silence (2 s); the server, whose own pings stay every 4 intervals, puts one in nearly every
// answer. A quarter of the client's pings and answers of ENet's interval, and both RTT
// estimates still fed.
TEST(SimPing, IdleTernPeersPingEveryFourIntervals) {
  Pair p(0xB1A8, "idle_pings", clean_link());
  ASSERT_TRUE(p.up) << p.h.seed_note();
  const auto& cc = p.client->core->counters();
  const auto& sc = p.server->core->counters();
  const std::uint64_t client_before = cc.pings_out;
  const std::uint64_t server_before = sc.pings_out;
  const std::uint64_t server_out_before = sc.datagrams_out;
  const std::uint64_t server_in_before = sc.datagrams_in;
  p.h.run_for(40 * kSec);
  p.h.print_summary();
  const std::uint64_t client_pings = cc.pings_out - client_before;
  const std::uint64_t server_pings = sc.pings_out - server_before;
  const std::uint64_t server_out = sc.datagrams_out - server_out_before;
  const std::uint64_t server_in = sc.datagrams_in - server_in_before;
  std::printf(
      "[sim] idle_pings: 40 s idle, client pings %llu, server pings %llu, server datagrams in "
      "%llu out %llu\n",
      static_cast<unsigned long long>(client_pings), static_cast<unsigned long long>(server_pings),
      static_cast<unsigned long long>(server_in), static_cast<unsigned long long>(server_out));
  // One ping per 4 intervals plus a round trip (2.02 s): 19 or 20 in 40 s.
  EXPECT_GE(client_pings, 18u);
  EXPECT_LE(client_pings, 21u);
  EXPECT_GE(server_pings + 2, client_pings);
  EXPECT_LE(server_pings, client_pings + 1);
  EXPECT_EQ(server_out, client_pings) << "the server's pings ride with its answers";
  // ENet's interval: ~77 client pings and as many answers, plus ~25 server pings and their
  // acks, in 40 s (the client_pings test: 91 datagrams in 20 s).
  EXPECT_LE(server_in + server_out, 3 * client_pings + 2);
  PeerStats st;
  ASSERT_TRUE(p.client->core->peer_stats(p.conn.client, st));
  EXPECT_GE(st.rtt_ms, 15u) << "the client's pings keep its RTT estimate fed";
  EXPECT_LE(st.rtt_ms, 30u);
  ASSERT_TRUE(p.server->core->peer_stats(p.conn.server, st));
  EXPECT_GE(st.rtt_ms, 15u) << "the server's own pings keep its RTT estimate fed";
  EXPECT_LE(st.rtt_ms, 30u);
  EXPECT_EQ(p.client->count(EventType::disconnect, p.conn.client), 0u);
  EXPECT_EQ(p.server->count(EventType::disconnect, p.conn.server), 0u);
}

// Idle pings need both sides: either side without them keeps ENet's interval (a plain ENet
// peer answers no hello, so it is the same as a side that does not offer them).
void idle_pings_refused(bool server_has_them, std::uint64_t seed) {
  proto::HostConfig with;
  const proto::HostConfig without = enet_ping_interval();
  Pair p(seed, server_has_them ? "idle_pings_client_off" : "idle_pings_server_off", clean_link(),
         server_has_them ? with : without, server_has_them ? without : with);
  ASSERT_TRUE(p.up) << p.h.seed_note();
  const std::uint64_t client_before = p.client->core->counters().pings_out;
  p.h.run_for(20 * kSec);
  const std::uint64_t client_pings = p.client->core->counters().pings_out - client_before;
  std::printf("[sim] idle pings refused (%s side off): 20 s idle, client pings %llu\n",
              server_has_them ? "client" : "server", static_cast<unsigned long long>(client_pings));
  EXPECT_GE(client_pings, 35u);
  EXPECT_LE(client_pings, 41u);
  EXPECT_EQ(p.client->count(EventType::disconnect, p.conn.client), 0u);
  EXPECT_EQ(p.server->count(EventType::disconnect, p.conn.server), 0u);
}

TEST(SimPing, IdlePingsOffOnTheClientKeepEnetsInterval) { idle_pings_refused(true, 0xB1A9); }
TEST(SimPing, IdlePingsOffOnTheServerKeepEnetsInterval) { idle_pings_refused(false, 0xB1AA); }

}  // namespace
}  // namespace tern::simtest
