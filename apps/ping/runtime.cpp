#include "runtime.hpp"

#include <chrono>
#include <cstdio>
#include <string>

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
  o.host.channels = proto::channel_switches(runtime.channel_rules);
  // The clients (each shard on its own port) only read the echoes, so they take them as views
  // of the received datagrams; the server sends each message back out and needs it as a Packet.
  o.host.lend_payloads = !share_port;
  if (share_port && runtime.token_key) {
    o.host.security = proto::Security::optional;
    o.host.token_keys.keys[0] = proto::sec::TokenKey{runtime.token_key->id, runtime.token_key->key};
    o.host.token_keys.count = 1;
    // Tokens list the address clients connect to; a wildcard bind is taken as loopback.
    if (bind.is_unspecified()) {
      o.host.secure_addresses[0] = tern::Endpoint::v4(0x7f000001u, bind.port);
      o.host.secure_addresses[1] = *tern::Endpoint::parse("[::1]:" + std::to_string(bind.port));
      o.host.secure_address_count = 2;
    } else {
      o.host.secure_addresses[0] = bind;
      o.host.secure_address_count = 1;
    }
  }
  return o;
}

tern::PeerHandle connect_peer(rt::Shard& shard, const RuntimeConfig& runtime,
                              const tern::Endpoint& server, std::size_t channels,
                              std::uint32_t data) {
  if (!runtime.token_key) return shard.connect(server, channels, data);
  tern::TokenRequest req;
  req.client_id = data;
  req.servers = {server};
  req.now_s = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  req.expire_s = req.now_s + 300;
  tern::ConnectToken token;
  std::string error;
  if (!tern::mint_token(*runtime.token_key, req, token, error)) return tern::PeerHandle{};
  return shard.connect_secure(server, channels, data, token);
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
