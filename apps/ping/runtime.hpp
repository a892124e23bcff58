// What tern-ping's three modes share: shard group set-up, the clock, payload words, and the
// run functions main() dispatches to.
#pragma once

#include "common/dpdk_session.hpp"
#include "common/little_endian.hpp"
#include "options.hpp"
#include "shard.hpp"

#include <tern/endpoint.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

namespace tern::ping {

int run_server(const ServeConfig& config);
int run_ping(const PingConfig& config);
int run_flood(const FloodConfig& config);
int run_discover(const DiscoverConfig& config);
// --protocol kcp (apps/ping/kcp.cpp): on tern::Host's KCP personality.
int run_kcp_server(const ServeConfig& config);
int run_kcp_ping(const PingConfig& config);

// Steady clock in nanoseconds; the same clock on every thread, so a timestamp written by one
// shard can be compared by another.
inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// Shard group options for a mode: the runtime flags plus the protocol settings.
rt::ShardGroupOptions group_options(const RuntimeConfig& runtime, const tern::Endpoint& bind,
                                    bool share_port, std::size_t peer_limit,
                                    std::uint32_t channel_limit);

// The wildcard address of the server's family, port 0: where a client group binds. With the
// dpdk driver: the configured IPv4 address and the local port (DPDK cannot pick port 0).
tern::Endpoint client_bind(const tern::Endpoint& server, const RuntimeConfig& runtime);

// shard.connect, or with --token-key a connect with a freshly minted token (encrypted).
tern::PeerHandle connect_peer(rt::Shard& shard, const RuntimeConfig& runtime,
                              const tern::Endpoint& server, std::size_t channels,
                              std::uint32_t data);

// Process-wide driver set-up a mode needs before its group starts (the DPDK EAL and port for
// --driver dpdk; nothing otherwise), undone when the guard goes. Declare it before the shard
// group so the group (and its drivers) are gone first.
class DriverSetup {
 public:
  bool open(const RuntimeConfig& runtime, std::string& error) {
    return runtime.driver != rt::DriverKind::dpdk ||
           dpdk_.open(runtime.dpdk, static_cast<unsigned>(runtime.shards), error);
  }

 private:
  app::DpdkSession dpdk_{"tern-ping"};
};

// Blocks SIGINT/SIGTERM in the calling thread (threads started afterwards inherit the mask,
// so the shard threads never take the signal), and undoes it.
void block_stop_signals();
void unblock_stop_signals();

}  // namespace tern::ping
