// The [dpdk] section of a TOML file as a drv::DpdkConfig (toml++), so every app configures the
// DPDK driver the same way (config/dpdk-*.toml are samples):
//
//   [dpdk]
//   port = "net_af_packet0,iface=veth0"   # device name or vdev spec (required)
//   ip = "10.77.0.1/24"                   # IPv4 address / on-link prefix (required)
//   gateway = "10.77.0.254"               # next hop off the prefix (optional)
//   gateway_mac = "02:00:00:00:00:fe"     # static ARP entry for it (optional)
//   static_arp = ["10.77.0.9 02:00:00:00:00:09"]   # more static ARP entries
//   mac = "02:00:00:00:00:01"             # default: the port's own
//   vlan = 0                              # 802.1Q VLAN ID, 0 = untagged
//   eal_args = ["--log-level=lib.eal:notice"]
//   hugepages = false                     # false: --no-huge -m memory_mb
//   memory_mb = 512
//   mbufs = 8191
//   rx_descriptors = 1024
//   tx_descriptors = 1024
//   checksum_offload = true
//   udp_checksum = true                   # false: IPv4 UDP checksum 0 (memif)
//   software_steering = true
//   poll_sleep_us = 50
//   arp_queue = 32
//
//   drv::DpdkConfig c;
//   if (!drv::load_dpdk_config("config/dpdk-af-packet.toml", c, error)) ...
//   if (!drv::dpdk_init(c, shards, error)) ...
#pragma once

#include "dpdk_driver.hpp"

#include <toml++/toml.h>

#include <string>
#include <vector>

namespace tern::drv {

// Reads one [dpdk] table into `out` (keys absent keep `out`'s values). False with
// "where: key: reason" on an unknown key or a bad value. `where` prefixes the messages.
bool dpdk_config_from_toml(const toml::table& section, const std::string& where, DpdkConfig& out,
                           std::string& error);
// Parses the file and reads its [dpdk] section (required).
bool load_dpdk_config(const std::string& path, DpdkConfig& out, std::string& error);

}  // namespace tern::drv
