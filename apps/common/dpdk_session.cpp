#include "common/dpdk_session.hpp"

#if TERN_APP_HAVE_DPDK
#include "dpdk_driver.hpp"
#endif
#if TERN_APP_HAVE_DPDK_CONFIG
#include "dpdk_config.hpp"
#endif

#include <unistd.h>

#include <cstdio>

namespace tern::app {

DpdkSession::~DpdkSession() {
#if TERN_APP_HAVE_DPDK
  if (!open_) return;
  if (drv::dpdk_initialized()) {
    std::fprintf(stderr, "%s: dpdk %s\n", app_.c_str(),
                 drv::format_dpdk_stats(drv::dpdk_closed_drivers_stats()).c_str());
  }
  drv::dpdk_shutdown();
#endif
}

bool DpdkSession::open(const DpdkOptions& o, unsigned queues, std::string& error) {
#if TERN_APP_HAVE_DPDK
  drv::DpdkConfig c;
  if (!o.config.empty()) {
#if TERN_APP_HAVE_DPDK_CONFIG
    if (!drv::load_dpdk_config(o.config, c, error)) return false;
#else
    error = "--dpdk-config: this build has no TOML support (toml++ not found)";
    return false;
#endif
  }
  // Flags override the file.
  const drv::DpdkFlags flags{o.port, o.ip, o.gateway, o.gateway_mac, o.mac, o.eal, o.mbufs, o.huge};
  if (!drv::apply_dpdk_flags(flags, c, error)) return false;
  if (c.port.empty()) {
    error = "--driver dpdk needs a port (--dpdk-port SPEC or port in the [dpdk] file)";
    return false;
  }
  if (c.link.ipv4 == 0) {
    error = "--driver dpdk needs an address (--dpdk-ip A.B.C.D/NN or ip in the [dpdk] file)";
    return false;
  }
  open_ = true;
  if (!drv::dpdk_init(c, queues, error)) return false;
  const net::LinkConfig link = drv::dpdk_link();
  std::fprintf(stderr, "%s: dpdk port %s mac %s, %s\n", app_.c_str(), c.port.c_str(),
               drv::format_mac(link.mac).c_str(), drv::dpdk_describe().c_str());
  return true;
#else
  (void)o;
  (void)queues;
  error = "--driver dpdk: this build has no DPDK driver";
  return false;
#endif
}

Endpoint dpdk_client_bind(const DpdkOptions& o) {
#if TERN_APP_HAVE_DPDK
  const net::LinkConfig link = drv::dpdk_link();
  const std::uint16_t port =
      o.local_port != 0 ? o.local_port : static_cast<std::uint16_t>(40000 + ::getpid() % 20000);
  return Endpoint::v4(link.ipv4, port);
#else
  (void)o;
  return Endpoint::v4(0, 0);
#endif
}

}  // namespace tern::app
