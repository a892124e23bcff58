// The apps' DPDK set-up with the DPDK driver built (dpdk_session_off.cpp stands in without it).
#include "common/dpdk_session.hpp"

#include "common/dpdk_file.hpp"
#include "dpdk_driver.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>

namespace tern::app {

struct DpdkSession::Settings {
  drv::DpdkConfig config;
};

DpdkSession::DpdkSession(std::string app)
    : app_(std::move(app)), settings_(std::make_unique<Settings>()) {}

DpdkSession::~DpdkSession() {
  if (!started_) return;
  if (drv::dpdk_initialized()) {
    std::fprintf(stderr, "%s: dpdk %s\n", app_.c_str(),
                 drv::format_dpdk_stats(drv::dpdk_closed_drivers_stats()).c_str());
  }
  drv::dpdk_shutdown();
}

bool DpdkSession::read_file(const std::string& path, std::string& error) {
  drv::DpdkConfig from_file;
  if (!read_dpdk_file(path, from_file, error)) return false;
  settings_->config = std::move(from_file);
  return true;
}

bool DpdkSession::apply_flags(const DpdkOptions& o, std::string& error) {
  const drv::DpdkFlags flags{o.port, o.ip, o.gateway, o.gateway_mac, o.mac, o.eal, o.mbufs, o.huge};
  return drv::apply_dpdk_flags(flags, settings_->config, error);
}

bool DpdkSession::has_port() const { return !settings_->config.port.empty(); }

bool DpdkSession::has_address() const { return settings_->config.link.ipv4 != 0; }

bool DpdkSession::start(unsigned queues, std::string& error) {
  const drv::DpdkConfig& c = settings_->config;
  started_ = true;
  if (!drv::dpdk_init(c, queues, error)) return false;
  const net::LinkConfig link = drv::dpdk_link();
  std::fprintf(stderr, "%s: dpdk port %s mac %s, %s\n", app_.c_str(), c.port.c_str(),
               drv::format_mac(link.mac).c_str(), drv::dpdk_describe().c_str());
  return true;
}

Endpoint DpdkSession::address(std::uint16_t udp_port) const {
  return Endpoint::v4(drv::dpdk_link().ipv4, udp_port);
}

bool DpdkSession::open(const DpdkOptions& o, unsigned queues, std::string& error) {
  if (!o.config.empty() && !read_file(o.config, error)) return false;
  // Flags override the file.
  if (!apply_flags(o, error)) return false;
  if (!has_port()) {
    error = "--driver dpdk needs a port (--dpdk-port SPEC or port in the [dpdk] file)";
    return false;
  }
  if (!has_address()) {
    error = "--driver dpdk needs an address (--dpdk-ip A.B.C.D/NN or ip in the [dpdk] file)";
    return false;
  }
  return start(queues, error);
}

Endpoint dpdk_client_bind(const DpdkOptions& o) {
  const net::LinkConfig link = drv::dpdk_link();
  const std::uint16_t port =
      o.local_port != 0 ? o.local_port : static_cast<std::uint16_t>(40000 + ::getpid() % 20000);
  return Endpoint::v4(link.ipv4, port);
}

std::size_t dpdk_send_forged(rt::Driver& driver, std::span<const ForgedDatagram> datagrams) {
  auto* dpdk = dynamic_cast<drv::DpdkDriver*>(&driver);
  if (dpdk == nullptr) return 0;
  constexpr std::size_t kBatch = 32;
  std::array<Endpoint, kBatch> from;
  std::array<rt::TxFrame, kBatch> frames;
  std::size_t taken = 0;
  while (!datagrams.empty()) {
    const std::size_t n = std::min(datagrams.size(), kBatch);
    for (std::size_t i = 0; i < n; ++i) {
      from[i] = datagrams[i].from;
      frames[i] = rt::TxFrame{datagrams[i].to, datagrams[i].bytes};
    }
    const std::size_t k =
        dpdk->tx_burst_from(std::span(from.data(), n), std::span(frames.data(), n));
    taken += k;
    if (k < n) break;
    datagrams = datagrams.subspan(n);
  }
  return taken;
}

}  // namespace tern::app
