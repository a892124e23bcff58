// tern-ping's command line: the three modes and what each one is configured with.
#pragma once

#include "common/dpdk_options.hpp"
#include "shard.hpp"

#include <tern/endpoint.hpp>
#include <tern/secure.hpp>
#include <tern/types.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tern::ping {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

extern const char* const kUsage;

// --driver dpdk: the port, the addresses and the EAL (see drivers/dpdk/dpdk_driver.hpp).
using DpdkOptions = app::DpdkOptions;

// How the shard threads run; every mode has these.
struct RuntimeConfig {
  rt::DriverKind driver = rt::DriverKind::socket;
  rt::IdlePolicy idle = rt::IdlePolicy::wait_deadline;
  std::size_t shards = 1;
  bool pin = false;
  bool checksum = false;
  bool path_mtu = false;  // path MTU discovery with Tern peers that run it too
  std::vector<tern::ChannelRule> channel_rules;  // --channel-options, in order
  DpdkOptions dpdk;                              // driver == dpdk
  // --token-key FILE (secure sessions): a server takes tokens under this key (policy
  // optional: plain ENet clients still connect); a client mints one per connection.
  std::optional<tern::TokenKey> token_key;
};

// The wire protocol: ENet on the shard runtime, or KCP on tern::Host (one thread, socket).
enum class Protocol { enet, kcp };

struct ServeConfig {
  tern::Endpoint bind;
  bool discovery = false;  // --info given: answer discovery pings with it
  std::string info;
  Protocol protocol = Protocol::enet;
  std::size_t peers = 4096;  // per shard
  std::uint32_t channels = 255;
  RuntimeConfig runtime;
};

// Ping-pong: one connection, one ping outstanding.
struct PingConfig {
  tern::Endpoint server;
  Protocol protocol = Protocol::enet;
  std::uint64_t count = 10000;
  std::size_t size = 64;
  tern::Delivery delivery = tern::Delivery::reliable;
  std::uint8_t channel = 0;
  std::uint64_t warmup = 100;  // pings
  std::uint64_t timeout_ms = 5000;
  RuntimeConfig runtime;
};

// Many connections, each with a window of messages in flight or a paced send rate.
struct FloodConfig {
  tern::Endpoint server;
  std::size_t peers = 1000;
  std::size_t window = 1;     // messages in flight per peer (window mode)
  bool paced = false;         // --rate given
  std::uint64_t rate_hz = 0;  // messages per second per peer (paced mode; 0 = idle peers)
  std::uint64_t warmup_ms = 1000;
  std::uint64_t duration_ms = 5000;
  std::size_t size = 64;
  tern::Delivery delivery = tern::Delivery::reliable;
  std::uint8_t channel = 0;
  std::uint64_t timeout_ms = 5000;  // for connecting every peer
  std::string json_path;
  RuntimeConfig runtime;
};

// Offline discovery: one ping to a server or a broadcast address, and every answer that
// comes within the timeout.
struct DiscoverConfig {
  tern::Endpoint target;
  std::size_t size = 512;  // info bytes the ping asks room for
  std::uint64_t timeout_ms = 1000;
};

enum class Mode { help, serve, ping, flood, discover };

struct Config {
  Mode mode = Mode::help;
  ServeConfig serve;
  PingConfig ping;
  FloodConfig flood;
  DiscoverConfig discover;
};

// False with a one-line reason on any bad command line.
bool parse_config(int argc, const char* const* argv, Config& config, std::string& error);

}  // namespace tern::ping
