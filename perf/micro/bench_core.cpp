// HostCore microbenchmarks on simulated time: acknowledgement processing and reassembly.
//
// Both capture real traffic once, then replay it into fresh cores in the timed loop. Cores are
// deterministic (fixed config, seed and times), so a fresh core built the same way is in the
// same state as the one the capture came from and accepts the replayed datagrams the same way.
#include "host_core.hpp"
#include "secure/secure.hpp"
#include "wire.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;

using Bytes = std::vector<std::byte>;

const Endpoint kClientEp = Endpoint::v4(0x0A000001, 40001);
const Endpoint kServerEp = Endpoint::v4(0x0A000002, 7777);
constexpr std::uint64_t kStartUs = 1'000'000;

std::vector<OutDatagram>& out_batch() {
  static std::vector<OutDatagram> batch(64);
  return batch;
}

// Flushes `core` completely, returning copies of what it wrote.
std::vector<Bytes> flush_all(HostCore& core, std::uint64_t now_us) {
  std::vector<Bytes> out;
  auto& batch = out_batch();
  for (;;) {
    const std::size_t n = core.flush(now_us, batch);
    for (std::size_t i = 0; i < n; ++i)
      out.emplace_back(batch[i].view().begin(), batch[i].view().end());
    if (n < batch.size()) return out;
  }
}

void drain(HostCore& core) {
  Event ev;
  while (core.poll_event(ev)) {
  }
}

// A client and a server that completed the handshake at fixed times.
struct ConnectedPair {
  HostCore client{HostConfig{}};
  HostCore server{HostConfig{}};
  PeerHandle to_server;
  std::uint64_t now_us = kStartUs;

  bool connect() {
    to_server = client.connect(now_us, kServerEp, 2, 0);
    for (int round = 0; round < 10; ++round) {
      now_us += 1000;
      for (const Bytes& dg : flush_all(client, now_us)) server.on_datagram(now_us, kClientEp, dg);
      for (const Bytes& dg : flush_all(server, now_us)) client.on_datagram(now_us, kServerEp, dg);
      drain(client);
      drain(server);
    }
    return client.peer_state(to_server) == PeerState::connected;
  }
};

// ---- deep queues -------------------------------------------------------------------------

// Queueing small reliable messages (congestion control's express lane, as a relay's copies
// are) behind a backlog of `depth` messages not yet sent: the cost per message must not grow
// with the depth (issue 26, "deep queues stay cheap").
void BM_QueueBehindBacklog(benchmark::State& state) {
  const auto depth = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t kQueued = 1000;
  const Bytes payload(64, std::byte{0x5a});
  for (auto _ : state) {
    state.PauseTiming();
    auto pair = std::make_unique<ConnectedPair>();
    PeerStats stats;
    if (!pair->connect() || !pair->client.peer_stats(pair->to_server, stats) ||
        !stats.congestion_control) {
      state.SkipWithError("no connection with congestion control");
      return;
    }
    for (std::size_t i = 0; i < depth; ++i) {
      pair->client.send(pair->to_server, 0, Delivery::reliable, payload);
    }
    state.ResumeTiming();
    for (std::size_t i = 0; i < kQueued; ++i) {
      if (pair->client.send(pair->to_server, 0, Delivery::reliable, payload) != SendResult::ok) {
        state.SkipWithError("a send was refused");
        return;
      }
    }
    state.PauseTiming();
    pair.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kQueued));
}
BENCHMARK(BM_QueueBehindBacklog)->Arg(0)->Arg(10'000)->Arg(100'000);

// ---- acknowledgements -------------------------------------------------------------------

// A connected client with `n` small reliable messages sent and unacknowledged; the server's
// acknowledgement datagrams for them are returned through `acks` when asked for.
std::unique_ptr<ConnectedPair> in_flight(std::size_t n, std::vector<Bytes>* acks) {
  auto pair = std::make_unique<ConnectedPair>();
  if (!pair->connect()) return nullptr;
  const Bytes payload(16, std::byte{0x77});
  for (std::size_t i = 0; i < n; ++i) {
    if (pair->client.send(pair->to_server, 0, Delivery::reliable, payload) != SendResult::ok)
      return nullptr;
  }
  pair->now_us += 1000;
  const std::vector<Bytes> data = flush_all(pair->client, pair->now_us);
  if (acks != nullptr) {
    for (const Bytes& dg : data) pair->server.on_datagram(pair->now_us, kClientEp, dg);
    *acks = flush_all(pair->server, pair->now_us);
  }
  return pair;
}

void BM_AckProcessing(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<Bytes> acks;
  {
    auto probe = in_flight(n, &acks);
    PeerStats before;
    if (probe == nullptr || !probe->client.peer_stats(probe->to_server, before) ||
        before.reliable_in_transit == 0) {
      state.SkipWithError("could not put the messages in flight");
      return;
    }
    // The replayed acknowledgements must clear everything on a fresh replica.
    auto replica = in_flight(n, nullptr);
    for (const Bytes& dg : acks) replica->client.on_datagram(replica->now_us + 1000, kServerEp, dg);
    PeerStats after;
    replica->client.peer_stats(replica->to_server, after);
    if (after.reliable_in_transit != 0) {
      state.SkipWithError("replayed acknowledgements did not clear the in-flight data");
      return;
    }
  }
  for (auto _ : state) {
    state.PauseTiming();
    auto pair = in_flight(n, nullptr);
    const std::uint64_t at = pair->now_us + 1000;
    state.ResumeTiming();
    for (const Bytes& dg : acks) pair->client.on_datagram(at, kServerEp, dg);
    benchmark::DoNotOptimize(pair->client.counters().commands_in);
    state.PauseTiming();
    pair.reset();  // destruction is not acknowledgement work
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
  // An inverted rate is CPU seconds per ack; the console shows it with an SI prefix ("25ns").
  state.counters["time_per_ack"] =
      benchmark::Counter(static_cast<double>(state.iterations() * n),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["ack_datagrams"] = static_cast<double>(acks.size());
}
BENCHMARK(BM_AckProcessing)->Arg(64)->Arg(1024)->Unit(benchmark::kMicrosecond);

// ---- reassembly -------------------------------------------------------------------------

// What the receiving server did during a capture, so a fresh server can be put through
// exactly the same inputs: datagrams from the client and its own flushes (whose output, the
// acknowledgements the sender needed to continue, is discarded on replay).
struct Step {
  std::uint64_t now_us;
  bool flush;
  Bytes datagram;
};

struct Capture {
  std::vector<Step> handshake;  // up to and including the server's connect
  std::vector<Step> transfer;   // the fragmented message
  std::size_t message_size = 0;
  bool ok = false;
};

Capture capture_transfer(std::size_t size) {
  Capture cap;
  cap.message_size = size;
  ConnectedPair pair;
  std::vector<Step>* log = &cap.handshake;
  bool delivered = false;
  auto round = [&] {
    pair.now_us += 1000;
    for (Bytes& dg : flush_all(pair.client, pair.now_us)) {
      pair.server.on_datagram(pair.now_us, kClientEp, dg);
      log->push_back({pair.now_us, false, std::move(dg)});
    }
    log->push_back({pair.now_us, true, {}});
    for (const Bytes& dg : flush_all(pair.server, pair.now_us))
      pair.client.on_datagram(pair.now_us, kServerEp, dg);
    drain(pair.client);
    Event ev;
    while (pair.server.poll_event(ev)) {
      if (ev.type == EventType::receive && ev.packet.size() == size) delivered = true;
    }
  };
  pair.to_server = pair.client.connect(pair.now_us, kServerEp, 2, 0);
  for (int i = 0; i < 10; ++i) round();
  if (pair.client.peer_state(pair.to_server) != PeerState::connected) return cap;

  log = &cap.transfer;
  Bytes message(size);
  for (std::size_t i = 0; i < size; ++i) message[i] = static_cast<std::byte>(i * 7);
  if (pair.client.send(pair.to_server, 1, Delivery::reliable, message) != SendResult::ok)
    return cap;
  for (int i = 0; i < 100'000 && !delivered; ++i) round();
  cap.ok = delivered;
  return cap;
}

// Replays `steps` into `server`; returns the size of the message delivered, if any.
std::size_t replay(HostCore& server, const std::vector<Step>& steps) {
  auto& batch = out_batch();
  std::size_t got = 0;
  for (const Step& s : steps) {
    if (s.flush) {
      while (server.flush(s.now_us, batch) == batch.size()) {
      }
      Event ev;
      while (server.poll_event(ev)) {
        if (ev.type == EventType::receive) got = ev.packet.size();
      }
    } else {
      server.on_datagram(s.now_us, kClientEp, s.datagram);
    }
  }
  return got;
}

void BM_Reassembly(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const Capture cap = capture_transfer(size);
  if (!cap.ok) {
    state.SkipWithError("capture did not deliver the message");
    return;
  }
  std::size_t fragments = 0;
  for (const Step& s : cap.transfer) fragments += s.flush ? 0 : 1;
  for (auto _ : state) {
    state.PauseTiming();
    auto server = std::make_unique<HostCore>(HostConfig{});
    replay(*server, cap.handshake);
    state.ResumeTiming();
    const std::size_t got = replay(*server, cap.transfer);
    state.PauseTiming();
    if (got != size) {
      state.SkipWithError("replay did not deliver the message");
      break;
    }
    server.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * size));
  state.counters["datagrams"] = static_cast<double>(fragments);
}
BENCHMARK(BM_Reassembly)->Arg(64 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

// ---- relay fan-out ----------------------------------------------------------------------

// The relay benchmark's protocol work without a network: one server core relaying every
// reliable message to the other members of its room (as tern-relay does) and one client core
// holding all the connections (as tern-loadgen does). Each iteration is one tick: every client
// sends one 64-byte message, then the cores trade datagrams until nothing is left to say.
// Each side's CPU time is taken separately, so `server_ns_per_copy` and `client_ns_per_copy`
// are the protocol's share of the relay's and the load generator's cost per relayed copy.
struct FanoutRig {
  static constexpr std::uint64_t kTickUs = 2000;
  std::size_t clients;
  std::size_t room_size;
  HostConfig config;
  std::unique_ptr<HostCore> client;
  std::unique_ptr<HostCore> server;
  std::vector<PeerHandle> to_server;          // client side, by client index
  std::vector<PeerHandle> server_peer;        // server side, by client index (its connect data)
  std::vector<std::uint32_t> client_of_slot;  // server peer slot -> client index
  std::uint64_t now_us = kStartUs;
  std::uint64_t server_ns = 0, client_ns = 0, copies = 0;
  // Client-to-server datagrams held back this many ticks (set once connected): every copy
  // then waits that long for its acknowledgement in the server's queues, as behind clients
  // that answer late or a relay that has fallen behind, so the queues outgrow the caches.
  std::size_t hold_ticks = 0;
  std::deque<std::vector<Bytes>> held;

  // Secure sessions (BM_RelayFanoutSecure): every client connects with a token of its own, the
  // server requires one, and the client lends payloads as tern-loadgen does.
  enum class Cipher { none, aes, chacha };
  Cipher cipher = Cipher::none;
  static constexpr std::uint64_t kUnixNow = 1'800'000'000;
  sec::TokenKey token_key{1, {}};

  FanoutRig(std::size_t n, std::size_t room, bool fixed_throttle, bool lend = false,
            Cipher c = Cipher::none)
      : clients(n), room_size(room), cipher(c) {
    config.peer_limit = n + 16;
    // With acknowledgements held, the RTT jumps once connected and ENet's throttle would
    // narrow the send window until its next epoch, capping what is in flight: the queues
    // would stay short, and copies would miss their tick.
    if (fixed_throttle) config.throttle_deceleration = 0;
    HostConfig client_config = config;
    client_config.lend_payloads = lend;
    client_config.secure_aes = c == Cipher::aes;
    HostConfig server_config = config;
    if (c != Cipher::none) {
      token_key.key.fill(0x42);
      server_config.security = Security::required;
      server_config.verify_before_peer = true;
      server_config.token_keys.keys[0] = token_key;
      server_config.token_keys.count = 1;
      server_config.secure_addresses[0] = kServerEp;
      server_config.secure_address_count = 1;
      server_config.secure_aes = c == Cipher::aes;
    }
    client = std::make_unique<HostCore>(client_config);
    server = std::make_unique<HostCore>(server_config);
    server->set_unix_time(now_us, kUnixNow);
  }

  PeerHandle connect_one(std::size_t i) {
    if (cipher == Cipher::none) {
      return client->connect(now_us, kServerEp, 1, static_cast<std::uint32_t>(i));
    }
    sec::TokenContents c;
    c.client_id = i;
    c.timeout_s = 30;
    c.server_count = 1;
    c.servers[0] = kServerEp;
    c.client_to_server.fill(static_cast<std::uint8_t>(i));
    c.server_to_client.fill(static_cast<std::uint8_t>(i + 1));
    std::array<std::uint8_t, sec::kTokenBytes> token{};
    sec::mint_token(token_key, kUnixNow, kUnixNow + 3600, c, token);
    std::array<std::uint8_t, 16> salt{};
    std::memcpy(salt.data(), &i, sizeof i);
    return client->connect_secure(now_us, kServerEp, 1, static_cast<std::uint32_t>(i), token,
                                  c.client_to_server, c.server_to_client, salt);
  }

  static std::uint64_t ns() {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }

  // Datagrams in flight each way, as the other side's receive queue.
  std::vector<Bytes> to_client_q, to_server_q;

  // One run-to-completion iteration of a side, as a runtime shard does it: up to 8 bursts of
  // 64 datagrams, each burst's events handled before the next, then one flush. Returns
  // whether it did anything.
  bool iterate(HostCore& core, const Endpoint& from, std::vector<Bytes>& inbox,
               std::vector<Bytes>& outbox, bool is_server, std::size_t& received,
               std::uint64_t& spent) {
    const std::uint64_t a = ns();
    const std::size_t take = std::min<std::size_t>(inbox.size(), 8 * 64);
    bool any = take != 0;
    for (std::size_t burst = 0; burst == 0 || burst < take; burst += 64) {
      for (std::size_t i = burst; i < std::min(take, burst + 64); ++i)
        core.on_datagram(now_us, from, inbox[i]);
      Event ev;
      while (core.poll_event(ev)) {
        any = true;
        if (!is_server) {
          received += ev.type == EventType::receive ? 1 : 0;
        } else if (ev.type == EventType::connect) {
          if (ev.peer.slot >= client_of_slot.size()) client_of_slot.resize(ev.peer.slot + 1);
          client_of_slot[ev.peer.slot] = ev.data;
          server_peer[ev.data] = ev.peer;
        } else if (ev.type == EventType::receive) {
          const std::size_t sender = client_of_slot[ev.peer.slot];
          const std::size_t first = sender - sender % room_size;
          const std::size_t members = std::min(room_size, clients - first);
          server->send_many(std::span<const PeerHandle>(server_peer.data() + first, members), 0,
                            Delivery::reliable, ev.packet, server_peer[sender]);
        }
      }
    }
    auto& batch = out_batch();
    std::uint64_t copying = 0;
    for (;;) {
      const std::size_t n = core.flush(now_us, batch);
      const std::uint64_t c0 = ns();
      for (std::size_t i = 0; i < n; ++i)
        outbox.emplace_back(batch[i].view().begin(), batch[i].view().end());
      copying += ns() - c0;
      any = any || n != 0;
      if (n < batch.size()) break;
    }
    spent += ns() - a - copying;  // the rig's copying is the network's work, not the core's
    inbox.erase(inbox.begin(), inbox.begin() + static_cast<std::ptrdiff_t>(take));
    return any;
  }

  // The server's iterations once warmed up, out of line so that `micro/misses.py` can count
  // their cache misses alone (callgrind's --toggle-collect).
  bool measuring = false;
  [[gnu::noinline]] bool serve_measured(std::size_t& received, std::uint64_t& spent) {
    return iterate(*server, kClientEp, to_server_q, to_client_q, true, received, spent);
  }
  bool serve(std::size_t& received, std::uint64_t& spent) {
    if (measuring) return serve_measured(received, spent);
    return iterate(*server, kClientEp, to_server_q, to_client_q, true, received, spent);
  }

  // Alternates the two sides until both are quiet; returns the copies the clients received.
  std::size_t exchange(bool timed) {
    std::size_t received = 0;
    std::uint64_t s = 0, c = 0;
    for (int round = 0; round < 1000; ++round) {
      const bool server_busy = serve(received, s);
      const bool client_busy =
          iterate(*client, kServerEp, to_client_q, hold_ticks == 0 ? to_server_q : held.back(),
                  false, received, c);
      if (!server_busy && !client_busy) break;
    }
    if (timed) {
      server_ns += s;
      client_ns += c;
    }
    return received;
  }

  bool connect() {
    to_server.resize(clients);
    server_peer.resize(clients);
    for (std::size_t i = 0; i < clients; ++i) {
      to_server[i] = connect_one(i);
      if (!to_server[i].valid()) return false;
    }
    for (int i = 0; i < 20; ++i) {
      now_us += 1000;
      exchange(false);
    }
    for (std::size_t i = 0; i < clients; ++i) {
      if (client->peer_state(to_server[i]) != PeerState::connected || !server_peer[i].valid())
        return false;
      if ((cipher != Cipher::none) != client->peer_secure(to_server[i])) return false;
      if ((cipher == Cipher::aes) != client->peer_secure_aes(to_server[i])) return false;
    }
    return true;
  }

  // One tick; returns the copies delivered.
  std::size_t tick() {
    now_us += kTickUs;
    if (hold_ticks != 0) {
      held.emplace_back();
      if (held.size() > hold_ticks) {
        for (Bytes& d : held.front()) to_server_q.push_back(std::move(d));
        held.pop_front();
      }
    }
    static const Bytes payload(64, std::byte{0x5a});
    const std::uint64_t a = ns();
    for (std::size_t i = 0; i < clients; ++i) {
      client->send(to_server[i], 0, Delivery::reliable, payload);
    }
    client_ns += ns() - a;
    const std::size_t got = exchange(true);
    copies += got;
    return got;
  }
};

void relay_fanout(benchmark::State& state, FanoutRig& rig) {
  const auto clients = static_cast<std::size_t>(state.range(0));
  const auto room = static_cast<std::size_t>(state.range(1));
  const auto hold = static_cast<std::size_t>(state.range(2));
  if (!rig.connect()) {
    state.SkipWithError(rig.cipher == FanoutRig::Cipher::aes && !sec::aes_available()
                            ? "no AES-NI"
                            : "clients did not connect");
    return;
  }
  rig.hold_ticks = hold;
  const std::size_t expected =
      clients / room * room * (room - 1) + (clients % room) * (clients % room - 1);
  // Warm the pools. Held acknowledgements first fire retransmission timeouts sized for the
  // handshake's RTT; the estimates and the congestion window settle within 20 round trips.
  for (std::size_t i = 0; i < 5 + hold * 20; ++i) rig.tick();
  rig.server_ns = rig.client_ns = rig.copies = 0;
  const std::uint64_t warmup_retransmits = rig.server->counters().retransmits;
  const HostCounters server_before = rig.server->counters();
  rig.measuring = true;
  for (auto _ : state) {
    if (rig.tick() != expected) {
      state.SkipWithError("a tick lost copies");
      break;
    }
  }
  const double copies = static_cast<double>(rig.copies);
  state.SetItemsProcessed(static_cast<std::int64_t>(rig.copies));
  state.counters["server_ns_per_copy"] = static_cast<double>(rig.server_ns) / copies;
  state.counters["client_ns_per_copy"] = static_cast<double>(rig.client_ns) / copies;
  state.counters["retransmits"] =
      static_cast<double>(rig.server->counters().retransmits - warmup_retransmits);
  state.counters["copies_per_datagram"] = static_cast<double>(rig.server->counters().messages_out) /
                                          static_cast<double>(rig.server->counters().datagrams_out);
  if (rig.cipher != FanoutRig::Cipher::none) {
    // The AEAD calls a relay pays per copy: seals of its datagrams out, opens of the
    // messages and acknowledgements in.
    const HostCounters& after = rig.server->counters();
    state.counters["server_seals_per_copy"] =
        static_cast<double>(after.sealed_out - server_before.sealed_out) / copies;
    state.counters["server_opens_per_copy"] =
        static_cast<double>(after.opened_in - server_before.opened_in) / copies;
  }
}

void BM_RelayFanout(benchmark::State& state) {
  FanoutRig rig(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)),
                state.range(2) != 0);
  relay_fanout(state, rig);
}
// Arguments: clients, room size, ticks the acknowledgements are held (0: none, each tick's
// copies are acknowledged within it; 16: about 112 copies per client in flight).
BENCHMARK(BM_RelayFanout)->Args({1000, 8, 0})->Args({1000, 8, 16})->Unit(benchmark::kMicrosecond);
// The same with secure sessions (issue 33), the client lending payloads as tern-loadgen does:
// the last argument is the cipher (0: none, the plain baseline with lending; 1: AES-256-GCM;
// 2: ChaCha20-Poly1305), so each side's ns per copy encrypted is read against plain's.
void BM_RelayFanoutSecure(benchmark::State& state) {
  FanoutRig rig(static_cast<std::size_t>(state.range(0)), static_cast<std::size_t>(state.range(1)),
                state.range(2) != 0, true, static_cast<FanoutRig::Cipher>(state.range(3)));
  if (rig.cipher != FanoutRig::Cipher::none && !sec::available()) {
    state.SkipWithError("built without libsodium");
    return;
  }
  relay_fanout(state, rig);
}
BENCHMARK(BM_RelayFanoutSecure)
    ->Args({1000, 8, 0, 0})
    ->Args({1000, 8, 0, 1})
    ->Args({1000, 8, 0, 2})
    ->Unit(benchmark::kMicrosecond);
// A fixed number of ticks, for counts that must repeat (micro/misses.py runs it under
// callgrind): TERN_FANOUT_TICKS=N adds BM_RelayFanout/.../iterations:N.
const bool fanout_fixed = [] {
  const char* ticks = std::getenv("TERN_FANOUT_TICKS");
  if (ticks == nullptr) return false;
  benchmark::RegisterBenchmark("BM_RelayFanout", BM_RelayFanout)
      ->Args({1000, 8, 0})
      ->Args({1000, 8, 16})
      ->Iterations(std::atoi(ticks))
      ->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace

// ---- unsequenced echo ----------------------------------------------------------------------

// The protocol's share of the memif echo (perf/dpdk_bench.py (d)) without a network: a client
// core holding 1000 connections keeps one 16-byte unsequenced message in flight on each, and a
// server core hands every message straight back on its connection, as tern-ping --flood and
// --serve do. Datagrams cross in bursts of 32 (what each side's shard takes per pass on memif),
// each burst's events handled before the next, and every side flushes after each burst.
// `server_ns_per_echo` is the server's on_datagram + events + send + flush per datagram (not
// the rig's copying of datagrams in and out);
// `client_ns_per_echo` the same for the client, which also sends the next message.
struct EchoRig {
  static constexpr std::size_t kBurst = 32;
  std::size_t peers;
  HostConfig server_config;
  HostConfig client_config;
  std::unique_ptr<HostCore> client;
  std::unique_ptr<HostCore> server;
  std::vector<PeerHandle> to_server;
  std::vector<std::uint32_t> index_of_slot;  // client's peer slot -> connection index
  std::uint64_t now_us = kStartUs;
  std::uint64_t echoes = 0;
  std::deque<Bytes> to_client_q, to_server_q;
  bool traffic = false;

  explicit EchoRig(std::size_t n) : peers(n) {
    server_config.peer_limit = client_config.peer_limit = n + 16;
    client_config.lend_payloads = true;  // as tern-ping's clients
    client = std::make_unique<HostCore>(client_config);
    server = std::make_unique<HostCore>(server_config);
  }

  void send_one(std::size_t i) {
    static const Bytes payload(16, std::byte{0x3c});
    client->send(to_server[i], 0, Delivery::unsequenced, payload);
  }

  // One shard pass on `core`: up to one burst from `inbox`, its events, then a full flush into
  // `outbox`. Returns whether it did anything; adds the core's time (not the rig's copying).
  bool pass(HostCore& core, const Endpoint& from, std::deque<Bytes>& inbox,
            std::deque<Bytes>& outbox, bool is_server, std::uint64_t& spent) {
    const std::uint64_t a = FanoutRig::ns();
    const std::size_t take = std::min(inbox.size(), kBurst);
    bool any = take != 0;
    for (std::size_t i = 0; i < take; ++i) core.on_datagram(now_us, from, inbox[i]);
    Event ev;
    while (core.poll_event(ev)) {
      any = true;
      if (ev.type != EventType::receive) continue;
      if (is_server) {
        server->send(ev.peer, ev.channel, ev.delivery, std::move(ev.packet));
      } else {
        ++echoes;
        if (traffic) send_one(index_of_slot[ev.peer.slot]);
      }
    }
    auto& batch = out_batch();
    std::uint64_t copying = 0;
    for (;;) {
      const std::size_t n = core.flush(now_us, batch);
      const std::uint64_t c0 = FanoutRig::ns();
      for (std::size_t i = 0; i < n; ++i)
        outbox.emplace_back(batch[i].view().begin(), batch[i].view().end());
      copying += FanoutRig::ns() - c0;
      any = any || n != 0;
      if (n < batch.size()) break;
    }
    spent += FanoutRig::ns() - a - copying;
    // The rig's own bookkeeping (a free() per datagram) stays out of the core's time.
    inbox.erase(inbox.begin(), inbox.begin() + static_cast<std::ptrdiff_t>(take));
    return any;
  }

  // Alternates the sides until both are quiet.
  void exchange(std::uint64_t& s, std::uint64_t& c) {
    for (;;) {
      const bool server_busy = pass(*server, kClientEp, to_server_q, to_client_q, true, s);
      const bool client_busy = pass(*client, kServerEp, to_client_q, to_server_q, false, c);
      if (!server_busy && !client_busy) return;
    }
  }

  bool connect() {
    to_server.resize(peers);
    for (std::size_t i = 0; i < peers; ++i) {
      to_server[i] = client->connect(now_us, kServerEp, 1, static_cast<std::uint32_t>(i));
      if (!to_server[i].valid()) return false;
      if (to_server[i].slot >= index_of_slot.size()) index_of_slot.resize(to_server[i].slot + 1);
      index_of_slot[to_server[i].slot] = static_cast<std::uint32_t>(i);
    }
    std::uint64_t s = 0, c = 0;
    for (int i = 0; i < 20; ++i) {
      now_us += 1000;
      exchange(s, c);
    }
    for (std::size_t i = 0; i < peers; ++i) {
      if (client->peer_state(to_server[i]) != PeerState::connected) return false;
    }
    return true;
  }
};

void BM_EchoUnsequenced(benchmark::State& state) {
  EchoRig rig(static_cast<std::size_t>(state.range(0)));
  if (!rig.connect()) {
    state.SkipWithError("clients did not connect");
    return;
  }
  rig.traffic = true;
  std::uint64_t s = 0, c = 0;
  const std::uint64_t a = FanoutRig::ns();
  for (std::size_t i = 0; i < rig.peers; ++i) rig.send_one(i);
  c += FanoutRig::ns() - a;
  // Warm the pools: a few thousand echoes round the loop.
  for (int i = 0; i < 200; ++i) {
    rig.pass(*rig.client, kServerEp, rig.to_client_q, rig.to_server_q, false, c);
    rig.pass(*rig.server, kClientEp, rig.to_server_q, rig.to_client_q, true, s);
  }
  rig.echoes = 0;
  s = c = 0;
  for (auto _ : state) {
    // A round: each side takes one burst, as two shards polling each other do.
    rig.pass(*rig.client, kServerEp, rig.to_client_q, rig.to_server_q, false, c);
    rig.pass(*rig.server, kClientEp, rig.to_server_q, rig.to_client_q, true, s);
  }
  if (rig.echoes == 0) {
    state.SkipWithError("nothing echoed");
    return;
  }
  const double echoes = static_cast<double>(rig.echoes);
  state.SetItemsProcessed(static_cast<std::int64_t>(rig.echoes));
  state.counters["server_ns_per_echo"] = static_cast<double>(s) / echoes;
  state.counters["client_ns_per_echo"] = static_cast<double>(c) / echoes;
  state.counters["in_flight"] =
      static_cast<double>(rig.to_client_q.size() + rig.to_server_q.size());
}
// Argument: connections, one message in flight on each.
BENCHMARK(BM_EchoUnsequenced)->Arg(1000);
