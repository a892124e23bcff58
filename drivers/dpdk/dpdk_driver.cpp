// DPDK driver: EAL/port set-up (once per process) and one queue pair per shard.
#include "dpdk_driver.hpp"
#include "spsc_ring.hpp"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <span>
#include <utility>

namespace tern::drv {

namespace {

constexpr std::size_t kBurst = 32;

std::uint64_t steady_us() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::string rte_error(const char* what, int err) {
  return std::string(what) + ": " + rte_strerror(err < 0 ? -err : err);
}

// A UDP frame queue 0's shard steered to another shard: the mbuf and what it parsed.
struct SteeredFrame {
  rte_mbuf* m = nullptr;
  Endpoint from;
  std::uint16_t offset = 0;  // payload offset in the mbuf's data
  std::uint16_t length = 0;
};
constexpr std::size_t kSteerRingCapacity = 2048;
using SteerRing = rt::SpscRing<SteeredFrame, kSteerRingCapacity>;
// Software steering's way out for shards 1..N-1: built frames for queue 0's shard to send, so
// the one tx queue keeps a single writer and needs no lock.
using HandoffRing = rt::SpscRing<rte_mbuf*, kSteerRingCapacity>;

// Frames a full transmit queue refused are held and sent first next time rather than dropped:
// a burst larger than the ring (a relay's fan-out) is smoothed out instead of losing copies
// that reliable delivery would only retransmit. Receiving goes on meanwhile: pausing it would
// deadlock two such drivers facing each other (each waiting for the other to read). Frames
// held for kBacklogGiveUpUs without any progress are dropped, so a peer that stopped draining
// costs a bounded amount of memory and no more.
constexpr std::size_t kBacklogCapacity = 1024;
constexpr std::uint64_t kBacklogGiveUpUs = 20'000;
// How often queue 0's driver reads the port's counters and link.
constexpr std::uint64_t kPortStatsIntervalUs = 100'000;

// The remote endpoint's shard (the local endpoint is the same for every frame).
std::size_t steer_target(const Endpoint& from, std::size_t shards) {
  std::uint64_t h = 0x9e3779b97f4a7c15ull ^ from.port;
  for (std::size_t i = 12; i < 16; ++i) h = (h ^ from.addr[i]) * 0x100000001b3ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<std::size_t>(h % shards);
}

// Process-wide state: the EAL, the port and what every queue shares.
struct Global {
  std::mutex mu;
  bool eal_attempted = false;
  bool eal_ok = false;
  bool ready = false;
  std::uint16_t port = 0;
  unsigned queues = 0;
  rte_mempool* pool = nullptr;
  DpdkConfig config;
  net::LinkConfig link;
  net::ChecksumMode tx_mode = net::ChecksumMode::software;
  std::uint64_t tx_flags = 0;
  bool rx_checksum = false;
  std::vector<bool> queue_open;
  DpdkSteering steering = DpdkSteering::single;
  // Software steering: frames queue 0's shard received for shard i (ring i; ring 0 unused),
  // and frames shard i built for queue 0's shard to send (handoff i; handoff 0 unused).
  std::vector<std::unique_ptr<SteerRing>> steer_rings;
  std::vector<std::unique_ptr<HandoffRing>> handoff_rings;
  DpdkStats closed;  // under mu
  // Mappings any queue learned from ARP (RSS sends ARP to one queue only): the others import
  // them when `arp_generation` moves.
  std::mutex arp_mu;
  std::vector<std::pair<std::uint32_t, net::MacAddress>> learned;
  std::atomic<std::uint64_t> arp_generation{0};
};

Global& global() {
  static Global g;
  return g;
}

bool has_arg(const std::vector<std::string>& args, std::initializer_list<const char*> names) {
  for (const std::string& a : args) {
    for (const char* n : names) {
      const std::size_t len = std::strlen(n);
      if (a.compare(0, len, n) == 0 && (a.size() == len || a[len] == '=')) return true;
    }
  }
  return false;
}

void publish_learned(std::uint32_t ip, const net::MacAddress& mac) {
  Global& g = global();
  std::lock_guard lock(g.arp_mu);
  auto it = std::find_if(g.learned.begin(), g.learned.end(),
                         [&](const auto& e) { return e.first == ip; });
  if (it != g.learned.end()) {
    if (it->second == mac) return;
    it->second = mac;
  } else {
    if (g.learned.size() >= net::ArpTable::kCapacity) g.learned.erase(g.learned.begin());
    g.learned.emplace_back(ip, mac);
  }
  g.arp_generation.fetch_add(1, std::memory_order_release);
}

}  // namespace

// ---- helpers ---------------------------------------------------------------------------------

bool apply_dpdk_flags(const DpdkFlags& f, DpdkConfig& c, std::string& error) {
  if (!f.port.empty()) c.port = f.port;
  if (!f.eal.empty()) c.eal_args = f.eal;
  if (f.mbufs != 0) c.mbufs = f.mbufs;
  if (f.huge) c.no_huge = false;
  if (!f.ip.empty() && !parse_ipv4_prefix(f.ip, c.link)) {
    error = "--dpdk-ip wants A.B.C.D/NN, got '" + f.ip + "'";
    return false;
  }
  if (!f.gateway.empty()) {
    net::LinkConfig gw;
    if (!parse_ipv4_prefix(f.gateway, gw) || gw.ipv4_prefix_len != 32) {
      error = "--dpdk-gateway wants A.B.C.D, got '" + f.gateway + "'";
      return false;
    }
    c.link.ipv4_gateway = gw.ipv4;
  }
  if (!f.gateway_mac.empty()) {
    c.gateway_mac = parse_mac(f.gateway_mac);
    if (!c.gateway_mac) {
      error = "--dpdk-gateway-mac wants aa:bb:cc:dd:ee:ff, got '" + f.gateway_mac + "'";
      return false;
    }
  }
  if (!f.mac.empty()) {
    const auto mac = parse_mac(f.mac);
    if (!mac || mac->is_multicast() || mac->is_zero()) {
      error = "--dpdk-mac wants a unicast aa:bb:cc:dd:ee:ff, got '" + f.mac + "'";
      return false;
    }
    c.link.mac = *mac;
  }
  return true;
}

bool parse_ipv4_prefix(const std::string& text, net::LinkConfig& link) {
  unsigned a, b, c, d, p = 32;
  char tail = 0;
  int n = std::sscanf(text.c_str(), "%u.%u.%u.%u/%u%c", &a, &b, &c, &d, &p, &tail);
  if (n != 5 && n != 4) return false;
  if (n == 4 && text.find('/') != std::string::npos) return false;
  if (a > 255 || b > 255 || c > 255 || d > 255 || p > 32) return false;
  link.ipv4 = (a << 24) | (b << 16) | (c << 8) | d;
  link.ipv4_prefix_len = static_cast<std::uint8_t>(p);
  return link.ipv4 != 0;
}

std::optional<net::MacAddress> parse_mac(const std::string& text) {
  unsigned v[6];
  char tail = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
                  &tail) != 6)
    return std::nullopt;
  net::MacAddress m;
  for (int i = 0; i < 6; ++i) {
    if (v[i] > 255) return std::nullopt;
    m.bytes[i] = static_cast<std::uint8_t>(v[i]);
  }
  return m;
}

std::string format_mac(const net::MacAddress& mac) {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", mac.bytes[0], mac.bytes[1],
                mac.bytes[2], mac.bytes[3], mac.bytes[4], mac.bytes[5]);
  return buf;
}

// ---- EAL and port ----------------------------------------------------------------------------

namespace {

bool init_eal(const DpdkConfig& c, std::string& error) {
  // rte_eal_init keeps pointers into argv: the strings live for the process.
  static std::vector<std::string> args;
  static std::vector<char*> argv;
  args = {"tern"};
  const bool vdev = c.port.rfind("net_", 0) == 0;
  if (!c.lcores.empty() && !has_arg(c.eal_args, {"-l", "--lcores", "-c"})) {
    args.push_back("-l");
    args.push_back(c.lcores);
  } else if (!has_arg(c.eal_args, {"-l", "--lcores", "-c"})) {
    // One lcore: the EAL's main thread is this one; shards register themselves.
    cpu_set_t set;
    CPU_ZERO(&set);
    int first = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      for (int i = 0; i < CPU_SETSIZE; ++i) {
        if (CPU_ISSET(i, &set)) {
          first = i;
          break;
        }
      }
    }
    args.push_back("-l");
    args.push_back(std::to_string(first));
  }
  if (c.no_huge && !has_arg(c.eal_args, {"--no-huge"})) args.push_back("--no-huge");
  if (c.no_huge && !has_arg(c.eal_args, {"-m", "--socket-mem"})) {
    args.push_back("-m");
    args.push_back(std::to_string(c.memory_mb));
  }
  // No shared runtime files, so several processes coexist. --in-memory does that with
  // hugepages; with --no-huge (legacy memory) the EAL refuses it, so --no-shconf instead.
  if (c.in_memory && !has_arg(c.eal_args, {"--in-memory", "--no-shconf", "--proc-type"})) {
    const bool huge = !c.no_huge || has_arg(c.eal_args, {"--huge-dir"});
    if (!huge || has_arg(c.eal_args, {"--no-huge"})) {
      args.push_back("--no-shconf");
    } else {
      args.push_back("--in-memory");
    }
    if (!has_arg(c.eal_args, {"--file-prefix"}))
      args.push_back("--file-prefix=tern" + std::to_string(::getpid()));
  }
  if (!has_arg(c.eal_args, {"--no-telemetry", "--telemetry"})) args.push_back("--no-telemetry");
  if (!has_arg(c.eal_args, {"--log-level"})) args.push_back("--log-level=lib.eal:warning");
  for (const std::string& a : c.pci_allow) {
    args.push_back("-a");
    args.push_back(a);
  }
  const bool pci_listed =
      !c.pci_allow.empty() || has_arg(c.eal_args, {"-a", "--allow", "-b", "--block", "--no-pci"});
  if (!vdev && !pci_listed) {
    // A PCI port ("0000:03:00.0"): probe that device only, not every NIC on the machine.
    args.push_back("-a");
    args.push_back(c.port);
  }
  if (vdev) {
    if (!pci_listed) args.push_back("--no-pci");
    // Unless the EAL args already create it.
    const std::string name = c.port.substr(0, c.port.find(','));
    bool listed = false;
    for (const std::string& a : c.eal_args) listed = listed || a.find(name) != std::string::npos;
    if (!listed) args.push_back("--vdev=" + c.port);
  }
  for (const std::string& a : c.eal_args) args.push_back(a);
  argv.clear();
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The EAL logs to stdout by default; keep stdout for the application's own output.
  rte_openlog_stream(stderr);
  // rte_eal_init pins the calling thread to its lcore; threads started later inherit that.
  cpu_set_t saved;
  const bool have_saved = pthread_getaffinity_np(pthread_self(), sizeof saved, &saved) == 0;
  const int r = rte_eal_init(static_cast<int>(argv.size() - 1), argv.data());
  if (have_saved) pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
  if (r < 0) {
    std::string line;
    for (std::size_t i = 1; i < args.size(); ++i) line += " " + args[i];
    error = rte_error("rte_eal_init failed", rte_errno) + " (EAL args:" + line + ")";
    return false;
  }
  return true;
}

bool init_port(Global& g, const DpdkConfig& c, unsigned queues, std::string& error) {
  const std::string name = c.port.substr(0, c.port.find(','));
  std::uint16_t port = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port) != 0) {
    error = "DPDK port '" + name + "' not found (" + std::to_string(rte_eth_dev_count_avail()) +
            " ports available)";
    return false;
  }
  rte_eth_dev_info info{};
  int r = rte_eth_dev_info_get(port, &info);
  if (r != 0) {
    error = rte_error("rte_eth_dev_info_get", r);
    return false;
  }
  rte_eth_conf conf{};
  // How N shards get their flows: one queue pair each, steered by RSS on the UDP 4-tuple or by
  // the kernel (net_af_packet with qpairs=N: PACKET_FANOUT_HASH); otherwise one queue pair for
  // the port, queue 0's shard steering UDP frames to the others in software.
  DpdkSteering steering = DpdkSteering::single;
  unsigned port_queues = queues;
  if (queues > 1) {
    const std::uint64_t want = RTE_ETH_RSS_NONFRAG_IPV4_UDP | RTE_ETH_RSS_IPV4;
    const std::uint64_t hf = want & info.flow_type_rss_offloads;
    const bool enough = info.max_rx_queues >= queues && info.max_tx_queues >= queues;
    if ((hf & RTE_ETH_RSS_NONFRAG_IPV4_UDP) != 0 && enough) {
      steering = DpdkSteering::rss;
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = hf;
    } else if (std::strcmp(info.driver_name, "net_af_packet") == 0 && enough) {
      steering = DpdkSteering::kernel_fanout;
    } else if (c.software_steering) {
      steering = DpdkSteering::software;
      port_queues = 1;
    } else {
      error = "port " + name + " (" + info.driver_name + ") has no RSS on UDP/IPv4 and " +
              std::to_string(info.max_rx_queues) + " rx queues; " + std::to_string(queues) +
              " shards need them (or software steering)";
      return false;
    }
  }
  g.tx_mode = net::ChecksumMode::software;
  g.tx_flags = 0;
  g.rx_checksum = false;
  if (c.checksum_offload) {
    const std::uint64_t ip = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM, udp = RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
    if ((info.tx_offload_capa & udp) != 0) {
      conf.txmode.offloads |= udp;
      g.tx_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_UDP_CKSUM;
      g.tx_mode = net::ChecksumMode::offload_udp;
      if ((info.tx_offload_capa & ip) != 0) {
        conf.txmode.offloads |= ip;
        g.tx_flags |= RTE_MBUF_F_TX_IP_CKSUM;
        g.tx_mode = net::ChecksumMode::offload;
      }
    }
    const std::uint64_t rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
    if ((info.rx_offload_capa & rx) == rx) {
      conf.rxmode.offloads |= rx;
      g.rx_checksum = true;
    }
  }
  if (!c.udp_checksum) {
    // Nothing left for the port to compute: the IPv4 header sum is 20 bytes.
    conf.txmode.offloads &=
        ~std::uint64_t{RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM};
    g.tx_flags = 0;
    g.tx_mode = net::ChecksumMode::udp_none;
  }
  r = rte_eth_dev_configure(port, static_cast<std::uint16_t>(port_queues),
                            static_cast<std::uint16_t>(port_queues), &conf);
  if (r != 0) {
    error = rte_error("rte_eth_dev_configure", r);
    return false;
  }
  std::uint16_t nrx = static_cast<std::uint16_t>(c.rx_descriptors);
  std::uint16_t ntx = static_cast<std::uint16_t>(c.tx_descriptors);
  rte_eth_dev_adjust_nb_rx_tx_desc(port, &nrx, &ntx);

  int socket = rte_eth_dev_socket_id(port);
  if (socket < 0) socket = static_cast<int>(rte_socket_id());
  if (socket < 0) socket = 0;
  const std::string pool_name = "tern_mbuf_s" + std::to_string(socket);
  rte_mempool* pool = rte_mempool_lookup(pool_name.c_str());
  if (pool == nullptr) {
    pool = rte_pktmbuf_pool_create(pool_name.c_str(), std::max(c.mbufs, 1024u),
                                   std::min(c.mbuf_cache, unsigned{RTE_MEMPOOL_CACHE_MAX_SIZE}), 0,
                                   RTE_MBUF_DEFAULT_BUF_SIZE, socket);
  }
  if (pool == nullptr) {
    error = rte_error("rte_pktmbuf_pool_create", rte_errno) + " (" + std::to_string(c.mbufs) +
            " mbufs; raise -m or lower mbufs)";
    return false;
  }
  for (unsigned q = 0; q < port_queues; ++q) {
    rte_eth_rxconf rxc = info.default_rxconf;
    rxc.offloads = conf.rxmode.offloads;
    r = rte_eth_rx_queue_setup(port, static_cast<std::uint16_t>(q), nrx,
                               static_cast<unsigned>(socket), &rxc, pool);
    if (r != 0) {
      error = rte_error(("rte_eth_rx_queue_setup " + std::to_string(q)).c_str(), r);
      return false;
    }
    rte_eth_txconf txc = info.default_txconf;
    txc.offloads = conf.txmode.offloads;
    r = rte_eth_tx_queue_setup(port, static_cast<std::uint16_t>(q), ntx,
                               static_cast<unsigned>(socket), &txc);
    if (r != 0) {
      error = rte_error(("rte_eth_tx_queue_setup " + std::to_string(q)).c_str(), r);
      return false;
    }
  }
  net::LinkConfig link = c.link;
  rte_ether_addr own{};
  rte_eth_macaddr_get(port, &own);
  if (link.mac.is_zero()) {
    std::memcpy(link.mac.bytes.data(), own.addr_bytes, 6);
    // A tap's MAC is the kernel interface's own: the kernel is the peer at the other end, so
    // we take a locally administered neighbour of it.
    if (std::strcmp(info.driver_name, "net_tap") == 0) {
      link.mac.bytes[0] = static_cast<std::uint8_t>((link.mac.bytes[0] | 0x02) & ~0x01);
      link.mac.bytes[5] ^= 0x01;
    }
  }
  if (std::memcmp(link.mac.bytes.data(), own.addr_bytes, 6) != 0) {
    // Another MAC than the port's: a second unicast filter, or promiscuous mode. The port's
    // primary MAC stays (on a tap it is the kernel's).
    rte_ether_addr want{};
    std::memcpy(want.addr_bytes, link.mac.bytes.data(), 6);
    if (rte_eth_dev_mac_addr_add(port, &want, 0) != 0) rte_eth_promiscuous_enable(port);
  }
  r = rte_eth_dev_start(port);
  if (r != 0) {
    error = rte_error("rte_eth_dev_start", r);
    return false;
  }
  g.port = port;
  g.queues = queues;
  g.steering = steering;
  g.steer_rings.clear();
  g.handoff_rings.clear();
  if (steering == DpdkSteering::software) {
    for (unsigned q = 0; q < queues; ++q) {
      g.steer_rings.push_back(std::make_unique<SteerRing>());
      g.handoff_rings.push_back(std::make_unique<HandoffRing>());
    }
  }
  g.pool = pool;
  g.link = link;
  g.queue_open.assign(queues, false);
  return true;
}

}  // namespace

bool dpdk_init(const DpdkConfig& config, unsigned queues, std::string& error) {
  Global& g = global();
  std::lock_guard lock(g.mu);
  if (g.eal_attempted) {
    error = "dpdk_init: already called in this process";
    return false;
  }
  if (config.port.empty()) {
    error = "dpdk: no port given";
    return false;
  }
  if (config.link.ipv4 == 0) {
    error = "dpdk: no IPv4 address given";
    return false;
  }
  if (queues == 0) queues = 1;
  g.eal_attempted = true;
  g.config = config;
  if (!init_eal(config, error)) return false;
  g.eal_ok = true;
  if (!init_port(g, config, queues, error)) return false;
  g.ready = true;
  return true;
}

bool dpdk_initialized() {
  Global& g = global();
  std::lock_guard lock(g.mu);
  return g.ready;
}

DpdkSteering dpdk_steering() {
  Global& g = global();
  std::lock_guard lock(g.mu);
  return g.steering;
}

const char* steering_name(DpdkSteering s) {
  switch (s) {
    case DpdkSteering::single: return "single";
    case DpdkSteering::rss: return "rss";
    case DpdkSteering::kernel_fanout: return "kernel_fanout";
    case DpdkSteering::software: return "software";
  }
  return "?";
}

std::string dpdk_describe() {
  Global& g = global();
  std::lock_guard lock(g.mu);
  if (!g.ready) return "not initialised";
  rte_eth_dev_info info{};
  rte_eth_dev_info_get(g.port, &info);
  const char* tx = g.tx_mode == net::ChecksumMode::offload       ? "offload"
                   : g.tx_mode == net::ChecksumMode::offload_udp ? "offload_udp"
                   : g.tx_mode == net::ChecksumMode::udp_none    ? "none (UDP 0 on IPv4)"
                                                                 : "software";
  return std::string("driver ") + (info.driver_name != nullptr ? info.driver_name : "?") + ", " +
         std::to_string(g.queues) + " shard(s), steering " + steering_name(g.steering) +
         ", tx checksum " + tx + ", rx checksum " + (g.rx_checksum ? "offload" : "software");
}

unsigned dpdk_queue_count() {
  Global& g = global();
  std::lock_guard lock(g.mu);
  return g.ready ? g.queues : 0;
}

net::LinkConfig dpdk_link() {
  Global& g = global();
  std::lock_guard lock(g.mu);
  return g.link;
}

void dpdk_shutdown() {
  Global& g = global();
  std::lock_guard lock(g.mu);
  if (!g.eal_ok) return;
  // Frames steered to shards that had already stopped.
  for (auto& ring : g.steer_rings) {
    SteeredFrame f;
    while (ring->try_pop(f)) rte_pktmbuf_free(f.m);
  }
  g.steer_rings.clear();
  for (auto& ring : g.handoff_rings) {
    rte_mbuf* m = nullptr;
    while (ring->try_pop(m)) rte_pktmbuf_free(m);
  }
  g.handoff_rings.clear();
  if (g.ready) {
    rte_eth_dev_stop(g.port);
    rte_eth_dev_close(g.port);
    g.ready = false;
  }
  rte_eal_cleanup();
  g.eal_ok = false;
}

DpdkPortStats dpdk_port_stats() {
  Global& g = global();
  DpdkPortStats s;
  if (!g.ready) return s;
  rte_eth_stats e{};
  if (rte_eth_stats_get(g.port, &e) != 0) return s;
  s.ipackets = e.ipackets;
  s.opackets = e.opackets;
  s.ibytes = e.ibytes;
  s.obytes = e.obytes;
  s.imissed = e.imissed;
  s.ierrors = e.ierrors;
  s.oerrors = e.oerrors;
  s.rx_nombuf = e.rx_nombuf;
  return s;
}

DpdkStats dpdk_closed_drivers_stats() {
  Global& g = global();
  DpdkStats s;
  {
    std::lock_guard lock(g.mu);
    s = g.closed;
  }
  s.port = dpdk_port_stats();
  return s;
}

std::string format_dpdk_stats(const DpdkStats& s) {
  std::string out;
  auto add = [&out](const std::string& name, std::uint64_t v) {
    if (v == 0) return;
    if (!out.empty()) out += ' ';
    out += name + "=" + std::to_string(v);
  };
  add("port.ipackets", s.port.ipackets);
  add("port.opackets", s.port.opackets);
  add("port.imissed", s.port.imissed);
  add("port.ierrors", s.port.ierrors);
  add("port.oerrors", s.port.oerrors);
  add("port.rx_nombuf", s.port.rx_nombuf);
  add("rx_arp", s.rx_arp);
  add("rx_other", s.rx_other);
  add("rx_wrong_port", s.rx_wrong_port);
  add("rx_own", s.rx_own);
  add("rx_multi_segment", s.rx_multi_segment);
  add("rx_bad_offload_checksum", s.rx_bad_offload_checksum);
  add("arp_requests_sent", s.arp_requests_sent);
  add("arp_replies_sent", s.arp_replies_sent);
  add("arp_pending", s.arp_pending);
  add("arp_queued", s.arp_queued);
  add("arp_failed", s.arp_failed);
  add("tx_no_ipv6", s.tx_no_ipv6);
  add("tx_too_big", s.tx_too_big);
  add("tx_no_mbuf", s.tx_no_mbuf);
  add("tx_full", s.tx_full);
  add("tx_backlogged", s.tx_backlogged);
  add("tx_backlog_dropped", s.tx_backlog_dropped);
  add("steered_out", s.steered_out);
  add("steered_in", s.steered_in);
  add("steer_dropped", s.steer_dropped);
  for (std::size_t i = 0; i < net::kDropCount; ++i)
    add(std::string("drop.") + net::drop_name(static_cast<net::Drop>(i)), s.drops.by_reason[i]);
  return out;
}

// ---- the per-queue driver --------------------------------------------------------------------

struct DpdkDriver::Impl {
  Impl(const Global& g, unsigned q, std::uint16_t udp_port)
      : port(g.port),
        queue(static_cast<std::uint16_t>(q)),
        pool(g.pool),
        link(g.link),
        resolver(g.link),
        tx_mode(g.tx_mode),
        tx_flags(g.tx_flags),
        rx_checksum(g.rx_checksum),
        drop_own(g.config.drop_own_frames),
        local_port(udp_port),
        arp_queue_limit(g.config.arp_queue),
        poll_sleep_us(std::max(1u, g.config.poll_sleep_us)),
        data_room(rte_pktmbuf_data_room_size(g.pool) - RTE_PKTMBUF_HEADROOM) {
    if (g.config.gateway_mac && g.link.ipv4_gateway != 0)
      resolver.set_static(g.link.ipv4_gateway, *g.config.gateway_mac);
    for (const auto& [ip, mac] : g.config.static_arp) resolver.set_static(ip, mac);
    pending.reserve(arp_queue_limit);
    std::memcpy(&own_mac_lo, link.mac.bytes.data(), 4);
    std::memcpy(&own_mac_hi, link.mac.bytes.data() + 4, 2);
    if (g.steering == DpdkSteering::software) {
      if (q == 0) {
        for (const auto& r : g.steer_rings) outbound.push_back(r.get());
        for (std::size_t i = 1; i < g.handoff_rings.size(); ++i)
          handoff_in.push_back(g.handoff_rings[i].get());
      } else {
        inbound = g.steer_rings[q].get();
        handoff_out = g.handoff_rings[q].get();
      }
    }
  }

  // Compares with two loads: memcmp of 6 bytes is a library call, once per frame.
  bool is_own_mac(const std::byte* mac) const {
    std::uint32_t a;
    std::uint16_t b;
    std::memcpy(&a, mac, 4);
    std::memcpy(&b, mac + 4, 2);
    return a == own_mac_lo && b == own_mac_hi;
  }

  // This shard's way out: its own tx queue, or under software steering (shards 1..N-1) the
  // hand-off ring to queue 0's shard. Returns how many leading frames were taken.
  std::uint16_t tx_raw(rte_mbuf** m, std::uint16_t n) {
    if (handoff_out != nullptr)
      return static_cast<std::uint16_t>(handoff_out->push_batch(std::span<rte_mbuf* const>(m, n)));
    return rte_eth_tx_burst(port, queue, m, n);
  }

  // Sends what the backlog holds, oldest first; true when it is empty afterwards.
  bool drain_backlog(std::uint64_t now) {
    if (backlog_n == 0) return true;
    std::size_t done = 0;
    while (done < backlog_n) {
      const auto want = static_cast<std::uint16_t>(std::min(backlog_n - done, kBurst));
      const std::uint16_t sent = tx_raw(backlog.data() + done, want);
      done += sent;
      if (sent < want) break;
    }
    if (done != 0) {
      std::memmove(backlog.data(), backlog.data() + done, (backlog_n - done) * sizeof(rte_mbuf*));
      backlog_n -= done;
      backlog_progress_us = now;
    } else if (now - backlog_progress_us > kBacklogGiveUpUs) {
      rte_pktmbuf_free_bulk(backlog.data(), static_cast<unsigned>(backlog_n));
      st.tx_full += backlog_n;
      stats->tx_dropped += backlog_n;
      st.tx_backlog_dropped += backlog_n;
      backlog_n = 0;
    }
    stats->tx_backlog = backlog_n;
    return backlog_n == 0;
  }

  // Sends n frames behind anything already held; what the queue refuses is held while there is
  // room, and dropped (counted) beyond that. Returns how many were sent or held.
  std::size_t tx(rte_mbuf** m, std::size_t n, std::uint64_t now) {
    std::size_t sent = 0;
    if (drain_backlog(now)) {
      while (sent < n) {
        const auto want = static_cast<std::uint16_t>(std::min(n - sent, kBurst));
        const std::uint16_t k = tx_raw(m + sent, want);
        sent += k;
        if (k < want) break;
      }
      if (sent < n) backlog_progress_us = now;
    }
    const std::size_t hold = std::min(n - sent, kBacklogCapacity - backlog_n);
    if (hold != 0) {
      std::memcpy(backlog.data() + backlog_n, m + sent, hold * sizeof(rte_mbuf*));
      backlog_n += hold;
      st.tx_backlogged += hold;
    }
    const std::size_t refused = n - sent - hold;
    if (refused != 0) {
      rte_pktmbuf_free_bulk(m + sent + hold, static_cast<unsigned>(refused));
      st.tx_full += refused;
      stats->tx_dropped += refused;
    }
    stats->tx_backlog = backlog_n;
    return sent + hold;
  }

  // Queue 0 under software steering: sends what the other shards handed over. Behind a
  // backlog they wait in their rings (whose producers then see them full).
  void drain_handoff(std::uint64_t now) {
    if (handoff_in.empty() || !drain_backlog(now)) return;
    std::array<rte_mbuf*, kBurst> bufs{};
    for (HandoffRing* ring : handoff_in) {
      const std::size_t n = ring->pop_batch(std::span<rte_mbuf*>(bufs));
      if (n != 0) tx(bufs.data(), n, now);
    }
  }

  // Queue 0: the port's counters and link, read now and then (not per packet).
  void refresh_port(std::uint64_t now) {
    if (queue != 0 || now < next_port_us) return;
    next_port_us = now + kPortStatsIntervalUs;
    rte_eth_stats e{};
    if (rte_eth_stats_get(port, &e) == 0) {
      rt::PortStats& p = stats->port;
      p.rx_packets = e.ipackets;
      p.tx_packets = e.opackets;
      p.rx_missed = e.imissed;
      p.rx_no_mbuf = e.rx_nombuf;
      p.rx_errors = e.ierrors;
      p.tx_errors = e.oerrors;
    }
    rte_eth_link l{};
    if (rte_eth_link_get_nowait(port, &l) == 0) {
      stats->port.link = l.link_status == RTE_ETH_LINK_UP ? 1 : 0;
      stats->port.link_speed_mbps = l.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : l.link_speed;
    }
  }

  struct Pending {
    std::uint32_t ip;
    rte_mbuf* m;
    std::uint32_t payload;
  };

  std::uint16_t port;
  std::uint16_t queue;
  rte_mempool* pool;
  net::LinkConfig link;
  net::ArpResolver resolver;
  net::ChecksumMode tx_mode;
  std::uint64_t tx_flags;
  bool rx_checksum;
  bool drop_own;
  std::uint16_t local_port;
  std::size_t arp_queue_limit;
  unsigned poll_sleep_us;
  std::size_t data_room;
  bool registered = false;
  std::uint64_t next_service_us = 0;
  std::uint64_t next_port_us = 0;
  std::uint32_t own_mac_lo = 0;
  std::uint16_t own_mac_hi = 0;
  // Software steering: queue 0 pushes to outbound[i] and pops handoff_in; queue i pops
  // `inbound` and pushes to handoff_out.
  SteerRing* inbound = nullptr;
  std::vector<SteerRing*> outbound;
  HandoffRing* handoff_out = nullptr;
  std::vector<HandoffRing*> handoff_in;
  std::array<rte_mbuf*, kBacklogCapacity> backlog{};
  std::size_t backlog_n = 0;
  std::uint64_t backlog_progress_us = 0;
  std::array<SteeredFrame, kBurst> steered{};

  std::array<rte_mbuf*, kBurst> rx_bufs{};
  std::array<rte_mbuf*, kBurst> held{};
  std::size_t held_n = 0;
  std::array<rte_mbuf*, kBurst> tx_bufs{};
  std::vector<Pending> pending;
  std::uint64_t arp_generation_seen = 0;
  DpdkStats st;
  rt::DriverStats* stats = nullptr;

  // Sends one control frame (ARP) built by `build` on this queue.
  template <class F>
  bool send_control(F&& build) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool);
    if (m == nullptr) {
      ++st.tx_no_mbuf;
      return false;
    }
    const std::size_t size = net::arp_frame_size(link);
    char* p = rte_pktmbuf_append(m, static_cast<std::uint16_t>(size));
    if (p == nullptr || build(std::span<std::byte>(reinterpret_cast<std::byte*>(p), size)) == 0) {
      rte_pktmbuf_free(m);
      return false;
    }
    return tx(&m, 1, steady_us()) == 1;
  }

  void send_arp_request(std::uint32_t ip) {
    if (send_control(
            [&](std::span<std::byte> out) { return net::build_arp_request(out, link, ip); }))
      ++st.arp_requests_sent;
  }

  void on_arp(const net::ArpPacket& a, std::uint64_t now) {
    ++st.rx_arp;
    const net::ArpVerdict v = resolver.on_arp(a, now);
    if (v.reply &&
        send_control([&](std::span<std::byte> out) { return net::build_arp_reply(out, link, a); }))
      ++st.arp_replies_sent;
    if (v.learned) {
      publish_learned(a.sender_ip, a.sender_mac);
      if (!pending.empty()) flush_pending(now);
    }
  }

  // Mappings learned by other queues.
  void import_learned(std::uint64_t now) {
    Global& g = global();
    const std::uint64_t gen = g.arp_generation.load(std::memory_order_acquire);
    if (gen == arp_generation_seen) return;
    arp_generation_seen = gen;
    std::vector<std::pair<std::uint32_t, net::MacAddress>> copy;
    {
      std::lock_guard lock(g.arp_mu);
      copy = g.learned;
    }
    for (const auto& [ip, mac] : copy) {
      const net::ArpTable::Entry* e = resolver.table().find(ip);
      if (e != nullptr && e->state == net::ArpTable::State::resolved && e->mac == mac) continue;
      net::ArpPacket a;
      a.op = net::ArpPacket::Op::reply;
      a.sender_ip = ip;
      a.sender_mac = mac;
      a.target_ip = link.ipv4;
      a.target_mac = link.mac;
      resolver.on_arp(a, now);
    }
    if (!pending.empty()) flush_pending(now);
  }

  // Sends the held frames whose next hop is now known; drops those whose resolution failed.
  void flush_pending(std::uint64_t now) {
    std::size_t keep = 0;
    for (Pending& p : pending) {
      const net::ArpTable::Entry* e = resolver.table().find(p.ip);
      if (e != nullptr && e->state == net::ArpTable::State::resolved) {
        std::memcpy(rte_pktmbuf_mtod(p.m, std::uint8_t*), e->mac.bytes.data(), 6);
        if (tx(&p.m, 1, now) == 1) {
          ++stats->tx_datagrams;
          stats->tx_bytes += p.payload;
        }
      } else if (e == nullptr || e->state != net::ArpTable::State::pending) {
        ++st.arp_failed;
        ++stats->tx_dropped;
        rte_pktmbuf_free(p.m);
      } else {
        pending[keep++] = p;
      }
    }
    pending.resize(keep);
  }

  // ARP housekeeping, at most once a millisecond (and whenever something was learned).
  void service(std::uint64_t now) {
    refresh_port(now);
    if (now < next_service_us) return;
    next_service_us = now + 1000;
    import_learned(now);
    if (resolver.next_deadline() <= now) {
      std::array<std::uint32_t, 8> due{};
      const std::size_t n = resolver.poll(now, due);
      for (std::size_t i = 0; i < n; ++i) send_arp_request(due[i]);
      if (!pending.empty()) flush_pending(now);
    }
  }
};

DpdkDriver::DpdkDriver(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  impl_->stats = &stats_;
  queue_ = impl_->queue;
  local_ = Endpoint::v4(impl_->link.ipv4, impl_->local_port);
}

DpdkDriver::~DpdkDriver() {
  Impl& d = *impl_;
  if (d.held_n != 0) rte_pktmbuf_free_bulk(d.held.data(), static_cast<unsigned>(d.held_n));
  // A last try for what the queue refused, then what is still held is counted as dropped.
  d.drain_backlog(steady_us());
  if (d.backlog_n != 0) {
    rte_pktmbuf_free_bulk(d.backlog.data(), static_cast<unsigned>(d.backlog_n));
    d.st.tx_full += d.backlog_n;
    d.st.tx_backlog_dropped += d.backlog_n;
    d.backlog_n = 0;
  }
  for (auto& p : d.pending) rte_pktmbuf_free(p.m);
  d.pending.clear();
  Global& g = global();
  {
    std::lock_guard lock(g.mu);
    if (queue_ < g.queue_open.size()) g.queue_open[queue_] = false;
    DpdkStats& c = g.closed;
    const DpdkStats& s = d.st;
    for (std::size_t i = 0; i < net::kDropCount; ++i) c.drops.by_reason[i] += s.drops.by_reason[i];
    c.rx_arp += s.rx_arp;
    c.rx_other += s.rx_other;
    c.rx_wrong_port += s.rx_wrong_port;
    c.rx_own += s.rx_own;
    c.rx_multi_segment += s.rx_multi_segment;
    c.rx_bad_offload_checksum += s.rx_bad_offload_checksum;
    c.arp_requests_sent += s.arp_requests_sent;
    c.arp_replies_sent += s.arp_replies_sent;
    c.arp_pending += s.arp_pending;
    c.arp_queued += s.arp_queued;
    c.arp_failed += s.arp_failed;
    c.tx_no_ipv6 += s.tx_no_ipv6;
    c.tx_too_big += s.tx_too_big;
    c.tx_no_mbuf += s.tx_no_mbuf;
    c.tx_full += s.tx_full;
    c.tx_backlogged += s.tx_backlogged;
    c.tx_backlog_dropped += s.tx_backlog_dropped;
    c.steered_out += s.steered_out;
    c.steered_in += s.steered_in;
    c.steer_dropped += s.steer_dropped;
  }
  if (d.registered) rte_thread_unregister();
}

rt::DriverCaps DpdkDriver::caps() const {
  rt::DriverCaps c;
  c.dual_stack = false;
  c.waitable = false;
  c.max_burst = kBurst;
  const std::size_t room = impl_->data_room - net::headers_size(net::Family::ipv4, impl_->link);
  c.max_datagram = std::min<std::size_t>(room, 65507);
  return c;
}

void DpdkDriver::refresh_stats() {
  impl_->next_port_us = 0;
  impl_->refresh_port(steady_us());
}

DpdkStats DpdkDriver::dpdk_stats() const {
  DpdkStats s = impl_->st;
  s.port = dpdk_port_stats();
  return s;
}

// Each burst used to read the clock (~20 ns), twice per busy-polling iteration.
std::uint64_t DpdkDriver::now() const { return now_us_ != 0 ? now_us_ : steady_us(); }

std::size_t DpdkDriver::rx_burst(std::span<rt::RxFrame> out) {
  Impl& d = *impl_;
  if (d.held_n != 0) {
    rte_pktmbuf_free_bulk(d.held.data(), static_cast<unsigned>(d.held_n));
    d.held_n = 0;
  }
  const std::uint64_t now = this->now();
  d.service(now);
  d.drain_handoff(now);
  d.drain_backlog(now);
  const auto want = static_cast<std::uint16_t>(std::min(out.size(), kBurst));
  if (want == 0) return 0;
  if (d.inbound != nullptr) {
    // Software steering, shards 1..N-1: what queue 0's shard passed on.
    const std::size_t n = d.inbound->pop_batch(std::span<SteeredFrame>(d.steered.data(), want));
    for (std::size_t i = 0; i < n; ++i) {
      const SteeredFrame& f = d.steered[i];
      out[i].from = f.from;
      out[i].bytes = {rte_pktmbuf_mtod(f.m, const std::byte*) + f.offset, f.length};
      d.held[d.held_n++] = f.m;
      stats_.rx_bytes += f.length;
    }
    stats_.rx_datagrams += n;
    d.st.steered_in += n;
    return n;
  }
  const std::uint16_t n = rte_eth_rx_burst(d.port, d.queue, d.rx_bufs.data(), want);
  std::size_t k = 0;
  // One for the burst: parse_frame resets every field itself, and a fresh one per frame was a
  // ~100-byte clear per datagram (a `rep stos` in LTO builds, see perf/README.md).
  net::ParsedFrame p;
  for (std::uint16_t i = 0; i < n; ++i) {
    rte_mbuf* m = d.rx_bufs[i];
    if (m->nb_segs != 1) {
      ++d.st.rx_multi_segment;
      ++stats_.rx_truncated;
      rte_pktmbuf_free(m);
      continue;
    }
    const auto* data = rte_pktmbuf_mtod(m, const std::byte*);
    const std::span<const std::byte> frame(data, m->data_len);
    // Our own transmissions, when the port loops them back (af_packet sees outgoing frames).
    if (d.drop_own && frame.size() >= 12 && d.is_own_mac(data + 6)) {
      ++d.st.rx_own;
      rte_pktmbuf_free(m);
      continue;
    }
    net::RxOptions opts;
    if (d.rx_checksum) {
      const std::uint64_t ip = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
      const std::uint64_t l4 = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
      if (ip == RTE_MBUF_F_RX_IP_CKSUM_BAD || l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD) {
        ++d.st.rx_bad_offload_checksum;
        ++stats_.rx_errors;
        rte_pktmbuf_free(m);
        continue;
      }
      opts.ip_checksum_verified = ip == RTE_MBUF_F_RX_IP_CKSUM_GOOD;
      opts.l4_checksum_verified = l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD;
    }
    net::Drop why{};
    if (!net::parse_frame(frame, d.link, opts, p, why)) {
      d.st.drops.add(why);
      rte_pktmbuf_free(m);
      continue;
    }
    if (p.kind == net::ParsedFrame::Kind::arp) {
      d.on_arp(p.arp, now);
      rte_pktmbuf_free(m);
      continue;
    }
    if (p.kind != net::ParsedFrame::Kind::udp) {
      ++d.st.rx_other;
      rte_pktmbuf_free(m);
      continue;
    }
    if (p.dst.port != d.local_port) {
      ++d.st.rx_wrong_port;
      rte_pktmbuf_free(m);
      continue;
    }
    if (!d.outbound.empty()) {
      const std::size_t t = steer_target(p.src, d.outbound.size());
      if (t != d.queue) {
        const SteeredFrame f{m, p.src, static_cast<std::uint16_t>(p.payload.data() - data),
                             static_cast<std::uint16_t>(p.payload.size())};
        if (d.outbound[t]->try_push(f)) {
          ++d.st.steered_out;
        } else {
          ++d.st.steer_dropped;
          rte_pktmbuf_free(m);
        }
        continue;
      }
    }
    // Rebuilt rather than copied: the parser has just stored p.src in pieces, and a 16-byte
    // copy of it would stall on store forwarding.
    if (p.family == net::Family::ipv4) {
      out[k].from.set_v4(p.src.v4_host_order(), p.src.port);
    } else {
      out[k].from = p.src;
    }
    out[k].bytes = p.payload;
    ++k;
    d.held[d.held_n++] = m;
    ++stats_.rx_datagrams;
    stats_.rx_bytes += p.payload.size();
  }
  return k;
}

// The backlog is the slack: a burst that finds the queue full waits there, and once it is full
// the shard holds its datagrams back rather than have them dropped.
std::size_t DpdkDriver::tx_room() const { return kBacklogCapacity - impl_->backlog_n; }

std::size_t DpdkDriver::tx_burst(std::span<const rt::TxFrame> frames) {
  const Endpoint src = Endpoint::v4(impl_->link.ipv4, impl_->local_port);
  return tx_each(frames, [&src](std::size_t) -> const Endpoint& { return src; });
}

std::size_t DpdkDriver::tx_burst_from(std::span<const Endpoint> from,
                                      std::span<const rt::TxFrame> frames) {
  if (from.size() < frames.size()) frames = frames.first(from.size());
  return tx_each(frames, [from](std::size_t i) -> const Endpoint& { return from[i]; });
}

template <class Source>
std::size_t DpdkDriver::tx_each(std::span<const rt::TxFrame> frames, Source source) {
  Impl& d = *impl_;
  const std::uint64_t now = this->now();
  const std::size_t hdr = net::headers_size(net::Family::ipv4, d.link);
  std::size_t index = 0;  // of the frame in hand, in the caller's span
  std::size_t handed = 0;
  std::array<std::uint32_t, kBurst> tx_lengths{};
  // A burst mostly goes to one next hop (the gateway, or the one peer of a memif link): its
  // resolved MAC is looked up once per burst, not once per frame.
  std::uint32_t resolved_hop = 0;
  net::MacAddress resolved_mac;
  bool have_resolved = false;
  d.drain_handoff(now);
  while (!frames.empty()) {
    const std::size_t chunk = std::min(frames.size(), kBurst);
    std::size_t k = 0;
    std::uint64_t k_bytes = 0;
    for (std::size_t i = 0; i < chunk; ++i, ++index) {
      const rt::TxFrame& f = frames[i];
      const Endpoint& src = source(index);
      if (!f.to.is_v4()) {
        ++d.st.tx_no_ipv6;
        ++stats_.tx_dropped;
        continue;
      }
      const std::uint32_t hop = net::next_hop_v4(d.link, f.to.v4_host_order());
      net::ArpLookup r;
      if (have_resolved && hop == resolved_hop) {
        r.status = net::ArpLookup::Status::resolved;
        r.mac = resolved_mac;
      } else {
        r = d.resolver.lookup(hop, now);
        if (r.send_request) d.send_arp_request(hop);
        have_resolved = r.status == net::ArpLookup::Status::resolved;
        resolved_hop = hop;
        resolved_mac = r.mac;
      }
      if (r.status == net::ArpLookup::Status::failed) {
        ++d.st.arp_failed;
        ++stats_.tx_dropped;
        continue;
      }
      const bool resolved = r.status == net::ArpLookup::Status::resolved;
      if (!resolved && d.pending.size() >= d.arp_queue_limit) {
        ++d.st.arp_pending;
        ++stats_.tx_dropped;
        continue;
      }
      const std::size_t total = hdr + f.bytes.size();
      if (total > d.data_room) {
        ++d.st.tx_too_big;
        ++stats_.tx_dropped;
        continue;
      }
      rte_mbuf* m = rte_pktmbuf_alloc(d.pool);
      if (m == nullptr) {
        ++d.st.tx_no_mbuf;
        ++stats_.tx_dropped;
        continue;
      }
      auto* p =
          reinterpret_cast<std::byte*>(rte_pktmbuf_append(m, static_cast<std::uint16_t>(total)));
      if (!f.bytes.empty()) std::memcpy(p + hdr, f.bytes.data(), f.bytes.size());
      if (net::write_udp_headers(std::span<std::byte>(p, total), d.link, r.mac, src, f.to,
                                 d.tx_mode) == 0) {
        ++stats_.tx_errors;
        rte_pktmbuf_free(m);
        continue;
      }
      m->l2_len = static_cast<std::uint16_t>(net::kEthernetHeaderSize +
                                             (d.link.vlan != 0 ? net::kVlanTagSize : 0));
      m->l3_len = net::kIpv4HeaderSize;
      m->ol_flags |= d.tx_flags;
      if (!resolved) {
        d.pending.push_back({hop, m, static_cast<std::uint32_t>(f.bytes.size())});
        ++d.st.arp_queued;
        ++handed;
        continue;
      }
      d.tx_bufs[k++] = m;
      k_bytes += f.bytes.size();
    }
    // Taken means sent or held for later; the refused rest is freed and counted by tx().
    std::size_t sent = 0;
    if (k != 0) {
      for (std::size_t i = 0; i < k; ++i) {
        // Lengths first: tx() may free what it refuses.
        tx_lengths[i] = rte_pktmbuf_pkt_len(d.tx_bufs[i]) - static_cast<std::uint32_t>(hdr);
      }
      sent = d.tx(d.tx_bufs.data(), k, now);
      for (std::size_t i = sent; i < k; ++i) k_bytes -= tx_lengths[i];
    }
    stats_.tx_datagrams += sent;
    stats_.tx_bytes += k_bytes;
    handed += sent;
    frames = frames.subspan(chunk);
  }
  return handed;
}

void DpdkDriver::wait(std::uint64_t timeout_us) {
  if (timeout_us == 0) return;
  if (wake_fd_ >= 0) {
    std::uint64_t v;
    // Readable: someone wants the shard awake. Read it empty and return.
    if (::read(wake_fd_, &v, sizeof v) == static_cast<ssize_t>(sizeof v)) return;
  }
  const std::uint64_t us = std::min<std::uint64_t>(timeout_us, impl_->poll_sleep_us);
  timespec ts{static_cast<time_t>(us / 1'000'000), static_cast<long>((us % 1'000'000) * 1000)};
  ::nanosleep(&ts, nullptr);
}

std::unique_ptr<rt::Driver> open_dpdk_driver(unsigned queue, std::uint16_t udp_port,
                                             std::string& error) {
  Global& g = global();
  std::unique_ptr<DpdkDriver::Impl> impl;
  {
    std::lock_guard lock(g.mu);
    if (!g.ready) {
      error = "dpdk: dpdk_init has not been called (or failed) in this process";
      return nullptr;
    }
    if (queue >= g.queues) {
      error = "dpdk: queue " + std::to_string(queue) + " out of range (port configured with " +
              std::to_string(g.queues) + " queues)";
      return nullptr;
    }
    if (udp_port == 0) {
      error = "dpdk: a local UDP port is required (port 0 cannot be picked without a kernel)";
      return nullptr;
    }
    if (g.queue_open[queue]) {
      error = "dpdk: queue " + std::to_string(queue) + " is already open";
      return nullptr;
    }
    impl = std::make_unique<DpdkDriver::Impl>(g, queue, udp_port);
    g.queue_open[queue] = true;
  }
  if (rte_lcore_id() == LCORE_ID_ANY) {
    if (rte_thread_register() != 0) {
      error = rte_error("rte_thread_register", rte_errno);
      std::lock_guard lock(g.mu);
      g.queue_open[queue] = false;
      return nullptr;
    }
    impl->registered = true;
  }
  return std::unique_ptr<rt::Driver>(new DpdkDriver(std::move(impl)));
}

}  // namespace tern::drv
