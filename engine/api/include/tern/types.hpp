// Vocabulary shared by the protocol core and the public API: deliveries, peer handles,
// events, per-peer statistics and the per-channel switches (HostOptions::channel_options).
#pragma once

#include <tern/endpoint.hpp>
#include <tern/packet.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>

namespace tern {

enum class Delivery : std::uint8_t {
  reliable,     // ordered per channel, retransmitted until acknowledged
  unreliable,   // sequenced per channel: late messages are dropped, never delivered backwards
  unsequenced,  // unordered; duplicates suppressed by a sliding window
  // Between Tern peers that agreed them (PeerStats::delivery_modes); to any other peer they
  // go as `reliable`, and arrive so. Both share the channel's reliable sequence numbers.
  reliable_unordered,  // retransmitted until acknowledged, delivered on arrival, exactly once
  reliable_sequenced,  // retransmitted, but one older than a message already delivered is dropped
};

constexpr bool is_reliable(Delivery d) {
  return d == Delivery::reliable || d == Delivery::reliable_unordered ||
         d == Delivery::reliable_sequenced;
}

const char* to_string(Delivery d);

// Identifies one connection on one host. The generation makes a handle to a connection that
// has ended harmless: it no longer matches the reused slot.
struct PeerHandle {
  std::uint32_t slot = 0xffffffffu;
  std::uint32_t generation = 0;
  bool valid() const { return slot != 0xffffffffu; }
  friend bool operator==(const PeerHandle&, const PeerHandle&) = default;
};

// The ENet peer state machine (DESIGN §3.1), in ENet's order.
enum class PeerState : std::uint8_t {
  disconnected,
  connecting,
  acknowledging_connect,
  connection_pending,
  connection_succeeded,
  connected,
  disconnect_later,
  disconnecting,
  acknowledging_disconnect,
  zombie,
};

const char* to_string(PeerState s);

// receipt: every command of a reliable message sent with a receipt was acknowledged by the
// peer (Host::send_with_receipt); `data` is the receipt's number, `channel` the message's.
// block_refused: the peer refused the large block we were sending on `channel`
// (Host::send_block) as above its cap, which `data` gives in bytes; the block is no longer in
// flight and will not be delivered, and send_block to that peer returns too_large above it.
enum class EventType : std::uint8_t { none, connect, receive, disconnect, receipt, block_refused };

enum class DisconnectReason : std::uint8_t {
  none,
  remote,    // the other side disconnected (gracefully, or with disconnect_now)
  local,     // this side's disconnect/disconnect_later completed
  timeout,   // the peer stopped answering within the timeout limits
  refused,   // the handshake failed (bad parameters, peer limit on the other side)
  replaced,  // a new connection from the same address superseded this one
  evicted,   // this host dropped the connection to keep buffered data under its memory cap
  // The peer broke the protocol in a way that strands data this host already acknowledged
  // (a KCP sender breaking its own fragment countdown): ended rather than left with a hole.
  protocol_error,
};

const char* to_string(DisconnectReason r);

struct Event {
  EventType type = EventType::none;
  PeerHandle peer;
  Endpoint address;
  std::uint8_t channel = 0;
  Delivery delivery = Delivery::reliable;
  DisconnectReason reason = DisconnectReason::none;
  std::uint32_t data = 0;  // connect data or disconnect data
  Packet packet;           // receive only; empty when the message is lent (see `lent`)
  // Receive only, and only from a core built with HostConfig::lend_payloads: the message's
  // bytes inside the datagram they arrived in, valid until the event handler returns. A
  // handler that only reads a message is spared a copy; payload() reads either form, and
  // take_payload() keeps one.
  std::span<const std::byte> lent;

  std::span<const std::byte> payload() const { return packet ? packet.bytes() : lent; }
  // The message as a Packet of its own: the event's, or a copy of the lent bytes.
  Packet take_payload() { return packet ? std::move(packet) : Packet::copy_of(lent); }
};

enum class SendResult : std::uint8_t {
  ok,
  not_connected,  // peer gone or not in the connected state
  bad_channel,    // channel >= negotiated channel count
  too_large,      // above max_packet_size, or more fragments than ENet allows
  queue_full,     // the peer already has max_queued bytes waiting (it is not keeping up)
  not_reliable,   // a receipt asked for a message that is not sent reliably
  block_busy,     // send_block: a block is still in flight on this channel to this peer
};

// When a message goes out relative to others queued to the same peer (sender side only;
// nothing on the wire says it). Higher first, lower never starved: see README, "Priorities".
enum class Priority : std::uint8_t {
  immediate,  // ahead of everything queued, and the host flushes at once
  high,
  medium,  // the default: ENet's order, the order of the calls
  low,     // bulk: also leaves room in the reliable window for the others
};

const char* to_string(SendResult r);

// A set of channel IDs, one bit each: bit c of word c / 64 (channel_mask({0, 3}) names 0 and 3).
using ChannelMask = std::array<std::uint64_t, 4>;

constexpr ChannelMask channel_mask(std::initializer_list<std::uint8_t> channels) {
  ChannelMask m{};
  for (const std::uint8_t c : channels) m[c / 64] |= std::uint64_t{1} << (c % 64);
  return m;
}

// Per-channel switches (README, "HostOptions"): what a channel turns off of the extensions
// the host runs, for what this host sends on it. A switch left true follows the host's
// (HostOptions::fast_retransmit etc.): a channel cannot turn on an extension its host has off.
// Local choices, nothing on the wire: the peer needs no word of them. Selective acks, large
// blocks and path MTU discovery are per connection by nature (an ack range, a block's slices,
// a probe are no channel's message) and have no switch here.
struct ChannelOptions {
  bool fast_retransmit = true;  // false: a loss waits for its timeout, as with ENet
  bool nodelay = true;          // false: ENet's backoff and resend rule on the channel
  // false: the channel's reliable messages are never copied, its unreliable ones never kept
  // for copies, and acks of what the peer sends on it never repeated.
  bool redundancy = true;
  // false: neither paced nor held by congestion control's window: ENet's window and throttle
  // (against everything in flight to the peer), as with a peer that did not agree.
  bool congestion_control = true;
  // false: its small reliable messages no longer jump queued bulk past the pacer: they are
  // scheduled and paced as bulk.
  bool cc_express = true;
  bool congestion_window = true;  // false: not held to the window regrowing after a stall
  bool delivery_modes = true;     // false: reliable_unordered/_sequenced are sent as reliable
  // The level of send() and send_with_receipt() without a priority. Immediate is taken as
  // high: only an explicit Priority::immediate flushes.
  Priority priority = Priority::medium;
};

// Channels `channels` take `options`. Rules apply in order: a channel named by several takes
// the last one's; a channel named by none, ChannelOptions{} (the host's settings).
struct ChannelRule {
  ChannelMask channels{};
  ChannelOptions options;
};

// A server's answer to a discovery ping (Host::discover; WIRE.md, "Discovery").
struct DiscoveryAnswer {
  Endpoint from;
  std::uint32_t rtt_us = 0;  // from our ping leaving to this answer arriving
  std::uint32_t nonce = 0;   // the ping it answers (what discover() returned)
  bool truncated = false;    // the server's info was cut to the room our ping asked for
  Packet info;               // what the server's application set (set_discovery_info)
};

struct PeerStats {
  std::uint32_t rtt_ms = 0;  // smoothed round-trip time
  std::uint32_t rtt_variance_ms = 0;
  std::uint32_t lowest_rtt_ms = 0;
  std::uint32_t packet_loss = 0;  // mean loss of reliable commands, scaled by 65536
  std::uint32_t packet_loss_variance = 0;
  std::uint32_t packet_throttle = 0;  // 0..32
  std::uint32_t packet_throttle_limit = 0;
  std::uint32_t mtu = 0;
  std::uint32_t window_size = 0;
  std::uint32_t channel_count = 0;
  std::uint64_t datagrams_sent = 0;
  std::uint64_t datagrams_received = 0;
  std::uint64_t bytes_sent = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t reliable_retransmits = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
  std::uint32_t reliable_in_transit = 0;  // bytes sent and not yet acknowledged
  std::uint32_t queued_outgoing = 0;      // commands waiting to be sent
  std::uint64_t queued_bytes = 0;         // payload bytes queued, in flight or unacknowledged
  // The connection's settings (Host::set_peer_timeout, set_peer_throttle and
  // set_peer_ping_interval, or the other side's THROTTLE_CONFIGURE; else the host's).
  std::uint32_t ping_interval_ms = 0;
  std::uint32_t timeout_limit = 0;
  std::uint32_t timeout_minimum_ms = 0;
  std::uint32_t timeout_maximum_ms = 0;
  std::uint32_t throttle_interval_ms = 0;
  std::uint32_t throttle_acceleration = 0;
  std::uint32_t throttle_deceleration = 0;
  bool selective_acks = false;        // Tern's ack ranges agreed with this peer
  bool nodelay = false;               // immediate acks agreed with this peer (nodelay)
  bool delivery_modes = false;        // reliable_unordered/_sequenced honoured by this peer
  bool redundancy = false;            // adaptive redundancy agreed with this peer
  bool path_mtu = false;              // path MTU discovery agreed (mtu is what it found)
  bool path_mtu_searching = false;    // its search is still running (mtu may still change)
  std::uint32_t redundancy_k = 0;     // copies each reliable command gets now (0: none)
  std::uint32_t redundancy_loss = 0;  // the loss redundancy measures, scaled by 65536
  bool blocks = false;                // large blocks go to this peer as paced slices
  // Congestion control agreed with this peer, and its model: bottleneck bandwidth (bytes/s),
  // min RTT, window and pacing rate (bytes/s); zeros before the first estimate.
  bool congestion_control = false;
  std::uint32_t cc_bandwidth = 0;
  std::uint32_t cc_min_rtt_ms = 0;
  std::uint32_t cc_cwnd = 0;
  std::uint32_t cc_pacing_rate = 0;
};

}  // namespace tern
