// tern-relay: the ENet-compatible game relay on the sharded runtime (DESIGN §8).
//
//   tern-relay --config config/relay.toml
//   tern-relay --listen 0.0.0.0:7777 --shards 2 --driver uring --metrics 127.0.0.1:9100
//   tern-relay --listen 0.0.0.0:7777 --driver dpdk --dpdk-config config/dpdk-memif-relay.toml
//
// Flags override the file. SIGTERM or SIGINT drains: every peer is disconnected gracefully and
// given limits-free time up to shutdown.drain_timeout_ms, then the process exits 0.
#include "admin.hpp"
#include "config.hpp"
#include "log.hpp"
#include "metrics.hpp"
#include "relay.hpp"

#include "common/cli.hpp"
#include "common/dpdk_options.hpp"
#include "common/dpdk_session.hpp"
#include "driver_factory.hpp"

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
    "                  [--driver socket|uring|dpdk] [--idle wait|busy] [--pin on|off]\n"
    "                  [--receive-buffer BYTES]\n"
    "                  [--metrics HOST:PORT] [--peers N] [--max-room-size N]\n"
    "                  [--broadcast-rooms A-B[,C-D...]] [--rules FILE] [--checksum on|off]\n"
    "                  [--selective-acks on|off] [--ack-delay-ms MS]\n"
    "                  [--fast-retransmit on|off] [--congestion-window on|off]\n"
    "                  [--min-rto-ms MS] [--throttle-window on|off]\n"
    "                  [--member-backlog BYTES] [--hold-backlog BYTES] [--slow-member-ms MS]\n"
    "                  [--overflow-limit N] [--ring-limit N] [--log-format text|json]\n"
    "                  [--kcp-port PORT]\n"
    "                  [--dpdk-config FILE] [--dpdk-port SPEC] [--dpdk-ip A.B.C.D/NN] ...\n"
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
    "  --driver D           socket (recvmmsg/sendmmsg), uring (io_uring; falls back) or dpdk\n"
    "                       (DPDK poll mode; the --dpdk-* flags or a [dpdk] section below)\n"
    "  --idle I             wait (sleep until traffic or a timer) or busy (poll while any\n"
    "                       client is connected; with none, wait)\n"
    "  --pin on|off         pin shard i to CPU i (default on)\n"
    "  --receive-buffer B   each shard socket's receive buffer (default 64 MiB; socket and\n"
    "                       uring drivers): what arrives faster than the relay reads waits here\n"
    "  --metrics HOST:PORT  serve Prometheus text at http://HOST:PORT/metrics\n"
    "  --peers N            relay-wide connection limit\n"
    "  --max-room-size N    members per room\n"
    "  --broadcast-rooms R  room ranges that are one-to-many\n"
    "  --rules FILE         payload filter rules (see config/filter.rules); SIGHUP reloads them\n"
    "  --bans FILE          bans file: ADDRESS[/BITS] [SECONDS] a line; SIGHUP reloads it\n"
    "  --checksum on|off    ENet CRC32 on every datagram (clients must enable it too)\n"
    "  --selective-acks on|off  Tern's ack ranges with clients that offer them (default on)\n"
    "  --ack-delay-ms MS    acks wait up to MS (0..1000) for a message to ride with (default 0)\n"
    "  --fast-retransmit on|off  resend a message once later ones are acknowledged, before\n"
    "                       its timeout (default on; off: ENet's timeouts only)\n"
    "  --congestion-window on|off  after a stall, resend one MTU and regrow as acks return\n"
    "                       (default on; off: resend everything that timed out, as ENet)\n"
    "  --min-rto-ms MS      retransmission timeouts never below MS (0..1000; default 200, so\n"
    "                       a stall of either side is not taken for a dead link; 0: ENet's)\n"
    "  --throttle-window on|off  ENet's throttle also shrinks the reliable window as RTTs\n"
    "                       rise (default off: a client that fell behind gets full windows)\n"
    "  --member-backlog B   bytes a member may have waiting; past it, disconnected (data 2)\n"
    "  --hold-backlog B     a member backlog that holds its room's senders (default 64 KiB,\n"
    "                       or 1/4 of member-backlog if less)\n"
    "  --slow-member-ms MS  a member holding its room this long is disconnected (data 2)\n"
    "  --overflow-limit N   messages waiting for another shard's ring that hold senders\n"
    "  --ring-limit N       cross-shard ring slots used (for tests; 0 = all)\n"
    "  --kcp-port PORT      also serve KCP clients (kcp-go, ikcp) on PORT of listen's address\n"
    "                       (0: any; the [kcp] section sets the rest)\n"
    "  --log-format F       text (default) or json: every log line one JSON object with ts,\n"
    "                       level, event and its fields\n"
    "\n"
    "DPDK (--driver dpdk): listen's PORT is the UDP port, the address is the DPDK one; the\n"
    "settings come from the config file's [dpdk] section (keys as config/dpdk-*.toml), then\n"
    "--dpdk-config, then the flags. Shards default to 1 (N > 1: RSS, af_packet qpairs=N, or\n"
    "software steering).\n"
    "  --dpdk-config FILE      a [dpdk] TOML section (replaces the config file's)\n"
    "  --dpdk-port SPEC        device or vdev spec (net_memif0,role=server,socket=/tmp/m.sock)\n"
    "  --dpdk-ip A.B.C.D/NN    our IPv4 address and on-link prefix\n"
    "  --dpdk-mac MAC          our MAC (default: the port's)\n"
    "  --dpdk-mbufs N          mbufs in the pool (at least 2048)\n"
    "  --dpdk-huge             hugepages instead of --no-huge\n"
    "  --dpdk-eal=\"ARGS\"      extra EAL arguments, space separated\n"
    "\n"
    "The admin endpoint (list rooms and clients, kick, ban) is on the metrics port when the\n"
    "config file's [admin] section has a token (see config/relay.toml).\n"
    "\n"
    "Prints 'relaying HOST:PORT' once ready. SIGTERM/SIGINT: graceful drain, summary, exit 0.\n"
    "SIGHUP: reload the filter rules and the bans file; a file that fails keeps what runs (one\n"
    "line on stderr either way, naming the file and line). A bad bans file at start: exit 2.\n"
    "exit status: 0 clean stop, 1 cannot start, 2 bad command line or configuration\n";

constexpr app::FlagSpec kFlags[] = {
    {"help", false},
    {"config", true},
    {"listen", true},
    {"shards", true},
    {"driver", true},
    {"idle", true},
    {"receive-buffer", true},
    {"pin", true},
    {"metrics", true},
    {"peers", true},
    {"max-room-size", true},
    {"broadcast-rooms", true},
    {"rules", true},
    {"dpdk-config", true},
    {"dpdk-port", true},
    {"dpdk-ip", true},
    {"dpdk-mac", true},
    {"dpdk-mbufs", true},
    {"dpdk-huge", false},
    {"dpdk-eal", true},
    {"checksum", true},
    {"selective-acks", true},
    {"ack-delay-ms", true},
    {"fast-retransmit", true},
    {"congestion-window", true},
    {"min-rto-ms", true},
    {"throttle-window", true},
    {"member-backlog", true},
    {"hold-backlog", true},
    {"slow-member-ms", true},
    {"overflow-limit", true},
    {"ring-limit", true},
    {"log-format", true},
    {"kcp-port", true},
    {"bans", true},
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
  if (auto v = cl.value("kcp-port")) {
    const auto n = app::parse_uint(*v, 0, 65535);
    if (!n) return why = "--kcp-port: must be 0..65535", false;
    c.kcp = true;
    c.kcp_port = static_cast<std::uint16_t>(*n);
  }
  if (auto v = cl.value("shards")) {
    const auto n = app::parse_uint(*v, 1, 256);
    if (!n) return why = "--shards: must be 1..256", false;
    c.shards = *n;
  }
  if (auto v = cl.value("driver")) {
    if (*v != "socket" && *v != "uring" && *v != "dpdk") {
      return why = "--driver: socket, uring or dpdk", false;
    }
    c.driver = std::string(*v);
  }
  if (auto v = cl.value("idle")) {
    if (*v != "wait" && *v != "busy") return why = "--idle: wait or busy", false;
    c.idle = std::string(*v);
  }
  for (auto [flag, out] : {std::pair{"pin", &c.pin}, std::pair{"checksum", &c.checksum},
                           std::pair{"selective-acks", &c.selective_acks},
                           std::pair{"fast-retransmit", &c.fast_retransmit},
                           std::pair{"congestion-window", &c.congestion_window},
                           std::pair{"throttle-window", &c.throttle_window}}) {
    if (auto v = cl.value(flag)) {
      const auto on = app::parse_on_off(*v);
      if (!on) return why = "--" + std::string(flag) + ": on or off", false;
      *out = *on;
    }
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
  if (auto v = cl.value("bans")) c.bans_path = std::string(*v);
  if (auto v = cl.value("ack-delay-ms")) {
    const auto n = app::parse_uint(*v, 0, 1000);
    if (!n) return why = "--ack-delay-ms: must be 0..1000", false;
    c.ack_delay_ms = static_cast<std::uint32_t>(*n);
  }
  if (auto v = cl.value("min-rto-ms")) {
    const auto n = app::parse_uint(*v, 0, 1000);
    if (!n) return why = "--min-rto-ms: must be 0..1000", false;
    c.min_rto_ms = static_cast<std::uint32_t>(*n);
  }
  if (auto v = cl.value("receive-buffer")) {
    const auto n = app::parse_uint(*v, 64 << 10, 1 << 30);
    if (!n) return why = "--receive-buffer: must be 65536..2^30 bytes", false;
    c.receive_buffer = *n;
  }
  if (auto v = cl.value("member-backlog")) {
    const auto n = app::parse_uint(*v, 0, std::uint64_t{1} << 40);
    if (!n) return why = "--member-backlog: must be 0..2^40 bytes", false;
    c.member_backlog = *n;
  }
  if (auto v = cl.value("hold-backlog")) {
    const auto n = app::parse_uint(*v, 0, std::uint64_t{1} << 40);
    if (!n) return why = "--hold-backlog: must be 0..2^40 bytes", false;
    c.hold_backlog = *n;
  }
  if (auto v = cl.value("slow-member-ms")) {
    const auto n = app::parse_uint(*v, 10, 60'000);
    if (!n) return why = "--slow-member-ms: must be 10..60000", false;
    c.slow_member_ms = static_cast<std::uint32_t>(*n);
  }
  if (auto v = cl.value("overflow-limit")) {
    const auto n = app::parse_uint(*v, 16, 1 << 24);
    if (!n) return why = "--overflow-limit: must be 16..16777216", false;
    c.overflow_limit = *n;
  }
  if (auto v = cl.value("ring-limit")) {
    const auto n = app::parse_uint(*v, 0, 1 << 20);
    if (!n) return why = "--ring-limit: must be 0..1048576", false;
    c.ring_limit = *n;
  }
  if (auto v = cl.value("log-format")) {
    LogFormat f;
    if (!parse_log_format(*v, f)) return why = "--log-format: text or json", false;
    c.log_format = std::string(*v);
  }
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

// --driver dpdk: the [dpdk] settings (file section, --dpdk-config, flags) into `dpdk`,
// checked; false with "FILE: dpdk.KEY: reason" or "--flag: reason". Also refuses --dpdk-*
// without the dpdk driver. The file's [dpdk] section is checked whatever the driver.
bool apply_dpdk(const app::CommandLine& cl, RelayConfig& c, app::DpdkSession& dpdk,
                std::string& why) {
  const bool want = c.driver == "dpdk";
  for (std::string_view f : cl.names()) {
    if (f.substr(0, 5) == "dpdk-" && !want) {
      return why = "--" + std::string(f) + " needs --driver dpdk", false;
    }
  }
  const bool built = drv::driver_built(rt::DriverKind::dpdk);
  if (want && !built) {
    return why = "--driver dpdk: this build has no DPDK driver (libdpdk not found at build time)",
           false;
  }
  if (built && c.dpdk_section && !dpdk.read_file(c.dpdk_file, why)) return false;
  if (!want) return true;
  if (auto v = cl.value("dpdk-config")) {
    if (!dpdk.read_file(std::string(*v), why)) return false;
  }
  app::DpdkOptions flags;
  if (auto v = cl.value("dpdk-port")) flags.port = std::string(*v);
  if (auto v = cl.value("dpdk-ip")) flags.ip = std::string(*v);
  if (auto v = cl.value("dpdk-mac")) flags.mac = std::string(*v);
  if (auto v = cl.value("dpdk-mbufs")) {
    const auto n = app::parse_uint(*v, 2048, 1u << 24);
    if (!n) return why = "--dpdk-mbufs: must be 2048..16777216", false;
    flags.mbufs = static_cast<unsigned>(*n);
  }
  flags.huge = cl.has("dpdk-huge");
  if (auto v = cl.value("dpdk-eal")) flags.eal = app::split_words(*v);
  if (!dpdk.apply_flags(flags, why)) return false;
  if (!dpdk.has_port()) {
    return why =
               "--driver dpdk needs a port: [dpdk] port in the config file, --dpdk-config "
               "FILE or --dpdk-port SPEC",
           false;
  }
  if (!dpdk.has_address()) {
    return why =
               "--driver dpdk needs an address: [dpdk] ip in the config file, --dpdk-config "
               "FILE or --dpdk-ip A.B.C.D/NN",
           false;
  }
  if (c.listen.port == 0) return why = "--driver dpdk needs a non-zero listen port", false;
  if (c.shards == 0) c.shards = 1;  // poll mode: one queue unless asked
  return true;
}

// The stop summary, as one text line of KEY=VALUE words or one JSON log line.
struct Summary {
  std::string text = "relay stopped";
  JsonObject json;
  void add(const char* key, std::uint64_t value) {
    text += ' ' + std::string(key) + '=' + std::to_string(value);
    json.add(key, value);
  }
};

// Config and flag combinations no single key can check; false with "FILE: KEY: reason".
bool check_combination(const RelayConfig& c, const std::string& file, std::string& why) {
  if (!c.admin_token.empty() && !c.metrics) {
    why = file +
          ": admin.token: the admin endpoint is served on the metrics port, which is "
          "off; set metrics.listen (or --metrics HOST:PORT)";
    return false;
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
  Log log;
  // Known before the file is read, so that the file's own errors come out in the asked format.
  if (auto v = cl.value("log-format")) {
    LogFormat f;
    if (!parse_log_format(*v, f)) return usage_error("--log-format: text or json");
    log.set_format(f);
  }
  RelayConfig config;
  std::string config_path;
  if (auto path = cl.value("config")) {
    config_path = std::string(*path);
    if (!load_config_file(config_path, config, error)) {
      log.error("config_error", error);
      return kExitUsage;
    }
  }
  if (!apply_flags(cl, config, error)) return usage_error(error);
  {
    LogFormat f;
    parse_log_format(config.log_format, f);
    log.set_format(f);
  }
  if (!check_combination(config, config_path.empty() ? "(no config file)" : config_path, error)) {
    log.error("config_error", error);
    return kExitUsage;
  }
  // A bad bans file is a configuration error, named by file and line, before anything starts.
  if (std::vector<BanLine> lines;
      !config.bans_path.empty() && !read_bans_file(config.bans_path, lines, error)) {
    log.error("config_error", "security.bans_file: " + error);
    return kExitUsage;
  }
  // The DPDK EAL and port for --driver dpdk, set up before the relay's shard group starts and
  // shut down after it is gone: declared before the Relay.
  app::DpdkSession dpdk("tern-relay");
  if (!apply_dpdk(cl, config, dpdk, error)) {
    log.error("config_error", error);
    return kExitUsage;
  }

  // The shard threads inherit this mask: only the main thread takes SIGINT/SIGTERM.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  if (config.driver == "dpdk" && !dpdk.start(static_cast<unsigned>(config.shards), error)) {
    log.error("start_failed", "cannot start the DPDK port: " + error);
    return kExitFailure;
  }
  // On DPDK listen's address is ignored: clients reach the relay at the port's address, so
  // that is what their tokens list unless public_address says otherwise.
  if (config.driver == "dpdk" && !config.public_address) {
    config.public_address = dpdk.address(config.listen.port);
  }
  Relay relay(config);
  if (!relay.start(error)) {
    log.error("start_failed", "cannot start on " + config.listen.to_string() + ": " + error,
              JsonObject().add("listen", config.listen.to_string()));
    return kExitFailure;
  }
  OpsEndpoint ops(relay, config, log);
  MetricsServer metrics;
  if (config.metrics) {
    if (!metrics.start(
            *config.metrics, [&ops](const HttpRequest& r) { return ops.handle(r); }, error)) {
      log.error("start_failed", error);
      relay.stop();
      return kExitFailure;
    }
  }
  {
    std::string text = "relaying " + relay.local_endpoint().to_string() +
                       " shards=" + std::to_string(relay.shards()) +
                       " driver=" + relay.driver_name();
    JsonObject fields;
    fields.add("listen", relay.local_endpoint().to_string())
        .add("shards", relay.shards())
        .add("driver", relay.driver_name());
    if (config.kcp) {
      text += " kcp=" + relay.kcp_endpoint().to_string();
      fields.add("kcp", relay.kcp_endpoint().to_string());
    }
    if (config.metrics) {
      text += " metrics=" + metrics.local_endpoint().to_string();
      fields.add("metrics", metrics.local_endpoint().to_string())
          .add("admin", !config.admin_token.empty());
    }
    log.info("relaying", text, fields);
  }

  int sig = 0;
  for (;;) {
    sigwait(&stop_signals, &sig);
    if (sig != SIGHUP) break;
    // Compiled here, on the main thread; the shards swap to the new rules at their next burst.
    if (relay.filtering()) {
      if (relay.reload_rules(error)) {
        log.write(stderr, LogLevel::info, "rules_reloaded",
                  "tern-relay: rules reloaded from " + config.rules_path,
                  JsonObject().add("rules", config.rules_path));
      } else {
        log.write(stderr, LogLevel::error, "rules_not_reloaded",
                  "tern-relay: rules not reloaded, the running rules stay: " + error,
                  JsonObject().add("rules", config.rules_path).add("message", error));
      }
    }
    if (relay.has_bans_file()) {
      std::size_t kicked = 0;
      if (relay.load_bans_file(error, &kicked)) {
        log.write(stderr, LogLevel::info, "bans_reloaded",
                  "tern-relay: bans reloaded from " + config.bans_path +
                      " kicked=" + std::to_string(kicked),
                  JsonObject().add("bans_file", config.bans_path).add("kicked", kicked));
      } else {
        log.write(stderr, LogLevel::error, "bans_not_reloaded",
                  "tern-relay: bans not reloaded, the running bans stay: " + error,
                  JsonObject().add("bans_file", config.bans_path).add("message", error));
      }
    }
    if (!relay.filtering() && !relay.has_bans_file()) {
      log.write(stderr, LogLevel::error, "rules_not_reloaded",
                "tern-relay: SIGHUP: nothing to reload (no filter rules, no bans file)",
                JsonObject().add("message", "nothing to reload"));
    }
  }
  const rt::ShardCounters before = relay.total();
  const bool drained = relay.stop();
  metrics.stop();
  const rt::ShardCounters t = relay.total();
  Summary sum;
  sum.add("signal", static_cast<std::uint64_t>(sig));
  sum.text += std::string(" drained=") + (drained ? "yes" : "no");
  sum.json.add("drained", drained);
  sum.add("peers_at_stop", before.peers);
  sum.add("connects", t.connects);
  sum.add("disconnects", t.disconnects);
  sum.add("messages_in", relay.messages_in());
  sum.add("copies_out", relay.copies_out());
  sum.add("datagrams_in", t.datagrams_in);
  sum.add("datagrams_out", t.datagrams_out);
  sum.add("commands_in", t.commands_in);
  sum.add("acks_out", t.acks_out);
  sum.add("busy_us", t.loop_time_us - std::min(t.loop_time_us, t.idle_poll_us));
  sum.add("retransmits", t.retransmits);
  sum.add("fast_retransmits", t.fast_retransmits);
  sum.add("timeouts_deferred", t.timeouts_deferred);
  sum.add("pacer_waits", t.pacer_waits);
  sum.add("cwnd_limited", t.cwnd_limited);
  sum.add("timeouts", t.timeouts);
  sum.add("tx_waits", t.tx_waits);
  sum.add("tx_dropped", t.tx_dropped);
  sum.add("rx_kernel_dropped", t.rx_kernel_dropped);
  std::uint64_t holds = 0, slow = 0, queued = 0, overflow_hw = 0;
  for (std::size_t i = 0; i < relay.shards(); ++i) {
    holds += relay.stats(i).holds.load();
    slow += relay.stats(i).slow_consumers.load();
    queued += relay.stats(i).reliable_queued.load();
    overflow_hw = std::max<std::uint64_t>(overflow_hw, relay.stats(i).overflow_high_water.load());
  }
  sum.add("holds", holds);
  sum.add("slow_consumers", slow);
  sum.add("reliable_queued", queued);
  sum.add("overflow_high_water", overflow_hw);
  for (std::size_t d = 0; d < kRelayDropCount; ++d) {
    sum.add(drop_name(static_cast<RelayDrop>(d)), relay.drops(static_cast<RelayDrop>(d)));
  }
  if (config.kcp) {
    // The KCP port's own counters; the protocol ones above are the ENet port's.
    sum.add("kcp_connects", t.kcp_connects);
    sum.add("kcp_disconnects", t.kcp_disconnects);
    sum.add("kcp_timeouts", t.kcp_timeouts);
    sum.add("kcp_messages_in", t.kcp_messages_in);
    sum.add("kcp_messages_out", t.kcp_messages_out);
    sum.add("kcp_datagrams_in", t.kcp_datagrams_in);
    sum.add("kcp_datagrams_out", t.kcp_datagrams_out);
    sum.add("kcp_retransmits", t.kcp_retransmits);
    sum.add("kcp_drops", t.kcp_drops);
  }
  log.info("relay_stopped", sum.text, sum.json);
  return kExitOk;
}
