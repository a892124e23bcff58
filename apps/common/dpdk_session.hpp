// --driver dpdk: the process-wide DPDK set-up (EAL and port) tern-ping and tern-loadgen need
// before their shard groups start, undone when the guard goes. In a build without the DPDK
// driver, open() refuses and the rest does nothing.
#pragma once

#include "common/dpdk_options.hpp"

#include <tern/endpoint.hpp>

#include <string>

namespace tern::app {

class DpdkSession {
 public:
  explicit DpdkSession(std::string app) : app_(std::move(app)) {}
  DpdkSession(const DpdkSession&) = delete;
  DpdkSession& operator=(const DpdkSession&) = delete;
  // Prints "APP: dpdk <the port's and drivers' counters>" and shuts the port and the EAL down.
  // Declare the guard before the shard groups so they (and their drivers) are gone first.
  ~DpdkSession();
  // A --dpdk-config file first, the flags over it, then drv::dpdk_init with `queues` queue
  // pairs; prints "APP: dpdk port ... mac ..." on success. False with a reason.
  bool open(const DpdkOptions& options, unsigned queues, std::string& error);

 private:
  std::string app_;
  bool open_ = false;
};

// Where a client group binds: the configured IPv4 address and --dpdk-local-port (or
// 40000 + pid % 20000). Only after DpdkSession::open() succeeded.
Endpoint dpdk_client_bind(const DpdkOptions& options);

}  // namespace tern::app
