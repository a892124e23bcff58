#include "options.hpp"

#include "common/channel_options.hpp"
#include "common/cli.hpp"
#include "driver_factory.hpp"

#include <string_view>

namespace tern::loadgen {

const char* const kUsage =
    "usage: tern-loadgen --target HOST:PORT [--clients N] [--room-size R] [--rate HZ]\n"
    "                    [--size BYTES] [--duration S] [--warmup S]\n"
    "                    [--delivery reliable|unreliable|unsequenced|mix] [--channels C]\n"
    "                    [--broadcast] [--first-room K] [--sources CIDR] [--shards S]\n"
    "                    [--driver socket|uring|dpdk] [--idle wait|busy] [--timeout-ms T]\n"
    "                    [--ack-delay-ms D] [--checksum] [--selective-acks on|off]\n"
    "                    [--fast-retransmit on|off] [--congestion-window on|off]\n"
    "                    [--nodelay on|off] [--redundancy on|off] [--congestion-control on|off]\n"
    "                    [--min-rto-ms MS] [--channel-options CHANNELS=SWITCHES ...]\n"
    "                    [--throttle-window on|off]\n"
    "                    [--max-queued BYTES]\n"
    "                    [--schedule S:HZ,...] [--per-second] [--json FILE]\n"
    "                    [--quiet] [--protocol enet|kcp]\n"
    "                    [--flood-rate N [--flood-at S] [--flood-for S] [--flood-from CIDR]]\n"
    "                    [--late-clients K [--late-at S]]\n"
    "                    [--dpdk-config FILE] [--dpdk-port SPEC] [--dpdk-ip A.B.C.D/NN] ...\n"
    "       tern-loadgen --help\n"
    "\n"
    "Plays every member of every room against an ENet-compatible relay (a server that forwards\n"
    "each message to the other members of the sender's room, the room being the connect data)\n"
    "and measures every relayed copy end to end on one clock: latency, loss, duplicates, order,\n"
    "routing. Client i joins room K + i / R.\n"
    "\n"
    "  --target HOST:PORT  the relay (required)\n"
    "  --clients N         connections, all opened at once (default 100)\n"
    "  --room-size R       clients per room; the last room may be smaller (default 8)\n"
    "  --rate HZ           messages/s each sending client sends, paced and spread evenly over\n"
    "                      the clients (default 30; 0 connects and stays idle)\n"
    "  --size BYTES        payload bytes, at least 24 (default 64)\n"
    "  --duration S        measured seconds (default 5; up to 3 decimals)\n"
    "  --warmup S          unmeasured seconds of traffic first (default 1)\n"
    "  --delivery D        reliable (default), unreliable, unsequenced, or mix (rotates the three\n"
    "                      per message)\n"
    "  --channels C        channels per connection; message n goes on channel n % C (default 1)\n"
    "  --broadcast         only the first member of each room sends (a spectator stream)\n"
    "  --first-room K      room number of the first room (default 1)\n"
    "  --sources CIDR      spread the clients over up to 64 source addresses of an IPv4 block\n"
    "                      (e.g. 127.0.0.0/24: 127.0.0.1..127.0.0.64), one client group each\n"
    "  --shards S          client threads, each with its own socket (default 1; with --sources,\n"
    "                      S / sources per address, at least 1)\n"
    "  --driver D          socket (default), uring or dpdk (poll mode; the --dpdk-* flags below)\n"
    "  --idle I            wait (default) or busy\n"
    "  --timeout-ms T      give up when not every client is connected after T ms (default 10000)\n"
    "  --ack-delay-ms D    clients hold acknowledgements up to D ms for their next message to\n"
    "                      carry, as a game that services its host once a frame does (default 0:\n"
    "                      ENet's, acknowledge at once; at most 1000)\n"
    "  --checksum          ENet CRC32 on every datagram (the server must enable it too)\n"
    "  --token-key FILE    secure sessions: each client mints a connect token under this key\n"
    "                      (tern-token keygen) naming its room, and encrypts everything\n"
    "  --selective-acks S  on (default): offer Tern's ack ranges; off: plain ENet acks only\n"
    "  --fast-retransmit S on (default): resend a message once later ones are acknowledged;\n"
    "                      off: ENet's retransmission timeouts only\n"
    "  --congestion-window S  on (default): after a stall, resend an MTU and regrow as acks\n"
    "                      return; off: resend all that timed out at once, as ENet\n"
    "  --protocol P        enet (default) or kcp: KCP sessions against tern-relay's KCP port\n"
    "                      (--target is that port), each joining with \"join:<room>\";\n"
    "                      reliable, one channel, no --broadcast, kernel sockets only\n"
    "  --nodelay S         off (default); on: KCP's nodelay: timeouts grow x1.5, a message is\n"
    "                      resent after 2 later ones are acknowledged, no throttle on the\n"
    "                      reliable window, and a Tern server is asked to acknowledge at once\n"
    "  --redundancy S      off (default); on: adaptive redundancy with a Tern server that runs it\n"
    "                      too: datagrams carry copies of unacknowledged messages and repeat\n"
    "                      ack ranges while loss is measured, within 30% more bytes\n"
    "  --congestion-control S  on (default): with a Tern server that runs it too, bulk is paced\n"
    "                      at the estimated bandwidth in a window past ENet's 64 KiB; small\n"
    "                      messages go ahead of it; off: ENet's window and throttle\n"
    "  --channel-options CHANNELS=SWITCHES  per-channel switches (repeatable; a later rule\n"
    "                      replaces an earlier one's for the channels both name): on CHANNELS\n"
    "                      (IDs and ranges, e.g. 1,3-5) turn off no-fast-retransmit,\n"
    "                      no-nodelay, no-redundancy, no-congestion-control, no-express,\n"
    "                      no-congestion-window, no-delivery-modes, or set the default level\n"
    "                      high|medium|low (e.g. --channels 2 --channel-options 1=no-redundancy)\n"
    "  --min-rto-ms MS     retransmission timeouts never below MS (0..1000; default 200, so a\n"
    "                      stall of either side is not taken for a dead link; 0: ENet's)\n"
    "  --throttle-window S off (default): the reliable window stays as RTTs rise; on: ENet's\n"
    "                      throttle shrinks it too\n"
    "  --max-queued BYTES  a client holding this much unacknowledged payload has its next\n"
    "                      message refused (counted, and its copies owed as lost) instead of\n"
    "                      queued: memory stays bounded if the target stops (default 65536;\n"
    "                      0: no bound)\n"
    "  --schedule S:HZ,... change the rate during the measured period: from S seconds into it\n"
    "                      on, each sending client sends HZ (0 pauses); --rate until the first\n"
    "                      (e.g. --duration 9 --schedule 3:300,6:50: a burst, then a quiet spell)\n"
    "  --per-second        also report each second of the measured period by send time: sent,\n"
    "                      refused, copies owed and delivered, latency p50/p99, and the copies\n"
    "                      that arrived in that second (whenever sent); --duration 300 at most\n"
    "  --json FILE         also write the result as a JSON object to FILE\n"
    "  --quiet             no progress line on stderr\n"
    "  --flood-rate N      also send N forged libenet CONNECTs/s, each from another spoofed\n"
    "                      source (address of --flood-from, fresh port), never answered: a\n"
    "                      connect flood (kernel drivers: a raw socket, needs CAP_NET_RAW;\n"
    "                      dpdk: frames of its own on the clients' port)\n"
    "  --flood-at S        start it S seconds into the measured period (default 0)\n"
    "  --flood-for S       for S seconds (default 0: to the end of the measured period)\n"
    "  --flood-from CIDR   the spoofed sources (default 127.99.0.0/16; dpdk 10.99.0.0/16, off\n"
    "                      the link: give the relay this host as its gateway)\n"
    "  --late-clients K    K more clients connect --late-at seconds into the measured period,\n"
    "                      each alone in a room after the others', idle; reports how many\n"
    "                      connected and their connect times (p50, max)\n"
    "  --late-at S         (default 1)\n"
    "\n"
    "DPDK (--driver dpdk): one client group of one shard (DPDK clients are not steered per\n"
    "shard; --shards must be 1 and --sources does not apply); the clients send from --dpdk-ip\n"
    "and --dpdk-local-port:\n"
    "  --dpdk-config FILE      a [dpdk] TOML section (config/dpdk-*.toml); flags override it\n"
    "  --dpdk-port SPEC        device or vdev spec (net_memif0,role=client,socket=/tmp/m.sock)\n"
    "  --dpdk-ip A.B.C.D/NN    our IPv4 address and on-link prefix (required without a file)\n"
    "  --dpdk-gateway A.B.C.D  next hop for destinations off the prefix\n"
    "  --dpdk-gateway-mac MAC  the gateway's MAC (static ARP entry)\n"
    "  --dpdk-mac MAC          our MAC (default: the port's)\n"
    "  --dpdk-local-port P     local UDP port (default 40000 + pid % 20000)\n"
    "  --dpdk-mbufs N          mbufs in the pool (at least 2048)\n"
    "  --dpdk-huge             hugepages instead of --no-huge -m 512\n"
    "  --dpdk-eal=\"ARGS\"      extra EAL arguments, space separated\n"
    "\n"
    "Prints 'connected N/N in X ms', a progress line each second on stderr, then a summary table\n"
    "and one machine-readable 'loadgen ...' line on stdout. Counted by send time: expected = the\n"
    "copies owed for messages sent in the measured period (room members - 1 each), delivered =\n"
    "those that arrived (stragglers are awaited up to 2 s), lost = expected - delivered.\n"
    "exit status: 0 run completed (even with loss), 1 connect failure / lost connection / I/O\n"
    "error, 2 bad command line\n";

namespace {

using tern::app::CommandLine;
using tern::app::read_seconds;
using tern::app::read_uint;

constexpr tern::app::FlagSpec kFlags[] = {
    {"help", false},
    {"target", true},
    {"clients", true},
    {"room-size", true},
    {"rate", true},
    {"size", true},
    {"duration", true},
    {"warmup", true},
    {"delivery", true},
    {"channels", true},
    {"sources", true},
    {"shards", true},
    {"driver", true},
    {"idle", true},
    {"json", true},
    {"first-room", true},
    {"broadcast", false},
    {"protocol", true},
    {"timeout-ms", true},
    {"quiet", false},
    {"dpdk-config", true},
    {"dpdk-port", true},
    {"dpdk-ip", true},
    {"dpdk-gateway", true},
    {"dpdk-gateway-mac", true},
    {"dpdk-mac", true},
    {"dpdk-eal", true},
    {"dpdk-local-port", true},
    {"dpdk-mbufs", true},
    {"dpdk-huge", false},
    {"ack-delay-ms", true},
    {"checksum", false},
    {"token-key", true},
    {"selective-acks", true},
    {"fast-retransmit", true},
    {"congestion-window", true},
    {"nodelay", true},
    {"redundancy", true},
    {"congestion-control", true},
    {"channel-options", true},
    {"min-rto-ms", true},
    {"max-queued", true},
    {"throttle-window", true},
    {"schedule", true},
    {"per-second", false},
    {"flood-rate", true},
    {"flood-at", true},
    {"flood-for", true},
    {"flood-from", true},
    {"late-clients", true},
    {"late-at", true},
};

constexpr std::uint64_t kDayMs = std::uint64_t{24} * 3600 * 1000;
constexpr std::uint64_t kMaxRate = 100000;
constexpr std::uint64_t kMaxPerSecondMs = 300'000;
constexpr std::uint64_t kMaxFloodRate = 10'000'000;
constexpr std::uint64_t kMaxLateClients = 65536;

bool parse_ipv4(std::string_view text, std::uint32_t& out) {
  std::uint32_t v = 0;
  for (int part = 0; part < 4; ++part) {
    const auto dot = text.find('.');
    if ((part < 3) == (dot == std::string_view::npos)) return false;
    const auto n = tern::app::parse_uint(text.substr(0, dot), 0, 255);
    if (!n) return false;
    v = (v << 8) | static_cast<std::uint32_t>(*n);
    text = part < 3 ? text.substr(dot + 1) : std::string_view{};
  }
  out = v;
  return true;
}

bool parse_runtime(const CommandLine& cl, Config& c, std::string& error) {
  if (const auto d = cl.value("driver")) {
    if (*d == "socket") {
      c.driver = rt::DriverKind::socket;
    } else if (*d == "uring") {
      c.driver = rt::DriverKind::uring;
    } else if (*d == "dpdk") {
      c.driver = rt::DriverKind::dpdk;
    } else {
      error = "--driver wants socket, uring or dpdk, got '" + std::string(*d) + "'";
      return false;
    }
  }
  if (const auto i = cl.value("idle")) {
    if (*i == "wait") {
      c.idle = rt::IdlePolicy::wait_deadline;
    } else if (*i == "busy") {
      c.idle = rt::IdlePolicy::busy_poll;
    } else {
      error = "--idle wants wait or busy, got '" + std::string(*i) + "'";
      return false;
    }
  }
  return true;
}

bool parse_dpdk(const CommandLine& cl, Config& c, std::string& error) {
  const bool dpdk = c.driver == rt::DriverKind::dpdk;
  if (!app::read_dpdk_flags(cl, dpdk, drv::driver_built(rt::DriverKind::dpdk), c.dpdk, error))
    return false;
  if (!dpdk) return true;
  if (!c.target.is_v4()) {
    error = "--driver dpdk is IPv4 only, but --target is IPv6";
    return false;
  }
  if (cl.has("sources")) {
    error = "--sources does not apply with --driver dpdk (the clients send from --dpdk-ip)";
    return false;
  }
  if (const auto s = cl.value("shards"); s && *s != "1") {
    error = "--driver dpdk: the clients run one group of one shard (--shards 1)";
    return false;
  }
  return true;
}

bool parse_delivery(const CommandLine& cl, Config& c, std::string& error) {
  const auto d = cl.value("delivery");
  if (!d) return true;
  if (*d == "reliable") {
    c.delivery = DeliveryMode::reliable;
  } else if (*d == "unreliable") {
    c.delivery = DeliveryMode::unreliable;
  } else if (*d == "unsequenced") {
    c.delivery = DeliveryMode::unsequenced;
  } else if (*d == "mix") {
    c.delivery = DeliveryMode::mix;
  } else {
    error =
        "--delivery wants reliable, unreliable, unsequenced or mix, got '" + std::string(*d) + "'";
    return false;
  }
  return true;
}

// --flood-*, --late-*: a forged CONNECT flood and clients that connect through it.
bool parse_flood(const CommandLine& cl, Config& c, std::string& error) {
  if (!(read_uint(cl, "flood-rate", 0, kMaxFloodRate, c.flood_rate, error) &&
        read_seconds(cl, "flood-at", 0, kDayMs, c.flood_at_ms, error) &&
        read_seconds(cl, "flood-for", 0, kDayMs, c.flood_for_ms, error) &&
        read_uint(cl, "late-clients", 0, kMaxLateClients, c.late_clients, error) &&
        read_seconds(cl, "late-at", 0, kDayMs, c.late_at_ms, error))) {
    return false;
  }
  const bool flood_flags = cl.has("flood-at") || cl.has("flood-for") || cl.has("flood-from");
  if (c.flood_rate == 0 && flood_flags) {
    error = "--flood-at, --flood-for and --flood-from need --flood-rate N (N > 0)";
    return false;
  }
  if (c.late_clients == 0 && cl.has("late-at")) {
    error = "--late-at needs --late-clients K (K > 0)";
    return false;
  }
  if ((c.flood_rate > 0 || c.late_clients > 0) && c.kcp) {
    error = "--flood-rate and --late-clients are ENet's (not with --protocol kcp)";
    return false;
  }
  const std::uint64_t rooms = (c.clients + c.room_size - 1) / c.room_size;
  if (std::uint64_t{c.first_room} + rooms + c.late_clients - 1 > 0xffffffffu) {
    error = "--late-clients: no room numbers left after --first-room (connect data is 32 bits)";
    return false;
  }
  if (c.flood_rate == 0) return true;
  if (!c.target.is_v4()) {
    error = "--flood-rate forges IPv4 sources, but --target is IPv6";
    return false;
  }
  // Kernel drivers: a loopback block, so the relay's answers stay on this machine. DPDK: a
  // block off the link, which the relay reaches through its gateway (the load generator).
  c.flood_from_text = std::string(
      cl.value("flood-from")
          .value_or(c.driver == rt::DriverKind::dpdk ? "10.99.0.0/16" : "127.99.0.0/16"));
  const std::string_view from = c.flood_from_text;
  const auto slash = from.find('/');
  const auto prefix = slash == std::string_view::npos
                          ? std::nullopt
                          : tern::app::parse_uint(from.substr(slash + 1), 8, 30);
  std::uint32_t base = 0;
  if (!prefix || !parse_ipv4(from.substr(0, slash), base)) {
    error = "--flood-from wants an IPv4 block /8 to /30 like 127.99.0.0/16, got '" +
            c.flood_from_text + "'";
    return false;
  }
  c.flood_hosts = (std::uint32_t{1} << (32 - *prefix)) - 2;
  c.flood_network = base & ~((std::uint32_t{1} << (32 - *prefix)) - 1);
  return true;
}

}  // namespace

const char* to_string(DeliveryMode m) {
  switch (m) {
    case DeliveryMode::reliable: return "reliable";
    case DeliveryMode::unreliable: return "unreliable";
    case DeliveryMode::unsequenced: return "unsequenced";
    case DeliveryMode::mix: return "mix";
  }
  return "?";
}

bool parse_schedule(std::string_view text, std::uint64_t max_rate, std::vector<RateStep>& out,
                    std::string& error) {
  out.clear();
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    const auto colon = item.find(':');
    const auto at = colon == std::string_view::npos
                        ? std::nullopt
                        : tern::app::parse_seconds_ms(item.substr(0, colon), 0, kDayMs);
    const auto rate = colon == std::string_view::npos
                          ? std::nullopt
                          : tern::app::parse_uint(item.substr(colon + 1), 0, max_rate);
    if (!at || !rate) {
      error = "--schedule wants S:HZ,... (seconds into the measured period, then a rate up to " +
              std::to_string(max_rate) + "), got '" + std::string(item) + "'";
      return false;
    }
    if (!out.empty() && *at <= out.back().at_ms) {
      error = "--schedule: times must increase, got '" + std::string(item) + "' after " +
              std::to_string(out.back().at_ms / 1000.0) + " s";
      return false;
    }
    out.push_back({*at, *rate});
  }
  if (out.empty()) {
    error = "--schedule wants at least one S:HZ";
    return false;
  }
  return true;
}

bool parse_sources(std::string_view cidr, std::size_t limit, std::vector<std::uint32_t>& out) {
  out.clear();
  const auto slash = cidr.find('/');
  std::uint32_t base = 0;
  std::uint64_t prefix = 32;
  if (slash != std::string_view::npos) {
    const auto p = tern::app::parse_uint(cidr.substr(slash + 1), 0, 32);
    if (!p) return false;
    prefix = *p;
  }
  if (!parse_ipv4(cidr.substr(0, slash), base)) return false;
  const std::uint64_t block = std::uint64_t{1} << (32 - prefix);
  const std::uint32_t network =
      prefix == 0 ? 0 : base & static_cast<std::uint32_t>(~std::uint64_t{0} << (32 - prefix));
  // /31 and /32 have no network or broadcast address to skip.
  const std::uint64_t first = block > 2 ? 1 : 0;
  const std::uint64_t last = block > 2 ? block - 2 : block - 1;
  for (std::uint64_t i = first; i <= last && out.size() < limit; ++i) {
    out.push_back(static_cast<std::uint32_t>(network + i));
  }
  return !out.empty();
}

bool parse_config(int argc, const char* const* argv, Config& c, std::string& error) {
  CommandLine cl;
  if (!cl.parse(argc, argv, kFlags, error)) return false;
  if (cl.has("help")) {
    c.help = true;
    return true;
  }
  const auto target_text = cl.value("target");
  if (!target_text) {
    error = "need --target HOST:PORT";
    return false;
  }
  const auto target = tern::Endpoint::parse(*target_text);
  if (!target || target->port == 0 || target->is_unspecified()) {
    error = "--target wants a concrete HOST:PORT, got '" + std::string(*target_text) + "'";
    return false;
  }
  c.target = *target;
  c.broadcast = cl.has("broadcast");
  c.quiet = cl.has("quiet");
  c.checksum = cl.has("checksum");
  if (const auto k = cl.value("token-key")) {
    tern::TokenKey key;
    if (!tern::load_token_key(std::string(*k), key, error)) {
      error = "--token-key: " + error;
      return false;
    }
    c.token_key = key;
  }
  c.per_second = cl.has("per-second");
  if (!tern::app::read_on_off(cl, "selective-acks", c.selective_acks, error) ||
      !tern::app::read_on_off(cl, "fast-retransmit", c.fast_retransmit, error) ||
      !tern::app::read_on_off(cl, "congestion-window", c.congestion_window, error) ||
      !tern::app::read_on_off(cl, "nodelay", c.nodelay, error) ||
      !tern::app::read_on_off(cl, "redundancy", c.redundancy, error) ||
      !tern::app::read_on_off(cl, "congestion-control", c.congestion_control, error) ||
      !tern::app::read_on_off(cl, "throttle-window", c.throttle_window, error)) {
    return false;
  }
  for (const std::string_view rule : cl.values("channel-options")) {
    tern::ChannelRule r;
    if (!tern::app::parse_channel_rule(rule, r, error)) {
      error = "--channel-options " + error;
      return false;
    }
    c.channel_rules.push_back(r);
  }
  if (const auto j = cl.value("json")) {
    if (j->empty()) {
      error = "--json wants a file name";
      return false;
    }
    c.json_path = std::string(*j);
  }
  if (!(parse_runtime(cl, c, error) && parse_dpdk(cl, c, error) && parse_delivery(cl, c, error) &&
        read_uint(cl, "clients", 1, std::uint64_t{1} << 20, c.clients, error) &&
        read_uint(cl, "room-size", 1, 4096, c.room_size, error) &&
        read_uint(cl, "rate", 0, kMaxRate, c.rate_hz, error) &&
        read_uint(cl, "size", kMinSize, kMaxSize, c.size, error) &&
        read_seconds(cl, "duration", 1, kDayMs, c.duration_ms, error) &&
        read_seconds(cl, "warmup", 0, kDayMs, c.warmup_ms, error) &&
        read_uint(cl, "channels", 1, 255, c.channels, error) &&
        read_uint(cl, "shards", 1, 1024, c.shards, error) &&
        read_uint(cl, "first-room", 0, 0xffffffffu, c.first_room, error) &&
        read_uint(cl, "timeout-ms", 1, kDayMs, c.timeout_ms, error) &&
        read_uint(cl, "ack-delay-ms", 0, 1000, c.ack_delay_ms, error) &&
        read_uint(cl, "min-rto-ms", 0, 1000, c.min_rto_ms, error) &&
        read_uint(cl, "max-queued", 0, std::uint64_t{1} << 32, c.max_queued, error))) {
    return false;
  }
  if (const auto p = cl.value("protocol")) {
    if (*p != "enet" && *p != "kcp") {
      error = "--protocol wants enet or kcp, got '" + std::string(*p) + "'";
      return false;
    }
    c.kcp = *p == "kcp";
  }
  if (c.kcp) {
    // KCP is one reliable ordered stream: the relay delivers every copy that way.
    if (c.delivery != DeliveryMode::reliable || c.channels != 1 || c.broadcast) {
      error = "--protocol kcp: reliable delivery on one channel, without --broadcast";
      return false;
    }
    if (c.driver == rt::DriverKind::dpdk) {
      error = "--protocol kcp: kernel sockets only (--driver socket or uring)";
      return false;
    }
    if (c.clients >= 65535) {
      error = "--protocol kcp: fewer than 65,535 clients (each conv is its client id + 1)";
      return false;
    }
  }
  if (const auto s = cl.value("schedule"); s && !parse_schedule(*s, kMaxRate, c.schedule, error)) {
    return false;
  }
  if (c.per_second && c.duration_ms > kMaxPerSecondMs) {
    error = "--per-second keeps a latency histogram per second per client thread: --duration " +
            std::to_string(kMaxPerSecondMs / 1000) + " at most";
    return false;
  }
  const std::uint64_t rooms = (c.clients + c.room_size - 1) / c.room_size;
  if (std::uint64_t{c.first_room} + rooms - 1 > 0xffffffffu) {
    error = "--first-room " + std::to_string(c.first_room) + " leaves no room numbers for " +
            std::to_string(rooms) + " rooms (connect data is 32 bits)";
    return false;
  }
  if (const auto s = cl.value("sources")) {
    c.sources_text = std::string(*s);
    if (!parse_sources(*s, 64, c.sources)) {
      error = "--sources wants an IPv4 block like 127.0.0.0/24, got '" + std::string(*s) + "'";
      return false;
    }
    if (!c.target.is_v4()) {
      error = "--sources are IPv4 addresses, but --target is IPv6";
      return false;
    }
  }
  return parse_flood(cl, c, error);
}

}  // namespace tern::loadgen
