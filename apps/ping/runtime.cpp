#include "runtime.hpp"

#include <cstdio>

#include <signal.h>
#include <unistd.h>

namespace tern::ping {

rt::ShardGroupOptions group_options(const RuntimeConfig& runtime, const tern::Endpoint& bind,
                                    bool share_port, std::size_t peer_limit,
                                    std::uint32_t channel_limit) {
  rt::ShardGroupOptions o;
  o.open_driver = rt::open_driver;
  o.bind = bind;
  o.shards = runtime.shards;
  o.driver = runtime.driver;
  o.idle = runtime.idle;
  o.pin = runtime.pin;
  o.share_port = share_port;
  o.host.peer_limit = peer_limit;
  o.host.channel_limit = channel_limit;
  o.host.checksum = runtime.checksum;
  o.host.pmtu = runtime.path_mtu;
  // The clients (each shard on its own port) only read the echoes, so they take them as views
  // of the received datagrams; the server sends each message back out and needs it as a Packet.
  o.host.lend_payloads = !share_port;
  return o;
}

tern::Endpoint client_bind(const tern::Endpoint& server, const RuntimeConfig& runtime) {
  // DriverSetup::open ran first: the address in effect (flag or file).
  if (runtime.driver == rt::DriverKind::dpdk) return app::dpdk_client_bind(runtime.dpdk);
  return *tern::Endpoint::parse(server.is_v4() ? "0.0.0.0:0" : "[::]:0");
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
