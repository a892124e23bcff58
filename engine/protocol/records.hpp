// The protocol core's records: queued and received commands, pending acknowledgements,
// channels, a connection's side blocks and the peer itself, and the slab peers live in.
#pragma once

#include "host_core.hpp"
#include "intake_buckets.hpp"
#include "intrusive.hpp"
#include "timer_wheel.hpp"
#include "wire.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace tern::proto {

constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t kMaxHeaderSize = 8;  // peer ID + sent time + checksum

// ENet's receive-window test: is `seq` inside the windows a receiver accepts, relative to the
// last delivered sequence number `current`? (Windows behind, or 7+ windows ahead, are not.)
bool in_receive_window(std::uint16_t seq, std::uint16_t current) {
  std::uint32_t window = seq / kReliableWindowSize;
  const std::uint32_t current_window = current / kReliableWindowSize;
  if (seq < current) window += kReliableWindows;
  return window >= current_window && window < current_window + kFreeReliableWindows - 1;
}

// Distance ahead of `current` in sequence space; orders everything inside the receive window.
std::uint16_t ahead(std::uint16_t seq, std::uint16_t current) {
  return static_cast<std::uint16_t>(seq - current);
}

// A queued command in one cache line. A relay holds one per copy of every message in flight,
// and the acknowledgement that frees it arrives a round trip after it was written, when it has
// long left the cache: each extra line is one more miss per copy. So the wire command is not
// kept whole but rebuilt when written (wire_command): send_* commands from their sequence
// numbers and their place in the message, disconnect from `body`; the four commands whose
// bodies do not fit (connect, verify_connect, bandwidth_limit, throttle_configure: rare) are
// encoded into `packet` when queued.
struct alignas(64) OutCmd {
  OutCmd* prev_ = nullptr;
  OutCmd* next_ = nullptr;
  // send_*: the whole message (a fragment is fragment_length bytes of it at fragment_offset);
  // `encoded`: the command's wire bytes.
  Packet packet;
  std::uint64_t sent_time_ms = 0;
  std::uint32_t rto_ms = 0;
  // Scheduling key (send_queue.cpp, "Priorities"): each outgoing list is kept in this order
  // (within a channel, in call order), and the builder merges the two lists by it.
  std::uint32_t queue_order = 0;
  std::uint32_t fragment_offset = 0;
  // disconnect: its data. send_unsequenced: the group. Fragments: the start sequence number
  // (low half) and the length of every fragment but the last (high half).
  std::uint32_t body = 0;
  std::uint16_t reliable_seq = 0;
  std::uint16_t unreliable_seq = 0;
  std::uint16_t send_attempts = 0;
  std::uint16_t fragment_length = 0;
  std::uint8_t command = 0;  // number | flags, as on the wire
  std::uint8_t channel_id = 0;
  bool in_sent = false;  // on sent_reliable (else, once sent, waiting for a resend)
  bool encoded = false;
  // HostConfig::nodelay: acknowledgements that arrived for commands sent after this one.
  std::uint8_t later_acks = 0;
  // Part of a message sent with a receipt (PeerExtra::receipts).
  bool receipt = false;
  Priority priority = Priority::medium;
  // Congestion control: a small reliable message queued ahead of bulk, past the pacer and
  // the window (HostConfig::cc_express_bytes).
  bool express = false;

  Cmd type() const { return static_cast<Cmd>(command & kCommandMask); }
  bool needs_ack() const { return (command & kFlagAcknowledge) != 0; }
  bool unsequenced_flag() const { return (command & kFlagUnsequenced) != 0; }
  // A message's bytes (which the send window and the throttle count), not a system command.
  bool has_payload() const { return packet && !encoded; }
  std::size_t wire_size() const {
    return encoded ? packet.size() : command_size(type()) + fragment_length;
  }
};
static_assert(sizeof(OutCmd) == 64, "one cache line per queued command");

// A connection's commands are taken from its own runs of 16 (intrusive.hpp, RunPool): a deep
// queue is walked line after line instead of a line here and there over the pool.
using OutCmdRuns = RunPool<OutCmd, 16>;

struct InCmd {
  InCmd* prev_ = nullptr;
  InCmd* next_ = nullptr;
  std::uint16_t reliable_seq = 0;
  std::uint16_t unreliable_seq = 0;
  Cmd type = Cmd::none;
  std::uint32_t fragment_count = 0;
  std::uint32_t fragments_remaining = 0;
  std::uint32_t accounted = 0;  // bytes charged to the waiting-data caps
  bool reassembling = false;    // an incomplete fragment set (charged to reassembly_bytes)
  // Taken while the sender's intake was held (HostCore::hold_intake): not yet acknowledged,
  // and acknowledged with the send time of the newest datagram that carried it on release.
  bool ack_withheld = false;
  std::uint16_t ack_sent_time = 0;
  // Delivery modes (kFeatureDeliveryModes): 0 (in order), kFlagTernUnordered or
  // kFlagTernSequenced; `delivered`: taken out of order, it holds its sequence number(s) only.
  std::uint8_t mode = 0;
  bool delivered = false;
  Packet packet;
  Packet bitmap;  // fragment sets: one bit per fragment received
};

struct PendingAck {
  std::uint16_t reliable_seq;  // a range's base
  std::uint16_t sent_time;     // a range's: of the newest datagram it covers
  std::uint8_t channel;
  bool is_disconnect;
  bool is_range;       // an ack_range (selective acks): reliable_seq plus `bits`
  std::uint32_t bits;  // bit i: reliable_seq + 1 + i is acknowledged too
};

// Pending acknowledgements, in pooled chunks: a peer holds chunks only while acks wait.
struct AckChunk {
  static constexpr std::size_t kCapacity = 9;  // 128-byte chunks
  AckChunk* prev_ = nullptr;
  AckChunk* next_ = nullptr;
  std::uint8_t begin = 0;  // acks[begin, end) are pending
  std::uint8_t end = 0;
  std::array<PendingAck, kCapacity> acks;
};

// Commands in flight by reliable sequence number modulo N, each slot tagged with the sequence
// number it holds: an acknowledgement finds its command, or learns that the slot holds another,
// from the table alone. The command itself was written a round trip ago and has usually left
// the cache; looking at an occupant to learn it is the wrong one cost a miss per ack. The tag
// rides in the address's top 16 bits (user-space addresses have them clear), so a slot is 8
// bytes and the slots of a connection's consecutive commands share lines: a table of addresses
// beside one of tags cost two misses where this costs one. A command at an address that uses
// those bits is not taken (claim fails, and the host-wide index holds it).
template <std::size_t N>
struct UnackedSlots {
  static constexpr unsigned kTagShift = 48;
  static constexpr std::uint64_t kAddressMask = (std::uint64_t{1} << kTagShift) - 1;
  std::array<std::uint64_t, N> slot{};  // 0: free

  static std::uint64_t address(const OutCmd* c) { return reinterpret_cast<std::uintptr_t>(c); }
  OutCmd* find(std::uint16_t s) const {
    const std::uint64_t v = slot[s % N];
    return v != 0 && v >> kTagShift == s ? reinterpret_cast<OutCmd*>(v & kAddressMask) : nullptr;
  }
  bool claim(OutCmd* c) {
    const std::size_t i = c->reliable_seq % N;
    if (slot[i] != 0 || address(c) > kAddressMask) return false;
    slot[i] = address(c) | std::uint64_t{c->reliable_seq} << kTagShift;
    return true;
  }
  bool release(const OutCmd* c) {
    const std::size_t i = c->reliable_seq % N;
    if (slot[i] != (address(c) | std::uint64_t{c->reliable_seq} << kTagShift)) return false;
    slot[i] = 0;
    return true;
  }
  bool empty() const {
    return std::all_of(slot.begin(), slot.end(), [](std::uint64_t v) { return v == 0; });
  }
};

// A channel's own slots: consecutive sequence numbers share lines, so the slot an
// acknowledgement names is usually in cache next to the ones its predecessors named, where a
// host-wide hash scatters them. A command whose slot is taken (more than this many sequence
// numbers behind the newest in flight: a backlog) goes to the channel's wide slots, and so
// does every later one while the channel has them (track_unacked).
inline constexpr std::size_t kChannelUnackedSlots = 32;

// A backlogged channel's slots: taken (from a pool) when the channel's own slots collide, and
// kept until the connection has nothing in flight, so a channel that hovers around the limit
// does not take and return them over and over. 1024 covers ENet's largest send window (64 KiB)
// of 64-byte messages; a command whose wide slot is taken too goes to the host-wide index.
// Without these slots a deep backlog sent every command through that index: a cache miss to
// insert it and one to find it again.
inline constexpr std::size_t kWideUnackedSlots = 1024;
using WideUnacked = UnackedSlots<kWideUnackedSlots>;

// Allocated (from a pool) the first time the channel carries a message either way.
struct Channel {
  UnackedSlots<kChannelUnackedSlots> unacked;
  WideUnacked* wide = nullptr;
  std::uint16_t out_reliable_seq = 0;
  std::uint16_t out_reliable_sent = 0;  // highest reliable seq transmitted at least once
  std::uint16_t out_unreliable_seq = 0;
  std::uint16_t used_reliable_windows = 0;
  std::array<std::uint16_t, kReliableWindows> reliable_windows{};
  std::uint16_t in_reliable_seq = 0;
  std::uint16_t in_unreliable_seq = 0;
  // The newest reliable-sequenced message delivered (as a sequence number; it counts only
  // while ahead of in_reliable_seq).
  std::uint16_t in_sequenced_newest = 0;
  // Congestion control: reliable commands queued and never sent that are not express; while
  // any wait, a small message of the channel queues behind them (its sequence order).
  std::uint32_t bulk_unsent = 0;
  IntrusiveList<InCmd> in_reliable;
  IntrusiveList<InCmd> in_unreliable;
};

inline constexpr std::uint32_t kUnlimitedWindow = 0xffffffffu;

// A connection's outgoing work: taken from a pool while anything is queued, in flight or
// waiting to be acknowledged, returned once all of it is gone (an idle peer holds none).
struct PeerQueues {
  IntrusiveList<OutCmd> outgoing_reliable;    // commands with the acknowledge flag
  IntrusiveList<OutCmd> outgoing_unreliable;  // everything else
  IntrusiveList<OutCmd> sent_reliable;
  IntrusiveList<AckChunk> acks;
  OutCmdRuns::Cursor out_run;  // where this connection's next command goes
  // Congestion control: the newest express message queued and not yet sent (null: none).
  // Express messages are written in the order queued and a send takes the list's front, so
  // when this one leaves, every express message before it has: the next one is queued behind
  // it in one step, however deep the queue (a relay's member backlog is all express).
  OutCmd* express_tail = nullptr;
  std::uint64_t next_timeout = 0;      // retransmission deadline of sent_reliable's front
  std::uint64_t earliest_timeout = 0;  // kept (with the block) until an ack clears it
  std::uint64_t acks_due = 0;          // HostConfig::ack_delay_ms: when held acks must go
  // Priorities (send_queue.cpp): the next scheduling key of each level, and the key of the
  // newest command written (the floor a level that was idle restarts from). Restart with the
  // block: they order queued commands only.
  std::array<std::uint32_t, 4> next_order{};
  std::uint32_t order_floor = 0;
  std::uint32_t reliable_data_in_transit = 0;
  // HostConfig::congestion_window: bytes of reliable data allowed in transit on top of
  // ENet's throttled window. Unlimited until a stall's retransmission timeout, then one MTU,
  // growing by what is acknowledged until it reaches ENet's largest window.
  std::uint32_t congestion_window = kUnlimitedWindow;
  // HostConfig::fast_retransmit: the newest send time among acknowledged commands sent once
  // (a resent command's ack may be for either copy), and whether an ack in the datagram being
  // read moved it, so commands sent well before it and still unacknowledged are lost.
  std::uint64_t newest_acked_sent_ms = 0;
  bool newest_acked_moved = false;
  // HostConfig::nodelay: acks of commands sent once, in the datagram being read.
  std::uint16_t fresh_acks = 0;
  std::uint32_t wide_channels = 0;  // channels holding a WideUnacked
  // HostConfig::redundancy: the last ack ranges written, each with the datagrams it is still
  // to ride in (one more while the datagram that first carried it is being built).
  std::array<PendingAck, 2> repeat_acks{};
  std::array<std::uint8_t, 2> repeat_left{};
  // HostConfig::redundancy: unreliable and unsequenced messages already sent, kept to go
  // again in later datagrams (send_attempts: the copies still to send), oldest first.
  IntrusiveList<OutCmd> unreliable_copies;
  std::size_t queued_bytes = 0;  // payload of the commands held here (HostConfig::max_queued)
};

// ENet's unsequenced receive window, allocated on the first unsequenced message received.
struct UnsequencedWindow {
  std::uint16_t incoming_group = 0;
  std::array<std::uint32_t, kUnsequencedWindowSize / 32> bits{};
};

// Per-connection statistics counters: 32 bits in the peer, the high words in PeerExtra (taken
// on the first carry, after 4 GiB or 4 billion of something).
enum Stat : std::uint8_t {
  kDatagramsSent,
  kDatagramsReceived,
  kBytesSent,
  kBytesReceived,
  kReliableRetransmits,
  kMessagesSent,
  kMessagesReceived,
  kStatCount
};

// Large blocks (blocks.cpp): a block being sent on one channel. Its bitfield and send times
// are allocated when it starts, never per slice.
struct OutBlock {
  Packet data;
  std::vector<std::uint64_t> acked;    // one bit per slice
  std::vector<std::uint64_t> sent_ms;  // when each slice last went (kNever: not yet)
  std::vector<std::uint64_t> resent;   // one bit per slice sent more than once (no RTT sample)
  std::uint32_t count = 0;
  std::uint32_t base = 0;      // every slice below it is acknowledged
  std::uint32_t next_new = 0;  // the first slice never sent
  std::uint16_t id = 0;
  std::uint16_t slice_size = 0;
  std::uint8_t channel = 0;
};

// A block being received on one channel (or the last one received there, `done`, kept to
// acknowledge the sender's late copies).
struct InBlock {
  Packet data;                      // allocated when its first slice arrives
  std::vector<std::uint64_t> have;  // one bit per slice
  std::uint32_t total = 0;
  std::uint32_t count = 0;
  std::uint32_t received = 0;
  std::uint32_t base = 0;    // every slice below it arrived
  std::uint32_t newest = 0;  // the highest slice index received
  std::uint16_t id = 0;
  std::uint16_t slice_size = 0;
  std::uint8_t channel = 0;
  bool done = false;
  bool ack_owed = false;
  bool newest_field = false;  // the last ack's field ended at `newest` (they alternate)
};

// A block this host refuses as above its cap: the block_refused answer owed to its sender,
// repeated (it is not acknowledged) while slices of that block keep coming.
struct BlockRefusal {
  std::uint64_t answered_ms = 0;  // when the last answer went (0: not yet)
  std::uint16_t id = 0;
  std::uint8_t channel = 0;
  bool owed = false;
};

struct BlockState {
  std::vector<OutBlock> out;           // one per channel at most
  std::vector<InBlock> in;             // one per channel at most
  std::vector<BlockRefusal> refusals;  // one per channel at most
  std::uint64_t in_bytes = 0;          // buffers of blocks in progress (HostConfig::max_block_size)
  // The last time a slice of ours was newly acknowledged (or a block started with none in
  // flight): a peer that acknowledges no slice for timeout_maximum is timed out.
  std::uint64_t progress_ms = 0;
  // The largest block the peer takes, from its block_refused (UINT32_MAX: not known).
  std::uint32_t peer_cap = UINT32_MAX;
  double tokens = 0;  // pacing: bytes the sender may still send now
  std::uint64_t tokens_ms = 0;
  std::uint64_t next_due_ms = 0;  // when the sender next has a slice to send (0: now)
  // The round trip the slices see, from acks of slices sent once (0: no sample yet, the
  // connection's RTT stands in): a transfer keeps the link busy, so the connection takes no
  // samples of its own (no pings) while it lasts.
  std::uint32_t srtt_ms = 0;
  std::uint32_t rttvar_ms = 0;
  std::uint16_t next_id = 0;
  std::uint8_t rotate = 0;  // which block's slices go first in the next datagram
  bool acks_owed = false;
  bool refusals_owed = false;
};

// Congestion control (congestion_control.cpp), in PeerExtra: started with the first bulk
// message, and kept while the connection idles so the estimates survive a quiet spell.
inline constexpr std::size_t kCcBandwidthRounds = 10;
struct CongestionState {
  enum Phase : std::uint8_t { startup, drain, probe_bw };
  bool on = false;            // started (Peer::congestion_control says agreed)
  bool pace_waiting = false;  // bulk is held until pace_next_us (the peer's timer wakes it)
  bool round_app_limited = false;
  Phase phase = startup;
  std::uint8_t round_slot = 0;      // bandwidth[] slot of the current round
  std::uint8_t full_bw_rounds = 0;  // rounds in startup without 25% more bandwidth
  std::uint8_t cycle = 0;           // probe_bw's place in its eight gains
  std::uint64_t pace_next_us = 0;   // when the next bulk byte may go
  std::uint64_t delivered = 0;      // reliable payload bytes acknowledged, ever
  std::uint64_t round_delivered = 0;
  std::uint64_t round_start_ms = 0;
  std::uint64_t min_rtt_stamp_ms = 0;
  std::uint64_t cycle_start_ms = 0;
  std::uint32_t min_rtt_ms = 0;  // 0: no sample yet
  std::uint32_t bandwidth = 0;   // bottleneck estimate, bytes/s (max of bandwidth[])
  std::uint32_t full_bw = 0;
  std::uint32_t cwnd = 0;             // set by the first cc_update_model
  std::uint32_t pacing_rate = 0;      // bytes/s, 0 until the first estimate
  std::uint32_t block_in_flight = 0;  // large-block slice bytes sent and not yet acknowledged
  std::array<std::uint32_t, kCcBandwidthRounds> bandwidth_rounds{};
};

// Secure sessions (secure_sessions.cpp; WIRE.md, "Secure sessions"): one connection's keys.
// `tx`/`rx` are the handshake keys (derived from the token's keys and the client's salt)
// until the server's challenge arrives, then the session keys derived from it.
struct PeerSecure {
  sec::SealState tx;
  sec::Key rx{};
  sec::ReplayWindow window;
  // AES-256-GCM agreed (WIRE.md, "Secure sessions"): both directions' expanded session keys,
  // tx.aes pointing into them; null for ChaCha20-Poly1305.
  std::unique_ptr<sec::AesKeys> aes;
  bool sealing = false;  // keys are the session's: every datagram both ways is sealed
  std::uint64_t client_id = 0;
  std::uint16_t user_data_len = 0;
  std::array<std::uint8_t, sec::kUserDataBytes> user_data{};
  // Client side until connected: the sealed token and the salt, sent with every CONNECT.
  std::unique_ptr<std::array<std::uint8_t, sec::kTokenBytes + 16>> connect_ext;
};

// A token-carrying handshake the server answered and the client has not (half_open.hpp
// names it by slot and stamp): the session keys it will have.
struct SecurePending {
  PeerSecure secure;
  std::uint32_t stamp = 0;  // 0: free
};

// A connect token that opened, as a CONNECT carried it, with the client's salt.
struct TokenArrival {
  sec::TokenHeader header;
  sec::TokenContents contents;
  std::array<std::uint8_t, 16> salt{};
  bool offers_aes = false;  // the client can seal with AES-256-GCM
};

// Rarely needed per-connection state: settings that differ from the host's defaults, bandwidth
// limits announced by the other side, and the statistics' high words. Allocated on first use.
struct PeerExtra {
  std::uint32_t ping_interval;
  std::uint32_t timeout_limit;
  std::uint32_t timeout_minimum;
  std::uint32_t timeout_maximum;
  std::uint32_t throttle_interval;
  std::uint32_t throttle_acceleration;
  std::uint32_t throttle_deceleration;
  std::uint32_t incoming_bandwidth = 0;
  std::uint32_t outgoing_bandwidth = 0;
  std::uint32_t withheld = 0;  // reliable commands taken but not acknowledged (hold_intake)
  IntakeBuckets intake;        // HostConfig::intake_rate and intake_bandwidth
  std::array<std::uint32_t, kStatCount> stat_high{};
  // HostConfig::redundancy, taken when it is agreed (Peer has no room left): the loss this
  // connection measures (scaled by 65536, a moving average of per-command samples) and the
  // bytes of copies and repeats it may still send.
  std::uint16_t redundancy_loss = 0;
  std::uint16_t redundancy_credit = 0;
  CongestionState cc;
  // Messages sent with a receipt and not yet wholly acknowledged, in send order.
  struct Receipt {
    std::uint32_t id;
    std::uint32_t commands_left;  // fragments (or 1) still unacknowledged
    std::uint16_t start_seq;      // the message's first reliable sequence number
    std::uint8_t channel;
  };
  std::vector<Receipt> receipts;
  // Large blocks (blocks.cpp), taken with the first block either way.
  std::unique_ptr<BlockState> blocks;
  // Path MTU discovery (pmtu.cpp), taken when it is agreed: the negotiated MTU; the largest
  // size acknowledged and the largest not yet known to fail; the negotiated size while it
  // still has to be probed first; the probe in flight (0: none), its tries and when it times
  // out or the next is due (0: never); a probe of the peer's to acknowledge; whether the
  // probe checks the current size again (the search is over).
  std::uint16_t pmtu_base = 0;
  std::uint16_t pmtu_lo = 0;
  std::uint16_t pmtu_hi = 0;
  std::uint16_t pmtu_first = 0;
  std::uint16_t pmtu_probe = 0;
  std::uint16_t pmtu_ack_owed = 0;
  std::uint8_t pmtu_tries = 0;
  bool pmtu_send = false;
  bool pmtu_recheck = false;
  std::uint64_t pmtu_due_ms = 0;
  // Secure sessions: keys, sequence numbers and the replay window (secure_sessions.cpp).
  std::unique_ptr<PeerSecure> secure;
};

// The hot per-connection record: what every connected peer needs, idle or not. Everything else
// hangs off it in pooled side blocks that exist only while used (queues, channels, unsequenced
// window, extra).
struct Peer {
  base::TimerNode timer;  // retransmission, ping or timeout: whichever is due first
  std::uint64_t last_receive_time = 0;
  PeerQueues* queues = nullptr;
  PeerExtra* extra = nullptr;
  UnsequencedWindow* unsequenced = nullptr;
  // channel_count == 1: the channel itself; more: an array of channel_count pointers. Either
  // may be null until first use.
  void* channel_store = nullptr;
  std::uint32_t slot = 0;
  std::uint32_t generation = 1;
  std::uint32_t connect_id = 0;
  std::uint32_t connect_data = 0;
  std::uint32_t event_data = 0;
  std::uint32_t window_size = kMaxWindowSize;
  std::uint32_t outgoing_data_total = 0;
  // ENet's epochs (max(now, 1) when last rolled), low 32 bits: their ages are taken modulo
  // 2^32 ms, exact unless a peer goes 49.7 days without an acknowledgement (throttle epoch)
  // or without sending (loss epoch). Valid once the matching *_epoch_set bit is set.
  std::uint32_t packet_throttle_epoch = 0;
  std::uint32_t packet_loss_epoch = 0;
  std::uint32_t packets_sent = 0;
  std::uint32_t packets_lost = 0;
  std::uint32_t packet_loss = 0;
  std::uint32_t packet_loss_variance = 0;
  std::uint32_t total_waiting_data = 0;  // bounded by HostConfig::max_waiting_data
  std::array<std::uint32_t, kStatCount> stat_low{};
  Endpoint address;
  // Round-trip times fit 16 bits: a sample is rebuilt from a 16-bit send time (at most
  // 65,535 ms), and the smoothed values and variances never exceed the largest sample.
  std::uint16_t last_rtt = kDefaultRoundTripTime;
  std::uint16_t lowest_rtt = kDefaultRoundTripTime;
  std::uint16_t last_rtt_variance = 0;
  std::uint16_t highest_rtt_variance = 0;
  std::uint16_t rtt = kDefaultRoundTripTime;
  std::uint16_t rtt_variance = 0;
  std::uint16_t mtu = kDefaultMtu;
  std::uint16_t incoming_peer_id = 0;
  std::uint16_t outgoing_peer_id = kMaxPeerId;
  std::uint16_t outgoing_reliable_seq = 0;
  std::uint16_t outgoing_unsequenced_group = 0;
  std::uint16_t connect_seq = 0;         // reliable seq of our CONNECT (the verify acks it)
  std::uint8_t incoming_session = 0xFF;  // kept across reuse of the slot, as ENet does
  std::uint8_t outgoing_session = 0xFF;
  std::uint8_t channel_count = 0;
  std::uint8_t packet_throttle = kDefaultPacketThrottle;  // 0..kPacketThrottleScale
  std::uint8_t packet_throttle_limit = kPacketThrottleScale;
  std::uint8_t packet_throttle_counter = 0;
  PeerState state = PeerState::disconnected;
  bool app_knows : 1 = false;  // a connect event was emitted or the app called connect()
  bool dirty : 1 = false;
  bool timer_due : 1 = false;
  // Set by the bandwidth throttle pass that is running (cleared at its start).
  bool incoming_bandwidth_marked : 1 = false;
  bool outgoing_bandwidth_marked : 1 = false;
  bool throttle_epoch_set : 1 = false;
  bool loss_epoch_set : 1 = false;
  // Tern extensions (WIRE.md): we connected and offered them in a hello; we accepted the
  // peer's offer and repeat our hello until the handshake completes; ack ranges agreed.
  bool hello_offered : 1 = false;
  bool hello_agreed : 1 = false;
  bool selective_acks : 1 = false;
  // Nodelay agreed in the hello: acknowledgements to this peer are never held (ack_delay_ms).
  bool nodelay_agreed : 1 = false;
  // Delivery modes agreed in the hello: reliable_unordered/_sequenced flags go both ways.
  bool delivery_modes : 1 = false;
  // Redundancy agreed in the hello: copies and repeated ack ranges go to this peer.
  bool redundancy : 1 = false;
  // Large blocks agreed in the hello: send_block goes as paced slices (blocks.cpp).
  bool blocks : 1 = false;
  // We accepted this connection's CONNECT (we are its server side).
  bool accepted : 1 = false;
  // HostCore::hold_intake: new reliable commands are kept unacknowledged and undelivered.
  bool intake_held : 1 = false;
  // A datagram arrived since the last retransmission timeout (check_timeouts).
  bool heard_since_timeout : 1 = false;
  // Congestion control agreed in the hello (its model, PeerExtra::cc, is taken with the first
  // bulk message, so a connection that only carries small messages stays without a PeerExtra).
  bool congestion_control : 1 = false;
  // Path MTU discovery agreed in the hello: probes go both ways (state in PeerExtra).
  bool pmtu : 1 = false;
  // Idle pings agreed in the hello: keep-alive pings every few intervals (idle_pings.cpp).
  bool idle_pings : 1 = false;
  // Secure sessions: the connection has keys (extra->secure); its datagrams are sealed once
  // the handshake answered.
  bool secure : 1 = false;

  bool connected_like() const {
    return state == PeerState::connected || state == PeerState::disconnect_later;
  }
  bool has_outgoing() const {
    return queues != nullptr &&
           (!queues->outgoing_reliable.empty() || !queues->outgoing_unreliable.empty() ||
            !queues->sent_reliable.empty());
  }
  bool sent_empty() const { return queues == nullptr || queues->sent_reliable.empty(); }
  bool outgoing_reliable_empty() const {
    return queues == nullptr || queues->outgoing_reliable.empty();
  }
  bool has_acks() const { return queues != nullptr && !queues->acks.empty(); }
  bool has_queued() const {
    return queues != nullptr && (!queues->acks.empty() || !queues->outgoing_reliable.empty() ||
                                 !queues->outgoing_unreliable.empty());
  }
};

// Peers live in chunks that never move (timers and handles point into them), without a heap
// block per peer. Slots are handed out in order; freed ones are reused through free_slots.
static_assert(sizeof(Peer) == 216, "every connected peer pays for Peer (tern-idle-memory)");

class PeerSlab {
 public:
  static constexpr std::uint32_t kShift = 8;
  static constexpr std::uint32_t kChunk = 1u << kShift;

  std::uint32_t size() const { return size_; }
  Peer& operator[](std::uint32_t slot) { return chunks_[slot >> kShift][slot & (kChunk - 1)]; }
  const Peer& operator[](std::uint32_t slot) const {
    return chunks_[slot >> kShift][slot & (kChunk - 1)];
  }
  std::uint32_t add() {
    if ((size_ & (kChunk - 1)) == 0) chunks_.push_back(std::make_unique<Peer[]>(kChunk));
    const std::uint32_t slot = size_++;
    (*this)[slot].slot = slot;
    return slot;
  }

 private:
  std::vector<std::unique_ptr<Peer[]>> chunks_;
  std::uint32_t size_ = 0;
};

struct Farewell {
  Endpoint to;
  std::uint32_t size = 0;
  // a DISCONNECT, or a VERIFY_CONNECT with its hello (and, sealed, its challenge)
  std::array<std::byte, 128> bytes;
};

// ok: acknowledge it (if it asks) and go on; stop: the rest of the datagram is not read;
// withheld: go on without acknowledging it (HostCore::hold_intake).
enum class Handled { ok, stop, withheld };

// ---- the command table's vocabulary (command_table.cpp) ---------------------------------

// What a handler may need from the datagram that carried its command.
struct Arrival {
  std::uint16_t sent_time = 0;  // the header's
  Drop why = Drop::count_;      // set by a handler that refuses the command
};

using StateSet = std::uint16_t;
constexpr StateSet state_bit(PeerState s) {
  return static_cast<StateSet>(1u << static_cast<unsigned>(s));
}
inline constexpr StateSet kAnyState = 0xFFFF;
inline constexpr StateSet kConnectedLike =
    state_bit(PeerState::connected) | state_bit(PeerState::disconnect_later);
// The hello's owner: it is read when any extension is on.
inline constexpr std::uint32_t kAnyFeature = ~std::uint32_t{0};

}  // namespace tern::proto
