// sim_soak: long randomized runs of real HostCores on the simulated network.
//
//   sim_soak [--seconds N] [--seed S] [--round R] [--quiet]
//
// Runs rounds until N seconds of wall-clock time are used (checked between rounds; a round is
// bounded in simulated time). Round r of seed S is a pure function of (S, r), so any failure is
// replayed with --seed S --round R. Each round draws one server and 1..4 clients, per-direction
// impairments (loss, duplication, reordering, latency, jitter, bandwidth with a queue), short
// link outages, host configurations, channel counts, and a mix of reliable, unreliable and
// unsequenced messages from 18 bytes to 300 KB in both directions; connections end every way
// there is (disconnect, disconnect_later, disconnect_now, reset, timeout) from either side, and
// clients reconnect. Invariants, checked as the round runs and at its end:
//   - reliable messages arrive exactly once, intact and in order per (connection, channel);
//     unreliable ones never go backwards; unsequenced ones never twice;
//   - nothing is delivered on a connection after its disconnect event; every connection a
//     host was told about ends with exactly one disconnect event, except where the
//     application itself closed it silently (disconnect_now, reset);
//   - disconnect reasons and data agree with what the other side did; a disconnect_later that
//     the remote sees as such delivered everything queued before it;
//   - buffered bytes never exceed the memory cap, and are zero once every connection ended;
//   - once the round is over and the hosts are gone, no packet buffer is left alive.
#include "delivery_checker.hpp"
#include "payload.hpp"
#include "sim_harness.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace tern::simtest {
namespace {

enum class End : std::uint8_t { none, disconnect, later, now, reset };

const char* end_name(End e) {
  switch (e) {
    case End::none: return "none";
    case End::disconnect: return "disconnect";
    case End::later: return "disconnect_later";
    case End::now: return "disconnect_now";
    case End::reset: return "reset";
  }
  return "?";
}

std::uint64_t key_of(PeerHandle h) { return (std::uint64_t{h.slot} << 32) | h.generation; }

// One side of one connection.
struct Side {
  PeerHandle handle;
  bool up = false;      // connect event seen
  bool gone = false;    // disconnect event seen
  bool closed = false;  // the application ended it silently (no event expected)
  DisconnectReason reason = DisconnectReason::none;
  std::uint32_t data = 0;
  End end = End::none;  // what this side's application did
  std::uint32_t end_data = 0;
  std::array<std::uint32_t, 256> reliable_sent{};  // per channel, accepted by send()
  std::array<std::uint32_t, 256> reliable_at_end{};
  std::array<std::uint32_t, 256> unreliable_sent{};
  std::array<std::uint32_t, 256> unsequenced_sent{};
  std::uint64_t reliable_bytes_sent = 0;
  bool finished() const { return gone || closed; }
};

struct Conn {
  std::uint32_t id = 0;
  std::size_t client_slot = 0;
  std::uint8_t channels = 1;
  Side client;
  Side server;
  // Messages travelling towards each side, checked on arrival.
  std::unique_ptr<DeliveryChecker> at_client;
  std::unique_ptr<DeliveryChecker> at_server;
  std::uint64_t started_us = 0;
};

struct RoundStats {
  std::uint64_t connections = 0;
  std::uint64_t delivered = 0;
  std::uint64_t timeouts = 0;
  std::map<std::string, std::uint64_t> ends;
  double sim_seconds = 0;
  std::uint64_t busy_steps = 0;
};

class Round {
 public:
  Round(std::uint64_t seed, std::uint64_t round, bool quiet)
      : seed_(seed), round_(round), quiet_(quiet), rng_(mix(seed, round)) {}

  // Returns the number of invariant violations.
  std::uint64_t run(RoundStats& stats);

 private:
  static std::uint64_t mix(std::uint64_t seed, std::uint64_t round) {
    std::uint64_t x = seed ^ (round * 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) {
    return std::uniform_int_distribution<std::uint64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return uniform(0, 1) < p; }

  // TERN_SOAK_TRACE=1: one line per connection event and application ending, to follow a
  // replayed round.
  void trace(const std::string& what) {
    if (tracing_)
      std::printf("[soak] trace t=%.3fs %s\n", static_cast<double>(h_->now()) / 1e6, what.c_str());
  }

  void fail(const std::string& what) {
    ++violations_;
    if (violations_ <= 25) {
      std::printf("[soak] VIOLATION round %" PRIu64 " t=%.3fs: %s\n", round_,
                  static_cast<double>(h_->now()) / 1e6, what.c_str());
    }
  }

  drv::LinkConditions random_link();
  proto::HostConfig random_config(bool patient);
  void on_server_event(const Event& ev);
  void on_client_event(std::size_t slot, const Event& ev);
  void on_end(Conn& c, bool at_client, const Event& ev);
  void check_receive(Conn& c, bool at_client, const Event& ev);
  void traffic(Conn& c, bool from_client);
  void maybe_end(Conn& c);
  void end_side(Conn& c, bool from_client, End e);
  void tick();
  void final_checks();
  Conn* by_handle(std::map<std::uint64_t, Conn*>& m, PeerHandle h) {
    auto it = m.find(key_of(h));
    return it == m.end() ? nullptr : it->second;
  }

  std::uint64_t seed_;
  std::uint64_t round_;
  bool quiet_;
  std::mt19937_64 rng_;
  std::unique_ptr<SimHarness> h_;
  SimHost* server_ = nullptr;
  std::vector<SimHost*> clients_;
  std::vector<Conn*> current_;  // per client slot: its latest connection, if any
  std::vector<std::uint64_t> reconnect_at_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::map<std::uint64_t, Conn*> server_handles_;
  std::vector<std::map<std::uint64_t, Conn*>> client_handles_;
  std::map<std::uint32_t, Conn*> by_id_;
  proto::HostConfig server_cfg_;
  bool winding_down_ = false;
  bool tracing_ = std::getenv("TERN_SOAK_TRACE") != nullptr;
  std::uint64_t next_tick_ = 0;
  std::uint64_t violations_ = 0;
  std::uint32_t next_id_ = 1;
  std::vector<std::pair<std::uint64_t, std::size_t>> outages_;  // (end time, slot)
  std::vector<drv::LinkConditions> up_links_, down_links_;
};

drv::LinkConditions Round::random_link() {
  drv::LinkConditions c;
  c.loss = chance(0.2) ? 0.0 : uniform(0.0, 0.25);
  c.duplicate = chance(0.5) ? 0.0 : uniform(0.0, 0.10);
  c.reorder = chance(0.5) ? 0.0 : uniform(0.0, 0.20);
  c.latency_us = between(1, 120) * kMs;
  c.jitter_us = between(0, 40) * kMs;
  c.reorder_delay_us = between(0, 30) * kMs;
  if (chance(0.3)) {
    c.bandwidth_bytes_per_s = between(50'000, 5'000'000);
    c.queue_limit_bytes = between(16'000, 1'000'000);
  }
  return c;
}

proto::HostConfig Round::random_config(bool patient) {
  proto::HostConfig c;
  if (patient) {
    c.timeout_limit = 1u << 12;
    c.timeout_minimum_ms = 60000;
    c.timeout_maximum_ms = 120000;
  }
  c.memory_cap = std::size_t{64} << 20;
  c.max_packet_size = 1u << 20;
  c.max_waiting_data = 8u << 20;
  if (chance(0.2)) c.mtu = static_cast<std::uint32_t>(between(576, 4096));
  if (chance(0.2)) c.ping_interval_ms = static_cast<std::uint32_t>(between(100, 2000));
  return c;
}

void Round::check_receive(Conn& c, bool at_client, const Event& ev) {
  Side& side = at_client ? c.client : c.server;
  if (side.finished()) {
    fail("conn " + std::to_string(c.id) + ": message delivered to the " +
         (at_client ? "client" : "server") + " after its connection ended");
  }
  if (!side.up) fail("conn " + std::to_string(c.id) + ": message before the connect event");
  const auto tag = read_tag(ev.packet.bytes());
  const std::uint32_t expect_stream = c.id * 2 + (at_client ? 1 : 0);
  if (tag && tag->stream != expect_stream) {
    fail("conn " + std::to_string(c.id) + ": message of stream " + std::to_string(tag->stream) +
         " arrived on this connection");
    return;
  }
  (at_client ? c.at_client : c.at_server)->on_receive(ev);
}

void Round::on_end(Conn& c, bool at_client, const Event& ev) {
  Side& side = at_client ? c.client : c.server;
  const Side& other = at_client ? c.server : c.client;
  const std::string who = "conn " + std::to_string(c.id) + " " + (at_client ? "client" : "server");
  trace(who + " disconnect event, reason " + to_string(ev.reason));
  if (side.gone) fail(who + ": second disconnect event");
  if (side.closed) fail(who + ": disconnect event after the application closed it silently");
  side.gone = true;
  side.reason = ev.reason;
  side.data = ev.data;
  switch (ev.reason) {
    case DisconnectReason::local:
      if (side.end != End::disconnect && side.end != End::later) {
        fail(who + ": reason local, but it called " + end_name(side.end));
      }
      break;
    case DisconnectReason::remote:
      if (other.end == End::none || other.end == End::reset) {
        fail(who + ": reason remote, but the other side did " + end_name(other.end));
      } else if (ev.data != other.end_data) {
        fail(who + ": disconnect data " + std::to_string(ev.data) + ", sent " +
             std::to_string(other.end_data));
      }
      if (other.end == End::later) {
        // Everything queued before disconnect_later arrived before its disconnect.
        const DeliveryChecker& got = at_client ? *c.at_client : *c.at_server;
        const std::uint32_t stream = c.id * 2 + (at_client ? 1 : 0);
        for (std::uint8_t ch = 0; ch < c.channels; ++ch) {
          if (got.next_reliable(stream, ch) != other.reliable_at_end[ch]) {
            fail(who + ": disconnect_later delivered " +
                 std::to_string(got.next_reliable(stream, ch)) + " of " +
                 std::to_string(other.reliable_at_end[ch]) + " reliable messages on channel " +
                 std::to_string(ch));
          }
        }
      }
      break;
    case DisconnectReason::timeout: break;
    case DisconnectReason::replaced:
      // A new connection from the same client address supersedes the server's old one.
      if (at_client) fail(who + ": reason replaced on the client");
      break;
    case DisconnectReason::evicted:
      // Dropped to keep this host under its memory cap: legitimate under any traffic.
      break;
    case DisconnectReason::protocol_error:
      // Only a KCP sender can cause it; the soak's peers speak ENet.
      fail(who + ": protocol_error between ENet peers");
      break;
    case DisconnectReason::refused:
      if (side.up) fail(who + ": refused after the connection was up");
      break;
    case DisconnectReason::none: fail(who + ": disconnect without a reason"); break;
  }
}

void Round::on_server_event(const Event& ev) {
  switch (ev.type) {
    case EventType::connect: {
      auto it = by_id_.find(ev.data);
      if (it == by_id_.end()) {
        fail("server: connect with unknown data " + std::to_string(ev.data));
        return;
      }
      Conn& c = *it->second;
      if (c.server.up) fail("conn " + std::to_string(c.id) + ": second server connect event");
      if (ev.address != clients_[c.client_slot]->address) {
        fail("conn " + std::to_string(c.id) + ": server connect from the wrong address");
      }
      trace("conn " + std::to_string(c.id) + " server connect event");
      c.server.up = true;
      c.server.handle = ev.peer;
      server_handles_[key_of(ev.peer)] = &c;
      break;
    }
    case EventType::receive:
      if (Conn* c = by_handle(server_handles_, ev.peer)) {
        check_receive(*c, false, ev);
      } else {
        fail("server: message for an unknown handle");
      }
      break;
    case EventType::disconnect:
      if (Conn* c = by_handle(server_handles_, ev.peer)) {
        on_end(*c, false, ev);
      } else {
        fail("server: disconnect for an unknown handle");
      }
      break;
    case EventType::receipt: fail("server: receipt nobody asked for"); break;
    case EventType::block_refused: fail("server: refusal of a block never sent"); break;
    case EventType::none: fail("server: event of type none"); break;
  }
}

void Round::on_client_event(std::size_t slot, const Event& ev) {
  Conn* c = by_handle(client_handles_[slot], ev.peer);
  if (c == nullptr) {
    fail("client " + std::to_string(slot) + ": event for an unknown handle");
    return;
  }
  switch (ev.type) {
    case EventType::connect:
      trace("conn " + std::to_string(c->id) + " client connect event");
      if (c->client.up) fail("conn " + std::to_string(c->id) + ": second client connect event");
      c->client.up = true;
      break;
    case EventType::receive: check_receive(*c, true, ev); break;
    case EventType::disconnect: on_end(*c, true, ev); break;
    case EventType::receipt: fail("client: receipt nobody asked for"); break;
    case EventType::block_refused: fail("client: refusal of a block never sent"); break;
    case EventType::none: fail("client: event of type none"); break;
  }
}

void Round::traffic(Conn& c, bool from_client) {
  Side& side = from_client ? c.client : c.server;
  const Side& other = from_client ? c.server : c.client;
  if (!side.up || side.finished() || side.end != End::none || !other.up || other.finished()) return;
  SimHost& host = from_client ? *clients_[c.client_slot] : *server_;
  const DeliveryChecker& peer_checker = from_client ? *c.at_server : *c.at_client;
  const std::uint32_t stream = c.id * 2 + (from_client ? 0 : 1);
  // Keep what is queued bounded: the peer's progress is visible to the test.
  std::uint64_t reliable_sent = 0;
  for (std::uint8_t ch = 0; ch < c.channels; ++ch) reliable_sent += side.reliable_sent[ch];
  std::uint64_t reliable_got = 0;
  for (std::uint8_t ch = 0; ch < c.channels; ++ch)
    reliable_got += peer_checker.next_reliable(stream, ch);
  const std::uint64_t n = between(0, 6);
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto ch = static_cast<std::uint8_t>(between(0, c.channels - 1));
    const double pick = uniform(0, 1);
    Delivery d = pick < 0.6    ? Delivery::reliable
                 : pick < 0.85 ? Delivery::unreliable
                               : Delivery::unsequenced;
    const double s = uniform(0, 1);
    std::uint32_t size = s < 0.7    ? static_cast<std::uint32_t>(between(kTagSize, 200))
                         : s < 0.9  ? static_cast<std::uint32_t>(between(200, 1400))
                         : s < 0.98 ? static_cast<std::uint32_t>(between(1400, 20000))
                                    : static_cast<std::uint32_t>(between(20000, 300000));
    if (d != Delivery::reliable) size = std::min<std::uint32_t>(size, 20000);
    if (d == Delivery::reliable && reliable_sent - reliable_got > 400) continue;
    std::uint32_t* seq = d == Delivery::reliable     ? &side.reliable_sent[ch]
                         : d == Delivery::unreliable ? &side.unreliable_sent[ch]
                                                     : &side.unsequenced_sent[ch];
    const Tag t{stream, ch, d, *seq, size};
    const SendResult r = host.core->send(side.handle, ch, d, make_payload(t));
    if (r == SendResult::ok) {
      ++*seq;
      if (d == Delivery::reliable) ++reliable_sent;
    } else if (host.core->peer_state(side.handle) == PeerState::connected) {
      // A connection that ended inside the last flush (a timeout, a DISCONNECT) reports it
      // through an event not drained yet: refusing is right then, but not while connected.
      fail("conn " + std::to_string(c.id) + ": send on a connected peer returned " + to_string(r));
    }
  }
}

void Round::end_side(Conn& c, bool from_client, End e) {
  Side& side = from_client ? c.client : c.server;
  SimHost& host = from_client ? *clients_[c.client_slot] : *server_;
  side.end = e;
  side.end_data = static_cast<std::uint32_t>(between(1, 0xFFFFFFFFu));
  trace("conn " + std::to_string(c.id) + " " + (from_client ? "client" : "server") + " calls " +
        end_name(e));
  side.reliable_at_end = side.reliable_sent;
  switch (e) {
    case End::disconnect: host.core->disconnect(side.handle, side.end_data); break;
    case End::later: host.core->disconnect_later(side.handle, side.end_data); break;
    case End::now:
      host.core->disconnect_now(side.handle, side.end_data);
      side.closed = true;
      break;
    case End::reset:
      host.core->reset(side.handle);
      side.end_data = 0;
      side.closed = true;
      break;
    case End::none: break;
  }
  if (side.closed && host.core->peer_state(side.handle) != PeerState::disconnected) {
    fail("conn " + std::to_string(c.id) + ": peer still alive after " + end_name(e));
  }
  if (host.core->send(side.handle, 0, Delivery::reliable,
                      make_payload(Tag{0xFFFFFFFFu, 0, Delivery::reliable, 0, 32})) ==
      SendResult::ok) {
    fail("conn " + std::to_string(c.id) + ": send accepted after " + end_name(e));
  }
}

void Round::maybe_end(Conn& c) {
  if (c.client.end != End::none || c.server.end != End::none) return;  // one ending at a time
  if (!c.client.up || !c.server.up || c.client.finished() || c.server.finished()) return;
  if (!chance(0.004)) return;  // ~ one ending per 2.5 s of a connection's life
  const bool from_client = chance(0.6);
  const double p = uniform(0, 1);
  const End e = p < 0.3 ? End::disconnect : p < 0.6 ? End::later : p < 0.8 ? End::now : End::reset;
  end_side(c, from_client, e);
}

void Round::tick() {
  const std::uint64_t now = h_->now();
  if (now < next_tick_) return;
  next_tick_ = now + 10 * kMs;
  h_->wake_at(next_tick_);

  // Outages end; new ones start.
  for (auto it = outages_.begin(); it != outages_.end();) {
    if (now >= it->first) {
      h_->net().set_link(clients_[it->second]->address, server_->address, up_links_[it->second]);
      h_->net().set_link(server_->address, clients_[it->second]->address, down_links_[it->second]);
      it = outages_.erase(it);
    } else {
      ++it;
    }
  }
  if (!winding_down_ && chance(0.0005)) {
    const std::size_t slot = between(0, clients_.size() - 1);
    drv::LinkConditions down = up_links_[slot];
    down.down = true;
    h_->net().set_link(clients_[slot]->address, server_->address, down);
    h_->net().set_link(server_->address, clients_[slot]->address, down);
    outages_.emplace_back(now + between(200, 4000) * kMs, slot);
  }

  for (std::size_t slot = 0; slot < clients_.size(); ++slot) {
    Conn* c = current_[slot];
    const bool client_done = c == nullptr || c->client.finished();
    if (client_done && !winding_down_) {
      if (reconnect_at_[slot] == 0) reconnect_at_[slot] = now + between(0, 3000) * kMs;
      if (now >= reconnect_at_[slot]) {
        reconnect_at_[slot] = 0;
        auto conn = std::make_unique<Conn>();
        conn->id = next_id_++;
        conn->client_slot = slot;
        conn->channels = static_cast<std::uint8_t>(between(1, 8));
        conn->at_client =
            std::make_unique<DeliveryChecker>("conn " + std::to_string(conn->id) + " client");
        conn->at_server =
            std::make_unique<DeliveryChecker>("conn " + std::to_string(conn->id) + " server");
        conn->at_client->accept_fragmented_unsequenced_as_reliable();
        conn->at_server->accept_fragmented_unsequenced_as_reliable();
        conn->started_us = now;
        conn->client.handle =
            clients_[slot]->core->connect(now, server_->address, conn->channels, conn->id);
        if (!conn->client.handle.valid()) {
          fail("client " + std::to_string(slot) + ": connect() refused");
          continue;
        }
        trace("conn " + std::to_string(conn->id) + " client " + std::to_string(slot) + " connects");
        client_handles_[slot][key_of(conn->client.handle)] = conn.get();
        by_id_[conn->id] = conn.get();
        current_[slot] = conn.get();
        conns_.push_back(std::move(conn));
      }
      continue;
    }
    if (c == nullptr) continue;
    if (winding_down_) {
      // Ask every connection nobody ended yet to finish gracefully, from the client.
      if (c->client.up && !c->client.finished() && c->client.end == End::none &&
          c->server.end == End::none) {
        end_side(*c, true, End::later);
      }
      continue;
    }
    traffic(*c, true);
    traffic(*c, false);
    maybe_end(*c);
  }
}

void Round::final_checks() {
  for (const auto& cp : conns_) {
    Conn& c = *cp;
    const std::string who = "conn " + std::to_string(c.id);
    if (!c.at_client->ok()) fail(who + " " + c.at_client->report());
    if (!c.at_server->ok()) fail(who + " " + c.at_server->report());
    // A host that was told about a connection must have been told it ended, unless its own
    // application closed it silently. A client is told from the moment it called connect().
    auto describe = [&](const Side& side, SimHost& host) {
      std::string d = std::string(" [state ") + to_string(host.core->peer_state(side.handle)) +
                      ", connect event " + (side.up ? "seen" : "not seen") + ", its end " +
                      end_name(side.end);
      PeerStats st;
      if (host.core->peer_stats(side.handle, st)) {
        d += ", rtt " + std::to_string(st.rtt_ms) + "±" + std::to_string(st.rtt_variance_ms) +
             " ms, throttle " + std::to_string(st.packet_throttle) + ", window " +
             std::to_string(st.window_size) + ", mtu " + std::to_string(st.mtu) + ", in transit " +
             std::to_string(st.reliable_in_transit) + " B, queued " +
             std::to_string(st.queued_outgoing) + " commands";
      }
      return d + "]";
    };
    if (!c.client.gone && !c.client.closed) {
      fail(who + ": client never saw it end" + describe(c.client, *clients_[c.client_slot]) +
           "; server side" + describe(c.server, *server_));
    }
    if (c.server.up && !c.server.gone && !c.server.closed) {
      fail(who + ": server never saw it end" + describe(c.server, *server_) + "; client side" +
           describe(c.client, *clients_[c.client_slot]));
    }
  }
  for (SimHost* host : clients_) {
    if (host->core->peer_count() != 0) fail(host->name + ": peers left after the round");
    if (host->core->counters().buffered_bytes != 0) {
      fail(host->name + ": " + std::to_string(host->core->counters().buffered_bytes) +
           " bytes still buffered with no connection");
    }
  }
  if (server_->core->peer_count() != 0) fail("server: peers left after the round");
  if (server_->core->counters().buffered_bytes != 0) {
    fail("server: " + std::to_string(server_->core->counters().buffered_bytes) +
         " bytes still buffered with no connection");
  }
}

std::uint64_t Round::run(RoundStats& stats) {
  const std::size_t live_before = Packet::thread_live_bytes();
  {
    h_ = std::make_unique<SimHarness>(mix(seed_, round_) ^ 0x50AC,
                                      "soak round " + std::to_string(round_), false);
    const bool patient = chance(0.5);
    server_cfg_ = random_config(patient);
    server_ = &h_->add_host("server", server_cfg_);
    server_->log_receives = false;
    server_->on_event = [this](SimHost&, const Event& ev) { on_server_event(ev); };
    const std::size_t n = between(1, 4);
    client_handles_.resize(n);
    current_.assign(n, nullptr);
    reconnect_at_.assign(n, 0);
    for (std::size_t i = 0; i < n; ++i) {
      SimHost& c = h_->add_host("client" + std::to_string(i), random_config(patient));
      c.log_receives = false;
      c.on_event = [this, i](SimHost&, const Event& ev) { on_client_event(i, ev); };
      clients_.push_back(&c);
      up_links_.push_back(random_link());
      down_links_.push_back(random_link());
      h_->net().set_link(c.address, server_->address, up_links_.back());
      h_->net().set_link(server_->address, c.address, down_links_.back());
    }
    h_->before_step = [this] { tick(); };
    h_->after_step = [this] {
      if (server_->core->counters().buffered_bytes > server_cfg_.memory_cap) {
        fail("server buffered " + std::to_string(server_->core->counters().buffered_bytes) +
             " bytes, above its memory cap");
      }
    };

    const std::uint64_t active = between(20, 60) * kSec;
    h_->run_for(active);

    // Wind down on clean links: every live connection ends gracefully; silent closes time out.
    winding_down_ = true;
    for (std::size_t i = 0; i < clients_.size(); ++i) {
      drv::LinkConditions clean;
      clean.latency_us = up_links_[i].latency_us;
      up_links_[i] = down_links_[i] = clean;
      h_->net().set_link(clients_[i]->address, server_->address, clean);
      h_->net().set_link(server_->address, clients_[i]->address, clean);
    }
    outages_.clear();
    // A silently closed connection leaves the other side retransmitting into the void. The
    // timeout check runs when a retransmission timer expires and the RTO doubles per attempt
    // (uncapped, as in libenet), so the last expiration before timeout_maximum can come up to
    // timeout_maximum later: the remote is told within about twice timeout_maximum.
    // A disconnect_later drains its queue first, and ENet's throttle can sit at 0 on a steady
    // link (one MTU per round trip; see the report of seed 1 round 105): up to ~1 MB queued
    // then takes minutes of simulated time, which cost little real time.
    const std::uint64_t patience =
        (2 * std::uint64_t{server_cfg_.timeout_maximum_ms} + 600000) * kMs;
    const bool ended = h_->run_until(
        [&] {
          for (const auto& c : conns_) {
            if (!c->client.finished()) return false;
            if (c->server.up && !c->server.finished()) return false;
          }
          return server_->core->peer_count() == 0;
        },
        patience);
    if (!ended)
      fail("connections still open " + std::to_string(patience / kSec) +
           " s after the wind-down began");
    h_->before_step = nullptr;
    h_->after_step = nullptr;
    final_checks();

    stats.sim_seconds = static_cast<double>(h_->now()) / 1e6;
    stats.busy_steps = h_->busy_steps();
    stats.connections = conns_.size();
    for (const auto& c : conns_) {
      stats.delivered += c->at_client->total() + c->at_server->total();
      for (const Side* s : {&c->client, &c->server}) {
        if (s->end != End::none) ++stats.ends[end_name(s->end)];
        if (s->reason == DisconnectReason::timeout) ++stats.timeouts;
      }
    }
    if (!quiet_ || violations_ != 0) h_->print_summary();
    conns_.clear();
    h_.reset();
  }
  const std::size_t live_after = Packet::thread_live_bytes();
  if (live_after != live_before) {
    ++violations_;
    std::printf("[soak] VIOLATION round %" PRIu64
                ": %zu packet bytes alive after the round (%zu before)\n",
                round_, live_after, live_before);
  }
  return violations_;
}

int usage() {
  std::fprintf(stderr, "usage: sim_soak [--seconds N] [--seed S] [--round R] [--quiet]\n");
  return 2;
}

}  // namespace
}  // namespace tern::simtest

int main(int argc, char** argv) {
  using namespace tern::simtest;
  double seconds = 20;
  std::uint64_t seed = seed_from_env(0x50A4u);
  long long only_round = -1;
  bool quiet = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", name);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seconds") {
      seconds = std::strtod(value("--seconds"), nullptr);
    } else if (a == "--seed") {
      seed = std::strtoull(value("--seed"), nullptr, 0);
    } else if (a == "--round") {
      only_round = std::strtoll(value("--round"), nullptr, 0);
    } else if (a == "--quiet") {
      quiet = true;
    } else {
      return usage();
    }
  }
  std::printf("[soak] seed=%" PRIu64 " seconds=%.0f%s\n", seed, seconds,
              only_round >= 0 ? (" round=" + std::to_string(only_round)).c_str() : "");
  std::fflush(stdout);

  // The wall clock only decides how many rounds to run; each round is a function of its seed.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds));
  std::uint64_t rounds = 0;
  std::uint64_t failed = 0;
  for (std::uint64_t r = only_round >= 0 ? static_cast<std::uint64_t>(only_round) : 0;; ++r) {
    RoundStats st;
    const std::uint64_t v = Round(seed, r, quiet).run(st);
    ++rounds;
    std::string ends;
    for (const auto& [name, n] : st.ends) ends += " " + name + "=" + std::to_string(n);
    std::printf("[soak] round %" PRIu64 ": %.1f s simulated, %" PRIu64 " connections, %" PRIu64
                " messages, %" PRIu64 " timeouts, busy_steps=%" PRIu64 ", ends:%s -> %s\n",
                r, st.sim_seconds, st.connections, st.delivered, st.timeouts, st.busy_steps,
                ends.c_str(), v == 0 ? "ok" : "VIOLATIONS");
    if (v != 0) {
      ++failed;
      std::printf("[soak] replay: sim_soak --seed %" PRIu64 " --round %" PRIu64 "\n", seed, r);
    }
    std::fflush(stdout);
    if (only_round >= 0 || std::chrono::steady_clock::now() >= deadline) break;
  }
  std::printf("[soak] %" PRIu64 " round(s), %" PRIu64 " with violations (seed=%" PRIu64 ")\n",
              rounds, failed, seed);
  return failed == 0 ? 0 : 1;
}
