// tern-ping --protocol kcp: the echo server and the ping-pong client on tern::Host's KCP
// personality (one thread, the socket driver). KCP has no connection handshake and no
// goodbye: the client's session is its conv (fixed per run), the server's connect event comes
// with the first ping, and sessions end by idle timeout.
#include "runtime.hpp"

#include "common/latency.hpp"
#include "common/signals.hpp"

#include <tern/host.hpp>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace tern::ping {

namespace {

constexpr std::uint32_t kConv = 0x7069'6e67;  // "ping"
constexpr auto kSignalPoll = std::chrono::milliseconds(20);

tern::HostOptions kcp_options(std::size_t sessions) {
  tern::HostOptions o;
  o.personality = tern::Personality::kcp;
  o.peer_limit = sessions;
  return o;
}

}  // namespace

int run_kcp_server(const ServeConfig& config) {
  std::string error;
  auto host = tern::Host::listen(kcp_options(config.peers), config.bind, error);
  if (host == nullptr) {
    std::fprintf(stderr, "tern-ping: cannot listen on %s: %s\n", config.bind.to_string().c_str(),
                 error.c_str());
    return kExitFailure;
  }
  tern::app::install_stop_handler();
  std::printf("serving %s protocol=kcp\n", host->local_endpoint().to_string().c_str());
  std::fflush(stdout);
  std::uint64_t echo_failed = 0;
  tern::Event ev;
  while (!tern::app::stop_requested()) {
    if (!host->service(ev, kSignalPoll)) continue;
    if (ev.type == tern::EventType::receive &&
        host->send(ev.peer, 0, tern::Delivery::reliable, ev.payload()) != tern::SendResult::ok) {
      ++echo_failed;
    }
  }
  const tern::HostStats s = host->stats();
  std::printf("served signal=%d protocol=kcp connects=%" PRIu64 " disconnects=%" PRIu64
              " timeouts=%" PRIu64 " messages_in=%" PRIu64 " messages_out=%" PRIu64
              " echo_failed=%" PRIu64 " datagrams_in=%" PRIu64 " datagrams_out=%" PRIu64
              " retransmits=%" PRIu64 " dropped=%" PRIu64 "\n",
              tern::app::stop_signal(), s.connects, s.disconnects, s.timeouts, s.messages_in,
              s.messages_out, echo_failed, s.datagrams_in, s.datagrams_out, s.retransmits,
              s.dropped);
  std::fflush(stdout);
  return kExitOk;
}

int run_kcp_ping(const PingConfig& config) {
  std::string error;
  const tern::Endpoint bind =
      *tern::Endpoint::parse(config.server.is_v4() ? "0.0.0.0:0" : "[::]:0");
  auto host = tern::Host::listen(kcp_options(1), bind, error);
  if (host == nullptr) {
    std::fprintf(stderr, "tern-ping: cannot open a socket: %s\n", error.c_str());
    return kExitFailure;
  }
  const tern::PeerHandle peer = host->connect(config.server, 1, kConv);
  if (!peer.valid()) {
    std::fprintf(stderr, "tern-ping: cannot open a KCP session\n");
    return kExitFailure;
  }
  const std::uint64_t total = config.warmup + config.count;
  std::vector<double> samples;
  samples.reserve(config.count);
  std::vector<std::byte> ping(config.size);
  for (std::uint64_t seq = 0; seq < total; ++seq) {
    std::memcpy(ping.data(), &seq, sizeof seq);
    for (std::size_t i = sizeof seq; i < ping.size(); ++i)
      ping[i] = static_cast<std::byte>((seq * 131 + i * 7) & 0xff);
    const auto sent = std::chrono::steady_clock::now();
    if (host->send(peer, 0, tern::Delivery::reliable, ping) != tern::SendResult::ok) {
      std::fprintf(stderr, "tern-ping: the KCP session ended\n");
      return kExitFailure;
    }
    // KCP is reliable: an echo that does not come is a dead server, not a lost ping.
    const auto give_up = sent + std::chrono::milliseconds(config.timeout_ms);
    bool echoed = false;
    std::size_t got = 0;
    tern::Event ev;
    while (!echoed) {
      if (std::chrono::steady_clock::now() > give_up) {
        std::fprintf(stderr, "tern-ping: no answer from %s within %" PRIu64 " ms\n",
                     config.server.to_string().c_str(), config.timeout_ms);
        return kExitFailure;
      }
      if (!host->service(ev, std::chrono::milliseconds(10))) continue;
      if (ev.type == tern::EventType::disconnect) {
        std::fprintf(stderr, "tern-ping: the KCP session timed out\n");
        return kExitFailure;
      }
      if (ev.type != tern::EventType::receive) continue;
      // A kcp-go server echoes what it reads as its own writes, split at its MSS: the echo
      // is the ping's bytes, in one message or several.
      const auto p = ev.payload();
      if (got + p.size() > ping.size() || std::memcmp(p.data(), ping.data() + got, p.size()) != 0) {
        std::fprintf(stderr, "tern-ping: echo %" PRIu64 " differs from the ping\n", seq);
        return kExitFailure;
      }
      got += p.size();
      echoed = got == ping.size();
    }
    if (seq >= config.warmup) {
      samples.push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent)
              .count());
    }
  }
  const tern::app::LatencySummary s = tern::app::summarize(samples);
  std::printf(
      "rtt_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f max=%.1f count=%zu lost=0"
      " delivery=reliable size=%zu protocol=kcp\n",
      s.p50, s.p90, s.p99, s.p999, s.max, s.count, config.size);
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace tern::ping
