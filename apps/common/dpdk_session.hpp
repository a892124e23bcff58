// --driver dpdk: the process-wide DPDK set-up (EAL and port) the apps need before their shard
// groups start, undone when the guard goes. The apps' one place for DPDK: dpdk_session.cpp is
// built with the DPDK driver and dpdk_session_off.cpp without it (meson picks), where every
// step refuses with a reason, so no app carries an #if for DPDK. Whether the build has it:
// drv::driver_built(rt::DriverKind::dpdk) (drivers/factory).
#pragma once

#include "common/dpdk_options.hpp"

#include <tern/endpoint.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

namespace tern::rt {
class Driver;
}  // namespace tern::rt

namespace tern::app {

class DpdkSession {
 public:
  explicit DpdkSession(std::string app);
  DpdkSession(const DpdkSession&) = delete;
  DpdkSession& operator=(const DpdkSession&) = delete;
  // Prints "APP: dpdk <the port's and drivers' counters>" and shuts the port and the EAL down.
  // Declare the guard before the shard groups so they (and their drivers) are gone first.
  ~DpdkSession();

  // The settings, step by step (tern-relay's order: its file's [dpdk] section, a --dpdk-config
  // file, the flags). read_file replaces them with a TOML file's [dpdk] table (keys it lacks
  // take their defaults); false with "FILE: dpdk.KEY: reason" and the like.
  bool read_file(const std::string& path, std::string& error);
  // The --dpdk-* values over the settings (the config path and local port are not read).
  bool apply_flags(const DpdkOptions& flags, std::string& error);
  bool has_port() const;
  bool has_address() const;
  // drv::dpdk_init with `queues` queue pairs; prints "APP: dpdk port ... mac ..." on success.
  bool start(unsigned queues, std::string& error);
  // The port's IPv4 address with `udp_port`, where a server on it is reached (after start).
  Endpoint address(std::uint16_t udp_port) const;

  // All of it for tern-ping and tern-loadgen: --dpdk-config first, the flags over it, the port
  // and address checked, then start(queues). False with a reason.
  bool open(const DpdkOptions& options, unsigned queues, std::string& error);

 private:
  struct Settings;  // drv::DpdkConfig, which needs the DPDK driver's header
  std::string app_;
  std::unique_ptr<Settings> settings_;
  bool started_ = false;
};

// Where a client group binds: the configured IPv4 address and --dpdk-local-port (or
// 40000 + pid % 20000). Only after DpdkSession::open() succeeded.
Endpoint dpdk_client_bind(const DpdkOptions& options);

// A datagram from an address and port that are not ours (tern-loadgen's forged CONNECT flood).
struct ForgedDatagram {
  Endpoint from;
  Endpoint to;
  std::span<const std::byte> bytes;
};
// Sends them on `driver`'s queue, which must be a DPDK driver (drv::DpdkDriver::tx_burst_from),
// from the thread that owns it (a task posted to its shard). Returns how many the queue took;
// 0 for any other driver and in builds without DPDK.
std::size_t dpdk_send_forged(rt::Driver& driver, std::span<const ForgedDatagram> datagrams);

}  // namespace tern::app
