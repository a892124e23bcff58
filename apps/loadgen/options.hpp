// tern-loadgen's command line: what one run is configured with.
#pragma once

#include "common/dpdk_options.hpp"
#include "shard.hpp"

#include <tern/endpoint.hpp>
#include <tern/secure.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tern::loadgen {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

extern const char* const kUsage;

// The payload header every message starts with (little endian):
//   [0, 4) sender's global client id, [4, 8) sequence number (per sender),
//   [8, 16) send time in steady-clock nanoseconds, [16] delivery tag (tern::Delivery value).
inline constexpr std::size_t kHeaderBytes = 17;
inline constexpr std::size_t kMinSize = 24;
inline constexpr std::size_t kMaxSize = std::size_t{1} << 20;

enum class DeliveryMode : std::uint8_t { reliable, unreliable, unsequenced, mix };

const char* to_string(DeliveryMode m);

// --driver dpdk: the port, the address and the EAL (drivers/dpdk/dpdk_driver.hpp), as given.
using DpdkOptions = app::DpdkOptions;

// --schedule: from `at_ms` into the measured period on, each sending client sends `rate_hz`.
struct RateStep {
  std::uint64_t at_ms = 0;
  std::uint64_t rate_hz = 0;
};

struct Config {
  bool help = false;
  tern::Endpoint target;
  std::size_t clients = 100;
  std::size_t room_size = 8;
  std::uint64_t rate_hz = 30;      // messages per second per sending client (0: connect, stay idle)
  std::vector<RateStep> schedule;  // rate changes during the measured period, in time order
  bool per_second = false;         // report each second of the measured period too
  std::size_t size = 64;
  std::uint64_t duration_ms = 5000;
  std::uint64_t warmup_ms = 1000;
  DeliveryMode delivery = DeliveryMode::reliable;
  std::uint32_t channels = 1;
  std::string sources_text;            // as given, for the report
  std::vector<std::uint32_t> sources;  // IPv4, host order; empty: wildcard bind
  std::size_t shards = 1;
  rt::DriverKind driver = rt::DriverKind::socket;
  DpdkOptions dpdk;  // driver == dpdk (one client group of one shard; no --sources)
  rt::IdlePolicy idle = rt::IdlePolicy::wait_deadline;
  std::string json_path;
  std::uint32_t first_room = 1;
  bool broadcast = false;
  std::uint64_t timeout_ms = 10000;
  std::uint32_t ack_delay_ms = 0;  // HostConfig::ack_delay_ms for every client
  // --token-key FILE (secure sessions): every client connects with a token it minted under
  // this key for --target, its room in the token's user data ("room=N"); all encrypted.
  std::optional<tern::TokenKey> token_key;
  bool checksum = false;                         // HostConfig::checksum
  bool selective_acks = true;                    // HostConfig::selective_acks
  bool fast_retransmit = true;                   // HostConfig::fast_retransmit
  bool nodelay = false;                          // HostConfig::nodelay
  bool redundancy = false;                       // HostConfig::redundancy
  bool congestion_control = true;                // HostConfig::congestion_control
  std::vector<tern::ChannelRule> channel_rules;  // --channel-options, in order
  bool congestion_window = true;                 // HostConfig::congestion_window
  std::uint32_t min_rto_ms = 200;                // HostConfig::min_rto_ms
  // HostConfig::max_queued for every client: payload bytes a client holds (queued, in flight,
  // unacknowledged) beyond which its next message is refused, counted and owed as lost. Keeps
  // the generator's memory bounded when the target stops taking traffic. 0: no bound.
  std::uint64_t max_queued = std::uint64_t{64} << 10;
  bool throttle_window = false;  // HostConfig::throttle_reliable_window
  bool quiet = false;
  // --protocol kcp: every client is a KCP session (engine/protocol/kcp, KCP's nodelay profile)
  // against tern-relay's KCP port, joining its room with a first message "join:<room>"; the
  // relay then delivers reliable, in order, on one stream (so --delivery reliable, one channel).
  bool kcp = false;
  // --flood-rate: forged libenet CONNECTs per second from spoofed sources (every address of
  // --flood-from but its first and last, a fresh port each), never answered, from
  // --flood-at for --flood-for (0: to the end) seconds into the measured period. Kernel
  // drivers send them through a raw socket, DPDK as frames of its own on the clients' port.
  std::uint64_t flood_rate = 0;
  std::uint64_t flood_at_ms = 0;
  std::uint64_t flood_for_ms = 0;
  std::string flood_from_text;
  std::uint32_t flood_network = 0;  // host order
  std::uint32_t flood_hosts = 0;
  // --late-clients: this many more clients connect --late-at seconds into the measured period,
  // each in a room of its own, idle; the report gives their connect times.
  std::size_t late_clients = 0;
  std::uint64_t late_at_ms = 1000;
};

// False with a one-line reason on any bad command line.
bool parse_config(int argc, const char* const* argv, Config& config, std::string& error);

// "3:200,6:50" -> {3000 ms, 200 Hz}, {6000 ms, 50 Hz}: times (seconds, up to 3 decimals)
// strictly increasing, each rate at most `max_rate`. False with a reason when malformed.
bool parse_schedule(std::string_view text, std::uint64_t max_rate, std::vector<RateStep>& out,
                    std::string& error);

// "10.0.0.0/24" -> up to `limit` host addresses of the block (network address and, for
// prefixes up to /30, the broadcast address skipped). False when malformed or not IPv4.
bool parse_sources(std::string_view cidr, std::size_t limit, std::vector<std::uint32_t>& out);

}  // namespace tern::loadgen
