#include "options.hpp"

#include "common/channel_options.hpp"
#include "common/cli.hpp"
#include "driver_factory.hpp"

#include <sched.h>

#include <algorithm>
#include <span>
#include <string_view>
#include <thread>

namespace tern::ping {

const char* const kUsage =
    "usage: tern-ping --serve HOST:PORT [--peers N] [--channels N] [RUNTIME] [--checksum]\n"
    "       tern-ping --connect HOST:PORT [--count N] [--size B] [DELIVERY] [--channel C]\n"
    "                 [--warmup N] [--timeout-ms T] [RUNTIME] [--checksum]\n"
    "       tern-ping --connect HOST:PORT --flood [--peers P] [--window W | --rate HZ]\n"
    "                 [--duration S] [--warmup S] [--size B] [DELIVERY] [--channel C]\n"
    "                 [--timeout-ms T] [--json FILE] [RUNTIME] [--checksum]\n"
    "       tern-ping --serve HOST:PORT --protocol kcp [--peers N]\n"
    "       tern-ping --connect HOST:PORT --protocol kcp [--count N] [--size B] [--warmup N]\n"
    "                 [--timeout-ms T]\n"
    "       tern-ping --discover HOST[:PORT] [--size B] [--timeout-ms T]\n"
    "       tern-ping --help\n"
    "\n"
    "Round-trip latency over ENet-compatible connections, on tern's shard runtime.\n"
    "\n"
    "--protocol kcp: the same server and ping-pong over KCP (kcp-go's wire format) on\n"
    "tern::Host's KCP personality, one thread on the socket driver; every message reliable on\n"
    "one stream, no handshake (the client's conv is fixed), sessions end by idle timeout.\n"
    "\n"
    "server (--serve): echoes every message to its sender on the same channel with the same\n"
    "delivery, until SIGINT/SIGTERM; then disconnects all peers gracefully (2 s at most) and\n"
    "prints a summary line. Prints 'serving HOST:PORT' once listening (port 0: the real port).\n"
    "  --peers N        simultaneous connections accepted per shard (default 4096)\n"
    "  --channels N     channels accepted per connection, 1..255 (default 255)\n"
    "  --shards N       threads sharing the port, SO_REUSEPORT (default 1)\n"
    "\n"
    "ping-pong client (--connect): one connection, one ping outstanding; prints one line\n"
    "  rtt_us p50=X p90=X p99=X p99.9=X max=X count=N lost=N delivery=NAME size=B\n"
    "  --count N        measured pings (default 10000)\n"
    "  --size B         payload bytes, at least 8 (default 64)\n"
    "  --warmup N       unmeasured pings first (default 100)\n"
    "  --timeout-ms T   give up connecting after T ms (default 5000)\n"
    "\n"
    "flood client (--connect --flood): P connections spread over the client shards, all\n"
    "connecting at once; prints 'connected N/P in X ms', then after the run one line\n"
    "  flood peers=P connected=P connect_ms=X window=W rate=R delivery=NAME size=B\n"
    "  duration_s=D sent=N received=N lost=N msgs_per_s=X rtt_us p50=X p90=X p99=X p99.9=X max=X\n"
    "(one line on stdout; window=0 in --rate mode, rate=0 in window mode)\n"
    "  --peers P        connections (default 1000)\n"
    "  --window W       messages in flight per connection; each echo sends the next (default 1)\n"
    "  --rate HZ        instead: each connection sends HZ messages/s, paced and spread evenly\n"
    "                   over the connections; 0 connects and stays idle\n"
    "  --warmup S       unmeasured seconds first (default 1; decimals allowed)\n"
    "  --duration S     measured seconds (default 5; decimals allowed)\n"
    "  --size B         payload bytes, at least 16 (default 64)\n"
    "  --shards N       client threads, each with its own socket (default 1)\n"
    "  --timeout-ms T   give up when not every connection is up after T ms (default 5000)\n"
    "  --json FILE      also write the result as a JSON object to FILE\n"
    "Counted by send time: sent = messages sent in the measured period, received = their\n"
    "echoes, lost = sent - received; msgs_per_s = received / duration.\n"
    "\n"
    "DELIVERY (clients):\n"
    "  --reliable       reliable delivery (default)\n"
    "  --unreliable     sequenced unreliable delivery; a message unanswered after 200 ms is\n"
    "                   lost and replaced (a later echo of it does not count)\n"
    "  --unsequenced    unsequenced delivery; losses handled as for --unreliable\n"
    "  --channel C      channel 0..254 (default 0)\n"
    "\n"
    "RUNTIME (all modes):\n"
    "  --driver D       socket (recvmmsg/sendmmsg, default), uring (io_uring when available)\n"
    "                   or dpdk (needs the --dpdk-* flags below; poll mode)\n"
    "  --idle I         wait (sleep until traffic or the next timer, default) or busy (spin;\n"
    "                   --serve spins only while a client is connected)\n"
    "  --pin on|off     pin shard i to CPU i (default: on for --serve unless the process is\n"
    "                   restricted to some CPUs, e.g. by taskset; off for clients)\n"
    "  --checksum       ENet CRC32 on every datagram (both sides must agree)\n"
    "  --channel-options CHANNELS=SWITCHES  per-channel switches of what this side sends\n"
    "                   (repeatable, later rules win): on CHANNELS (e.g. 0,2-3) turn off\n"
    "                   no-fast-retransmit, no-nodelay, no-redundancy, no-congestion-control,\n"
    "                   no-express, no-congestion-window, no-delivery-modes, or set the\n"
    "                   default level high|medium|low\n"
    "  --token-key FILE secure sessions (tern-token keygen): a server takes connect tokens\n"
    "                   under this key besides plain clients; a client mints one per\n"
    "                   connection for the --connect address and encrypts everything\n"
    "\n"
    "DPDK (--driver dpdk; the server's HOST is ignored, its PORT is used; clients send from\n"
    "--dpdk-ip and --dpdk-local-port; one shard unless the port has RSS or is af_packet\n"
    "with qpairs=N):\n"
    "  --dpdk-config FILE      a [dpdk] TOML section (config/dpdk-*.toml); flags override it\n"
    "  --dpdk-port SPEC        device or vdev spec: net_af_packet0,iface=veth0 |\n"
    "                          net_memif0,role=server,socket=/tmp/m.sock | net_tap0,iface=tap0\n"
    "  --dpdk-ip A.B.C.D/NN    our IPv4 address and on-link prefix (required without a file)\n"
    "  --dpdk-gateway A.B.C.D  next hop for destinations off the prefix\n"
    "  --dpdk-gateway-mac MAC  the gateway's MAC (static ARP entry)\n"
    "  --dpdk-mac MAC          our MAC (default: the port's)\n"
    "  --dpdk-local-port P     clients: local UDP port (default 40000 + pid % 20000)\n"
    "  --dpdk-mbufs N          mbufs in the pool (default 8191, at least 2048)\n"
    "  --dpdk-huge             use hugepages (default: --no-huge -m 512)\n"
    "  --dpdk-eal=\"ARGS\"      extra EAL arguments, space separated\n"
    "\n"
    "discovery (--discover): one discovery ping to HOST (a server, or a broadcast address such\n"
    "as 255.255.255.255; PORT 7777 when left out) with room for B bytes of info (default 512),\n"
    "and one line per server that answers within T ms (default 1000): its address, RTT and\n"
    "info (non-printable bytes as \\xNN). --serve --info TEXT answers such pings with TEXT.\n"
    "exit status 0 when some server answered, 1 when none did.\n"
    "\n"
    "--path-mtu (serve and ping-pong): path MTU discovery with a Tern peer that runs it too;\n"
    "ping-pong's line then ends with mtu=N, the MTU the client found.\n"
    "\n"
    "HOST:PORT is 1.2.3.4:P, [::1]:P, localhost:P or *:P (server: any address, dual stack).\n"
    "exit status: 0 success, 1 cannot connect / server lost / I/O error, 2 bad command line\n";

namespace {

using tern::app::CommandLine;
using tern::app::read_seconds;
using tern::app::read_uint;

constexpr tern::app::FlagSpec kFlags[] = {
    {"help", false},      {"serve", true},        {"connect", true},
    {"flood", false},     {"peers", true},        {"channels", true},
    {"checksum", false},  {"count", true},        {"size", true},
    {"reliable", false},  {"unreliable", false},  {"unsequenced", false},
    {"channel", true},    {"warmup", true},       {"timeout-ms", true},
    {"driver", true},     {"idle", true},         {"shards", true},
    {"pin", true},        {"window", true},       {"rate", true},
    {"duration", true},   {"json", true},         {"dpdk-port", true},
    {"dpdk-ip", true},    {"dpdk-gateway", true}, {"dpdk-gateway-mac", true},
    {"dpdk-mac", true},   {"dpdk-eal", true},     {"dpdk-local-port", true},
    {"dpdk-mbufs", true}, {"dpdk-huge", false},   {"dpdk-config", true},
    {"protocol", true},   {"discover", true},     {"info", true},
    {"path-mtu", false},  {"token-key", true},    {"channel-options", true},
};

// Flags each mode accepts besides its own mode flag; anything else is an error for that mode.
constexpr std::string_view kRuntimeFlags[] = {
    "checksum",    "path-mtu",  "driver",          "idle",         "shards",
    "pin",         "dpdk-port", "dpdk-ip",         "dpdk-gateway", "dpdk-gateway-mac",
    "dpdk-mac",    "dpdk-eal",  "dpdk-local-port", "dpdk-mbufs",   "dpdk-huge",
    "dpdk-config", "token-key", "channel-options"};
constexpr std::string_view kServeFlags[] = {"peers", "channels", "protocol", "info"};
constexpr std::string_view kPingFlags[] = {"count",      "size",        "reliable",
                                           "unreliable", "unsequenced", "channel",
                                           "warmup",     "timeout-ms",  "protocol"};
constexpr std::string_view kFloodFlags[] = {
    "flood",    "peers",      "window",      "rate",    "duration",   "warmup", "size",
    "reliable", "unreliable", "unsequenced", "channel", "timeout-ms", "json"};

bool listed(std::span<const std::string_view> list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// Reads "--name" as an unsigned integer into `out`; false with a reason when malformed.
// Pinning by default only where it cannot fight an outer affinity choice (taskset, cgroups):
// ShardGroup pins shard i to CPU i whatever CPUs the process was given.
bool affinity_unrestricted() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return false;
  return static_cast<unsigned>(CPU_COUNT(&set)) >=
         std::max(1u, std::thread::hardware_concurrency());
}

bool parse_dpdk(const CommandLine& cl, bool serve, RuntimeConfig& r, std::string& error) {
  const bool dpdk = r.driver == rt::DriverKind::dpdk;
  if (!app::read_dpdk_flags(cl, dpdk, drv::driver_built(rt::DriverKind::dpdk), r.dpdk, error))
    return false;
  if (!dpdk) return true;
  if (serve && cl.has("dpdk-local-port")) {
    error = "--dpdk-local-port is for clients (the server uses the port of --serve)";
    return false;
  }
  return true;
}

bool parse_runtime(const CommandLine& cl, bool serve, RuntimeConfig& r, std::string& error) {
  r.checksum = cl.has("checksum");
  r.path_mtu = cl.has("path-mtu");
  for (const std::string_view rule : cl.values("channel-options")) {
    tern::ChannelRule c;
    if (!tern::app::parse_channel_rule(rule, c, error)) {
      error = "--channel-options " + error;
      return false;
    }
    r.channel_rules.push_back(c);
  }
  if (const auto k = cl.value("token-key")) {
    tern::TokenKey key;
    if (!tern::load_token_key(std::string(*k), key, error)) {
      error = "--token-key: " + error;
      return false;
    }
    r.token_key = key;
  }
  if (const auto d = cl.value("driver")) {
    if (*d == "socket") {
      r.driver = rt::DriverKind::socket;
    } else if (*d == "uring") {
      r.driver = rt::DriverKind::uring;
    } else if (*d == "dpdk") {
      r.driver = rt::DriverKind::dpdk;
    } else {
      error = "--driver wants socket, uring or dpdk, got '" + std::string(*d) + "'";
      return false;
    }
  }
  if (!parse_dpdk(cl, serve, r, error)) return false;
  if (const auto i = cl.value("idle")) {
    if (*i == "wait") {
      r.idle = rt::IdlePolicy::wait_deadline;
    } else if (*i == "busy") {
      r.idle = rt::IdlePolicy::busy_poll;
    } else {
      error = "--idle wants wait or busy, got '" + std::string(*i) + "'";
      return false;
    }
  }
  r.pin = serve && affinity_unrestricted();
  if (!tern::app::read_on_off(cl, "pin", r.pin, error)) return false;
  return read_uint(cl, "shards", 1, 1024, r.shards, error);
}

bool parse_delivery(const CommandLine& cl, tern::Delivery& delivery, std::string& error) {
  const int n = (cl.has("reliable") ? 1 : 0) + (cl.has("unreliable") ? 1 : 0) +
                (cl.has("unsequenced") ? 1 : 0);
  if (n > 1) {
    error = "choose one of --reliable, --unreliable, --unsequenced";
    return false;
  }
  if (cl.has("unreliable")) delivery = tern::Delivery::unreliable;
  if (cl.has("unsequenced")) delivery = tern::Delivery::unsequenced;
  return true;
}

// --protocol kcp runs on tern::Host: one thread, the socket driver, KCP's one reliable
// stream of messages. Flags that choose something else are refused rather than ignored.
bool parse_protocol(const CommandLine& cl, Protocol& protocol, std::string& error) {
  const auto p = cl.value("protocol");
  if (!p || *p == "enet") return true;
  if (*p != "kcp") {
    error = "--protocol wants enet or kcp, got '" + std::string(*p) + "'";
    return false;
  }
  protocol = Protocol::kcp;
  for (std::string_view f : {"driver", "idle", "shards", "pin", "checksum", "unreliable",
                             "unsequenced", "channel", "channels"}) {
    if (cl.has(f)) {
      error = "--" + std::string(f) +
              " does not apply to --protocol kcp (one thread on the "
              "socket driver, every message reliable on one stream)";
      return false;
    }
  }
  return true;
}

bool parse_discover(const CommandLine& cl, Config& config, std::string& error) {
  for (std::string_view f : cl.names()) {
    if (f == "discover" || f == "size" || f == "timeout-ms") continue;
    error = "--" + std::string(f) + " does not apply to --discover";
    return false;
  }
  std::string text(*cl.value("discover"));
  // A bare host (or [v6]) gets the default port.
  const bool bracketed = !text.empty() && text.front() == '[';
  const std::size_t colon = text.rfind(':');
  if (colon == std::string::npos || (bracketed && text.back() == ']')) text += ":7777";
  const auto target = tern::Endpoint::parse(text);
  if (!target || target->port == 0 || target->is_unspecified()) {
    error = "--discover wants HOST[:PORT] with a concrete host, got '" +
            std::string(*cl.value("discover")) + "'";
    return false;
  }
  config.mode = Mode::discover;
  config.discover.target = *target;
  return read_uint(cl, "size", 0, 4000, config.discover.size, error) &&
         read_uint(cl, "timeout-ms", 1, 600'000, config.discover.timeout_ms, error);
}

}  // namespace

bool parse_config(int argc, const char* const* argv, Config& config, std::string& error) {
  CommandLine cl;
  if (!cl.parse(argc, argv, kFlags, error)) return false;
  if (cl.has("help")) {
    config.mode = Mode::help;
    return true;
  }
  if (cl.has("discover")) return parse_discover(cl, config, error);
  const bool serve = cl.has("serve");
  const bool connect = cl.has("connect");
  if (serve == connect) {
    error = serve ? "--serve and --connect exclude each other" : "need --serve or --connect";
    return false;
  }
  const bool flood = connect && cl.has("flood");
  config.mode = serve ? Mode::serve : flood ? Mode::flood : Mode::ping;
  const char* const mode_name = serve ? "--serve" : flood ? "--connect --flood" : "--connect";
  using Names = std::span<const std::string_view>;
  const Names own = serve ? Names(kServeFlags) : flood ? Names(kFloodFlags) : Names(kPingFlags);
  for (std::string_view f : cl.names()) {
    if (f == "serve" || f == "connect" || listed(kRuntimeFlags, f) || listed(own, f)) continue;
    error = "--" + std::string(f) + " does not apply to " + mode_name;
    if (f == "flood") error = "--flood needs --connect";
    if (!serve && listed(kFloodFlags, f)) error += " (it needs --flood)";
    return false;
  }
  const std::string_view address_text = *cl.value(serve ? "serve" : "connect");
  const auto address = tern::Endpoint::parse(address_text);
  if (!address) {
    error = "cannot parse address '" + std::string(address_text) + "' (want HOST:PORT)";
    return false;
  }
  if (connect && (address->port == 0 || address->is_unspecified())) {
    error = "--connect needs a concrete address and port, got '" + std::string(address_text) + "'";
    return false;
  }

  if (serve) {
    ServeConfig& s = config.serve;
    s.bind = *address;
    if (const auto info = cl.value("info")) {
      s.discovery = true;
      s.info = std::string(*info);
    }
    return parse_protocol(cl, s.protocol, error) && parse_runtime(cl, true, s.runtime, error) &&
           read_uint(cl, "peers", 1, std::uint64_t{1} << 24, s.peers, error) &&
           read_uint(cl, "channels", 1, 255, s.channels, error);
  }

  if (!flood) {
    PingConfig& c = config.ping;
    c.server = *address;
    if (!parse_protocol(cl, c.protocol, error)) return false;
    if (!parse_runtime(cl, false, c.runtime, error) || !parse_delivery(cl, c.delivery, error)) {
      return false;
    }
    if (c.runtime.shards != 1) {
      error = "ping-pong runs one connection on one shard; --shards N > 1 needs --flood";
      return false;
    }
    return read_uint(cl, "count", 1, std::uint64_t{1} << 32, c.count, error) &&
           read_uint(cl, "size", 8, 16u << 20, c.size, error) &&
           read_uint(cl, "channel", 0, 254, c.channel, error) &&
           read_uint(cl, "warmup", 0, std::uint64_t{1} << 32, c.warmup, error) &&
           read_uint(cl, "timeout-ms", 1, std::uint64_t{24} * 3600 * 1000, c.timeout_ms, error);
  }

  FloodConfig& f = config.flood;
  f.server = *address;
  if (!parse_runtime(cl, false, f.runtime, error) || !parse_delivery(cl, f.delivery, error)) {
    return false;
  }
  if (cl.has("window") && cl.has("rate")) {
    error = "--window and --rate exclude each other";
    return false;
  }
  f.paced = cl.has("rate");
  if (const auto j = cl.value("json")) {
    if (j->empty()) {
      error = "--json wants a file name";
      return false;
    }
    f.json_path = std::string(*j);
  }
  if (!(read_uint(cl, "peers", 1, std::uint64_t{1} << 24, f.peers, error) &&
        read_uint(cl, "window", 1, 65536, f.window, error) &&
        read_uint(cl, "rate", 0, 1000000, f.rate_hz, error) &&
        read_seconds(cl, "warmup", 0, std::uint64_t{24} * 3600 * 1000, f.warmup_ms, error) &&
        read_seconds(cl, "duration", 1, std::uint64_t{24} * 3600 * 1000, f.duration_ms, error) &&
        read_uint(cl, "size", 16, 16u << 20, f.size, error) &&
        read_uint(cl, "channel", 0, 254, f.channel, error) &&
        read_uint(cl, "timeout-ms", 1, std::uint64_t{24} * 3600 * 1000, f.timeout_ms, error))) {
    return false;
  }
  if (f.runtime.shards > f.peers) f.runtime.shards = f.peers;  // no empty client shards
  if (f.runtime.driver == rt::DriverKind::dpdk && f.runtime.shards != 1) {
    // Client shards each own their peers; the port's steering would not respect that.
    error = "--driver dpdk: the flood client runs on one shard (--shards 1)";
    return false;
  }
  return true;
}

}  // namespace tern::ping
