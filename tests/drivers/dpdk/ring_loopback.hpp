// A net_ring port that loops every frame back to its sender: datagrams go to our own address
// (a static ARP entry for it) and own frames are not dropped. Shared by the dpdk tests and
// benchmarks that need a real DPDK port without a peer process.
#pragma once

#include "dpdk_driver.hpp"

#include <cstdint>

namespace tern::test {

inline drv::DpdkConfig ring_loopback_config(std::uint32_t ipv4, std::uint8_t mac_last_byte,
                                            std::uint32_t mbufs) {
  drv::DpdkConfig c;
  c.port = "net_ring0";
  c.link.ipv4 = ipv4;
  c.link.ipv4_prefix_len = 24;
  c.link.mac = {{0x02, 0x00, 0x00, 0x00, 0x00, mac_last_byte}};
  c.static_arp = {{ipv4, c.link.mac}};
  c.drop_own_frames = false;
  c.mbufs = mbufs;
  c.eal_args = {"--log-level=lib.eal:error"};
  return c;
}

}  // namespace tern::test
