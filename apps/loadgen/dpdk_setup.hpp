// --driver dpdk: the process-wide DPDK set-up (EAL and port) tern-loadgen needs before its
// client group starts, undone when the guard goes. Without the DPDK driver in the build, open()
// fails for --driver dpdk and does nothing otherwise.
#pragma once

#include "options.hpp"

#include <tern/endpoint.hpp>

#include <string>

namespace tern::loadgen {

class DpdkSetup {
 public:
  DpdkSetup() = default;
  DpdkSetup(const DpdkSetup&) = delete;
  DpdkSetup& operator=(const DpdkSetup&) = delete;
  // Prints the port's counters and shuts the port and the EAL down. Declare the guard before
  // the shard groups so they (and their drivers) are gone first.
  ~DpdkSetup();
  // A --dpdk-config file first, the flags over it, then drv::dpdk_init with one queue. Nothing
  // unless config.driver is dpdk. False with a reason.
  bool open(const Config& config, std::string& error);
  // Where the client group binds: the configured IPv4 address and --dpdk-local-port (or
  // 40000 + pid % 20000). Only after open() succeeded.
  tern::Endpoint client_bind(const Config& config) const;

 private:
  bool open_ = false;
};

}  // namespace tern::loadgen
