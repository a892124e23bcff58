#include "dpdk_setup.hpp"

#if TERN_LOADGEN_HAVE_DPDK
#include "dpdk_driver.hpp"
#endif
#if TERN_LOADGEN_HAVE_DPDK_CONFIG
#include "dpdk_config.hpp"
#endif

#include <unistd.h>

#include <cstdio>

namespace tern::loadgen {

DpdkSetup::~DpdkSetup() {
#if TERN_LOADGEN_HAVE_DPDK
  if (!open_) return;
  if (drv::dpdk_initialized()) {
    std::fprintf(stderr, "tern-loadgen: dpdk %s\n",
                 drv::format_dpdk_stats(drv::dpdk_closed_drivers_stats()).c_str());
  }
  drv::dpdk_shutdown();
#endif
}

bool DpdkSetup::open(const Config& config, std::string& error) {
  if (config.driver != rt::DriverKind::dpdk) return true;
#if TERN_LOADGEN_HAVE_DPDK
  const DpdkOptions& o = config.dpdk;
  drv::DpdkConfig c;
  if (!o.config.empty()) {
#if TERN_LOADGEN_HAVE_DPDK_CONFIG
    if (!drv::load_dpdk_config(o.config, c, error)) return false;
#else
    error = "--dpdk-config: this build has no TOML support (toml++ not found)";
    return false;
#endif
  }
  // Flags override the file.
  if (!o.port.empty()) c.port = o.port;
  if (!o.eal.empty()) c.eal_args = o.eal;
  if (o.mbufs != 0) c.mbufs = o.mbufs;
  if (o.huge) c.no_huge = false;
  if (!o.ip.empty() && !drv::parse_ipv4_prefix(o.ip, c.link)) {
    error = "--dpdk-ip wants A.B.C.D/NN, got '" + o.ip + "'";
    return false;
  }
  if (!o.gateway.empty()) {
    net::LinkConfig gw;
    if (!drv::parse_ipv4_prefix(o.gateway, gw) || gw.ipv4_prefix_len != 32) {
      error = "--dpdk-gateway wants A.B.C.D, got '" + o.gateway + "'";
      return false;
    }
    c.link.ipv4_gateway = gw.ipv4;
  }
  if (!o.gateway_mac.empty()) {
    c.gateway_mac = drv::parse_mac(o.gateway_mac);
    if (!c.gateway_mac) {
      error = "--dpdk-gateway-mac wants aa:bb:cc:dd:ee:ff, got '" + o.gateway_mac + "'";
      return false;
    }
  }
  if (!o.mac.empty()) {
    const auto mac = drv::parse_mac(o.mac);
    if (!mac || mac->is_multicast() || mac->is_zero()) {
      error = "--dpdk-mac wants a unicast aa:bb:cc:dd:ee:ff, got '" + o.mac + "'";
      return false;
    }
    c.link.mac = *mac;
  }
  if (c.port.empty()) {
    error = "--driver dpdk needs a port (--dpdk-port SPEC or port in the [dpdk] file)";
    return false;
  }
  if (c.link.ipv4 == 0) {
    error = "--driver dpdk needs an address (--dpdk-ip A.B.C.D/NN or ip in the [dpdk] file)";
    return false;
  }
  open_ = true;
  if (!drv::dpdk_init(c, 1, error)) return false;  // one client shard
  const net::LinkConfig link = drv::dpdk_link();
  std::fprintf(stderr, "tern-loadgen: dpdk port %s mac %s, %s\n", c.port.c_str(),
               drv::format_mac(link.mac).c_str(), drv::dpdk_describe().c_str());
  return true;
#else
  error = "--driver dpdk: this build has no DPDK driver";
  return false;
#endif
}

tern::Endpoint DpdkSetup::client_bind(const Config& config) const {
#if TERN_LOADGEN_HAVE_DPDK
  const net::LinkConfig link = drv::dpdk_link();
  const std::uint16_t port = config.dpdk.local_port != 0
                                 ? config.dpdk.local_port
                                 : static_cast<std::uint16_t>(40000 + ::getpid() % 20000);
  return tern::Endpoint::v4(link.ipv4, port);
#else
  (void)config;
  return tern::Endpoint::v4(0, 0);
#endif
}

}  // namespace tern::loadgen
