// tern-relay's configuration: a TOML file (config/relay.toml documents every key) and the
// command-line flags that override it.
#pragma once

#include <tern/endpoint.hpp>
#include <tern/secure.hpp>
#include <tern/types.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tern::relay {

struct RoomRange {
  std::uint32_t first = 0;
  std::uint32_t last = 0;
  bool contains(std::uint32_t room) const { return room >= first && room <= last; }
};

struct RelayConfig {
  Endpoint listen = Endpoint::v4(0, 7777);
  std::size_t shards = 0;         // 0 = one per CPU
  std::string driver = "socket";  // "socket", "uring" or "dpdk"
  std::string idle = "wait";
  bool pin = true;
  // SO_RCVBUF of each shard's socket (socket and uring drivers). A relay past its capacity
  // must not lose what it cannot read yet: a datagram the kernel drops is often an
  // acknowledgement, whose copies the relay then resends to members who had them, so the
  // overload feeds itself. The clients' windows bound what can be in flight; this holds it.
  std::size_t receive_buffer = std::size_t{64} << 20;
  std::optional<Endpoint> metrics;  // HTTP /metrics; none = off
  // /metrics has one series per room and per client for the busiest ones only, and the rest
  // summed in one "other" series: rooms and clients are unbounded, a time-series database's
  // series are not.
  std::size_t top_rooms = 10;
  std::size_t top_talkers = 10;
  // [admin]: the admin endpoint on the metrics port (admin.hpp). Empty: off.
  std::string admin_token;
  // [log]: "text" (the lines as they always were) or "json" (one object per line).
  std::string log_format = "text";

  std::size_t max_peers = 4096;  // whole relay
  std::uint32_t max_room_size = 64;
  std::uint32_t channels = 255;
  std::uint32_t max_message_rate = 0;    // messages/s per peer, 0 = unlimited
  std::uint32_t max_peer_bandwidth = 0;  // incoming bytes/s per peer, 0 = unlimited
  std::uint32_t incoming_bandwidth = 0;  // ENet host bandwidth limits (bytes/s), 0 = off
  std::uint32_t outgoing_bandwidth = 0;
  std::uint32_t max_message_size = 1 << 20;
  // Bytes a member may have waiting (queued, in flight, unacknowledged): a member whose reliable
  // copies would pass it is disconnected (kSlowConsumer); unreliable copies are shed past half
  // of it. 0 = no limit.
  std::size_t member_backlog = 1 << 20;

  // [overload]: back-pressure before the acknowledgement (relay.hpp).
  // A member backlog (bytes) past which its room's members are held; released below half of
  // it. 0 = 64 KiB, or a quarter of member_backlog if that is less. What sits in a backlog is
  // latency for everyone in the room and memory for the relay; 64 KiB is some 100 ms of a busy
  // member's copies.
  std::size_t hold_backlog = 0;
  // A member that keeps its room held this long is disconnected (kSlowConsumer). Held ENet
  // senders give up after about 5 s without an acknowledgement, so keep it well below that.
  std::uint32_t slow_member_ms = 2000;
  // Messages waiting for one other shard's ring past which the rooms fanning out to it are
  // held; released below half of it.
  std::size_t overflow_limit = 4096;
  // For tests: cross-shard ring slots used (0 = all of them).
  std::size_t ring_limit = 0;
  std::size_t hold_threshold() const {
    if (hold_backlog != 0) return hold_backlog;
    constexpr std::size_t kDefault = 64 << 10;
    return member_backlog != 0 ? std::clamp<std::size_t>(member_backlog / 4, 1, kDefault)
                               : kDefault;
  }

  // [protocol]: how the relay speaks to every client (HostConfig's fields of the same names).
  bool checksum = false;       // ENet CRC32 on every datagram; clients must enable it too
  bool selective_acks = true;  // Tern's ack ranges with clients that offer them
  bool path_mtu = false;       // path MTU discovery with Tern clients that offer it
  std::uint32_t ack_delay_ms = 0;
  // [security]: the handshake under attack (engine/protocol/WIRE.md, "Handshake under attack").
  bool verify_before_peer = true;
  std::uint32_t half_open_capacity = 65536;
  std::uint32_t half_open_timeout_ms = 10000;
  std::uint32_t connect_rate_per_address = 0;  // CONNECTs/s, 0 = no limit
  std::uint32_t connect_burst_per_address = 8;
  std::uint32_t connect_rate_per_prefix = 0;  // per /24 IPv4, /64 IPv6
  std::uint32_t connect_burst_per_prefix = 64;
  // Bans file: "ADDRESS[/BITS] [SECONDS]" a line (apps/relay/bans.hpp); SIGHUP reloads it.
  std::string bans_path;  // acks wait this long for a message to ride with
  // [security] secure sessions (engine/protocol/WIRE.md, "Secure sessions"): policy plain,
  // optional or required; key_file and, while rotating, key_file_old (tern-token keygen);
  // public_address: the address clients reach the relay at, which tokens list (default: the
  // listen address, a wildcard taken as 127.0.0.1; on DPDK the port's address). A token's
  // user data "room=N" names the member's room instead of its connect data.
  std::string security_policy = "plain";
  std::vector<tern::TokenKey> token_keys;
  std::optional<tern::Endpoint> public_address;
  // AES-256-GCM for clients that offer it, where this CPU has AES-NI (else ChaCha20-Poly1305).
  bool secure_aes = true;
  bool fast_retransmit = true;    // resend what later acks overtook, before its timeout
  bool congestion_window = true;  // after a stall, resend an MTU and regrow as acks return
  // Retransmission timeouts never shorter than this (HostConfig::min_rto_ms). On a sub-ms
  // path ENet's are 2-5 ms; after a stall of either side, a client's acks wait behind its
  // messages, each worth a fan-out, tens of ms of the relay's work, and a shorter floor took
  // every client for stalled and shrank its congestion window: the relay never caught up
  // (perf/README.md, "Stall recovery"). 0 = ENet's timeouts as computed.
  std::uint32_t min_rto_ms = 200;
  // ENet's packet throttle also shrinks the reliable window as RTTs rise
  // (HostConfig::throttle_reliable_window). Off: a client that fell behind for a moment gets
  // its copies at full window again instead of one MTU per round trip.
  bool throttle_window = false;
  // [protocol] channel_options: per-channel switches of what the relay sends (tern::ChannelRule,
  // "CHANNELS=SWITCHES" each: apps/common/channel_options.hpp), in order.
  std::vector<tern::ChannelRule> channel_rules;

  // [kcp]: KCP members (kcp-go, ikcp) on a second UDP port (config/relay.toml, README.md).
  bool kcp = false;                    // the section is present (or --kcp-port given)
  std::uint16_t kcp_port = 0;          // on listen's address; 0 = one the system picks (printed)
  std::string kcp_room_rule = "join";  // "join": first message "join:<room>"; "conv": room = conv
  std::uint32_t kcp_channel = 0;       // the channel ENet members receive KCP members' messages on
  std::uint32_t kcp_nodelay = 1;
  std::uint32_t kcp_interval_ms = 10;
  std::uint32_t kcp_resend = 2;
  bool kcp_nc = true;
  std::uint32_t kcp_send_window = 128;
  std::uint32_t kcp_receive_window = 128;
  std::uint32_t kcp_mtu = 1400;
  bool kcp_fec = false;  // frame what the relay sends with kcp-go's FEC data-shard header
  std::uint32_t kcp_fec_data_shards = 10;
  std::uint32_t kcp_fec_parity_shards = 3;
  std::uint32_t kcp_idle_timeout_ms = 30000;
  // [discovery]: answer discovery pings (engine/protocol/WIRE.md, "Discovery") with
  // "name=NAME\nplayers=N\nmax_players=M\n" and then `info`, N the clients connected now.
  // A [discovery] section turns it on (enabled = false keeps it off).
  bool discovery = false;
  std::string discovery_name;
  std::string discovery_info;
  std::uint32_t discovery_rate_per_address = 4;  // answers/s per address, 0 = no limit
  std::uint32_t discovery_rate_per_prefix = 64;  // per /24 IPv4, /64 IPv6

  std::vector<RoomRange> broadcast_rooms;
  std::uint32_t drain_timeout_ms = 5000;
  std::string rules_path;  // payload filter rules (engine/filter); empty = no filter

  // driver = "dpdk": the port, the address and the EAL, from the file's [dpdk] section (same
  // keys as config/dpdk-*.toml) and the --dpdk-* flags. The UDP port is listen's port; listen's
  // address is ignored (the address is dpdk.ip).
  // The file had a [dpdk] section: read and checked by main.cpp through app::DpdkSession
  // (drivers/dpdk's reader, the same keys as every app's), whatever the driver.
  bool dpdk_section = false;
  std::string dpdk_file;  // that file
};

// Reads `path` into `config`. On failure returns false and `error` names the file, the key and
// the reason ("relay.toml: limits.room_size: must be between 2 and 65536").
bool load_config_file(const std::string& path, RelayConfig& config, std::string& error);

// "A-B" or "A" into a range; false on anything else.
bool parse_room_range(const std::string& text, RoomRange& out);

}  // namespace tern::relay
