// tern-relay: the ENet-compatible game relay on the sharded runtime (DESIGN §8).
//
//   tern-relay --config config/relay.toml
//   tern-relay --listen 0.0.0.0:7777 --shards 2 --driver uring --metrics 127.0.0.1:9100
//
// Flags override the file. SIGTERM or SIGINT drains: every peer is disconnected gracefully and
// given limits-free time up to shutdown.drain_timeout_ms, then the process exits 0.
#include "config.hpp"
#include "metrics.hpp"
#include "relay.hpp"

#include "common/cli.hpp"

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <string>
#include <string_view>

namespace {

using namespace tern;
using namespace tern::relay;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: tern-relay [--config FILE] [--listen HOST:PORT] [--shards N]\n"
    "                  [--driver socket|uring] [--idle wait|busy] [--pin on|off]\n"
    "                  [--metrics HOST:PORT] [--peers N] [--max-room-size N]\n"
    "                  [--broadcast-rooms A-B[,C-D...]] [--rules FILE]\n"
    "       tern-relay --help\n"
    "\n"
    "ENet-compatible game relay. A client joins the room named by its connect data (0 = no\n"
    "room); every message a member sends is forwarded to every other member of its room on the\n"
    "same channel with the same delivery. In broadcast rooms only the first member's messages\n"
    "fan out; the others' go to the first member only.\n"
    "\n"
    "  --config FILE        TOML configuration (see config/relay.toml); flags override it\n"
    "  --listen HOST:PORT   UDP address (default 0.0.0.0:7777; *:PORT = dual stack)\n"
    "  --shards N           poller threads on the port (default: one per CPU)\n"
    "  --driver D           socket (recvmmsg/sendmmsg) or uring (io_uring; falls back)\n"
    "  --idle I             wait (sleep until traffic or a timer) or busy (poll)\n"
    "  --pin on|off         pin shard i to CPU i (default on)\n"
    "  --metrics HOST:PORT  serve Prometheus text at http://HOST:PORT/metrics\n"
    "  --peers N            relay-wide connection limit\n"
    "  --max-room-size N    members per room\n"
    "  --broadcast-rooms R  room ranges that are one-to-many\n"
    "  --rules FILE         payload filter rules (see config/filter.rules); SIGHUP reloads them\n"
    "\n"
    "Prints 'relaying HOST:PORT' once ready. SIGTERM/SIGINT: graceful drain, summary, exit 0.\n"
    "SIGHUP: reload the filter rules; a file that fails keeps the running rules (one line on\n"
    "stderr either way).\n"
    "exit status: 0 clean stop, 1 cannot start, 2 bad command line or configuration\n";

constexpr app::FlagSpec kFlags[] = {
    {"help", false},         {"config", true},          {"listen", true},
    {"shards", true},        {"driver", true},          {"idle", true},
    {"pin", true},           {"metrics", true},         {"peers", true},
    {"max-room-size", true}, {"broadcast-rooms", true}, {"rules", true},
};

int usage_error(const std::string& why) {
  std::fprintf(stderr, "tern-relay: %s\n%s", why.c_str(), kUsage);
  return kExitUsage;
}

// Applies the flags over `c`; false with a reason.
bool apply_flags(const app::CommandLine& cl, RelayConfig& c, std::string& why) {
  if (auto v = cl.value("listen")) {
    const auto e = Endpoint::parse(*v);
    if (!e) return why = "--listen: '" + std::string(*v) + "' is not HOST:PORT", false;
    c.listen = *e;
  }
  if (auto v = cl.value("shards")) {
    const auto n = app::parse_uint(*v, 1, 256);
    if (!n) return why = "--shards: must be 1..256", false;
    c.shards = *n;
  }
  if (auto v = cl.value("driver")) {
    if (*v != "socket" && *v != "uring") return why = "--driver: socket or uring", false;
    c.driver = std::string(*v);
  }
  if (auto v = cl.value("idle")) {
    if (*v != "wait" && *v != "busy") return why = "--idle: wait or busy", false;
    c.idle = std::string(*v);
  }
  if (auto v = cl.value("pin")) {
    if (*v != "on" && *v != "off") return why = "--pin: on or off", false;
    c.pin = *v == "on";
  }
  if (auto v = cl.value("metrics")) {
    const auto e = Endpoint::parse(*v);
    if (!e) return why = "--metrics: '" + std::string(*v) + "' is not HOST:PORT", false;
    c.metrics = *e;
  }
  if (auto v = cl.value("peers")) {
    const auto n = app::parse_uint(*v, 1, 10'000'000);
    if (!n) return why = "--peers: must be 1..10000000", false;
    c.max_peers = *n;
  }
  if (auto v = cl.value("max-room-size")) {
    const auto n = app::parse_uint(*v, 2, 65536);
    if (!n) return why = "--max-room-size: must be 2..65536", false;
    c.max_room_size = static_cast<std::uint32_t>(*n);
  }
  if (auto v = cl.value("rules")) c.rules_path = std::string(*v);
  if (auto v = cl.value("broadcast-rooms")) {
    c.broadcast_rooms.clear();
    std::string_view rest = *v;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      RoomRange r;
      if (!parse_room_range(std::string(rest.substr(0, comma)), r)) {
        return why = "--broadcast-rooms: expected A-B[,C-D...] with 1 <= A <= B", false;
      }
      c.broadcast_rooms.push_back(r);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  app::CommandLine cl;
  std::string error;
  if (!cl.parse(argc, argv, kFlags, error)) return usage_error(error);
  if (cl.has("help")) {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  RelayConfig config;
  if (auto path = cl.value("config")) {
    if (!load_config_file(std::string(*path), config, error)) {
      std::fprintf(stderr, "tern-relay: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  if (!apply_flags(cl, config, error)) return usage_error(error);

  // The shard threads inherit this mask: only the main thread takes SIGINT/SIGTERM.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  Relay relay(config);
  if (!relay.start(error)) {
    std::fprintf(stderr, "tern-relay: cannot start on %s: %s\n", config.listen.to_string().c_str(),
                 error.c_str());
    return kExitFailure;
  }
  MetricsServer metrics;
  if (config.metrics) {
    if (!metrics.start(
            *config.metrics, [&relay] { return relay.metrics_text(); }, error)) {
      std::fprintf(stderr, "tern-relay: %s\n", error.c_str());
      relay.stop();
      return kExitFailure;
    }
  }
  std::printf("relaying %s shards=%zu driver=%s", relay.local_endpoint().to_string().c_str(),
              relay.shards(), relay.driver_name().c_str());
  if (config.metrics) std::printf(" metrics=%s", metrics.local_endpoint().to_string().c_str());
  std::printf("\n");
  std::fflush(stdout);

  int sig = 0;
  for (;;) {
    sigwait(&stop_signals, &sig);
    if (sig != SIGHUP) break;
    // Compiled here, on the main thread; the shards swap to the new rules at their next burst.
    if (relay.reload_rules(error)) {
      std::fprintf(stderr, "tern-relay: rules reloaded from %s\n", config.rules_path.c_str());
    } else {
      std::fprintf(stderr, "tern-relay: rules not reloaded, the running rules stay: %s\n",
                   error.c_str());
    }
  }
  const rt::ShardCounters before = relay.total();
  const bool drained = relay.stop();
  metrics.stop();
  const rt::ShardCounters t = relay.total();
  std::printf(
      "relay stopped signal=%d drained=%s peers_at_stop=%llu connects=%llu disconnects=%llu "
      "messages_in=%llu copies_out=%llu datagrams_in=%llu datagrams_out=%llu",
      sig, drained ? "yes" : "no", static_cast<unsigned long long>(before.peers),
      static_cast<unsigned long long>(t.connects), static_cast<unsigned long long>(t.disconnects),
      static_cast<unsigned long long>(relay.messages_in()),
      static_cast<unsigned long long>(relay.copies_out()),
      static_cast<unsigned long long>(t.datagrams_in),
      static_cast<unsigned long long>(t.datagrams_out));
  for (std::size_t d = 0; d < kRelayDropCount; ++d) {
    std::printf(" %s=%llu", relay_drop_name(static_cast<RelayDrop>(d)),
                static_cast<unsigned long long>(relay.drops(static_cast<RelayDrop>(d))));
  }
  std::printf("\n");
  return kExitOk;
}
