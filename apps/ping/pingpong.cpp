// tern-ping --connect: ping-pong over one connection, one ping outstanding, on a one-shard
// client group. The shard thread does the whole exchange (connect, ping, check, time); the
// main thread only starts it, feeds it a 10 ms tick for loss detection and waits.
#include "runtime.hpp"

#include "common/latency.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace tern::ping {

namespace {

constexpr std::uint64_t kSeqBytes = 8;
constexpr std::uint64_t kResendAfterNs = 200'000'000;
constexpr auto kTick = std::chrono::milliseconds(10);
constexpr auto kGoodbyeGrace = std::chrono::seconds(2);
constexpr std::uint64_t kPreallocatedSamples = std::uint64_t{1} << 22;

enum Status : int { running, finished, failed };

// Everything the exchange needs; owned by the shard thread while `status` is running, then
// handed to main with a release store.
struct PingRun {
  explicit PingRun(const PingConfig& c) : config(c) {}

  const PingConfig& config;
  tern::PeerHandle peer;
  bool connected = false;
  bool waiting = false;  // a ping is outstanding
  std::uint64_t seq = 0;
  std::uint64_t sent_ns = 0;
  std::uint64_t done = 0;
  std::uint64_t lost = 0;
  std::vector<double> samples;
  std::string error;
  std::atomic<bool> connected_flag{false};
  std::atomic<int> status{running};

  std::uint64_t total() const { return config.warmup + config.count; }
  void fail(std::string why) {
    error = std::move(why);
    waiting = false;
    status.store(failed, std::memory_order_release);
  }
};

// The first 8 bytes carry the sequence number (little endian); the rest is a pattern derived
// from it, so a corrupted or mismatched echo is caught, not just a wrong header.
std::byte pattern_byte(std::uint64_t seq, std::size_t i) {
  return static_cast<std::byte>((seq * 131 + i * 7) & 0xff);
}

void send_ping(rt::Shard& shard, PingRun& run) {
  tern::Packet ping = tern::Packet::allocate(run.config.size);
  const auto bytes = ping.mutable_bytes();
  ++run.seq;
  app::store_le<std::uint64_t>(bytes, 0, run.seq);
  for (std::size_t i = kSeqBytes; i < bytes.size(); ++i) bytes[i] = pattern_byte(run.seq, i);
  run.sent_ns = now_ns();
  const tern::SendResult r =
      shard.send(run.peer, run.config.channel, run.config.delivery, std::move(ping));
  if (r != tern::SendResult::ok) {
    return run.fail(std::string("send failed: ") + tern::to_string(r));
  }
  run.waiting = true;
}

void on_echo(rt::Shard& shard, PingRun& run, std::span<const std::byte> echo) {
  const std::uint64_t at = now_ns();
  if (!run.waiting || echo.size() < kSeqBytes || app::load_le<std::uint64_t>(echo, 0) != run.seq)
    return;  // stale
  bool same = echo.size() == run.config.size;
  for (std::size_t i = kSeqBytes; same && i < echo.size(); ++i) {
    same = echo[i] == pattern_byte(run.seq, i);
  }
  if (!same) {
    return run.fail("echo of ping " + std::to_string(run.seq) + " differs from the ping");
  }
  run.waiting = false;
  if (run.done >= run.config.warmup) {
    run.samples.push_back(static_cast<double>(at - run.sent_ns) / 1000.0);
  }
  if (++run.done >= run.total()) {
    run.status.store(finished, std::memory_order_release);
    return;
  }
  send_ping(shard, run);
}

void on_event(rt::Shard& shard, PingRun& run, tern::Event& ev) {
  if (run.status.load(std::memory_order_relaxed) != running || ev.peer != run.peer) return;
  switch (ev.type) {
    case tern::EventType::connect:
      run.connected = true;
      run.connected_flag.store(true, std::memory_order_release);
      send_ping(shard, run);
      break;
    case tern::EventType::receive: on_echo(shard, run, ev.payload()); break;
    case tern::EventType::disconnect:
      if (run.connected) {
        run.fail(std::string("server went away (") + tern::to_string(ev.reason) + ") after " +
                 std::to_string(run.done) + " pings");
      } else {
        run.fail("connecting to " + run.config.server.to_string() + " failed (" +
                 tern::to_string(ev.reason) + ")");
      }
      break;
    case tern::EventType::none:
    case tern::EventType::receipt:               // never asked for here
    case tern::EventType::block_refused: break;  // no block sent here
  }
}

// Unreliable and unsequenced pings can vanish: after 200 ms the ping counts as lost and the
// next one (with a new number, so a late echo is ignored) goes out.
void on_tick(rt::Shard& shard, PingRun& run) {
  if (run.status.load(std::memory_order_relaxed) != running || !run.waiting) return;
  if (tern::is_reliable(run.config.delivery)) return;
  if (now_ns() - run.sent_ns < kResendAfterNs) return;
  if (run.done >= run.config.warmup) ++run.lost;
  run.waiting = false;
  send_ping(shard, run);
}

}  // namespace

int run_ping(const PingConfig& config) {
  DriverSetup setup;  // before the group: the drivers close before the port does
  std::string setup_error;
  if (!setup.open(config.runtime, setup_error)) {
    std::fprintf(stderr, "tern-ping: %s\n", setup_error.c_str());
    return kExitFailure;
  }
  rt::ShardGroup group(group_options(config.runtime, client_bind(config.server, config.runtime),
                                     false, 1, std::uint32_t{config.channel} + 1));
  PingRun run(config);
  run.samples.reserve(std::min<std::uint64_t>(config.count, kPreallocatedSamples));
  group.set_event_handler([&run](rt::Shard& shard, tern::Event& ev) { on_event(shard, run, ev); });
  std::string error;
  if (!group.start(error)) {
    std::fprintf(stderr, "tern-ping: cannot open a socket: %s\n", error.c_str());
    return kExitFailure;
  }
  group.post(0, [&run](rt::Shard& shard) {
    run.peer = connect_peer(shard, run.config.runtime, run.config.server,
                            std::size_t{run.config.channel} + 1, 0);
    if (!run.peer.valid()) {
      run.fail("cannot start connecting to " + run.config.server.to_string());
    }
  });

  const auto connect_deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config.timeout_ms);
  int status = running;
  while ((status = run.status.load(std::memory_order_acquire)) == running) {
    if (!run.connected_flag.load(std::memory_order_acquire) &&
        std::chrono::steady_clock::now() >= connect_deadline) {
      group.stop(std::chrono::milliseconds(0));  // joins: `run` is main's from here on
      std::fprintf(stderr, "tern-ping: no answer from %s within %" PRIu64 " ms\n",
                   config.server.to_string().c_str(), config.timeout_ms);
      return kExitFailure;
    }
    std::this_thread::sleep_for(kTick);
    group.post(0, [&run](rt::Shard& shard) { on_tick(shard, run); });
  }
  if (status == failed) {
    group.stop(std::chrono::milliseconds(0));
    std::fprintf(stderr, "tern-ping: %s\n", run.error.c_str());
    return kExitFailure;
  }

  const tern::app::LatencySummary s = tern::app::summarize(run.samples);
  std::string mtu;
  if (config.runtime.path_mtu) {
    // Read on the shard's thread, which owns the connection.
    // Read on the shard's thread, which owns the connection, once the search is over (10 s
    // at most: a probe waits at most 2 s, and a search takes a dozen).
    std::atomic<std::uint32_t> found{0};
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (found.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) {
      group.post(0, [&run, &found](rt::Shard& shard) {
        tern::PeerStats st;
        if (!shard.peer_stats(run.peer, st)) {
          found.store(1, std::memory_order_release);
        } else if (!st.path_mtu_searching) {
          found.store(st.mtu, std::memory_order_release);
        }
      });
      std::this_thread::sleep_for(kTick);
    }
    group.stop(kGoodbyeGrace);  // joins: nothing posted is still running
    mtu = " mtu=" + std::to_string(found.load(std::memory_order_acquire));
  }
  std::printf("rtt_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f max=%.1f count=%zu lost=%" PRIu64
              " delivery=%s size=%zu%s\n",
              s.p50, s.p90, s.p99, s.p999, s.max, s.count, run.lost,
              tern::to_string(config.delivery), config.size, mtu.c_str());
  std::fflush(stdout);
  // Graceful goodbye; the result is already out, so a server that vanished meanwhile is not
  // an error any more.
  group.stop(kGoodbyeGrace);
  return kExitOk;
}

}  // namespace tern::ping
