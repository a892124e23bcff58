#include "runtime.hpp"

#include <cstdio>

#if TERN_PING_HAVE_DPDK
#include "dpdk_driver.hpp"
#endif
#if TERN_PING_HAVE_DPDK_CONFIG
#include "dpdk_config.hpp"
#endif

#include <signal.h>
#include <unistd.h>

namespace tern::ping {

rt::ShardGroupOptions group_options(const RuntimeConfig& runtime, const tern::Endpoint& bind,
                                    bool share_port, std::size_t peer_limit,
                                    std::uint32_t channel_limit) {
  rt::ShardGroupOptions o;
  o.bind = bind;
  o.shards = runtime.shards;
  o.driver = runtime.driver;
  o.idle = runtime.idle;
  o.pin = runtime.pin;
  o.share_port = share_port;
  o.host.peer_limit = peer_limit;
  o.host.channel_limit = channel_limit;
  o.host.checksum = runtime.checksum;
  return o;
}

tern::Endpoint client_bind(const tern::Endpoint& server, const RuntimeConfig& runtime) {
#if TERN_PING_HAVE_DPDK
  if (runtime.driver == rt::DriverKind::dpdk) {
    // DriverSetup::open ran first: the address in effect (flag or file).
    const net::LinkConfig link = drv::dpdk_link();
    const std::uint16_t port = runtime.dpdk.local_port != 0
                                   ? runtime.dpdk.local_port
                                   : static_cast<std::uint16_t>(40000 + ::getpid() % 20000);
    return tern::Endpoint::v4(link.ipv4, port);
  }
#else
  (void)runtime;
#endif
  return *tern::Endpoint::parse(server.is_v4() ? "0.0.0.0:0" : "[::]:0");
}

DriverSetup::~DriverSetup() {
#if TERN_PING_HAVE_DPDK
  if (!dpdk_) return;
  if (drv::dpdk_initialized()) {
    std::fprintf(stderr, "tern-ping: dpdk %s\n",
                 drv::format_dpdk_stats(drv::dpdk_closed_drivers_stats()).c_str());
  }
  drv::dpdk_shutdown();
#endif
}

bool DriverSetup::open(const RuntimeConfig& runtime, std::string& error) {
  if (runtime.driver != rt::DriverKind::dpdk) return true;
#if TERN_PING_HAVE_DPDK
  const DpdkOptions& o = runtime.dpdk;
  drv::DpdkConfig c;
  if (!o.config.empty()) {
#if TERN_PING_HAVE_DPDK_CONFIG
    if (!drv::load_dpdk_config(o.config, c, error)) return false;
#else
    error = "--dpdk-config: this build has no TOML support (toml++ not found)";
    return false;
#endif
  }
  // Flags override the file.
  const drv::DpdkFlags flags{o.port, o.ip, o.gateway, o.gateway_mac, o.mac, o.eal, o.mbufs, o.huge};
  if (!drv::apply_dpdk_flags(flags, c, error)) return false;
  dpdk_ = true;
  if (!drv::dpdk_init(c, static_cast<unsigned>(runtime.shards), error)) return false;
  const net::LinkConfig link = drv::dpdk_link();
  std::fprintf(stderr, "tern-ping: dpdk port %s mac %s, %s\n", o.port.c_str(),
               drv::format_mac(link.mac).c_str(), drv::dpdk_describe().c_str());
  return true;
#else
  error = "--driver dpdk: this build has no DPDK driver";
  return false;
#endif
}

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void unblock_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

}  // namespace tern::ping
