// tern::drv::DpdkDriver: one DPDK ethdev queue pair per shard (DESIGN §6).
//
// The process initialises the EAL and the port once (dpdk_init), then each shard thread opens
// its own queue pair (open_dpdk_driver(queue, ...)). The driver sees whole Ethernet frames and
// does the link layer itself with tern::net: frames are parsed with net::parse_frame, ARP is
// answered and learned inside the driver and never passed up, UDP payloads are handed up
// zero-copy (spans into the mbufs, freed at the next rx_burst). Transmit builds each frame in
// a fresh mbuf behind headers written by net::write_udp_headers, with IPv4/UDP checksums
// offloaded when the port supports it.
//
//   drv::DpdkConfig c;
//   c.port = "net_af_packet0,iface=veth0";     // vdev spec (created) or an existing device
//   c.link.ipv4 = 0x0a4d0001; c.link.ipv4_prefix_len = 24;
//   if (!drv::dpdk_init(c, shards, error)) ...; // once per process, before the shards start
//   auto d = drv::open_dpdk_driver(shard_index, udp_port, error);  // on the shard's thread
//   ...
//   drv::dpdk_shutdown();                        // after every driver is closed
//
// Poll mode: wait() sleeps at most poll_sleep_us (caps().waitable is false). Queue counts:
// N > 1 needs RSS on the UDP 4-tuple (flow_type_rss_offloads), or a net_af_packet port opened
// with qpairs=N (the kernel's PACKET_FANOUT_HASH steers flows). Without either, only N = 1.
#pragma once

#include "driver.hpp"
#include "net.hpp"
#include "net_arp.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tern::drv {

struct DpdkConfig {
  // Extra EAL arguments, passed as given after the ones below (e.g. "--log-level=8").
  std::vector<std::string> eal_args;
  // The EAL's core list (-l), e.g. "2" or "2-3"; empty: the first CPU this process may use.
  // Shards are not EAL lcores (they register their own threads), so one core is enough.
  std::string lcores;
  // PCI devices the EAL may probe (-a each). Empty with a PCI port: just that port; with a
  // vdev port: none (--no-pci).
  std::vector<std::string> pci_allow;
  // The device: a name ("net_af_packet0") that exists after EAL init, or a vdev spec
  // ("net_af_packet0,iface=veth0", "net_memif0,role=server,socket=/tmp/x.sock",
  // "net_tap0,iface=tap0") that is added with --vdev; the name is the part before the comma.
  std::string port;
  // MAC (zero: the port's own), IPv4 address (required), prefix, gateway, VLAN, TTL.
  net::LinkConfig link;
  // The gateway's MAC, if known: a static ARP entry (never asked for).
  std::optional<net::MacAddress> gateway_mac;
  // Further static ARP entries (IPv4 host order -> MAC), like `ip neigh add ... permanent`.
  std::vector<std::pair<std::uint32_t, net::MacAddress>> static_arp;
  // Drop received frames whose source MAC is ours (ports that loop our transmissions back).
  // The frame-path benchmark turns it off to receive its own frames through net_ring.
  bool drop_own_frames = true;
  unsigned mbufs = 8191;  // per pool; at least 2048 (rx rings + tx in flight + caches)
  unsigned mbuf_cache = 256;
  unsigned rx_descriptors = 1024;
  unsigned tx_descriptors = 1024;
  bool no_huge = true;           // --no-huge (anonymous memory) unless the EAL args say otherwise
  unsigned memory_mb = 512;      // -m, with no_huge
  bool in_memory = true;         // --in-memory: no shared runtime files, so processes coexist
  bool checksum_offload = true;  // use the port's TX/RX checksum offloads when it has them
  // False: IPv4 datagrams go out with UDP checksum 0 ("none"), for links that cannot corrupt a
  // frame (net_memif). Received checksums are verified either way unless 0.
  bool udp_checksum = true;
  unsigned poll_sleep_us = 50;  // longest single sleep in wait()
  std::size_t arp_queue = 32;   // frames held per queue while their next hop is resolved
  // N > 1 shards on a port with neither RSS nor N queues: queue 0's shard receives everything
  // and passes each UDP frame to the shard its remote endpoint hashes to; all shards share one
  // tx queue (under a lock). False: dpdk_init fails instead.
  bool software_steering = true;
};

// How dpdk_init spread the shards' traffic.
enum class DpdkSteering : std::uint8_t {
  single,         // one shard
  rss,            // one queue pair per shard, RSS on the UDP 4-tuple
  kernel_fanout,  // net_af_packet qpairs=N: the kernel's PACKET_FANOUT_HASH
  software,       // one queue pair; queue 0's shard steers frames through rings
};
const char* steering_name(DpdkSteering s);

// Parses "A.B.C.D/NN" into link.ipv4 and ipv4_prefix_len, "aa:bb:cc:dd:ee:ff" into a MAC.
bool parse_ipv4_prefix(const std::string& text, net::LinkConfig& link);
std::optional<net::MacAddress> parse_mac(const std::string& text);

// The --dpdk-* command-line settings the apps share; empty strings and 0 leave `out` alone.
struct DpdkFlags {
  std::string port;              // --dpdk-port SPEC
  std::string ip;                // --dpdk-ip A.B.C.D/NN
  std::string gateway;           // --dpdk-gateway A.B.C.D
  std::string gateway_mac;       // --dpdk-gateway-mac MAC
  std::string mac;               // --dpdk-mac MAC (unicast)
  std::vector<std::string> eal;  // --dpdk-eal "ARGS"
  unsigned mbufs = 0;            // --dpdk-mbufs
  bool huge = false;             // --dpdk-huge
};
// Lays the flags over `out` (usually read from a [dpdk] file first). False with
// "--dpdk-FLAG wants ..., got '...'".
bool apply_dpdk_flags(const DpdkFlags& flags, DpdkConfig& out, std::string& error);
std::string format_mac(const net::MacAddress& mac);

// Initialises the EAL (once per process) and the port with `queues` rx/tx queue pairs, one per
// shard. False with a one-line reason on any failure; a second call fails too.
bool dpdk_init(const DpdkConfig& config, unsigned queues, std::string& error);
bool dpdk_initialized();
// The queue count dpdk_init configured (shards; 0 before) and how they are fed.
unsigned dpdk_queue_count();
DpdkSteering dpdk_steering();
// "driver net_tap, 1 queue(s), steering single, tx checksum offload, rx checksum offload".
std::string dpdk_describe();
// The link configuration in effect (MAC filled in from the port).
net::LinkConfig dpdk_link();
// Stops and closes the port and cleans the EAL up. Every driver must be closed first.
void dpdk_shutdown();

// Opens queue pair `queue` for the calling thread (registers it with the EAL when it is not an
// EAL thread, so mempool caches work). `udp_port` is the local UDP port (must not be 0):
// datagrams to other ports are dropped and counted. nullptr with a reason on failure.
std::unique_ptr<rt::Driver> open_dpdk_driver(unsigned queue, std::uint16_t udp_port,
                                             std::string& error);

// The ethdev's own counters (rte_eth_stats_get).
struct DpdkPortStats {
  std::uint64_t ipackets = 0;
  std::uint64_t opackets = 0;
  std::uint64_t ibytes = 0;
  std::uint64_t obytes = 0;
  std::uint64_t imissed = 0;
  std::uint64_t ierrors = 0;
  std::uint64_t oerrors = 0;
  std::uint64_t rx_nombuf = 0;
};
DpdkPortStats dpdk_port_stats();

// What the driver adds to rt::DriverStats.
struct DpdkStats {
  net::DropCounters drops;          // refused by parse_frame, by reason
  std::uint64_t rx_arp = 0;         // ARP frames consumed
  std::uint64_t rx_other = 0;       // valid ICMP/ICMPv6 frames (ignored)
  std::uint64_t rx_wrong_port = 0;  // UDP to another local port
  std::uint64_t rx_own = 0;         // frames sent by us, looped back by the port
  std::uint64_t rx_multi_segment = 0;
  std::uint64_t rx_bad_offload_checksum = 0;  // the NIC flagged a bad IP or L4 checksum
  std::uint64_t arp_requests_sent = 0;
  std::uint64_t arp_replies_sent = 0;
  std::uint64_t arp_pending = 0;         // frames dropped: next hop unresolved and the queue full
  std::uint64_t arp_queued = 0;          // frames held until their next hop was resolved
  std::uint64_t arp_failed = 0;          // frames dropped: resolution failed
  std::uint64_t tx_no_ipv6 = 0;          // IPv6 destinations (no neighbour discovery yet)
  std::uint64_t tx_too_big = 0;          // frame larger than an mbuf's data room
  std::uint64_t tx_no_mbuf = 0;          // mbuf allocation failed
  std::uint64_t tx_full = 0;             // dropped: the tx queue was full and the backlog too
  std::uint64_t tx_backlogged = 0;       // frames held for a full tx queue and sent later
  std::uint64_t tx_backlog_dropped = 0;  // of tx_full: held, but the queue made no progress
  std::uint64_t steered_out = 0;         // software steering: frames passed to other shards
  std::uint64_t steered_in = 0;          // frames taken from this shard's steering ring
  std::uint64_t steer_dropped = 0;       // the target shard's ring was full
  DpdkPortStats port;                    // the whole port, every queue
};

// The sum of the stats of every driver closed so far (each adds its own when it closes), with
// the port's counters: what an app prints after its shard group has stopped.
DpdkStats dpdk_closed_drivers_stats();
// One line of the non-zero counters, "arp_replies_sent=2 drop.not_for_us=5 ...".
std::string format_dpdk_stats(const DpdkStats& s);

class DpdkDriver final : public rt::Driver {
 public:
  ~DpdkDriver() override;
  DpdkDriver(const DpdkDriver&) = delete;
  DpdkDriver& operator=(const DpdkDriver&) = delete;

  std::size_t rx_burst(std::span<rt::RxFrame> out) override;
  std::size_t tx_burst(std::span<const rt::TxFrame> frames) override;
  // As tx_burst, but frame i leaves from from[i] (an IPv4 address and port other than ours):
  // how a load generator forges a flood's sources on a link only DPDK reaches (memif). Frames
  // without a source are not sent. Call it on the queue's thread, as tx_burst.
  std::size_t tx_burst_from(std::span<const Endpoint> from, std::span<const rt::TxFrame> frames);
  std::size_t tx_room() const override;
  void wait(std::uint64_t timeout_us) override;
  void set_wake_fd(int fd) override { wake_fd_ = fd; }
  void set_time(std::uint64_t now_us) override { now_us_ = now_us; }

  Endpoint local_endpoint() const override { return local_; }
  rt::DriverCaps caps() const override;
  rt::DriverStats stats() const override { return stats_; }
  void refresh_stats() override;
  std::string name() const override { return "dpdk"; }

  DpdkStats dpdk_stats() const;
  unsigned queue() const { return queue_; }

 private:
  struct Impl;
  friend std::unique_ptr<rt::Driver> open_dpdk_driver(unsigned, std::uint16_t, std::string&);
  explicit DpdkDriver(std::unique_ptr<Impl> impl);

  std::uint64_t now() const;
  // tx_burst's body; source(i) is frame i's source endpoint.
  template <class Source>
  std::size_t tx_each(std::span<const rt::TxFrame> frames, Source source);

  std::unique_ptr<Impl> impl_;
  unsigned queue_ = 0;
  std::uint64_t now_us_ = 0;  // the shard's clock; 0 until a shard gives it
  Endpoint local_;
  int wake_fd_ = -1;
  rt::DriverStats stats_;
};

}  // namespace tern::drv
