// tern-ping --connect --flood: many connections from a client shard group, each keeping a
// window of messages in flight (throughput under load) or sending at a paced rate (game-tick
// load, or idle connections with --rate 0).
//
// Peer g lives on shard g % shards. Each shard owns its peers, their in-flight slots and a
// latency histogram outright: the event handler and the posted tasks run on the shard thread,
// so nothing on the per-message path is locked or allocated (payloads come from the shard
// thread's Packet pool). The main thread connects everyone, then drives the phases and posts
// a tick to every shard (1 ms paced, 10 ms window mode) for pacing and loss detection.
#include "runtime.hpp"

#include "common/histogram.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tern::ping {

namespace {

using namespace std::chrono_literals;

constexpr std::size_t kHeaderBytes = 16;  // send time (ns), then sequence number
constexpr std::uint64_t kLostAfterNs = 200'000'000;
constexpr std::uint64_t kScanEveryNs = 10'000'000;
constexpr auto kPacedTick = 1ms;  // rate mode: how often main looks for the end (shards send)
constexpr auto kWindowTick = 10ms;
constexpr auto kConnectPoll = 1ms;
constexpr std::uint64_t kReliableDrainNs = 2'000'000'000;
constexpr std::uint64_t kUnreliableDrainNs = kLostAfterNs + 20'000'000;
constexpr auto kGoodbyeGrace = 2s;
constexpr std::uint32_t kNoPeer = std::numeric_limits<std::uint32_t>::max();

// Single-writer counter that other threads may read while it changes: a plain load and
// store, no read-modify-write on the hot path.
template <class T>
void bump(std::atomic<T>& a, T by = 1) {
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

struct Slot {
  std::uint64_t seq = 0;
  std::uint64_t sent_ns = 0;
  bool busy = false;
};

struct FloodPeer {
  tern::PeerHandle handle;
  std::uint32_t global = 0;  // 0..P-1
  bool connected = false;
  std::uint64_t next_seq = 0;
  std::uint64_t offset_ns = 0;  // paced: this peer's phase in the send period
};

struct alignas(64) FloodShard {
  // Shard thread only (main reads them after the threads are joined).
  std::vector<FloodPeer> peers;
  std::vector<Slot> slots;             // window mode: peers.size() * window
  std::vector<std::uint32_t> by_slot;  // PeerHandle::slot -> index into peers
  tern::app::LatencyHistogram histogram;
  bool traffic = false;
  std::uint64_t last_scan_ns = 0;
  std::size_t cursor = 0;  // paced: next peer to send, in `cycle`
  std::uint64_t cycle = 0;
  std::uint64_t send_failed = 0;
  std::uint64_t bad_echoes = 0;
  // Read by main while the shard runs.
  std::atomic<std::uint64_t> sent{0};      // sent within the measured period
  std::atomic<std::uint64_t> received{0};  // echoes of those
  std::atomic<std::uint32_t> connected{0};
  std::atomic<std::uint32_t> dropped{0};  // connections lost before the goodbye
  std::atomic<std::uint32_t> connect_failed{0};
  std::atomic<std::uint64_t> last_connect_ns{0};
  std::atomic<std::uint8_t> last_reason{0};
};

struct Flood {
  explicit Flood(const FloodConfig& c) : config(c) {}
  const FloodConfig& config;
  bool lossy = false;           // unreliable/unsequenced: 200 ms without echo means lost
  std::uint64_t period_ns = 0;  // paced
  // Set by main before the start task is posted (the post publishes them).
  std::uint64_t traffic_ns = 0;  // warm-up begins
  std::uint64_t start_ns = 0;    // measured period [start_ns, end_ns)
  std::uint64_t end_ns = 0;
  std::atomic<bool> finishing{false};
  std::vector<std::unique_ptr<FloodShard>> shards;
};

std::uint32_t find_peer(const FloodShard& fs, tern::PeerHandle h) {
  if (h.slot >= fs.by_slot.size()) return kNoPeer;
  const std::uint32_t k = fs.by_slot[h.slot];
  return k != kNoPeer && fs.peers[k].handle == h ? k : kNoPeer;
}

bool send_message(const Flood& f, FloodShard& fs, rt::Shard& shard, FloodPeer& peer,
                  std::uint64_t seq, std::uint64_t now) {
  tern::Packet packet = tern::Packet::allocate(f.config.size);
  const auto bytes = packet.mutable_bytes();
  app::store_le<std::uint64_t>(bytes, 0, now);
  app::store_le<std::uint64_t>(bytes, 8, seq);
  // A libc call even for nothing: the flood's usual 16-byte messages have no padding.
  if (bytes.size() > kHeaderBytes) {
    std::memset(bytes.data() + kHeaderBytes, 0, bytes.size() - kHeaderBytes);
  }
  if (shard.send(peer.handle, f.config.channel, f.config.delivery, std::move(packet)) !=
      tern::SendResult::ok) {
    ++fs.send_failed;
    return false;
  }
  if (now >= f.start_ns && now < f.end_ns) bump(fs.sent);
  return true;
}

// Window mode: (re)fills slot j of peer k with a new message.
void send_slot(const Flood& f, FloodShard& fs, rt::Shard& shard, std::uint32_t k, std::size_t j,
               std::uint64_t now) {
  FloodPeer& peer = fs.peers[k];
  Slot& slot = fs.slots[k * f.config.window + j];
  const std::uint64_t seq = peer.next_seq++ * f.config.window + j;
  slot.busy = send_message(f, fs, shard, peer, seq, now);
  slot.seq = seq;
  slot.sent_ns = now;
}

void fill_window(const Flood& f, FloodShard& fs, rt::Shard& shard, std::uint32_t k,
                 std::uint64_t now) {
  for (std::size_t j = 0; j < f.config.window; ++j) {
    if (!fs.slots[k * f.config.window + j].busy) send_slot(f, fs, shard, k, j, now);
  }
}

void on_echo(const Flood& f, FloodShard& fs, rt::Shard& shard, std::uint32_t k,
             std::span<const std::byte> bytes) {
  const std::uint64_t now = shard.delivery_time_ns();
  if (bytes.size() != f.config.size) {
    ++fs.bad_echoes;
    return;
  }
  const std::uint64_t sent_ns = app::load_le<std::uint64_t>(bytes, 0);
  const std::uint64_t seq = app::load_le<std::uint64_t>(bytes, 8);
  const bool windowed = !f.config.paced;
  std::size_t j = 0;
  if (windowed) {
    // A 64-bit division costs ~40 cycles per echo; one message in flight is the common case.
    j = f.config.window == 1 ? 0 : static_cast<std::size_t>(seq % f.config.window);
    Slot& slot = fs.slots[k * f.config.window + j];
    if (!slot.busy || slot.seq != seq || slot.sent_ns != sent_ns) return;  // replaced as lost
    slot.busy = false;
  }
  const std::uint64_t rtt = now - sent_ns;
  if (sent_ns >= f.start_ns && sent_ns < f.end_ns && !(f.lossy && rtt > kLostAfterNs)) {
    bump(fs.received);
    fs.histogram.record(rtt);
  }
  if (windowed && now < f.end_ns) send_slot(f, fs, shard, k, j, now);
}

void on_event(Flood& f, rt::Shard& shard, tern::Event& ev) {
  FloodShard& fs = *f.shards[shard.index()];
  const std::uint32_t k = find_peer(fs, ev.peer);
  if (k == kNoPeer) return;
  FloodPeer& peer = fs.peers[k];
  switch (ev.type) {
    case tern::EventType::receive: on_echo(f, fs, shard, k, ev.payload()); break;
    case tern::EventType::connect:
      peer.connected = true;
      bump(fs.connected);
      fs.last_connect_ns.store(now_ns(), std::memory_order_relaxed);
      if (fs.traffic && !f.config.paced) fill_window(f, fs, shard, k, now_ns());
      break;
    case tern::EventType::disconnect:
      peer.connected = false;
      if (!f.config.paced) {
        for (std::size_t j = 0; j < f.config.window; ++j) {
          fs.slots[k * f.config.window + j].busy = false;
        }
      }
      if (!f.finishing.load(std::memory_order_acquire)) {
        bump(fs.dropped);
        fs.last_reason.store(static_cast<std::uint8_t>(ev.reason), std::memory_order_relaxed);
      }
      break;
    case tern::EventType::none:
    case tern::EventType::receipt:               // never asked for here
    case tern::EventType::block_refused: break;  // no block sent here
  }
}

void connect_all(Flood& f, rt::Shard& shard) {
  FloodShard& fs = *f.shards[shard.index()];
  for (std::uint32_t k = 0; k < fs.peers.size(); ++k) {
    FloodPeer& peer = fs.peers[k];
    peer.handle = connect_peer(shard, f.config.runtime, f.config.server,
                               std::size_t{f.config.channel} + 1, peer.global);
    if (!peer.handle.valid()) {
      bump(fs.connect_failed);
      continue;
    }
    if (peer.handle.slot >= fs.by_slot.size()) fs.by_slot.resize(peer.handle.slot + 1, kNoPeer);
    fs.by_slot[peer.handle.slot] = k;
  }
}

void start_traffic(const Flood& f, rt::Shard& shard) {
  FloodShard& fs = *f.shards[shard.index()];
  fs.traffic = true;
  const std::uint64_t now = now_ns();
  fs.last_scan_ns = now;
  if (f.config.paced) return;  // the ticks send
  for (std::uint32_t k = 0; k < fs.peers.size(); ++k) {
    if (fs.peers[k].connected) fill_window(f, fs, shard, k, now);
  }
}

// Rate mode, on every iteration of the shard's loop (its tick handler): peers send in a fixed
// cyclic order, each at its own phase; sends that fell due since the last call go out now (a
// late call catches up, nothing is skipped). Returns when the next send is due (now_ns time),
// or kNoSend. The shard sleeps until then, so sends leave at their phases, a few at a time,
// as a game's clients would send them, not gathered into one batch per main-thread tick.
constexpr std::uint64_t kNoSend = ~std::uint64_t{0};
std::uint64_t send_due(const Flood& f, rt::Shard& shard) {
  FloodShard& fs = *f.shards[shard.index()];
  if (!fs.traffic || fs.peers.empty() || f.config.rate_hz == 0) return kNoSend;
  const std::uint64_t now = now_ns();
  for (;;) {
    FloodPeer& peer = fs.peers[fs.cursor];
    const std::uint64_t due = f.traffic_ns + fs.cycle * f.period_ns + peer.offset_ns;
    if (due >= f.end_ns) return kNoSend;
    if (due > now) return due;
    if (peer.connected) send_message(f, fs, shard, peer, peer.next_seq++, now);
    if (++fs.cursor == fs.peers.size()) {
      fs.cursor = 0;
      ++fs.cycle;
    }
  }
}

// Window mode: unreliable slots unanswered for kLostAfterNs count as lost and are refilled.
void tick(const Flood& f, rt::Shard& shard) {
  FloodShard& fs = *f.shards[shard.index()];
  if (!fs.traffic || fs.peers.empty()) return;
  const std::uint64_t now = now_ns();
  if (!f.lossy || now - fs.last_scan_ns < kScanEveryNs) return;
  fs.last_scan_ns = now;
  for (std::uint32_t k = 0; k < fs.peers.size(); ++k) {
    if (!fs.peers[k].connected) continue;
    for (std::size_t j = 0; j < f.config.window; ++j) {
      Slot& slot = fs.slots[k * f.config.window + j];
      if (!slot.busy || now - slot.sent_ns < kLostAfterNs) continue;
      slot.busy = false;  // lost: counted as sent - received; a late echo no longer matches
      if (now < f.end_ns) send_slot(f, fs, shard, k, j, now);
    }
  }
}

template <class F>
std::uint64_t sum(const Flood& f, F field) {
  std::uint64_t total = 0;
  for (const auto& fs : f.shards) total += field(*fs);
  return total;
}

void post_all(rt::ShardGroup& group, Flood& f, void (*task)(const Flood&, rt::Shard&)) {
  for (std::size_t i = 0; i < group.size(); ++i) {
    group.post(i, [&f, task](rt::Shard& shard) { task(f, shard); });
  }
}

const char* idle_name(rt::IdlePolicy p) { return p == rt::IdlePolicy::busy_poll ? "busy" : "wait"; }

bool write_json(const std::string& path, const std::string& body) {
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) return false;
  const bool ok = std::fputs(body.c_str(), out) >= 0;
  return std::fclose(out) == 0 && ok;
}

}  // namespace

int run_flood(const FloodConfig& config) {
  const std::size_t nshards =
      std::max<std::size_t>(1, std::min(config.runtime.shards, config.peers));
  const std::size_t per_shard = (config.peers + nshards - 1) / nshards;
  RuntimeConfig runtime = config.runtime;
  runtime.shards = nshards;
  DriverSetup setup;  // before the group: the drivers close before the port does
  std::string setup_error;
  if (!setup.open(runtime, setup_error)) {
    std::fprintf(stderr, "tern-ping: %s\n", setup_error.c_str());
    return kExitFailure;
  }
  rt::ShardGroup group(group_options(runtime, client_bind(config.server, runtime), false, per_shard,
                                     std::uint32_t{config.channel} + 1));

  Flood f(config);
  f.lossy = !tern::is_reliable(config.delivery);
  if (config.paced && config.rate_hz > 0)
    f.period_ns = std::max<std::uint64_t>(1, 1'000'000'000 / config.rate_hz);
  for (std::size_t i = 0; i < nshards; ++i) {
    auto fs = std::make_unique<FloodShard>();
    fs->peers.reserve(per_shard);
    fs->by_slot.assign(per_shard, kNoPeer);
    f.shards.push_back(std::move(fs));
  }
  for (std::size_t g = 0; g < config.peers; ++g) {
    FloodPeer peer;
    peer.global = static_cast<std::uint32_t>(g);
    // Phases spread evenly over one period across all peers, whatever shard they are on.
    peer.offset_ns =
        static_cast<std::uint64_t>(static_cast<unsigned __int128>(g) * f.period_ns / config.peers);
    f.shards[g % nshards]->peers.push_back(peer);
  }
  if (!config.paced) {
    for (auto& fs : f.shards) fs->slots.assign(fs->peers.size() * config.window, Slot{});
  }

  group.set_event_handler([&f](rt::Shard& shard, tern::Event& ev) { on_event(f, shard, ev); });
  if (config.paced) {
    group.set_tick_handler([&f](rt::Shard& shard) -> std::uint64_t {
      const std::uint64_t due = send_due(f, shard);
      if (due == kNoSend) return ~std::uint64_t{0};
      const std::uint64_t now = now_ns();
      return shard.now_us() + (due > now ? (due - now + 999) / 1000 : 0);
    });
  }
  std::string error;
  if (!group.start(error)) {
    std::fprintf(stderr, "tern-ping: cannot open the client sockets: %s\n", error.c_str());
    return kExitFailure;
  }

  // ---- connect everyone at once ----
  const std::uint64_t connect_ns = now_ns();
  for (std::size_t i = 0; i < nshards; ++i) {
    group.post(i, [&f](rt::Shard& shard) { connect_all(f, shard); });
  }
  const std::uint64_t connect_deadline = connect_ns + config.timeout_ms * 1'000'000;
  const std::string server = config.server.to_string();
  std::uint64_t connected = 0;
  for (;;) {
    connected =
        sum(f, [](const FloodShard& s) { return s.connected.load(std::memory_order_relaxed); });
    if (connected == config.peers) break;
    const std::uint64_t failed =
        sum(f, [](const FloodShard& s) { return s.dropped.load(std::memory_order_relaxed); }) +
        sum(f,
            [](const FloodShard& s) { return s.connect_failed.load(std::memory_order_relaxed); });
    if (failed > 0 || now_ns() >= connect_deadline) {
      f.finishing.store(true, std::memory_order_release);
      group.stop(std::chrono::milliseconds(0));
      std::uint8_t reason = 0;
      for (const auto& fs : f.shards) reason = std::max(reason, fs->last_reason.load());
      if (failed > 0) {
        std::fprintf(stderr,
                     "tern-ping: connected %" PRIu64 "/%zu peers to %s; %" PRIu64
                     " failed (last reason: %s)\n",
                     connected, config.peers, server.c_str(), failed,
                     tern::to_string(static_cast<tern::DisconnectReason>(reason)));
      } else {
        std::fprintf(
            stderr, "tern-ping: connected only %" PRIu64 "/%zu peers to %s within %" PRIu64 " ms\n",
            connected, config.peers, server.c_str(), config.timeout_ms);
      }
      return kExitFailure;
    }
    std::this_thread::sleep_for(kConnectPoll);
  }
  std::uint64_t last_connect = connect_ns;
  for (const auto& fs : f.shards) {
    last_connect = std::max(last_connect, fs->last_connect_ns.load(std::memory_order_relaxed));
  }
  const double connect_ms = static_cast<double>(last_connect - connect_ns) / 1e6;
  std::printf("connected %" PRIu64 "/%zu in %.1f ms\n", connected, config.peers, connect_ms);
  std::fflush(stdout);

  // ---- warm-up, measured period, drain ----
  f.traffic_ns = now_ns();
  f.start_ns = f.traffic_ns + config.warmup_ms * 1'000'000;
  f.end_ns = f.start_ns + config.duration_ms * 1'000'000;
  post_all(group, f, start_traffic);
  const auto tick_every = config.paced ? kPacedTick : kWindowTick;
  const std::uint64_t drain_ns = f.lossy ? kUnreliableDrainNs : kReliableDrainNs;
  auto next_tick = std::chrono::steady_clock::now();
  for (;;) {
    const std::uint64_t now = now_ns();
    const std::uint64_t lost_peers =
        sum(f, [](const FloodShard& s) { return s.dropped.load(std::memory_order_relaxed); });
    if (lost_peers >= connected) break;  // the server went away: nothing more to measure
    if (now >= f.end_ns) {
      const std::uint64_t sent =
          sum(f, [](const FloodShard& s) { return s.sent.load(std::memory_order_relaxed); });
      const std::uint64_t received =
          sum(f, [](const FloodShard& s) { return s.received.load(std::memory_order_relaxed); });
      if (received >= sent || now >= f.end_ns + drain_ns) break;
    }
    if (!config.paced) post_all(group, f, tick);
    next_tick += tick_every;
    std::this_thread::sleep_until(next_tick);
  }

  // ---- goodbye; from here the shards' state is main's ----
  f.finishing.store(true, std::memory_order_release);
  group.stop(kGoodbyeGrace);

  tern::app::LatencyHistogram histogram;
  std::uint64_t sent = 0, received = 0, dropped = 0, send_failed = 0, bad_echoes = 0;
  std::uint8_t reason = 0;
  for (const auto& fs : f.shards) {
    histogram.merge(fs->histogram);
    sent += fs->sent.load();
    received += fs->received.load();
    dropped += fs->dropped.load();
    send_failed += fs->send_failed;
    bad_echoes += fs->bad_echoes;
    reason = std::max(reason, fs->last_reason.load());
  }
  const std::uint64_t lost = sent > received ? sent - received : 0;
  const double duration_s = static_cast<double>(config.duration_ms) / 1000.0;
  const double msgs_per_s = static_cast<double>(received) / duration_s;
  const tern::app::LatencySummary s = histogram.summary(1e-3);
  const std::size_t window = config.paced ? 0 : config.window;
  const std::uint64_t rate = config.paced ? config.rate_hz : 0;
  const std::uint64_t still_connected = connected - std::min<std::uint64_t>(connected, dropped);
  const char* delivery = tern::to_string(config.delivery);

  std::printf("flood peers=%zu connected=%" PRIu64 " connect_ms=%.1f window=%zu rate=%" PRIu64
              " delivery=%s size=%zu duration_s=%g sent=%" PRIu64 " received=%" PRIu64
              " lost=%" PRIu64
              " msgs_per_s=%.0f rtt_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f "
              "max=%.1f\n",
              config.peers, still_connected, connect_ms, window, rate, delivery, config.size,
              duration_s, sent, received, lost, msgs_per_s, s.p50, s.p90, s.p99, s.p999, s.max);
  std::fflush(stdout);

  int status = kExitOk;
  if (!config.json_path.empty()) {
    char body[1024];
    std::snprintf(
        body, sizeof body,
        "{\"peers\": %zu, \"connected\": %" PRIu64
        ", \"connect_ms\": %.1f, \"window\": %zu, "
        "\"rate\": %" PRIu64
        ", \"delivery\": \"%s\", \"size\": %zu, \"duration_s\": %g, "
        "\"warmup_s\": %g, \"sent\": %" PRIu64 ", \"received\": %" PRIu64 ", \"lost\": %" PRIu64
        ", \"msgs_per_s\": %.0f, \"rtt_us\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
        "\"p99.9\": %.1f, \"max\": %.1f, \"count\": %zu}, \"shards\": %zu, \"driver\": \"%s\", "
        "\"idle\": \"%s\", \"server\": \"%s\"}\n",
        config.peers, still_connected, connect_ms, window, rate, delivery, config.size, duration_s,
        static_cast<double>(config.warmup_ms) / 1000.0, sent, received, lost, msgs_per_s, s.p50,
        s.p90, s.p99, s.p999, s.max, s.count, nshards, group.driver_name(0).c_str(),
        idle_name(config.runtime.idle), server.c_str());
    if (!write_json(config.json_path, body)) {
      std::fprintf(stderr, "tern-ping: cannot write %s\n", config.json_path.c_str());
      status = kExitFailure;
    }
  }
  if (send_failed > 0 || bad_echoes > 0) {
    std::fprintf(stderr, "tern-ping: %" PRIu64 " sends refused, %" PRIu64 " malformed echoes\n",
                 send_failed, bad_echoes);
  }
  if (dropped > 0) {
    std::fprintf(stderr,
                 "tern-ping: %" PRIu64
                 " of %zu connections were lost during the run "
                 "(last reason: %s)\n",
                 dropped, config.peers,
                 tern::to_string(static_cast<tern::DisconnectReason>(reason)));
    status = kExitFailure;
  }
  return status;
}

}  // namespace tern::ping
