// tern-ping: ping-pong latency over one Tern/ENet connection (DESIGN §8).
//
//   tern-ping --serve 0.0.0.0:7777                 echo every message back to its sender
//   tern-ping --connect 127.0.0.1:7777 --count 1000  one ping in flight, RTT percentiles
//
// The server echoes with the message's own channel and delivery, so one server serves every
// client mode. The client keeps exactly one ping outstanding: the measured time is a full
// round trip through both hosts' service loops, not a pipelined throughput figure.
#include <tern/host.hpp>

#include "common/cli.hpp"
#include "common/latency.hpp"
#include "common/signals.hpp"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: tern-ping --serve HOST:PORT [--peers N] [--channels N] [--checksum]\n"
    "       tern-ping --connect HOST:PORT [--count N] [--size B]\n"
    "                 [--reliable | --unreliable | --unsequenced] [--channel C]\n"
    "                 [--warmup N] [--checksum] [--timeout-ms T]\n"
    "       tern-ping --help\n"
    "\n"
    "Ping-pong latency over one ENet-compatible connection.\n"
    "\n"
    "server (--serve): echoes every message to its sender on the same channel with the same\n"
    "delivery, until SIGINT/SIGTERM; then disconnects all peers and prints a summary line.\n"
    "  --peers N        simultaneous connections accepted (default 4096)\n"
    "  --channels N     channels accepted per connection, 1..255 (default 255)\n"
    "\n"
    "client (--connect): one ping outstanding at a time; prints one line\n"
    "  rtt_us p50=X p90=X p99=X p99.9=X max=X count=N lost=N delivery=NAME size=B\n"
    "  --count N        measured pings (default 10000)\n"
    "  --size B         payload bytes, at least 8 (default 64)\n"
    "  --reliable       reliable delivery (default)\n"
    "  --unreliable     sequenced unreliable delivery; a ping unanswered after 200 ms is\n"
    "                   counted as lost and sent again\n"
    "  --unsequenced    unsequenced delivery; losses handled as for --unreliable\n"
    "  --channel C      channel 0..254 (default 0)\n"
    "  --warmup N       unmeasured pings first (default 100)\n"
    "  --timeout-ms T   give up connecting after T ms (default 5000)\n"
    "\n"
    "both:\n"
    "  --checksum       ENet CRC32 on every datagram (both sides must agree)\n"
    "\n"
    "HOST:PORT is 1.2.3.4:P, [::1]:P, localhost:P or *:P (server: any address, dual stack).\n"
    "exit status: 0 success, 1 cannot connect / server lost / I/O error, 2 bad command line\n";

constexpr tern::app::FlagSpec kFlags[] = {
    {"help", false},     {"serve", true},       {"connect", true},      {"peers", true},
    {"channels", true},  {"checksum", false},   {"count", true},        {"size", true},
    {"reliable", false}, {"unreliable", false}, {"unsequenced", false}, {"channel", true},
    {"warmup", true},    {"timeout-ms", true},
};
constexpr std::string_view kServeOnly[] = {"peers", "channels"};
constexpr std::string_view kConnectOnly[] = {"count",       "size",    "reliable", "unreliable",
                                             "unsequenced", "channel", "warmup",   "timeout-ms"};

// Pings stay well below the default 32 MiB message limit on both sides: a latency tool.
constexpr std::uint64_t kMaxSize = 16u << 20;
constexpr std::uint64_t kSeqBytes = 8;
constexpr auto kResendAfter = std::chrono::milliseconds(200);
constexpr auto kDisconnectGrace = std::chrono::seconds(2);
constexpr auto kServeSlice = std::chrono::milliseconds(100);
constexpr std::uint64_t kPreallocatedSamples = std::uint64_t{1} << 22;

struct ServeConfig {
  tern::Endpoint bind;
  std::size_t peers = 4096;
  std::uint32_t channels = 255;
  bool checksum = false;
};

struct ConnectConfig {
  tern::Endpoint server;
  std::uint64_t count = 10000;
  std::size_t size = 64;
  tern::Delivery delivery = tern::Delivery::reliable;
  std::uint8_t channel = 0;
  std::uint64_t warmup = 100;
  bool checksum = false;
  std::uint64_t timeout_ms = 5000;
};

struct Config {
  bool help = false;
  bool serve = false;
  ServeConfig serve_config;
  ConnectConfig connect_config;
};

// Reads "--name" as an unsigned integer into `out`; false with a reason when malformed.
template <class T>
bool read_uint(const tern::app::CommandLine& cl, std::string_view name, std::uint64_t min,
               std::uint64_t max, T& out, std::string& error) {
  const auto text = cl.value(name);
  if (!text) return true;
  const auto v = tern::app::parse_uint(*text, min, max);
  if (!v) {
    error = "--" + std::string(name) + " wants an integer in " + std::to_string(min) + ".." +
            std::to_string(max) + ", got '" + std::string(*text) + "'";
    return false;
  }
  out = static_cast<T>(*v);
  return true;
}

bool parse_config(int argc, const char* const* argv, Config& config, std::string& error) {
  tern::app::CommandLine cl;
  if (!cl.parse(argc, argv, kFlags, error)) return false;
  if (cl.has("help")) {
    config.help = true;
    return true;
  }
  const bool serve = cl.has("serve");
  const bool connect = cl.has("connect");
  if (serve == connect) {
    error = serve ? "--serve and --connect exclude each other" : "need --serve or --connect";
    return false;
  }
  config.serve = serve;
  using Names = std::span<const std::string_view>;
  const Names other_mode_flags = serve ? Names(kConnectOnly) : Names(kServeOnly);
  for (std::string_view f : other_mode_flags) {
    if (cl.has(f)) {
      error = "--" + std::string(f) + " does not apply to " + (serve ? "--serve" : "--connect");
      return false;
    }
  }
  const std::string_view address_text = *cl.value(serve ? "serve" : "connect");
  const auto address = tern::Endpoint::parse(address_text);
  if (!address) {
    error = "cannot parse address '" + std::string(address_text) + "' (want HOST:PORT)";
    return false;
  }

  if (serve) {
    ServeConfig& s = config.serve_config;
    s.bind = *address;
    s.checksum = cl.has("checksum");
    return read_uint(cl, "peers", 1, std::uint64_t{1} << 24, s.peers, error) &&
           read_uint(cl, "channels", 1, 255, s.channels, error);
  }

  ConnectConfig& c = config.connect_config;
  c.server = *address;
  if (c.server.port == 0 || c.server.is_unspecified()) {
    error = "--connect needs a concrete address and port, got '" + std::string(address_text) + "'";
    return false;
  }
  c.checksum = cl.has("checksum");
  const int deliveries = (cl.has("reliable") ? 1 : 0) + (cl.has("unreliable") ? 1 : 0) +
                         (cl.has("unsequenced") ? 1 : 0);
  if (deliveries > 1) {
    error = "choose one of --reliable, --unreliable, --unsequenced";
    return false;
  }
  if (cl.has("unreliable")) c.delivery = tern::Delivery::unreliable;
  if (cl.has("unsequenced")) c.delivery = tern::Delivery::unsequenced;
  return read_uint(cl, "count", 1, std::uint64_t{1} << 32, c.count, error) &&
         read_uint(cl, "size", kSeqBytes, kMaxSize, c.size, error) &&
         read_uint(cl, "channel", 0, 254, c.channel, error) &&
         read_uint(cl, "warmup", 0, std::uint64_t{1} << 32, c.warmup, error) &&
         read_uint(cl, "timeout-ms", 1, std::uint64_t{24} * 3600 * 1000, c.timeout_ms, error);
}

// ---- server ---------------------------------------------------------------------------------

int run_server(const ServeConfig& config) {
  tern::HostOptions options;
  options.peer_limit = config.peers;
  options.channel_limit = config.channels;
  options.checksum = config.checksum;
  std::string error;
  auto host = tern::Host::listen(options, config.bind, error);
  if (host == nullptr) {
    std::fprintf(stderr, "tern-ping: cannot listen on %s: %s\n", config.bind.to_string().c_str(),
                 error.c_str());
    return kExitFailure;
  }
  tern::app::install_stop_handler();
  // Tests and scripts bind port 0 and read the real port from this line.
  std::printf("serving %s\n", host->local_endpoint().to_string().c_str());
  std::fflush(stdout);

  // Keyed by slot so shutdown can reach every live connection; touched only on connect and
  // disconnect, never per message.
  std::unordered_map<std::uint32_t, tern::PeerHandle> peers;
  peers.reserve(std::min<std::size_t>(config.peers, 4096));
  std::uint64_t echo_failed = 0;
  tern::Event ev;
  while (!tern::app::stop_requested()) {
    if (!host->service(ev, kServeSlice)) continue;
    switch (ev.type) {
      case tern::EventType::receive:
        if (host->send(ev.peer, ev.channel, ev.delivery, std::move(ev.packet)) !=
            tern::SendResult::ok) {
          ++echo_failed;
        }
        break;
      case tern::EventType::connect: peers[ev.peer.slot] = ev.peer; break;
      case tern::EventType::disconnect: {
        const auto it = peers.find(ev.peer.slot);
        if (it != peers.end() && it->second == ev.peer) peers.erase(it);
        break;
      }
      case tern::EventType::none: break;
    }
  }

  // Tell every client at once rather than letting them time out; disconnect_now needs no
  // acknowledgement, which suits a process that is about to exit.
  for (const auto& [slot, peer] : peers) host->disconnect_now(peer, 0);
  host->flush();
  const tern::HostStats s = host->stats();
  std::printf("served signal=%d connects=%" PRIu64 " disconnects=%" PRIu64 " timeouts=%" PRIu64
              " messages_in=%" PRIu64 " messages_out=%" PRIu64 " echo_failed=%" PRIu64
              " datagrams_in=%" PRIu64 " datagrams_out=%" PRIu64 " bytes_in=%" PRIu64
              " bytes_out=%" PRIu64 " retransmits=%" PRIu64 " dropped=%" PRIu64
              " disconnected_at_exit=%zu\n",
              tern::app::stop_signal(), s.connects, s.disconnects, s.timeouts, s.messages_in,
              s.messages_out, echo_failed, s.datagrams_in, s.datagrams_out, s.bytes_in, s.bytes_out,
              s.retransmits, s.dropped, peers.size());
  std::fflush(stdout);
  return kExitOk;
}

// ---- client ---------------------------------------------------------------------------------

// The first 8 bytes carry the sequence number (little endian); the rest is a pattern derived
// from it, so a corrupted or mismatched echo is caught, not just a wrong header.
void fill_ping(std::vector<std::byte>& buf, std::uint64_t seq) {
  for (std::size_t i = 0; i < kSeqBytes; ++i) buf[i] = static_cast<std::byte>(seq >> (8 * i));
  for (std::size_t i = kSeqBytes; i < buf.size(); ++i) {
    buf[i] = static_cast<std::byte>((seq * 131 + i * 7) & 0xff);
  }
}

std::uint64_t read_seq(std::span<const std::byte> bytes) {
  std::uint64_t seq = 0;
  for (std::size_t i = 0; i < kSeqBytes; ++i) seq |= std::uint64_t(bytes[i]) << (8 * i);
  return seq;
}

std::chrono::microseconds until(SteadyTime deadline) {
  const auto left = deadline - std::chrono::steady_clock::now();
  return left.count() > 0 ? std::chrono::ceil<std::chrono::microseconds>(left)
                          : std::chrono::microseconds(0);
}

// Connects and waits for the handshake; an invalid handle when it fails (reason on stderr).
tern::PeerHandle wait_connected(tern::Host& host, const ConnectConfig& config) {
  const tern::PeerHandle peer = host.connect(config.server, std::size_t{config.channel} + 1, 0);
  if (!peer.valid()) {
    std::fprintf(stderr, "tern-ping: cannot start connecting to %s\n",
                 config.server.to_string().c_str());
    return {};
  }
  const SteadyTime deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(config.timeout_ms);
  tern::Event ev;
  while (std::chrono::steady_clock::now() < deadline) {
    if (!host.service(ev, until(deadline))) continue;
    if (ev.peer != peer) continue;
    if (ev.type == tern::EventType::connect) return peer;
    if (ev.type == tern::EventType::disconnect) {
      std::fprintf(stderr, "tern-ping: connecting to %s failed (%s)\n",
                   config.server.to_string().c_str(), tern::to_string(ev.reason));
      return {};
    }
  }
  host.reset(peer);
  std::fprintf(stderr, "tern-ping: no answer from %s within %" PRIu64 " ms\n",
               config.server.to_string().c_str(), config.timeout_ms);
  return {};
}

int run_client(const ConnectConfig& config) {
  tern::HostOptions options;
  options.peer_limit = 1;
  options.channel_limit = std::uint32_t{config.channel} + 1;
  options.checksum = config.checksum;
  const auto bind = tern::Endpoint::parse(config.server.is_v4() ? "0.0.0.0:0" : "[::]:0");
  std::string error;
  auto host = tern::Host::listen(options, *bind, error);
  if (host == nullptr) {
    std::fprintf(stderr, "tern-ping: cannot open a socket: %s\n", error.c_str());
    return kExitFailure;
  }
  const tern::PeerHandle peer = wait_connected(*host, config);
  if (!peer.valid()) return kExitFailure;

  const bool resend_lost = config.delivery != tern::Delivery::reliable;
  const std::uint64_t total = config.warmup + config.count;
  // Preallocated for ordinary runs; a huge --count grows the vector between pings (outside
  // the timed region) instead of reserving gigabytes up front.
  std::vector<double> samples;
  samples.reserve(std::min<std::uint64_t>(config.count, kPreallocatedSamples));
  std::vector<std::byte> ping(config.size);
  std::uint64_t seq = 0;
  std::uint64_t done = 0;
  std::uint64_t lost = 0;
  tern::Event ev;

  while (done < total) {
    fill_ping(ping, ++seq);
    const SteadyTime sent_at = std::chrono::steady_clock::now();
    const tern::SendResult r = host->send(peer, config.channel, config.delivery, ping);
    if (r != tern::SendResult::ok) {
      std::fprintf(stderr, "tern-ping: send failed: %s\n", tern::to_string(r));
      return kExitFailure;
    }
    host->flush();
    const SteadyTime resend_at = sent_at + kResendAfter;
    bool answered = false;
    while (!answered) {
      const auto slice = resend_lost ? until(resend_at) : std::chrono::microseconds(kServeSlice);
      if (!host->service(ev, slice)) {
        if (resend_lost && std::chrono::steady_clock::now() >= resend_at) {
          if (done >= config.warmup) ++lost;
          break;  // the next ping gets a new number, so a late echo of this one is ignored
        }
        continue;
      }
      if (ev.type == tern::EventType::disconnect && ev.peer == peer) {
        std::fprintf(stderr, "tern-ping: server went away (%s) after %" PRIu64 " pings\n",
                     tern::to_string(ev.reason), done);
        return kExitFailure;
      }
      if (ev.type != tern::EventType::receive || ev.peer != peer) continue;
      const auto echo = ev.packet.bytes();
      if (echo.size() < kSeqBytes || read_seq(echo) != seq) continue;  // stale echo
      if (echo.size() != ping.size() || std::memcmp(echo.data(), ping.data(), ping.size()) != 0) {
        std::fprintf(stderr, "tern-ping: echo of ping %" PRIu64 " differs from the ping\n", seq);
        return kExitFailure;
      }
      const auto rtt = std::chrono::steady_clock::now() - sent_at;
      if (done >= config.warmup) {
        samples.push_back(std::chrono::duration<double, std::micro>(rtt).count());
      }
      ++done;
      answered = true;
    }
  }

  const tern::app::LatencySummary s = tern::app::summarize(samples);
  std::printf("rtt_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f max=%.1f count=%zu lost=%" PRIu64
              " delivery=%s size=%zu\n",
              s.p50, s.p90, s.p99, s.p999, s.max, s.count, lost, tern::to_string(config.delivery),
              config.size);
  std::fflush(stdout);

  // Graceful goodbye; the result is already out, so a server that vanished meanwhile is not
  // an error any more.
  host->disconnect(peer, 0);
  const SteadyTime deadline = std::chrono::steady_clock::now() + kDisconnectGrace;
  while (std::chrono::steady_clock::now() < deadline) {
    if (host->service(ev, until(deadline)) && ev.type == tern::EventType::disconnect &&
        ev.peer == peer) {
      break;
    }
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  std::string error;
  if (!parse_config(argc, argv, config, error)) {
    std::fprintf(stderr, "tern-ping: %s\n%s", error.c_str(), kUsage);
    return kExitUsage;
  }
  if (config.help) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  return config.serve ? run_server(config.serve_config) : run_client(config.connect_config);
}
