// The sans-I/O ENet 1.3 host. Behaviour follows libenet 1.3.17 where it is observable on the
// wire (handshake, sessions, acknowledgements, windows, fragments, throttle, timeouts); the
// bookkeeping differs where ENet scans: peers are found by address, peers with work are kept
// on a dirty list, and timers live in a timing wheel, so an idle peer costs nothing until its
// timer.
#include "host_core.hpp"

#include "intrusive.hpp"
#include "peer_table.hpp"
#include "pointer_index.hpp"
#include "timer_wheel.hpp"

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstring>
#include <limits>
#include <vector>

namespace tern::proto {

namespace {

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
  std::uint32_t queue_order = 0;  // merges the two outgoing lists back into queue order
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

// Message references the core lets go of (acknowledged or dropped commands), held until
// flush() and dropped several at a time: a relay's copies of one message to different members
// are acknowledged within the same few receive bursts, and dropping each alone costs a locked
// subtract on a line that has usually left the cache. A direct-mapped table: a buffer already
// in its slot gains a count, any other evicts it (dropping what it holds).
class ReleaseBatch {
 public:
  static constexpr std::size_t kSlots = 256;

  ReleaseBatch() = default;
  ReleaseBatch(const ReleaseBatch&) = delete;
  ReleaseBatch& operator=(const ReleaseBatch&) = delete;
  ~ReleaseBatch() { flush(); }

  void add(detail::PacketBuffer* raw) {
    // Buffers are 64-byte aligned: the bits above the alignment spread them over the slots.
    const std::size_t i = (reinterpret_cast<std::uintptr_t>(raw) >> 6) % kSlots;
    Slot& s = slots_[i];
    if (s.raw == raw) {
      ++s.count;
      return;
    }
    if (s.raw != nullptr) {
      Packet::release_raw(s.raw, s.count);
    } else {
      used_[used_n_++] = static_cast<std::uint16_t>(i);
    }
    s.raw = raw;
    s.count = 1;
  }

  void flush() {
    for (std::size_t k = 0; k < used_n_; ++k) {
      Slot& s = slots_[used_[k]];
      Packet::release_raw(s.raw, s.count);
      s.raw = nullptr;
      s.count = 0;
    }
    used_n_ = 0;
  }

 private:
  struct Slot {
    detail::PacketBuffer* raw = nullptr;
    std::uint32_t count = 0;
  };
  std::array<Slot, kSlots> slots_{};
  std::array<std::uint16_t, kSlots> used_{};  // occupied slots, so flush() visits only those
  std::size_t used_n_ = 0;
};

// Commands in flight by reliable sequence number modulo N, each slot tagged with the sequence
// number it holds: an acknowledgement finds its command, or learns that the slot holds another,
// from the table alone. The command itself was written a round trip ago and has usually left
// the cache; looking at an occupant to learn it is the wrong one cost a miss per ack.
template <std::size_t N>
struct UnackedSlots {
  std::array<OutCmd*, N> cmd{};
  std::array<std::uint16_t, N> seq{};

  OutCmd* find(std::uint16_t s) const {
    OutCmd* c = cmd[s % N];
    return c != nullptr && seq[s % N] == s ? c : nullptr;
  }
  bool claim(OutCmd* c) {
    const std::size_t i = c->reliable_seq % N;
    if (cmd[i] != nullptr) return false;
    cmd[i] = c;
    seq[i] = c->reliable_seq;
    return true;
  }
  bool release(const OutCmd* c) {
    const std::size_t i = c->reliable_seq % N;
    if (cmd[i] != c) return false;
    cmd[i] = nullptr;
    return true;
  }
  bool empty() const {
    return std::all_of(cmd.begin(), cmd.end(), [](const OutCmd* c) { return c == nullptr; });
  }
};

// A channel's own slots: consecutive sequence numbers share lines, so the slot an
// acknowledgement names is usually in cache next to the ones its predecessors named, where a
// host-wide hash scatters them. A command whose slot is taken (more than this many sequence
// numbers behind the newest in flight: a backlog) goes to the channel's wide slots.
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
  std::uint64_t next_timeout = 0;      // retransmission deadline of sent_reliable's front
  std::uint64_t earliest_timeout = 0;  // kept (with the block) until an ack clears it
  std::uint64_t acks_due = 0;          // HostConfig::ack_delay_ms: when held acks must go
  std::uint32_t queue_counter = 0;     // restarts with the block: orders queued commands only
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
  std::uint32_t wide_channels = 0;  // channels holding a WideUnacked
  std::size_t queued_bytes = 0;     // payload of the commands held here (HostConfig::max_queued)
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
  // HostConfig::intake_rate and intake_bandwidth: the buckets, and when they were last filled
  // (0: never, they start full).
  double intake_messages = 0;
  double intake_bytes = 0;
  std::uint64_t intake_filled_ms = 0;
  std::array<std::uint32_t, kStatCount> stat_high{};
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
  // We accepted this connection's CONNECT (we are its server side).
  bool accepted : 1 = false;
  // HostCore::hold_intake: new reliable commands are kept unacknowledged and undelivered.
  bool intake_held : 1 = false;

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
  std::array<std::byte, 32> bytes;
};

// A growable ring of events: amortised allocation-free once sized.
class EventRing {
 public:
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  void push(Event&& ev) { append() = std::move(ev); }
  // The next free slot, for the caller to fill in place (every field: the slot holds whatever
  // event last passed through it, with its packet already moved out).
  Event& append() {
    if (count_ == ring_.size()) grow();
    Event& slot = ring_[(head_ + count_) & (ring_.size() - 1)];
    ++count_;
    return slot;
  }
  bool pop(Event& out) {
    if (count_ == 0) return false;
    // The move leaves the slot's packet empty, which is all a free slot needs: assigning a
    // fresh Event on top would cost a store-forwarding stall per event.
    out = std::move(ring_[head_]);
    head_ = (head_ + 1) & (ring_.size() - 1);
    --count_;
    return true;
  }

 private:
  void grow() {
    std::vector<Event> bigger(ring_.empty() ? 64 : ring_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) {
      bigger[i] = std::move(ring_[(head_ + i) & (ring_.size() - 1)]);
    }
    ring_ = std::move(bigger);
    head_ = 0;
  }
  std::vector<Event> ring_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

// ok: acknowledge it (if it asks) and go on; stop: the rest of the datagram is not read;
// withheld: go on without acknowledging it (HostCore::hold_intake).
enum class Handled { ok, stop, withheld };

}  // namespace

struct HostCore::Impl {
  HostConfig config;
  HostCounters counters;
  PeerSlab slots;
  std::vector<std::uint32_t> free_slots;
  // Route and identity keys (see "routing" below): connections beyond the peer ID field's reach
  // by (remote endpoint, our peer ID for them), accepted ones by the client's own index.
  base::PeerTable<std::uint32_t> by_address;
  std::size_t peer_count = 0;
  std::uint32_t next_client_peer_id = 0;  // where connect() starts looking for a free ID
  std::size_t connected_peers = 0;
  std::size_t bandwidth_limited_peers = 0;
  bool recalculate_bandwidth_limits = false;
  std::uint64_t bandwidth_throttle_epoch = 0;
  std::uint64_t random_state;
  std::uint64_t now_ms = 0;
  Pool<OutCmd> out_pool;
  ReleaseBatch releases;  // references put_out() let go of, dropped at the next flush()
  // Reliable commands transmitted at least once and not yet acknowledged (on sent_reliable,
  // or back on outgoing_reliable for a resend) are indexed, so an acknowledgement finds its
  // command without walking the list: in their channel's slots (Channel::unacked, then
  // Channel::wide), or here by peer slot, channel and sequence number (system commands, and
  // those whose channel slots are taken).
  base::PointerIndex<OutCmd> unacked{1024};
  Pool<WideUnacked> wide_pool;
  Pool<InCmd> in_pool;
  Pool<AckChunk> ack_pool;
  Pool<PeerQueues> queue_pool;
  Pool<Channel> channel_pool;
  Pool<UnsequencedWindow> unsequenced_pool;
  Pool<PeerExtra> extra_pool;
  EventRing events;
  std::vector<std::uint32_t> dirty;
  base::TimerWheel timers;
  std::vector<Farewell> farewells;
  std::vector<Peer*> throttle_scratch;

  // The address table's hash is keyed: sources are chosen by whoever sends to us.
  explicit Impl(const HostConfig& cfg)
      : config(cfg), by_address(cfg.random_seed ^ 0x5bd1e9955bd1e995ull) {
    config.mtu = std::clamp(config.mtu, kMinMtu, kMaxMtu);
    config.channel_limit = std::clamp(config.channel_limit, kMinChannelCount, kMaxChannelCount);
    random_state = cfg.random_seed != 0 ? cfg.random_seed : 0x9E3779B97F4A7C15ull;
  }

  ~Impl() {
    for (std::uint32_t i = 0; i < slots.size(); ++i) release_blocks(slots[i]);
  }  // `releases` drops what release_blocks let go of as it is destroyed

  std::uint32_t random_u32() {
    // xorshift64*: connect IDs only need to differ between connections.
    random_state ^= random_state >> 12;
    random_state ^= random_state << 25;
    random_state ^= random_state >> 27;
    return static_cast<std::uint32_t>((random_state * 2685821657736338717ull) >> 32);
  }

  // ---- peers --------------------------------------------------------------------------

  Peer* find(PeerHandle h) {
    if (h.slot >= slots.size()) return nullptr;
    Peer* p = &slots[h.slot];
    if (p->generation != h.generation || p->state == PeerState::disconnected) return nullptr;
    return p;
  }
  const Peer* find(PeerHandle h) const { return const_cast<Impl*>(this)->find(h); }

  // ---- side blocks ----------------------------------------------------------------------

  // A peer epoch for now (ENet never stores 0) and the age of one, both modulo 2^32 ms.
  std::uint32_t epoch_stamp() const {
    return static_cast<std::uint32_t>(std::max<std::uint64_t>(now_ms, 1));
  }
  std::uint32_t ms_since(std::uint32_t epoch) const {
    return static_cast<std::uint32_t>(now_ms) - epoch;
  }

  PeerQueues& queues(Peer& p) {
    if (p.queues == nullptr) p.queues = queue_pool.get();
    return *p.queues;
  }

  // Returns the queues block once nothing is queued, in flight, unacknowledged or timing out.
  void release_queues_if_idle(Peer& p) {
    PeerQueues* q = p.queues;
    if (q != nullptr && q->outgoing_reliable.empty() && q->outgoing_unreliable.empty() &&
        q->sent_reliable.empty() && q->acks.empty() && q->earliest_timeout == 0) {
      if (q->wide_channels != 0) for_each_channel(p, [this](Channel& ch) { release_wide(ch); });
      queue_pool.put(q);
      p.queues = nullptr;
    }
  }

  // Only once nothing is in flight on the channel: its wide slots are all empty.
  void release_wide(Channel& ch) {
    if (ch.wide != nullptr) {
      assert(ch.wide->empty());
      wide_pool.put(ch.wide);
      ch.wide = nullptr;
    }
  }

  PeerExtra& extra(Peer& p) {
    if (p.extra == nullptr) {
      PeerExtra* e = extra_pool.get();
      e->ping_interval = config.ping_interval_ms;
      e->timeout_limit = config.timeout_limit;
      e->timeout_minimum = config.timeout_minimum_ms;
      e->timeout_maximum = config.timeout_maximum_ms;
      e->throttle_interval = config.throttle_interval_ms;
      e->throttle_acceleration = config.throttle_acceleration;
      e->throttle_deceleration = config.throttle_deceleration;
      p.extra = e;
    }
    return *p.extra;
  }

  // Stores a setting in the peer's extra block, which is only taken for a non-default value.
  void set_setting(Peer& p, std::uint32_t PeerExtra::*field, std::uint32_t value,
                   std::uint32_t host_default) {
    if (p.extra == nullptr && value == host_default) return;
    extra(p).*field = value;
  }

  std::uint32_t ping_interval(const Peer& p) const {
    return p.extra != nullptr ? p.extra->ping_interval : config.ping_interval_ms;
  }
  std::uint32_t timeout_limit(const Peer& p) const {
    return p.extra != nullptr ? p.extra->timeout_limit : config.timeout_limit;
  }
  std::uint32_t timeout_minimum(const Peer& p) const {
    return p.extra != nullptr ? p.extra->timeout_minimum : config.timeout_minimum_ms;
  }
  std::uint32_t timeout_maximum(const Peer& p) const {
    return p.extra != nullptr ? p.extra->timeout_maximum : config.timeout_maximum_ms;
  }
  std::uint32_t throttle_interval(const Peer& p) const {
    return p.extra != nullptr ? p.extra->throttle_interval : config.throttle_interval_ms;
  }
  std::uint32_t throttle_acceleration(const Peer& p) const {
    return p.extra != nullptr ? p.extra->throttle_acceleration : config.throttle_acceleration;
  }
  std::uint32_t throttle_deceleration(const Peer& p) const {
    return p.extra != nullptr ? p.extra->throttle_deceleration : config.throttle_deceleration;
  }
  static std::uint32_t incoming_bandwidth(const Peer& p) {
    return p.extra != nullptr ? p.extra->incoming_bandwidth : 0;
  }
  static std::uint32_t outgoing_bandwidth(const Peer& p) {
    return p.extra != nullptr ? p.extra->outgoing_bandwidth : 0;
  }
  void set_throttle_settings(Peer& p, std::uint32_t interval, std::uint32_t acceleration,
                             std::uint32_t deceleration) {
    set_setting(p, &PeerExtra::throttle_interval, interval, config.throttle_interval_ms);
    set_setting(p, &PeerExtra::throttle_acceleration, acceleration, config.throttle_acceleration);
    set_setting(p, &PeerExtra::throttle_deceleration, deceleration, config.throttle_deceleration);
  }
  void set_bandwidths(Peer& p, std::uint32_t incoming, std::uint32_t outgoing) {
    set_setting(p, &PeerExtra::incoming_bandwidth, incoming, 0);
    set_setting(p, &PeerExtra::outgoing_bandwidth, outgoing, 0);
  }

  void count(Peer& p, Stat s, std::size_t n) {
    const std::uint32_t before = p.stat_low[s];
    p.stat_low[s] = before + static_cast<std::uint32_t>(n);
    if (p.stat_low[s] < before) ++extra(p).stat_high[s];
  }
  static std::uint64_t stat(const Peer& p, Stat s) {
    const std::uint64_t high = p.extra != nullptr ? p.extra->stat_high[s] : 0;
    return (high << 32) | p.stat_low[s];
  }

  // The channel, or nullptr if it has carried nothing yet (id must be below channel_count).
  static Channel* channel_if(const Peer& p, std::uint8_t id) {
    if (p.channel_store == nullptr) return nullptr;
    if (p.channel_count == 1) return static_cast<Channel*>(p.channel_store);
    return static_cast<Channel**>(p.channel_store)[id];
  }

  // The channel, allocated on first use (id must be below channel_count). Every send asks for
  // its channel, so the common case (already there) stays inline and a first use takes a call.
  Channel& channel(Peer& p, std::uint8_t id) {
    if (p.channel_store != nullptr) {
      if (p.channel_count == 1) return *static_cast<Channel*>(p.channel_store);
      if (Channel* ch = static_cast<Channel**>(p.channel_store)[id]) return *ch;
    }
    return first_use_of_channel(p, id);
  }

  [[gnu::noinline]] Channel& first_use_of_channel(Peer& p, std::uint8_t id) {
    if (p.channel_count == 1) {
      if (p.channel_store == nullptr) p.channel_store = channel_pool.get();
      return *static_cast<Channel*>(p.channel_store);
    }
    if (p.channel_store == nullptr) p.channel_store = new Channel*[p.channel_count]();
    Channel*& ch = static_cast<Channel**>(p.channel_store)[id];
    if (ch == nullptr) ch = channel_pool.get();
    return *ch;
  }

  template <class F>
  static void for_each_channel(const Peer& p, F&& f) {
    if (p.channel_store == nullptr) return;
    if (p.channel_count == 1) {
      f(*static_cast<Channel*>(p.channel_store));
      return;
    }
    for (std::uint32_t i = 0; i < p.channel_count; ++i) {
      if (Channel* ch = static_cast<Channel**>(p.channel_store)[i]) f(*ch);
    }
  }

  // Frees every channel (their queues must be empty) and sets the new count.
  void reset_channels(Peer& p, std::uint32_t count) {
    for_each_channel(p, [this](Channel& ch) {
      release_wide(ch);
      channel_pool.put(&ch);
    });
    if (p.queues != nullptr) p.queues->wide_channels = 0;
    if (p.channel_count > 1) delete[] static_cast<Channel**>(p.channel_store);
    p.channel_store = nullptr;
    p.channel_count = static_cast<std::uint8_t>(count);
  }

  // Everything a peer holds outside its record; it is left as a freshly reset peer has it.
  void release_blocks(Peer& p) {
    clear_queues(p);
    if (p.queues != nullptr) {
      queue_pool.put(p.queues);
      p.queues = nullptr;
    }
    reset_channels(p, 0);
    if (p.unsequenced != nullptr) {
      unsequenced_pool.put(p.unsequenced);
      p.unsequenced = nullptr;
    }
    if (p.extra != nullptr) {
      extra_pool.put(p.extra);
      p.extra = nullptr;
    }
  }

  PeerHandle handle_of(const Peer& p) const { return PeerHandle{p.slot, p.generation}; }

  Event event_for(const Peer& p, EventType type) const {
    Event ev;
    ev.type = type;
    ev.peer = handle_of(p);
    ev.address = p.address;
    return ev;
  }

  // ---- routing: which connection a datagram's header names ------------------------------
  //
  // The peer ID we hand out (and the remote side puts in every header it sends us) is the
  // connection's slot, as in ENet, wherever the 12-bit field can hold it: a datagram then finds
  // its connection by indexing, and the address it came from confirms it. Connections in
  // slots from kMaxPeerId on (a shard with more than 4,095) get an ID that no other connection
  // from their address uses, and a route key (address, ID) in by_address. Connections we
  // accepted are also found by the client's own index, to recognise a retransmitted or
  // restarted CONNECT: through the route key when the ID we gave mirrors that index, else an
  // identity key (address, kIdentityKey | index), which no route key can equal.
  static constexpr std::uint16_t kIdentityKey = 0x8000;

  static constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};

  // The slot of the connection a header's peer ID names for datagrams from `from`, or kNoSlot
  // (its state is the caller's to check).
  std::uint32_t route_slot(const Endpoint& from, std::uint16_t id) const {
    if (id < slots.size()) {
      const Peer& q = slots[id];
      if (q.incoming_peer_id == id && q.state != PeerState::disconnected && q.address == from) {
        return id;
      }
    }
    const std::uint32_t* slot = by_address.find(base::PeerKey(from, id));
    return slot != nullptr ? *slot : kNoSlot;
  }

  Peer* route(const Endpoint& from, std::uint16_t id) {
    const std::uint32_t slot = route_slot(from, id);
    return slot != kNoSlot ? &slots[slot] : nullptr;
  }

  // Whether datagrams from `address` naming `id` already go to some connection.
  bool peer_id_taken(const Endpoint& address, std::uint16_t id) const {
    return route_slot(address, id) != kNoSlot;
  }

  // A peer ID for a connection in a slot beyond the field's reach: `preferred` if no
  // connection from that address uses it, else the next free one; kMaxPeerId when all 4,095
  // are taken.
  std::uint16_t free_peer_id(const Endpoint& address, std::uint16_t preferred) const {
    for (std::uint32_t i = 0; i < kMaxPeerId; ++i) {
      const auto id = static_cast<std::uint16_t>((preferred + i) % kMaxPeerId);
      if (!peer_id_taken(address, id)) return id;
    }
    return kMaxPeerId;
  }

  // A connection we accepted from `address`, found by the client's own index.
  Peer* find_accepted(const Endpoint& address, std::uint16_t client_index) {
    if (const std::uint32_t* slot =
            by_address.find(base::PeerKey(address, kIdentityKey | client_index))) {
      return &slots[*slot];
    }
    if (const std::uint32_t* slot = by_address.find(base::PeerKey(address, client_index))) {
      Peer& q = slots[*slot];
      if (q.accepted && q.outgoing_peer_id == client_index) return &q;
    }
    return nullptr;
  }

  // A new connection to or from `address`. Its peer ID is its slot where that can be used,
  // else `preferred` or the next free ID (see routing above); null at the peer limit or when
  // no ID is free.
  Peer* allocate_peer(const Endpoint& address, std::uint16_t preferred) {
    if (peer_count >= config.peer_limit) return nullptr;
    const std::uint32_t next_slot = free_slots.empty() ? slots.size() : free_slots.back();
    const std::uint16_t peer_id =
        next_slot < kMaxPeerId && !peer_id_taken(address, static_cast<std::uint16_t>(next_slot))
            ? static_cast<std::uint16_t>(next_slot)
            : free_peer_id(address, preferred);
    if (peer_id == kMaxPeerId) return nullptr;
    std::uint32_t slot;
    if (!free_slots.empty()) {
      slot = free_slots.back();
      free_slots.pop_back();
    } else {
      slot = slots.add();
    }
    Peer& p = slots[slot];
    // A free slot holds no side blocks (reset_peer released them).
    const std::uint32_t generation = p.generation;
    const std::uint8_t in_session = p.incoming_session;
    const std::uint8_t out_session = p.outgoing_session;
    p = Peer{};
    p.slot = slot;
    p.generation = generation;
    p.incoming_session = in_session;
    p.outgoing_session = out_session;
    p.address = address;
    p.incoming_peer_id = peer_id;
    p.mtu = static_cast<std::uint16_t>(config.mtu);
    if (peer_id != slot) by_address.insert(base::PeerKey(address, peer_id), slot);
    ++peer_count;
    return &p;
  }

  // Called once the client's index is known; see routing above.
  void key_accepted(Peer& p) {
    p.accepted = true;
    if (p.incoming_peer_id == p.slot) {
      by_address.insert(base::PeerKey(p.address, kIdentityKey | p.outgoing_peer_id), p.slot);
    }
  }

  void erase_key(const base::PeerKey& key, std::uint32_t slot) {
    if (const std::uint32_t* v = by_address.find(key); v != nullptr && *v == slot) {
      by_address.erase(key);
    }
  }

  void end_reassembly(InCmd* c) {
    if (c->reassembling) {
      counters.reassembly_bytes -= c->accounted;
      c->reassembling = false;
    }
  }

  void release_in(Peer& p, InCmd* c) {
    end_reassembly(c);
    p.total_waiting_data -= c->accounted;
    counters.buffered_bytes -= c->accounted;
    in_pool.put(c);
  }

  static std::uint64_t unacked_key(const Peer& p, std::uint8_t channel, std::uint16_t seq) {
    return std::uint64_t{p.slot} << 24 | std::uint64_t{channel} << 16 | seq;
  }

  // Every OutCmd goes back through here, so PeerQueues::queued_bytes stays exact.
  void put_out(PeerQueues& q, OutCmd* c) {
    q.queued_bytes -= c->fragment_length;
    if (c->packet) releases.add(std::move(c->packet).into_raw());
    out_pool.put(c);
  }

  // The channel a command is queued on; null for system commands (0xFF), which have none.
  static Channel* command_channel(const Peer& p, std::uint8_t channel_id) {
    return channel_id < p.channel_count ? channel_if(p, channel_id) : nullptr;
  }

  void track_unacked(Peer& p, OutCmd* c) {
    if (Channel* ch = command_channel(p, c->channel_id)) {
      if (ch->unacked.claim(c)) return;
      if (ch->wide == nullptr) {
        ch->wide = wide_pool.get();
        ++p.queues->wide_channels;  // c is queued there
      }
      if (ch->wide->claim(c)) return;
    }
    unacked.insert(unacked_key(p, c->channel_id, c->reliable_seq), c);
  }

  void untrack_unacked(Peer& p, OutCmd* c) {
    if (Channel* ch = command_channel(p, c->channel_id)) {
      if (ch->unacked.release(c)) return;
      if (ch->wide != nullptr && ch->wide->release(c)) return;
    }
    unacked.erase(unacked_key(p, c->channel_id, c->reliable_seq));
  }

  OutCmd* find_unacked(const Peer& p, std::uint8_t channel_id, std::uint16_t seq) const {
    if (const Channel* ch = command_channel(p, channel_id)) {
      if (OutCmd* c = ch->unacked.find(seq)) return c;
      if (ch->wide != nullptr) {
        if (OutCmd* c = ch->wide->find(seq)) return c;
      }
    }
    return unacked.size() != 0 ? unacked.find(unacked_key(p, channel_id, seq)) : nullptr;
  }

  void free_reliable(Peer& p, OutCmd* c) {
    if (c->send_attempts > 0) untrack_unacked(p, c);
    put_out(*p.queues, c);
  }

  void clear_queues(Peer& p) {
    if (PeerQueues* q = p.queues) {
      while (OutCmd* c = q->outgoing_reliable.pop_front()) free_reliable(p, c);
      while (OutCmd* c = q->outgoing_unreliable.pop_front()) put_out(*q, c);
      while (OutCmd* c = q->sent_reliable.pop_front()) free_reliable(p, c);
      while (AckChunk* c = q->acks.pop_front()) ack_pool.put(c);
      q->reliable_data_in_transit = 0;
    }
    for_each_channel(p, [&](Channel& ch) {
      while (InCmd* c = ch.in_reliable.pop_front()) release_in(p, c);
      while (InCmd* c = ch.in_unreliable.pop_front()) release_in(p, c);
    });
  }

  void set_state(Peer& p, PeerState s) {
    const bool was = p.connected_like();
    p.state = s;
    const bool is = p.connected_like();
    if (!was && is) {
      ++connected_peers;
      if (incoming_bandwidth(p) != 0) ++bandwidth_limited_peers;
    } else if (was && !is) {
      --connected_peers;
      if (incoming_bandwidth(p) != 0) --bandwidth_limited_peers;
    }
  }

  // enet_peer_reset: forget everything about the connection and free the slot.
  void reset_peer(Peer& p) {
    if (p.state == PeerState::disconnected) return;
    set_state(p, PeerState::connection_pending);  // leaves connected accounting
    release_blocks(p);
    if (p.incoming_peer_id != p.slot) {
      erase_key(base::PeerKey(p.address, p.incoming_peer_id), p.slot);
    } else if (p.accepted) {
      erase_key(base::PeerKey(p.address, kIdentityKey | p.outgoing_peer_id), p.slot);
    }
    timers.cancel(p.timer);
    p.state = PeerState::disconnected;
    p.dirty = false;
    p.timer_due = false;
    ++p.generation;
    free_slots.push_back(p.slot);
    --peer_count;
  }

  void emit_disconnect(Peer& p, DisconnectReason reason, std::uint32_t data) {
    Event ev = event_for(p, EventType::disconnect);
    ev.reason = reason;
    ev.data = data;
    events.push(std::move(ev));
    ++counters.disconnects;
    if (reason == DisconnectReason::timeout) ++counters.timeouts;
  }

  void emit_connect(Peer& p) {
    p.app_knows = true;
    Event ev = event_for(p, EventType::connect);
    ev.data = p.connect_data;
    events.push(std::move(ev));
    ++counters.connects;
  }

  void mark_dirty(Peer& p) {
    if (!p.dirty) {
      p.dirty = true;
      dirty.push_back(p.slot);
    }
  }

  std::uint64_t peer_deadline(const Peer& p) const {
    std::uint64_t deadline = kNever;
    if (!p.sent_empty()) {
      deadline = p.queues->next_timeout;
    } else if (p.connected_like()) {
      deadline = p.last_receive_time + ping_interval(p);
    }
    if (p.has_acks() && p.queues->acks_due != 0) deadline = std::min(deadline, p.queues->acks_due);
    return deadline;
  }

  // One timer per peer, moved in O(1) whenever its earliest deadline changes.
  void schedule(Peer& p) {
    if (p.state == PeerState::disconnected) return;
    const std::uint64_t deadline = peer_deadline(p);
    if (deadline == kNever) {
      timers.cancel(p.timer);
    } else if (!base::TimerWheel::scheduled(p.timer) || p.timer.expiry != deadline) {
      p.timer.owner = &p;
      timers.schedule(p.timer, deadline);
    }
  }

  // enet_protocol_notify_connect
  void notify_connect(Peer& p) {
    recalculate_bandwidth_limits = true;
    set_state(p, PeerState::connected);
    emit_connect(p);
  }

  // enet_protocol_notify_disconnect
  void notify_disconnect(Peer& p, DisconnectReason reason) {
    if (p.state >= PeerState::connection_pending) recalculate_bandwidth_limits = true;
    if (p.state != PeerState::connecting && p.state < PeerState::connection_succeeded) {
      reset_peer(p);  // a half-open connection the application never saw
      return;
    }
    const bool tell = p.app_knows;
    const std::uint32_t data = reason == DisconnectReason::remote ? p.event_data : 0;
    if (tell) emit_disconnect(p, reason, data);
    reset_peer(p);
  }

  // ---- outgoing queue -----------------------------------------------------------------

  // enet_peer_setup_outgoing_command: assigns sequence numbers at queue time.
  void queue_outgoing(Peer& p, const Command& cmd, Packet packet, std::uint32_t offset,
                      std::uint16_t length) {
    PeerQueues& q = queues(p);
    OutCmd* oc = out_pool.get();
    oc->command = cmd.command;
    oc->channel_id = cmd.channel_id;
    oc->packet = std::move(packet);
    oc->fragment_offset = offset;
    oc->fragment_length = length;
    q.queued_bytes += length;
    oc->queue_order = ++q.queue_counter;
    p.outgoing_data_total += static_cast<std::uint32_t>(command_size(cmd.type()) + length);
    if (cmd.channel_id == kSystemChannel) {
      ++p.outgoing_reliable_seq;
      oc->reliable_seq = p.outgoing_reliable_seq;
      oc->unreliable_seq = 0;
    } else {
      Channel& ch = channel(p, cmd.channel_id);
      if (cmd.needs_ack()) {
        ++ch.out_reliable_seq;
        ch.out_unreliable_seq = 0;
        oc->reliable_seq = ch.out_reliable_seq;
        oc->unreliable_seq = 0;
      } else if (cmd.unsequenced_flag()) {
        ++p.outgoing_unsequenced_group;
        oc->reliable_seq = 0;
        oc->unreliable_seq = 0;
      } else {
        if (offset == 0) ++ch.out_unreliable_seq;
        oc->reliable_seq = ch.out_reliable_seq;
        oc->unreliable_seq = ch.out_unreliable_seq;
      }
    }
    switch (cmd.type()) {
      case Cmd::send_unsequenced: oc->body = p.outgoing_unsequenced_group; break;
      case Cmd::send_fragment:
      case Cmd::send_unreliable_fragment: {
        const SendFragment& f = cmd.fragment;
        const std::uint32_t full_length =
            f.fragment_number == 0 ? f.data_length : f.fragment_offset / f.fragment_number;
        oc->body = std::uint32_t{f.start_seq} | full_length << 16;
        break;
      }
      case Cmd::disconnect: oc->body = cmd.disconnect.data; break;
      case Cmd::connect:
      case Cmd::verify_connect:
      case Cmd::bandwidth_limit:
      case Cmd::throttle_configure: {
        Command whole = cmd;
        whole.reliable_seq = oc->reliable_seq;
        oc->packet = Packet::allocate(command_size(cmd.type()));
        encode_command(oc->packet.mutable_bytes(), whole);
        oc->encoded = true;
        break;
      }
      default: break;
    }
    if (cmd.needs_ack()) {
      q.outgoing_reliable.push_back(oc);
    } else {
      q.outgoing_unreliable.push_back(oc);
    }
    mark_dirty(p);
  }

  void queue_system(Peer& p, Command cmd) {
    cmd.channel_id = kSystemChannel;
    queue_outgoing(p, cmd, Packet{}, 0, 0);
  }

  // Builds a one-command datagram sent outside the connection's queues (disconnect_now, and
  // disconnecting a connection that never completed): ENet flushes these immediately.
  void queue_farewell(Peer& p, std::uint32_t data) {
    Command cmd;
    cmd.command = static_cast<std::uint8_t>(Cmd::disconnect) | kFlagUnsequenced;
    cmd.channel_id = kSystemChannel;
    cmd.reliable_seq = ++p.outgoing_reliable_seq;
    cmd.disconnect.data = data;
    Farewell f;
    f.to = p.address;
    Header h;
    h.peer_id = p.outgoing_peer_id;
    h.session = p.outgoing_session;
    std::size_t n = encode_header(f.bytes, h, config.checksum);
    n += encode_command(std::span<std::byte>(f.bytes).subspan(n), cmd);
    f.size = static_cast<std::uint32_t>(n);
    if (config.checksum) {
      write_checksum(std::span<std::byte>(f.bytes.data(), n), 2,
                     p.outgoing_peer_id < kMaxPeerId ? p.connect_id : 0);
    }
    farewells.push_back(f);
  }

  // A retransmission timeout that looks like a stall (see check_timeouts): only an MTU of
  // reliable data goes out, and every byte acknowledged lets one more go (slow start: the
  // window doubles each round trip) until it reaches the largest ENet window, where the limit
  // is lifted. Acks for the originals (delayed, not lost) then free the commands waiting for
  // their resend instead of sending them twice. No congestion-avoidance phase as in TCP:
  // ENet's throttle already answers rising RTTs, and on a lossy game link a window that
  // stays small after every timeout only adds delay.
  void shrink_congestion_window(const Peer& p, PeerQueues& q) { q.congestion_window = p.mtu; }

  void grow_congestion_window(PeerQueues& q, std::uint32_t acked) {
    if (q.congestion_window == kUnlimitedWindow) return;
    q.congestion_window += acked;
    if (q.congestion_window >= kMaxWindowSize) q.congestion_window = kUnlimitedWindow;
  }

  // enet_protocol_remove_sent_reliable_command
  Cmd remove_sent_reliable(Peer& p, std::uint16_t seq, std::uint8_t channel_id) {
    // ENet searches sent_reliable, then the timed-out commands waiting at the front of
    // outgoing_reliable for their resend (they can still be acknowledged): exactly the
    // commands the index holds.
    OutCmd* found = p.queues != nullptr ? find_unacked(p, channel_id, seq) : nullptr;
    return found != nullptr ? remove_acked(p, found) : Cmd::none;
  }

  // A command found in the unacked index (so p.queues holds it) leaves it, acknowledged.
  Cmd remove_acked(Peer& p, OutCmd* found) {
    PeerQueues& q = *p.queues;
    const std::uint16_t seq = found->reliable_seq;
    const std::uint8_t channel_id = found->channel_id;
    untrack_unacked(p, found);
    const bool was_sent = found->in_sent;
    if (Channel* ch = command_channel(p, channel_id)) {
      const std::uint16_t w = seq_window(seq);
      if (ch->reliable_windows[w] > 0) {
        --ch->reliable_windows[w];
        if (ch->reliable_windows[w] == 0)
          ch->used_reliable_windows &= static_cast<std::uint16_t>(~(1u << w));
      }
    }
    const Cmd type = found->type();
    if (was_sent) {
      q.sent_reliable.remove(found);
      if (found->has_payload()) {
        q.reliable_data_in_transit -= found->fragment_length;
        grow_congestion_window(q, found->fragment_length);
      }
      if (found->send_attempts == 1 && found->sent_time_ms > q.newest_acked_sent_ms) {
        q.newest_acked_sent_ms = found->sent_time_ms;
        q.newest_acked_moved = true;
      }
    } else {
      q.outgoing_reliable.remove(found);
    }
    put_out(q, found);
    rearm_retransmission_timer(q);
    return type;
  }

  // ---- incoming -----------------------------------------------------------------------

  bool charge(Peer& p, std::size_t bytes, bool reassembly, Drop& why) {
    if (p.total_waiting_data + bytes > config.max_waiting_data) {
      why = Drop::waiting_data_cap;
      return false;
    }
    const std::size_t reassembly_budget = config.memory_cap / 4 * 3;
    if (counters.buffered_bytes + bytes > config.memory_cap ||
        (reassembly && counters.reassembly_bytes + bytes > reassembly_budget)) {
      why = Drop::memory_cap;
      evict_largest_holder();
      return false;
    }
    p.total_waiting_data += bytes;
    counters.buffered_bytes += bytes;
    if (reassembly) counters.reassembly_bytes += bytes;
    return true;
  }

  // Under the memory cap, the connection sitting on the most undelivered data goes: a flood of
  // never-completed fragment sets would otherwise hold the host's memory for as long as its
  // sender keeps acknowledging. The scan is O(peers) but runs only when the cap is hit, and
  // each eviction frees the largest holding there is.
  void evict_largest_holder() {
    Peer* hog = nullptr;
    for (std::uint32_t i = 0; i < slots.size(); ++i) {
      Peer& sp = slots[i];
      if (sp.state != PeerState::disconnected &&
          (hog == nullptr || sp.total_waiting_data > hog->total_waiting_data)) {
        hog = &sp;
      }
    }
    if (hog == nullptr || hog->total_waiting_data == 0) return;  // it is all in the event queue
    ++counters.evictions;
    queue_farewell(*hog, 0);
    if (hog->app_knows) emit_disconnect(*hog, DisconnectReason::evicted, 0);
    if (hog->connected_like()) recalculate_bandwidth_limits = true;
    reset_peer(*hog);
  }

  // A message that waited in a reorder list or a fragment set: its buffer moves to the event
  // queue, which keeps the bytes charged to the host until the application takes them.
  void deliver(Peer& p, std::uint8_t channel, Delivery delivery, InCmd* c) {
    Packet packet = std::move(c->packet);
    release_in(p, c);
    deliver_now(p, channel, delivery, std::move(packet));
  }

  // `lent`: the message's bytes in the datagram being handled, when `packet` is empty
  // (HostConfig::lend_payloads); they are not held here, so not charged to buffered_bytes.
  void deliver_now(Peer& p, std::uint8_t channel, Delivery delivery, Packet packet,
                   std::span<const std::byte> lent = {}) {
    counters.buffered_bytes += packet.size();
    ++counters.messages_in;
    count(p, kMessagesReceived, 1);
    // Filled where it waits: one message, one event written, not built and then moved.
    static_assert(sizeof(Event) == 64, "every field of Event is set below: add the new one");
    Event& ev = events.append();
    ev.type = EventType::receive;
    ev.peer = handle_of(p);
    ev.address = p.address;
    ev.channel = channel;
    ev.delivery = delivery;
    ev.reason = DisconnectReason::none;
    ev.data = 0;
    ev.packet = std::move(packet);
    ev.lent = lent;
  }

  // A message taken whole from the datagram being handled: lent when the caller allows it,
  // else copied.
  void deliver_from_datagram(Peer& p, std::uint8_t channel, Delivery delivery,
                             std::span<const std::byte> bytes) {
    if (config.lend_payloads) {
      deliver_now(p, channel, delivery, Packet{}, bytes);
    } else {
      deliver_now(p, channel, delivery, Packet::copy_of(bytes));
    }
  }

  // enet_peer_dispatch_incoming_reliable_commands
  // Unlike ENet, which releases a run of reliable messages and only then the unreliable ones
  // sequenced behind the last of them, unreliable messages held behind each reliable message
  // are released right after it: the same order, fewer needless drops.
  void dispatch_reliable(Peer& p, std::uint8_t channel_id) {
    if (p.intake_held) return;  // release_intake dispatches
    Channel& ch = channel(p, channel_id);
    while (InCmd* c = ch.in_reliable.front()) {
      if (c->fragments_remaining > 0 ||
          c->reliable_seq != static_cast<std::uint16_t>(ch.in_reliable_seq + 1)) {
        break;
      }
      ch.in_reliable_seq = c->reliable_seq;
      if (c->fragment_count > 0) {
        ch.in_reliable_seq = static_cast<std::uint16_t>(ch.in_reliable_seq + c->fragment_count - 1);
      }
      ch.in_reliable.remove(c);
      deliver(p, channel_id, Delivery::reliable, c);
      ch.in_unreliable_seq = 0;
      if (!ch.in_unreliable.empty()) dispatch_unreliable(p, channel_id);
    }
  }

  // Unreliable messages are sequenced behind the reliable message they followed: deliverable
  // once that reliable sequence number is current, and only if newer than the last delivered.
  void dispatch_unreliable(Peer& p, std::uint8_t channel_id) {
    Channel& ch = channel(p, channel_id);
    InCmd* c = ch.in_unreliable.front();
    while (c != nullptr) {
      InCmd* next = c->next_;
      if (c->reliable_seq == ch.in_reliable_seq) {
        if (c->unreliable_seq <= ch.in_unreliable_seq) {
          ch.in_unreliable.remove(c);
          counters.drops.add(Drop::late_unreliable);
          release_in(p, c);
        } else if (c->fragments_remaining == 0) {
          ch.in_unreliable_seq = c->unreliable_seq;
          ch.in_unreliable.remove(c);
          deliver(p, channel_id, Delivery::unreliable, c);
        }
        // else: an incomplete set for the current sequence waits for its other fragments
      } else if (!in_receive_window(c->reliable_seq, ch.in_reliable_seq)) {
        ch.in_unreliable.remove(c);
        counters.drops.add(Drop::late_unreliable);
        release_in(p, c);
      } else {
        break;  // sorted: everything further waits for a later reliable message
      }
      c = next;
    }
  }

  // Inserts into the sorted reliable reorder list; nullptr return = duplicate.
  bool insert_reliable(Channel& ch, InCmd* c) {
    const std::uint16_t key = ahead(c->reliable_seq, ch.in_reliable_seq);
    InCmd* pos = ch.in_reliable.back();
    while (pos != nullptr) {
      const std::uint16_t k = ahead(pos->reliable_seq, ch.in_reliable_seq);
      if (k == key) return false;
      if (k < key) break;
      pos = ch.in_reliable.prev(pos);
    }
    ch.in_reliable.insert_after(pos, c);
    return true;
  }

  InCmd* find_reliable(Channel& ch, std::uint16_t seq) {
    const std::uint16_t key = ahead(seq, ch.in_reliable_seq);
    for (InCmd* pos = ch.in_reliable.back(); pos != nullptr; pos = ch.in_reliable.prev(pos)) {
      const std::uint16_t k = ahead(pos->reliable_seq, ch.in_reliable_seq);
      if (k == key) return pos;
      if (k < key) break;
    }
    return nullptr;
  }

  // Sorted by (reliable sequence ahead of current, unreliable sequence).
  InCmd* find_or_position_unreliable(Channel& ch, std::uint16_t rseq, std::uint16_t useq,
                                     InCmd*& insert_after) {
    const std::uint16_t key = ahead(rseq, ch.in_reliable_seq);
    InCmd* pos = ch.in_unreliable.back();
    while (pos != nullptr) {
      const std::uint16_t k = ahead(pos->reliable_seq, ch.in_reliable_seq);
      if (k < key || (k == key && pos->unreliable_seq < useq)) break;
      if (k == key && pos->unreliable_seq == useq) {
        insert_after = pos;
        return pos;
      }
      pos = ch.in_unreliable.prev(pos);
    }
    insert_after = pos;
    return nullptr;
  }

  Handled handle_send_reliable(Peer& p, const Command& cmd, std::uint16_t sent_time, Drop& why) {
    Channel& ch = channel(p, cmd.channel_id);
    if (p.state == PeerState::disconnect_later) return Handled::ok;  // discarded, still acked
    if (!in_receive_window(cmd.reliable_seq, ch.in_reliable_seq)) {
      // Behind the delivered sequence number: a retransmission we already have.
      const bool behind = ahead(cmd.reliable_seq, ch.in_reliable_seq) >= 0x8000;
      counters.drops.add(behind ? Drop::duplicate : Drop::out_of_window);
      return Handled::ok;
    }
    if (cmd.reliable_seq == ch.in_reliable_seq) {
      counters.drops.add(Drop::duplicate);
      return Handled::ok;
    }
    if (InCmd* have = find_reliable(ch, cmd.reliable_seq)) {
      counters.drops.add(Drop::duplicate);
      if (!have->ack_withheld) return Handled::ok;
      // Still held: acknowledged on release, with the newest send time (a smaller RTT sample).
      have->ack_sent_time = sent_time;
      return Handled::withheld;
    }
    const std::size_t len = cmd.payload.size();
    if (!meter(p, len)) {
      ++counters.intake_over_limit;
      return Handled::withheld;  // neither kept nor acknowledged: the sender resends it
    }
    if (p.intake_held) return withhold_reliable(p, ch, cmd, sent_time, why);
    if (!charge(p, len, false, why)) return Handled::stop;  // no ack: the sender retries later
    if (ch.in_reliable.empty() &&
        cmd.reliable_seq == static_cast<std::uint16_t>(ch.in_reliable_seq + 1)) {
      // The next message in order with nothing held before it, the usual case: delivered
      // straight away, as dispatch_reliable would, without a stay on the reorder list.
      p.total_waiting_data -= len;
      counters.buffered_bytes -= len;
      ch.in_reliable_seq = cmd.reliable_seq;
      deliver_from_datagram(p, cmd.channel_id, Delivery::reliable, cmd.payload);
      ch.in_unreliable_seq = 0;
      if (!ch.in_unreliable.empty()) dispatch_unreliable(p, cmd.channel_id);
      return Handled::ok;
    }
    InCmd* c = in_pool.get();
    c->reliable_seq = cmd.reliable_seq;
    c->type = Cmd::send_reliable;
    c->packet = Packet::copy_of(cmd.payload);
    c->accounted = static_cast<std::uint32_t>(len);
    insert_reliable(ch, c);
    dispatch_reliable(p, cmd.channel_id);
    return Handled::ok;
  }

  // HostConfig::intake_rate / intake_bandwidth: true when the peer's buckets pay for one more
  // message of `bytes`, which they then do.
  bool meter(Peer& p, std::size_t bytes) {
    if (config.intake_rate == 0 && config.intake_bandwidth == 0) return true;
    PeerExtra& e = extra(p);
    const double rate = config.intake_rate;
    const double bandwidth = config.intake_bandwidth;
    if (e.intake_filled_ms == 0) {
      e.intake_messages = rate;
      e.intake_bytes = bandwidth;
    } else {
      const double seconds = static_cast<double>(now_ms - e.intake_filled_ms) / 1000.0;
      e.intake_messages = std::min(rate, e.intake_messages + seconds * rate);
      e.intake_bytes = std::min(bandwidth, e.intake_bytes + seconds * bandwidth);
    }
    e.intake_filled_ms = std::max<std::uint64_t>(now_ms, 1);
    const auto size = static_cast<double>(bytes);
    if (rate != 0 && e.intake_messages < 1) return false;
    if (bandwidth != 0 && e.intake_bytes < std::min(size, bandwidth)) return false;
    e.intake_messages -= 1;
    e.intake_bytes -= size;
    return true;
  }

  // A new reliable command from a peer whose intake is held: kept, neither delivered nor
  // acknowledged, so the sender's own window stops it sending more; past
  // HostConfig::max_withheld it is not even kept (the sender resends it).
  Handled withhold_reliable(Peer& p, Channel& ch, const Command& cmd, std::uint16_t sent_time,
                            Drop& why) {
    PeerExtra& e = extra(p);
    if (e.withheld >= config.max_withheld || !charge(p, cmd.payload.size(), false, why)) {
      ++counters.intake_refused;
      return Handled::withheld;
    }
    InCmd* c = in_pool.get();
    c->reliable_seq = cmd.reliable_seq;
    c->type = Cmd::send_reliable;
    c->packet = Packet::copy_of(cmd.payload);
    c->accounted = static_cast<std::uint32_t>(cmd.payload.size());
    c->ack_withheld = true;
    c->ack_sent_time = sent_time;
    insert_reliable(ch, c);
    ++e.withheld;
    ++counters.intake_withheld;
    return Handled::withheld;
  }

  // Acknowledges what hold_intake kept and delivers what is now in order.
  void release_intake(Peer& p) {
    p.intake_held = false;
    if (p.extra != nullptr) p.extra->withheld = 0;
    for (std::uint32_t id = 0; id < p.channel_count; ++id) {
      Channel* ch = channel_if(p, static_cast<std::uint8_t>(id));
      if (ch == nullptr || ch->in_reliable.empty()) continue;
      for (InCmd* c = ch->in_reliable.front(); c != nullptr; c = c->next_) {
        if (!c->ack_withheld) continue;
        c->ack_withheld = false;
        Command ack;
        ack.command = static_cast<std::uint8_t>(Cmd::send_reliable) | kFlagAcknowledge;
        ack.channel_id = static_cast<std::uint8_t>(id);
        ack.reliable_seq = c->reliable_seq;
        queue_ack(p, ack, c->ack_sent_time);
      }
      dispatch_reliable(p, static_cast<std::uint8_t>(id));
    }
    if (p.has_queued()) mark_dirty(p);
    schedule(p);
  }

  Handled handle_send_unreliable(Peer& p, const Command& cmd, Drop& why) {
    Channel& ch = channel(p, cmd.channel_id);
    if (p.state == PeerState::disconnect_later) return Handled::ok;
    const std::uint16_t rseq = cmd.reliable_seq;
    const std::uint16_t useq = cmd.unreliable.unreliable_seq;
    if (!in_receive_window(rseq, ch.in_reliable_seq)) {
      counters.drops.add(Drop::late_unreliable);
      return Handled::ok;
    }
    if (rseq == ch.in_reliable_seq) {
      if (useq <= ch.in_unreliable_seq) {
        counters.drops.add(Drop::late_unreliable);
        return Handled::ok;
      }
      if (!meter(p, cmd.payload.size())) {
        counters.drops.add(Drop::over_limit);
        return Handled::ok;
      }
      // Deliverable at once; anything older still waiting (fragment sets) is now late.
      ch.in_unreliable_seq = useq;
      deliver_from_datagram(p, cmd.channel_id, Delivery::unreliable, cmd.payload);
      dispatch_unreliable(p, cmd.channel_id);
      return Handled::ok;
    }
    // Follows a reliable message not yet delivered: hold it until then.
    InCmd* after = nullptr;
    if (find_or_position_unreliable(ch, rseq, useq, after) != nullptr) {
      counters.drops.add(Drop::duplicate);
      return Handled::ok;
    }
    const std::size_t len = cmd.payload.size();
    if (!meter(p, len)) {
      counters.drops.add(Drop::over_limit);
      return Handled::ok;
    }
    if (!charge(p, len, false, why)) {
      counters.drops.add(why);
      return Handled::ok;  // unreliable: dropping it is the contract
    }
    InCmd* c = in_pool.get();
    c->reliable_seq = rseq;
    c->unreliable_seq = useq;
    c->type = Cmd::send_unreliable;
    c->packet = Packet::copy_of(cmd.payload);
    c->accounted = static_cast<std::uint32_t>(len);
    ch.in_unreliable.insert_after(after, c);
    return Handled::ok;
  }

  Handled handle_send_unsequenced(Peer& p, const Command& cmd, Drop& why) {
    (void)why;
    if (p.state == PeerState::disconnect_later) return Handled::ok;
    std::uint32_t group = cmd.unsequenced.unsequenced_group;
    const std::uint32_t index = group % kUnsequencedWindowSize;
    const std::uint16_t incoming_group =
        p.unsequenced != nullptr ? p.unsequenced->incoming_group : 0;
    if (group < incoming_group) group += 0x10000;
    if (group >= static_cast<std::uint32_t>(incoming_group) +
                     kFreeUnsequencedWindows * kUnsequencedWindowSize) {
      counters.drops.add(Drop::out_of_window);
      return Handled::ok;
    }
    group &= 0xFFFF;
    if (p.unsequenced == nullptr) p.unsequenced = unsequenced_pool.get();
    UnsequencedWindow& window = *p.unsequenced;
    if (group - index != window.incoming_group) {
      window.incoming_group = static_cast<std::uint16_t>(group - index);
      window.bits.fill(0);
    } else if (window.bits[index / 32] & (1u << (index % 32))) {
      counters.drops.add(Drop::duplicate);
      return Handled::ok;
    }
    if (!meter(p, cmd.payload.size())) {
      counters.drops.add(Drop::over_limit);
      return Handled::ok;
    }
    window.bits[index / 32] |= 1u << (index % 32);
    deliver_from_datagram(p, cmd.channel_id, Delivery::unsequenced, cmd.payload);
    return Handled::ok;
  }

  bool validate_fragment(const Command& cmd, Drop& why) const {
    const SendFragment& f = cmd.fragment;
    const std::uint32_t len = f.data_length;
    if (len == 0) {
      why = Drop::fragment_past_total;
      return false;
    }
    if (f.fragment_count == 0 || f.fragment_count > kMaxFragmentCount ||
        f.total_length < f.fragment_count) {
      why = Drop::fragment_count_invalid;
      return false;
    }
    if (f.fragment_number >= f.fragment_count) {
      why = Drop::fragment_number_out_of_range;
      return false;
    }
    if (f.total_length > config.max_packet_size) {
      why = Drop::message_too_large;
      return false;
    }
    if (f.fragment_offset >= f.total_length || len > f.total_length - f.fragment_offset) {
      why = Drop::fragment_past_total;
      return false;
    }
    return true;
  }

  InCmd* new_fragment_set(Peer& p, const Command& cmd, std::uint16_t rseq, std::uint16_t useq,
                          Cmd type, Drop& why) {
    const SendFragment& f = cmd.fragment;
    const std::size_t bitmap_bytes = (std::size_t{f.fragment_count} + 31) / 32 * 4;
    if (!charge(p, f.total_length + bitmap_bytes, true, why)) return nullptr;
    InCmd* c = in_pool.get();
    c->reliable_seq = rseq;
    c->unreliable_seq = useq;
    c->type = type;
    c->fragment_count = f.fragment_count;
    c->fragments_remaining = f.fragment_count;
    // Zeroed: overlapping fragments can complete a set without writing every byte, and the
    // pool's buffers still hold other connections' messages.
    c->packet = Packet::allocate(f.total_length);
    std::memset(c->packet.mutable_bytes().data(), 0, f.total_length);
    c->bitmap = Packet::allocate(bitmap_bytes);
    std::memset(c->bitmap.mutable_bytes().data(), 0, bitmap_bytes);
    c->accounted = static_cast<std::uint32_t>(f.total_length + bitmap_bytes);
    c->reassembling = true;
    return c;
  }

  // Every fragment must agree with the set started under its start sequence number.
  static bool matches_set(const InCmd* set, const Command& cmd, Cmd type) {
    return set->type == type && set->packet.size() == cmd.fragment.total_length &&
           set->fragment_count == cmd.fragment.fragment_count;
  }

  // Copies one fragment into its set; false if it was already there.
  bool fill_fragment(InCmd* set, const Command& cmd) {
    const SendFragment& f = cmd.fragment;
    auto* bits = reinterpret_cast<std::uint32_t*>(set->bitmap.mutable_bytes().data());
    const std::uint32_t word = f.fragment_number / 32;
    const std::uint32_t bit = 1u << (f.fragment_number % 32);
    if (bits[word] & bit) return false;
    bits[word] |= bit;
    --set->fragments_remaining;
    if (set->fragments_remaining == 0) end_reassembly(set);
    std::memcpy(set->packet.mutable_bytes().data() + f.fragment_offset, cmd.payload.data(),
                cmd.payload.size());
    return true;
  }

  Handled handle_send_fragment(Peer& p, const Command& cmd, Drop& why) {
    Channel& ch = channel(p, cmd.channel_id);
    const std::uint16_t start = cmd.fragment.start_seq;
    if (!in_receive_window(start, ch.in_reliable_seq) || start == ch.in_reliable_seq) {
      // A set already delivered (its retransmitted fragments are still acknowledged).
      counters.drops.add(Drop::duplicate);
      return Handled::ok;
    }
    if (!validate_fragment(cmd, why)) return Handled::stop;
    if (p.state == PeerState::disconnect_later) return Handled::ok;
    InCmd* set = find_reliable(ch, start);
    if (set != nullptr) {
      if (!matches_set(set, cmd, Cmd::send_fragment)) {
        why = Drop::fragment_mismatch;
        return Handled::stop;
      }
    } else {
      if (!meter(p, cmd.fragment.total_length)) {
        ++counters.intake_over_limit;
        return Handled::withheld;
      }
      if (p.intake_held) {
        // No new set while held: only sets already started fill up (and wait for release).
        ++counters.intake_refused;
        return Handled::withheld;
      }
      set = new_fragment_set(p, cmd, start, 0, Cmd::send_fragment, why);
      if (set == nullptr) return Handled::stop;
      insert_reliable(ch, set);
    }
    if (!fill_fragment(set, cmd)) {
      counters.drops.add(Drop::duplicate);
      return Handled::ok;
    }
    if (set->fragments_remaining == 0) dispatch_reliable(p, cmd.channel_id);
    return Handled::ok;
  }

  Handled handle_send_unreliable_fragment(Peer& p, const Command& cmd, Drop& why) {
    Channel& ch = channel(p, cmd.channel_id);
    const std::uint16_t rseq = cmd.reliable_seq;
    const std::uint16_t start = cmd.fragment.start_seq;
    if (!in_receive_window(rseq, ch.in_reliable_seq) ||
        (rseq == ch.in_reliable_seq && start <= ch.in_unreliable_seq)) {
      counters.drops.add(Drop::late_unreliable);
      return Handled::ok;
    }
    if (!validate_fragment(cmd, why)) return Handled::stop;
    if (p.state == PeerState::disconnect_later) return Handled::ok;
    InCmd* after = nullptr;
    InCmd* set = find_or_position_unreliable(ch, rseq, start, after);
    if (set != nullptr) {
      if (!matches_set(set, cmd, Cmd::send_unreliable_fragment)) {
        why = Drop::fragment_mismatch;
        return Handled::stop;
      }
    } else {
      if (!meter(p, cmd.fragment.total_length)) {
        counters.drops.add(Drop::over_limit);
        return Handled::ok;
      }
      set = new_fragment_set(p, cmd, rseq, start, Cmd::send_unreliable_fragment, why);
      if (set == nullptr) {
        counters.drops.add(why);
        return Handled::ok;
      }
      ch.in_unreliable.insert_after(after, set);
    }
    if (!fill_fragment(set, cmd)) {
      counters.drops.add(Drop::duplicate);
      return Handled::ok;
    }
    if (set->fragments_remaining == 0) dispatch_unreliable(p, cmd.channel_id);
    return Handled::ok;
  }

  // enet_peer_throttle
  void throttle(Peer& p, std::uint32_t rtt) {
    const std::uint32_t current = p.packet_throttle;
    const std::uint32_t limit = p.packet_throttle_limit;
    std::uint32_t next = current;
    if (p.last_rtt <= p.last_rtt_variance) {
      next = limit;
    } else if (rtt <= p.last_rtt) {
      next = std::min(current + throttle_acceleration(p), limit);
    } else if (rtt > std::uint32_t{p.last_rtt} + 2 * std::uint32_t{p.last_rtt_variance}) {
      const std::uint32_t deceleration = throttle_deceleration(p);
      next = current > deceleration ? current - deceleration : 0;
    }
    p.packet_throttle = static_cast<std::uint8_t>(next);  // never above the limit (<= 32)
  }

  Handled handle_acknowledge(Peer& p, const Command& cmd) {
    if (p.state == PeerState::disconnected || p.state == PeerState::zombie) return Handled::ok;
    if (!take_rtt_sample(p, cmd.ack.received_sent_time)) return Handled::ok;
    const Cmd acked = remove_sent_reliable(p, cmd.ack.received_reliable_seq, cmd.channel_id);
    if (acked == Cmd::none) counters.drops.add(Drop::unexpected_ack);
    switch (p.state) {
      case PeerState::acknowledging_connect:
        if (acked != Cmd::verify_connect) return Handled::stop;
        notify_connect(p);
        break;
      case PeerState::disconnecting:
        if (acked != Cmd::disconnect) return Handled::stop;
        notify_disconnect(p, DisconnectReason::local);
        break;
      case PeerState::disconnect_later:
        if (!p.has_outgoing()) start_disconnect(p, p.event_data);
        break;
      default: break;
    }
    return Handled::ok;
  }

  // Calls f(seq) for each sequence number an ack range names, in order.
  template <class F>
  static void for_each_in_range(std::uint16_t seq, std::uint32_t bits, F&& f) {
    for (;;) {
      f(seq);
      if (bits == 0) return;
      const int skip = std::countr_zero(bits);
      seq = static_cast<std::uint16_t>(seq + skip + 1);
      bits = skip == 31 ? 0 : bits >> (skip + 1);
    }
  }

  // The commands a range names, found before any is freed. They were written a round trip
  // ago, and a relay sends megabytes in that time, so they have left the cache and so have
  // the messages they hold: asking for all of them first lets the misses overlap, where
  // freeing them one by one would wait out each in turn (two waits per command: its own line,
  // then its message's reference count).
  std::size_t find_range(const Peer& p, std::uint8_t channel_id, std::uint16_t seq,
                         std::uint32_t bits, std::array<OutCmd*, kAckRangeSpan>& found) const {
    const Channel* ch = channel_if(p, channel_id);
    if (ch != nullptr) {
      for_each_in_range(seq, bits, [&](std::uint16_t s) {
        OutCmd* c = ch->unacked.find(s);
        if (c == nullptr && ch->wide != nullptr) c = ch->wide->find(s);
        detail::prefetch_line(c);
      });
    }
    std::size_t n = 0;
    for_each_in_range(seq, bits, [&](std::uint16_t s) {
      OutCmd* c = find_unacked(p, channel_id, s);  // indexed commands are queued: p.queues
      if (c != nullptr) c->packet.prefetch();
      found[n++] = c;
    });
    return n;
  }

  // Selective acks (WIRE.md, "Extensions"): one command acknowledges up to 33 commands of one
  // channel. They only cover application channels, so the handshake and disconnect states,
  // which wait for system commands, never see one; one RTT sample stands for the range.
  Handled handle_ack_range(Peer& p, const Command& cmd, Drop& why) {
    // Understanding is enough to accept them: a client that offered selective acks takes
    // ranges even if the server's hello never reached it (the server agreed; only we do not
    // know). Sending them waits for the agreement.
    if (!p.selective_acks && !p.hello_offered) {
      why = Drop::extension_not_agreed;
      return Handled::stop;
    }
    if (cmd.channel_id >= p.channel_count) {
      why = Drop::bad_channel;
      return Handled::stop;
    }
    if (!p.connected_like()) {
      why = Drop::wrong_state;
      return Handled::stop;
    }
    if (!take_rtt_sample(p, cmd.ack_range.received_sent_time)) return Handled::ok;
    std::array<OutCmd*, kAckRangeSpan> found;
    const std::size_t n =
        find_range(p, cmd.channel_id, cmd.reliable_seq, cmd.ack_range.bits, found);
    for (std::size_t i = 0; i < n; ++i) {
      if (found[i] == nullptr) {
        counters.drops.add(Drop::unexpected_ack);
      } else {
        remove_acked(p, found[i]);
      }
    }
    if (p.state == PeerState::disconnect_later && !p.has_outgoing())
      start_disconnect(p, p.event_data);
    return Handled::ok;
  }

  // A Tern peer's hello. The connecting side offers its features with its CONNECT; the other
  // side answers with the ones both have alongside its VERIFY_CONNECT, and from then on each
  // uses what the answer names. Anything else (a repeat, a hello in another state) is ignored.
  Handled handle_hello(Peer& p, const Command& cmd) {
    const std::uint32_t agreed = cmd.hello.features & local_features();
    if (p.hello_offered) {
      if (p.state == PeerState::connected) p.selective_acks = (agreed & kFeatureSelectiveAcks) != 0;
    } else if (p.state == PeerState::acknowledging_connect && agreed != 0) {
      p.hello_agreed = true;
      p.selective_acks = (agreed & kFeatureSelectiveAcks) != 0;
    }
    return Handled::ok;
  }

  std::uint32_t local_features() const { return config.selective_acks ? kFeatureSelectiveAcks : 0; }

  // Folds an acknowledgement's echoed send time into the RTT estimate and the throttle, as
  // ENet does for every acknowledgement. False when the time cannot be ours.
  bool take_rtt_sample(Peer& p, std::uint16_t received_sent_time) {
    // Rebuild the full send time from its low 16 bits, as ENet does.
    const std::int64_t now = static_cast<std::int64_t>(now_ms);
    std::int64_t sent = (now & ~std::int64_t{0xFFFF}) | received_sent_time;
    if ((sent & 0x8000) > (now & 0x8000)) sent -= 0x10000;
    if (sent > now || sent < 0) return false;
    // At most 65,535 (see above), so every RTT field fits 16 bits.
    const std::uint32_t rtt = std::max<std::uint32_t>(static_cast<std::uint32_t>(now - sent), 1);
    std::uint32_t smoothed = p.rtt;
    std::uint32_t variance = p.rtt_variance;
    if (p.last_receive_time > 0) {
      throttle(p, rtt);
      variance -= variance / 4;
      // ENet truncates diff/8, so a smoothed RTT up to 7 ms below a steady sample never
      // moves and the throttle can sit at 0 for good; rounding lets it converge.
      if (rtt >= smoothed) {
        const std::uint32_t diff = rtt - smoothed;
        variance += diff / 4;
        smoothed += (diff + 4) / 8;
      } else {
        const std::uint32_t diff = smoothed - rtt;
        variance += diff / 4;
        smoothed -= (diff + 4) / 8;
      }
    } else {
      smoothed = rtt;
      variance = (rtt + 1) / 2;
    }
    p.rtt = static_cast<std::uint16_t>(smoothed);
    p.rtt_variance = static_cast<std::uint16_t>(variance);
    p.lowest_rtt = std::min(p.lowest_rtt, p.rtt);
    p.highest_rtt_variance = std::max(p.highest_rtt_variance, p.rtt_variance);
    if (!p.throttle_epoch_set || ms_since(p.packet_throttle_epoch) >= throttle_interval(p)) {
      p.last_rtt = p.lowest_rtt;
      p.last_rtt_variance = std::max<std::uint16_t>(p.highest_rtt_variance, 1);
      p.lowest_rtt = p.rtt;
      p.highest_rtt_variance = p.rtt_variance;
      p.packet_throttle_epoch = epoch_stamp();
      p.throttle_epoch_set = true;
    }
    p.last_receive_time = std::max<std::uint64_t>(now_ms, 1);
    if (p.queues != nullptr) p.queues->earliest_timeout = 0;
    return true;
  }

  void compute_window_from_bandwidth(Peer& p) {
    const std::uint32_t incoming = incoming_bandwidth(p);
    if (incoming == 0 && config.outgoing_bandwidth == 0) {
      p.window_size = kMaxWindowSize;
    } else if (incoming == 0 || config.outgoing_bandwidth == 0) {
      p.window_size =
          (std::max(incoming, config.outgoing_bandwidth) / kWindowSizeScale) * kMinWindowSize;
    } else {
      p.window_size =
          (std::min(incoming, config.outgoing_bandwidth) / kWindowSizeScale) * kMinWindowSize;
    }
    p.window_size = std::clamp(p.window_size, kMinWindowSize, kMaxWindowSize);
  }

  // enet_protocol_handle_connect (server side). Returns the new peer or nullptr.
  Peer* handle_connect(const Endpoint& from, const Command& cmd, Drop& why) {
    const Connect& c = cmd.connect;
    if (c.channel_count < kMinChannelCount || c.channel_count > kMaxChannelCount ||
        c.outgoing_peer_id >= kMaxPeerId) {
      why = Drop::bad_handshake;
      return nullptr;
    }
    // A client's indices are distinct among its live connections, so its index finds a
    // retransmitted CONNECT, and a restarted client (same socket, same index, new connect ID)
    // replaces its old connection.
    if (Peer* found = find_accepted(from, static_cast<std::uint16_t>(c.outgoing_peer_id))) {
      Peer& old = *found;
      if (old.outgoing_peer_id == c.outgoing_peer_id && old.state != PeerState::connecting) {
        if (old.connect_id == c.connect_id) {
          why = Drop::duplicate;  // a retransmitted CONNECT; our VERIFY retransmits on its own
          return nullptr;
        }
        if (old.app_knows) emit_disconnect(old, DisconnectReason::replaced, 0);
        if (old.connected_like()) recalculate_bandwidth_limits = true;
        reset_peer(old);
      }
    }
    Peer* pp = allocate_peer(from, static_cast<std::uint16_t>(c.outgoing_peer_id));
    if (pp == nullptr) {
      why = Drop::peer_limit;
      return nullptr;
    }
    Peer& p = *pp;
    const std::uint32_t channel_count = std::min(c.channel_count, config.channel_limit);
    reset_channels(p, channel_count);
    p.state = PeerState::acknowledging_connect;
    p.connect_id = c.connect_id;
    p.outgoing_peer_id = static_cast<std::uint16_t>(c.outgoing_peer_id);
    key_accepted(p);
    set_bandwidths(p, c.incoming_bandwidth, c.outgoing_bandwidth);
    set_throttle_settings(p, c.throttle_interval, c.throttle_acceleration, c.throttle_deceleration);
    p.connect_data = c.data;
    p.event_data = c.data;

    constexpr std::uint8_t kSessionValues = kHeaderSessionMask >> kHeaderSessionShift;
    std::uint8_t incoming_session =
        c.incoming_session == 0xFF ? p.outgoing_session : c.incoming_session;
    incoming_session = static_cast<std::uint8_t>((incoming_session + 1) & kSessionValues);
    if (incoming_session == p.outgoing_session) {
      incoming_session = static_cast<std::uint8_t>((incoming_session + 1) & kSessionValues);
    }
    p.outgoing_session = incoming_session;
    std::uint8_t outgoing_session =
        c.outgoing_session == 0xFF ? p.incoming_session : c.outgoing_session;
    outgoing_session = static_cast<std::uint8_t>((outgoing_session + 1) & kSessionValues);
    if (outgoing_session == p.incoming_session) {
      outgoing_session = static_cast<std::uint8_t>((outgoing_session + 1) & kSessionValues);
    }
    p.incoming_session = outgoing_session;

    const std::uint32_t mtu = std::clamp(c.mtu, kMinMtu, kMaxMtu);
    p.mtu = static_cast<std::uint16_t>(std::min<std::uint32_t>(p.mtu, mtu));
    compute_window_from_bandwidth(p);
    std::uint32_t window = config.incoming_bandwidth == 0
                               ? kMaxWindowSize
                               : (config.incoming_bandwidth / kWindowSizeScale) * kMinWindowSize;
    window = std::min(window, c.window_size);
    window = std::clamp(window, kMinWindowSize, kMaxWindowSize);

    Command verify;
    verify.command = static_cast<std::uint8_t>(Cmd::verify_connect) | kFlagAcknowledge;
    verify.connect.outgoing_peer_id = p.incoming_peer_id;
    verify.connect.incoming_session = incoming_session;
    verify.connect.outgoing_session = outgoing_session;
    verify.connect.mtu = p.mtu;
    verify.connect.window_size = window;
    verify.connect.channel_count = channel_count;
    verify.connect.incoming_bandwidth = config.incoming_bandwidth;
    verify.connect.outgoing_bandwidth = config.outgoing_bandwidth;
    verify.connect.throttle_interval = throttle_interval(p);
    verify.connect.throttle_acceleration = throttle_acceleration(p);
    verify.connect.throttle_deceleration = throttle_deceleration(p);
    verify.connect.connect_id = p.connect_id;
    queue_system(p, verify);
    return &p;
  }

  // enet_protocol_handle_verify_connect (client side).
  Handled handle_verify_connect(Peer& p, const Command& cmd, Drop& why) {
    if (p.state != PeerState::connecting) return Handled::ok;
    const Connect& c = cmd.connect;
    if (c.channel_count < kMinChannelCount || c.channel_count > kMaxChannelCount ||
        c.throttle_interval != throttle_interval(p) ||
        c.throttle_acceleration != throttle_acceleration(p) ||
        c.throttle_deceleration != throttle_deceleration(p) || c.connect_id != p.connect_id) {
      why = Drop::bad_handshake;
      p.event_data = 0;
      set_state(p, PeerState::zombie);
      if (p.app_knows) emit_disconnect(p, DisconnectReason::refused, 0);
      reset_peer(p);
      return Handled::stop;
    }
    remove_sent_reliable(p, p.connect_seq, kSystemChannel);
    // No channel has carried anything yet: the connection is not up.
    if (c.channel_count < p.channel_count) reset_channels(p, c.channel_count);
    p.outgoing_peer_id = static_cast<std::uint16_t>(c.outgoing_peer_id);
    p.incoming_session = static_cast<std::uint8_t>(c.incoming_session);
    p.outgoing_session = static_cast<std::uint8_t>(c.outgoing_session);
    const std::uint32_t mtu = std::clamp(c.mtu, kMinMtu, kMaxMtu);
    p.mtu = static_cast<std::uint16_t>(std::min<std::uint32_t>(p.mtu, mtu));
    const std::uint32_t window = std::clamp(c.window_size, kMinWindowSize, kMaxWindowSize);
    p.window_size = std::min(p.window_size, window);
    set_bandwidths(p, c.incoming_bandwidth, c.outgoing_bandwidth);
    notify_connect(p);
    return Handled::ok;
  }

  // enet_protocol_handle_disconnect
  Handled handle_disconnect(Peer& p, const Command& cmd) {
    if (p.state == PeerState::disconnected || p.state == PeerState::zombie ||
        p.state == PeerState::acknowledging_disconnect) {
      return Handled::ok;
    }
    clear_queues(p);
    p.event_data = cmd.disconnect.data;
    if (p.state == PeerState::connection_succeeded || p.state == PeerState::disconnecting ||
        p.state == PeerState::connecting) {
      const DisconnectReason reason =
          p.state == PeerState::connecting ? DisconnectReason::refused : DisconnectReason::remote;
      if (p.app_knows) emit_disconnect(p, reason, p.event_data);
      reset_peer(p);
    } else if (!p.connected_like()) {
      if (p.state == PeerState::connection_pending) recalculate_bandwidth_limits = true;
      reset_peer(p);
    } else if (cmd.needs_ack()) {
      set_state(p, PeerState::acknowledging_disconnect);  // zombie once the ack is sent
    } else {
      recalculate_bandwidth_limits = true;
      emit_disconnect(p, DisconnectReason::remote, p.event_data);
      reset_peer(p);
    }
    return Handled::ok;
  }

  Handled handle_bandwidth_limit(Peer& p, const Command& cmd) {
    if (!p.connected_like()) return Handled::stop;
    if (incoming_bandwidth(p) != 0) --bandwidth_limited_peers;
    set_bandwidths(p, cmd.bandwidth.incoming_bandwidth, cmd.bandwidth.outgoing_bandwidth);
    if (incoming_bandwidth(p) != 0) ++bandwidth_limited_peers;
    compute_window_from_bandwidth(p);
    return Handled::ok;
  }

  Handled handle_throttle_configure(Peer& p, const Command& cmd) {
    if (!p.connected_like()) return Handled::stop;
    set_throttle_settings(p, cmd.throttle.interval, cmd.throttle.acceleration,
                          cmd.throttle.deceleration);
    return Handled::ok;
  }

  // enet_peer_queue_acknowledgement
  void queue_ack(Peer& p, const Command& cmd, std::uint16_t sent_time) {
    if (cmd.channel_id < p.channel_count) {
      const Channel* ch = channel_if(p, cmd.channel_id);
      const std::uint16_t in_reliable_seq = ch != nullptr ? ch->in_reliable_seq : 0;
      std::uint32_t window = seq_window(cmd.reliable_seq);
      const std::uint32_t current = seq_window(in_reliable_seq);
      if (cmd.reliable_seq < in_reliable_seq) window += kReliableWindows;
      // Commands that far ahead were discarded; acknowledging them would lose them for good.
      if (window >= current + kFreeReliableWindows - 1 &&
          window <= current + kFreeReliableWindows) {
        return;
      }
    }
    PeerQueues& q = queues(p);
    AckChunk* chunk = q.acks.back();
    const bool ranged = p.selective_acks && cmd.channel_id < p.channel_count;
    if (ranged && chunk != nullptr && chunk->end > chunk->begin) {
      // Into the previous range when it covers this sequence number: most acks of a burst
      // cost one bit. The range keeps the sent time of the first datagram it acknowledged:
      // the sender's one RTT sample then includes the time acks were held (ack_delay_ms), as
      // ENet's one sample per command would, and its retransmission timeout covers the hold.
      // With the newest sent time the sample missed the hold, and a sender whose acks were
      // held retransmitted what had arrived.
      PendingAck& last = chunk->acks[chunk->end - 1];
      const auto ahead = static_cast<std::uint16_t>(cmd.reliable_seq - last.reliable_seq);
      if (last.is_range && last.channel == cmd.channel_id && ahead < kAckRangeSpan) {
        if (ahead != 0) last.bits |= 1u << (ahead - 1);
        return;
      }
    }
    p.outgoing_data_total += ranged ? kAckRangeSize : kAcknowledgeSize;
    if (chunk == nullptr || chunk->end == AckChunk::kCapacity) {
      chunk = ack_pool.get();
      q.acks.push_back(chunk);
    }
    chunk->acks[chunk->end++] = PendingAck{
        cmd.reliable_seq, sent_time, cmd.channel_id, cmd.type() == Cmd::disconnect, ranged, 0};
  }

  void on_datagram(std::uint64_t now_us, const Endpoint& from, std::span<const std::byte> bytes) {
    now_ms = now_us / 1000;
    ++counters.datagrams_in;
    counters.bytes_in += bytes.size();
    DecodedHeader dh;
    Drop why = Drop::count_;
    if (!decode_header(bytes, config.checksum, dh, why)) {
      counters.drops.add(why);
      return;
    }
    Peer* peer = nullptr;
    if (dh.header.peer_id != kMaxPeerId) {
      // Address, port and peer ID together name the connection; a datagram whose three do not
      // match one (a forged or stale peer ID included) belongs to none.
      peer = route(from, dh.header.peer_id);
      if (peer == nullptr) {
        counters.drops.add(Drop::unknown_peer);
        return;
      }
      if (peer->state == PeerState::disconnected || peer->state == PeerState::zombie) {
        counters.drops.add(Drop::unknown_peer);
        return;
      }
      if (peer->outgoing_peer_id < kMaxPeerId && dh.header.session != peer->incoming_session) {
        counters.drops.add(Drop::bad_session);
        return;
      }
    }
    if (config.checksum && !verify_checksum(bytes, dh, peer != nullptr ? peer->connect_id : 0)) {
      counters.drops.add(Drop::bad_checksum);
      return;
    }
    if (peer != nullptr) {
      count(*peer, kDatagramsReceived, 1);
      count(*peer, kBytesReceived, bytes.size());
    }

    CommandDecoder decoder(bytes, dh.size);
    Command cmd;
    while (true) {
      why = Drop::count_;
      if (!decoder.next(cmd, why)) {
        if (!decoder.at_end()) counters.drops.add(why);
        break;
      }
      ++counters.commands_in;
      const Cmd type = cmd.type();
      if (peer == nullptr && type != Cmd::connect) {
        counters.drops.add(Drop::unknown_peer);
        break;
      }
      Handled result = Handled::ok;
      switch (type) {
        case Cmd::connect:
          if (peer != nullptr) {
            why = Drop::wrong_state;
            result = Handled::stop;
          } else {
            peer = handle_connect(from, cmd, why);
            if (peer == nullptr) result = Handled::stop;
          }
          break;
        case Cmd::acknowledge:
          result = handle_acknowledge(*peer, cmd);
          if (result == Handled::stop) why = Drop::wrong_state;
          break;
        case Cmd::verify_connect: result = handle_verify_connect(*peer, cmd, why); break;
        case Cmd::disconnect: result = handle_disconnect(*peer, cmd); break;
        case Cmd::ping:
          if (!peer->connected_like()) {
            why = Drop::wrong_state;
            result = Handled::stop;
          }
          break;
        case Cmd::send_reliable:
        case Cmd::send_unreliable:
        case Cmd::send_unsequenced:
        case Cmd::send_fragment:
        case Cmd::send_unreliable_fragment:
          if (cmd.channel_id >= peer->channel_count) {
            why = Drop::bad_channel;
            result = Handled::stop;
          } else if (!peer->connected_like()) {
            why = Drop::wrong_state;
            result = Handled::stop;
          } else if (cmd.payload.size() > config.max_packet_size) {
            why = Drop::message_too_large;
            result = Handled::stop;
          } else if (type == Cmd::send_reliable) {
            result = handle_send_reliable(*peer, cmd, dh.header.sent_time, why);
          } else if (type == Cmd::send_unreliable) {
            result = handle_send_unreliable(*peer, cmd, why);
          } else if (type == Cmd::send_unsequenced) {
            result = handle_send_unsequenced(*peer, cmd, why);
          } else if (type == Cmd::send_fragment) {
            result = handle_send_fragment(*peer, cmd, why);
          } else {
            result = handle_send_unreliable_fragment(*peer, cmd, why);
          }
          break;
        case Cmd::bandwidth_limit:
          result = handle_bandwidth_limit(*peer, cmd);
          if (result == Handled::stop) why = Drop::wrong_state;
          break;
        case Cmd::throttle_configure:
          result = handle_throttle_configure(*peer, cmd);
          if (result == Handled::stop) why = Drop::wrong_state;
          break;
        case Cmd::tern_hello:
        case Cmd::ack_range:
          if (local_features() == 0) {
            why = Drop::unknown_command;  // as a plain ENet host: stop here
            result = Handled::stop;
          } else if (type == Cmd::tern_hello) {
            result = handle_hello(*peer, cmd);
          } else {
            result = handle_ack_range(*peer, cmd, why);
          }
          break;
        default:
          why = Drop::unknown_command;
          result = Handled::stop;
          break;
      }
      if (result == Handled::stop) {
        if (why != Drop::count_) counters.drops.add(why);
        break;
      }
      if (result == Handled::withheld) continue;
      if (peer != nullptr && peer->state == PeerState::disconnected) break;  // reset by a handler
      // Extension commands are never acknowledged, whatever their flag says.
      if (peer != nullptr && cmd.needs_ack() && type != Cmd::tern_hello && type != Cmd::ack_range) {
        if (!dh.header.has_sent_time) break;
        switch (peer->state) {
          case PeerState::disconnecting:
          case PeerState::acknowledging_connect:
          case PeerState::disconnected:
          case PeerState::zombie: break;
          case PeerState::acknowledging_disconnect:
            if (type == Cmd::disconnect) queue_ack(*peer, cmd, dh.header.sent_time);
            break;
          default: queue_ack(*peer, cmd, dh.header.sent_time); break;
        }
      }
    }
    if (peer != nullptr && peer->state != PeerState::disconnected) {
      if (peer->queues != nullptr && peer->queues->newest_acked_moved) resend_overtaken(*peer);
      if (holds_acks(*peer)) {
        if (peer->queues->acks_due == 0) peer->queues->acks_due = now_ms + config.ack_delay_ms;
      } else if (peer->has_queued()) {
        mark_dirty(*peer);
      }
      release_queues_if_idle(*peer);
      schedule(*peer);
    }
  }

  // HostConfig::ack_delay_ms: acknowledgements with nothing else to send to a connected peer
  // wait (up to the delay) for a command to ride with. Handshake and disconnect acks never
  // wait, and neither do acks for a peer that is dirty anyway.
  bool holds_acks(const Peer& p) const {
    return config.ack_delay_ms != 0 && p.state == PeerState::connected && !p.dirty &&
           p.has_acks() && p.queues->outgoing_reliable.empty() &&
           p.queues->outgoing_unreliable.empty();
  }

  // ---- application calls ----------------------------------------------------------------

  PeerHandle connect(std::uint64_t now_us, const Endpoint& to, std::size_t channel_count,
                     std::uint32_t data) {
    now_ms = now_us / 1000;
    // Several connections to one server are fine (ENet allows them); each gets its own ID.
    if (peer_count >= config.peer_limit) return PeerHandle{};
    Peer* pp = allocate_peer(to, static_cast<std::uint16_t>(next_client_peer_id++ % kMaxPeerId));
    if (pp == nullptr) return PeerHandle{};
    Peer& p = *pp;
    channel_count = std::clamp<std::size_t>(channel_count, kMinChannelCount, kMaxChannelCount);
    reset_channels(p, static_cast<std::uint32_t>(channel_count));
    p.state = PeerState::connecting;
    p.app_knows = true;
    p.hello_offered = local_features() != 0;
    p.connect_id = random_u32();
    p.connect_data = data;
    p.window_size = config.outgoing_bandwidth == 0
                        ? kMaxWindowSize
                        : (config.outgoing_bandwidth / kWindowSizeScale) * kMinWindowSize;
    p.window_size = std::clamp(p.window_size, kMinWindowSize, kMaxWindowSize);

    Command cmd;
    cmd.command = static_cast<std::uint8_t>(Cmd::connect) | kFlagAcknowledge;
    cmd.connect.outgoing_peer_id = p.incoming_peer_id;
    cmd.connect.incoming_session = p.incoming_session;
    cmd.connect.outgoing_session = p.outgoing_session;
    cmd.connect.mtu = p.mtu;
    cmd.connect.window_size = p.window_size;
    cmd.connect.channel_count = static_cast<std::uint32_t>(channel_count);
    cmd.connect.incoming_bandwidth = config.incoming_bandwidth;
    cmd.connect.outgoing_bandwidth = config.outgoing_bandwidth;
    cmd.connect.throttle_interval = throttle_interval(p);
    cmd.connect.throttle_acceleration = throttle_acceleration(p);
    cmd.connect.throttle_deceleration = throttle_deceleration(p);
    cmd.connect.connect_id = p.connect_id;
    cmd.connect.data = data;
    queue_system(p, cmd);
    p.connect_seq = p.outgoing_reliable_seq;
    return handle_of(p);
  }

  SendResult send(PeerHandle h, std::uint8_t channel_id, Delivery delivery, Packet payload) {
    Peer* p = find(h);
    if (p == nullptr) return SendResult::not_connected;
    return send(*p, channel_id, delivery, std::move(payload));
  }

  SendResult send(Peer& p, std::uint8_t channel_id, Delivery delivery, Packet payload) {
    if (p.state != PeerState::connected) return SendResult::not_connected;
    if (channel_id >= p.channel_count) return SendResult::bad_channel;
    const std::size_t size = payload.size();
    if (size > config.max_packet_size) return SendResult::too_large;
    // The receiver is not keeping up: refuse rather than hold without bound. An empty queue
    // takes any message, so one larger than the limit still goes.
    if (config.max_queued != 0 && p.queues != nullptr && p.queues->queued_bytes != 0 &&
        p.queues->queued_bytes + size >
            (delivery == Delivery::reliable ? config.max_queued : config.max_queued / 2)) {
      ++counters.queue_full;
      return SendResult::queue_full;
    }
    Channel& ch = channel(p, channel_id);
    std::size_t fragment_length = p.mtu - 4 - kFragmentCommandSize;
    if (config.checksum) fragment_length -= 4;
    ++counters.messages_out;
    count(p, kMessagesSent, 1);
    if (size > fragment_length) {
      const std::size_t fragment_count = (size + fragment_length - 1) / fragment_length;
      if (fragment_count > kMaxFragmentCount) return SendResult::too_large;
      Command frag;
      std::uint16_t start;
      if (delivery == Delivery::unreliable && ch.out_unreliable_seq < 0xFFFF) {
        frag.command = static_cast<std::uint8_t>(Cmd::send_unreliable_fragment);
        start = static_cast<std::uint16_t>(ch.out_unreliable_seq + 1);
      } else {
        frag.command = static_cast<std::uint8_t>(Cmd::send_fragment) | kFlagAcknowledge;
        start = static_cast<std::uint16_t>(ch.out_reliable_seq + 1);
      }
      frag.channel_id = channel_id;
      frag.fragment.start_seq = start;
      frag.fragment.fragment_count = static_cast<std::uint32_t>(fragment_count);
      frag.fragment.total_length = static_cast<std::uint32_t>(size);
      std::size_t offset = 0;
      for (std::uint32_t number = 0; offset < size; ++number) {
        const std::size_t len = std::min(fragment_length, size - offset);
        frag.fragment.fragment_number = number;
        frag.fragment.fragment_offset = static_cast<std::uint32_t>(offset);
        frag.fragment.data_length = static_cast<std::uint16_t>(len);
        queue_outgoing(p, frag, payload, static_cast<std::uint32_t>(offset),
                       static_cast<std::uint16_t>(len));
        offset += len;
      }
      return SendResult::ok;
    }
    Command cmd;
    cmd.channel_id = channel_id;
    if (delivery == Delivery::unsequenced) {
      cmd.command = static_cast<std::uint8_t>(Cmd::send_unsequenced) | kFlagUnsequenced;
      cmd.unsequenced.data_length = static_cast<std::uint16_t>(size);
    } else if (delivery == Delivery::reliable || ch.out_unreliable_seq >= 0xFFFF) {
      cmd.command = static_cast<std::uint8_t>(Cmd::send_reliable) | kFlagAcknowledge;
      cmd.reliable.data_length = static_cast<std::uint16_t>(size);
    } else {
      cmd.command = static_cast<std::uint8_t>(Cmd::send_unreliable);
      cmd.unreliable.data_length = static_cast<std::uint16_t>(size);
    }
    queue_outgoing(p, cmd, std::move(payload), 0, static_cast<std::uint16_t>(size));
    return SendResult::ok;
  }

  // enet_peer_disconnect
  void start_disconnect(Peer& p, std::uint32_t data) {
    if (p.state == PeerState::disconnecting || p.state == PeerState::disconnected ||
        p.state == PeerState::acknowledging_disconnect || p.state == PeerState::zombie) {
      return;
    }
    clear_queues(p);
    if (p.connected_like()) {
      Command cmd;
      cmd.command = static_cast<std::uint8_t>(Cmd::disconnect) | kFlagAcknowledge;
      cmd.disconnect.data = data;
      queue_system(p, cmd);
      recalculate_bandwidth_limits = true;
      set_state(p, PeerState::disconnecting);
      schedule(p);
    } else {
      queue_farewell(p, data);
      reset_peer(p);
    }
  }

  void disconnect_now(Peer& p, std::uint32_t data) {
    if (p.state != PeerState::zombie && p.state != PeerState::disconnecting) {
      clear_queues(p);
      queue_farewell(p, data);
    }
    if (p.connected_like()) recalculate_bandwidth_limits = true;
    reset_peer(p);
  }

  void disconnect_later(Peer& p, std::uint32_t data) {
    if (p.connected_like() && p.has_outgoing()) {
      set_state(p, PeerState::disconnect_later);
      p.event_data = data;
    } else {
      start_disconnect(p, data);
    }
  }

  // ---- output -------------------------------------------------------------------------

  // enet_protocol_check_timeouts, with one departure: the walk stops at the first command
  // still inside its timeout. ENet walks the whole of sent_reliable on every check; under
  // load that list holds a window's worth of commands per peer, each check touches all of
  // them (cache misses on a linked list), and the load generator spent ~35% of its time there
  // once a burst of delay had started the retransmissions: the slower it got, the more was in
  // flight and the costlier each check, a collapse ENet shares. The list is in send order, so
  // what lies behind the first live command was sent later; one whose own (smaller) timeout
  // has passed is resent when the commands ahead of it expire or are acknowledged, as TCP's
  // single retransmission timer would. Nothing on the wire changes.
  // True when the peer timed out (and is gone).
  bool check_timeouts(Peer& p) {
    PeerQueues& q = queues(p);
    const std::uint64_t first_sent_ms =
        q.sent_reliable.empty() ? 0 : q.sent_reliable.front()->sent_time_ms;
    OutCmd* insert_after = nullptr;
    OutCmd* c = q.sent_reliable.front();
    while (c != nullptr) {
      OutCmd* next = c->next_;
      if (now_ms - c->sent_time_ms < c->rto_ms) break;
      if (q.earliest_timeout == 0 || c->sent_time_ms < q.earliest_timeout) {
        q.earliest_timeout = c->sent_time_ms;
      }
      if (q.earliest_timeout != 0 && (now_ms - q.earliest_timeout >= timeout_maximum(p) ||
                                      ((std::uint64_t{1} << std::min<std::uint32_t>(
                                            c->send_attempts - 1, 62)) >= timeout_limit(p) &&
                                       now_ms - q.earliest_timeout >= timeout_minimum(p)))) {
        notify_disconnect(p, DisconnectReason::timeout);
        return true;
      }
      ++p.packets_lost;
      c->rto_ms *= 2;
      requeue_lost(q, c, insert_after);
      insert_after = c;
      c = next;
    }
    // Only a stall shrinks the window: when something sent as late as what timed out has been
    // acknowledged, the path is delivering and the timeout was a loss (an ack lost, or a
    // resend lost again), which the window would only slow down.
    if (insert_after != nullptr && config.congestion_window &&
        q.newest_acked_sent_ms < first_sent_ms)
      shrink_congestion_window(p, q);
    rearm_retransmission_timer(q);
    return false;
  }

  // A command taken as lost leaves the in-flight list for outgoing_reliable, behind
  // `insert_after` (its front when null), so lost commands keep their send order and go out
  // before anything queued later. It stays in the unacked index: a late ack still frees it.
  static void requeue_lost(PeerQueues& q, OutCmd* c, OutCmd* insert_after) {
    if (c->has_payload()) q.reliable_data_in_transit -= c->fragment_length;
    q.sent_reliable.remove(c);
    c->in_sent = false;
    q.outgoing_reliable.insert_after(insert_after, c);
  }

  // The retransmission deadline is the front's: the in-flight list is in send order.
  static void rearm_retransmission_timer(PeerQueues& q) {
    if (OutCmd* front = q.sent_reliable.front())
      q.next_timeout = front->sent_time_ms + front->rto_ms;
  }

  // HostConfig::fast_retransmit. sent_reliable is in send order, so the walk ends at the first
  // command sent too recently to have been overtaken. What it finds goes back to the front of
  // outgoing_reliable, in order, as a timeout would put it, but keeps its retransmission
  // timeout (the path is delivering) and leaves the congestion window alone.
  void resend_overtaken(Peer& p) {
    PeerQueues& q = *p.queues;
    q.newest_acked_moved = false;
    if (!config.fast_retransmit) return;
    const std::uint64_t margin = std::max<std::uint32_t>(p.rtt / 4, 1);
    OutCmd* insert_after = nullptr;
    OutCmd* c = q.sent_reliable.front();
    while (c != nullptr && c->sent_time_ms + margin < q.newest_acked_sent_ms) {
      OutCmd* next = c->next_;
      ++p.packets_lost;
      ++counters.fast_retransmits;
      requeue_lost(q, c, insert_after);
      insert_after = c;
      c = next;
    }
    if (insert_after != nullptr) rearm_retransmission_timer(q);
  }

  struct Build {
    OutDatagram* dg;
    std::size_t pos;
    std::size_t limit;
    std::size_t commands = 0;
    bool sent_time = false;
    bool more = false;
    bool zombie_after = false;
  };

  std::size_t room(const Build& b) const { return b.limit - b.pos; }

  void put_command(Build& b, const Command& cmd, std::span<const std::byte> payload) {
    std::span<std::byte> out(b.dg->bytes.data() + b.pos, b.limit - b.pos);
    const std::size_t n = encode_command(out, cmd);
    b.pos += n;
    if (!payload.empty()) {
      std::memcpy(b.dg->bytes.data() + b.pos, payload.data(), payload.size());
      b.pos += payload.size();
    }
    ++b.commands;
  }

  // The wire command a queued one stands for (see OutCmd).
  static Command wire_command(const OutCmd& c) {
    Command cmd;
    cmd.command = c.command;
    cmd.channel_id = c.channel_id;
    cmd.reliable_seq = c.reliable_seq;
    switch (c.type()) {
      case Cmd::disconnect: cmd.disconnect.data = c.body; break;
      case Cmd::send_reliable: cmd.reliable.data_length = c.fragment_length; break;
      case Cmd::send_unreliable:
        cmd.unreliable.unreliable_seq = c.unreliable_seq;
        cmd.unreliable.data_length = c.fragment_length;
        break;
      case Cmd::send_unsequenced:
        cmd.unsequenced.unsequenced_group = static_cast<std::uint16_t>(c.body);
        cmd.unsequenced.data_length = c.fragment_length;
        break;
      case Cmd::send_fragment:
      case Cmd::send_unreliable_fragment: {
        const std::uint32_t total = static_cast<std::uint32_t>(c.packet.size());
        const std::uint32_t full_length = c.body >> 16;
        cmd.fragment.start_seq = static_cast<std::uint16_t>(c.body);
        cmd.fragment.data_length = c.fragment_length;
        cmd.fragment.fragment_count = (total + full_length - 1) / full_length;
        cmd.fragment.fragment_number = c.fragment_offset / full_length;
        cmd.fragment.total_length = total;
        cmd.fragment.fragment_offset = c.fragment_offset;
        break;
      }
      default: break;
    }
    return cmd;
  }

  void put_queued(Build& b, const OutCmd& c) {
    if (c.encoded) {
      std::memcpy(b.dg->bytes.data() + b.pos, c.packet.bytes().data(), c.packet.size());
      b.pos += c.packet.size();
      ++b.commands;
      return;
    }
    put_command(b, wire_command(c),
                c.packet ? c.packet.bytes().subspan(c.fragment_offset, c.fragment_length)
                         : std::span<const std::byte>());
  }

  void write_acks(Peer& p, Build& b) {
    PeerQueues& q = queues(p);
    while (AckChunk* chunk = q.acks.front()) {
      for (; chunk->begin < chunk->end; ++chunk->begin) {
        const PendingAck& a = chunk->acks[chunk->begin];
        if (room(b) < (a.is_range ? kAckRangeSize : kAcknowledgeSize)) {
          b.more = true;
          return;
        }
        Command cmd;
        cmd.channel_id = a.channel;
        cmd.reliable_seq = a.reliable_seq;
        if (a.is_range) {
          cmd.command = static_cast<std::uint8_t>(Cmd::ack_range);
          cmd.ack_range.received_sent_time = a.sent_time;
          cmd.ack_range.bits = a.bits;
        } else {
          cmd.command = static_cast<std::uint8_t>(Cmd::acknowledge);
          cmd.ack.received_reliable_seq = a.reliable_seq;
          cmd.ack.received_sent_time = a.sent_time;
        }
        put_command(b, cmd, {});
        ++counters.acks_out;
        if (a.is_disconnect) b.zombie_after = true;
      }
      q.acks.remove(chunk);
      ack_pool.put(chunk);
    }
  }

  enum class Wrote { sent, blocked, full, dropped };

  // A reliable command, if the reliable windows and the throttled send window allow it.
  Wrote write_reliable_one(Peer& p, Build& b, OutCmd* c) {
    PeerQueues& q = *p.queues;  // c is queued there
    // Behind a backlog the queue is cold and walking it is a chain of misses: ask for the
    // next command while this one is written.
    if (const OutCmd* next = q.outgoing_reliable.next(c)) detail::prefetch_line(next);
    Channel* ch = command_channel(p, c->channel_id);
    const std::uint16_t w = seq_window(c->reliable_seq);
    if (ch != nullptr && c->send_attempts < 1 && c->reliable_seq % kReliableWindowSize == 0) {
      const std::uint32_t span_mask = (1u << (kFreeReliableWindows + 2)) - 1;
      const std::uint32_t blocked_windows =
          (span_mask << w) | (span_mask >> (kReliableWindows - w));
      if (ch->reliable_windows[(w + kReliableWindows - 1) % kReliableWindows] >=
              kReliableWindowSize ||
          (ch->used_reliable_windows & blocked_windows) != 0) {
        return Wrote::blocked;  // the receiver may still hold the window we would reuse
      }
    }
    if (c->has_payload()) {
      const std::uint32_t throttled =
          config.throttle_reliable_window
              ? (p.packet_throttle * p.window_size) / kPacketThrottleScale
              : p.window_size;
      const std::uint32_t window = std::min(throttled, q.congestion_window);
      if (q.reliable_data_in_transit + c->fragment_length >
          std::max<std::uint32_t>(window, p.mtu)) {
        return Wrote::blocked;
      }
    }
    if (room(b) < c->wire_size()) return Wrote::full;
    if (ch != nullptr && c->send_attempts < 1) {
      ch->used_reliable_windows |= static_cast<std::uint16_t>(1u << w);
      ++ch->reliable_windows[w];
      ch->out_reliable_sent = c->reliable_seq;
    }
    if (c->send_attempts == 0) {
      track_unacked(p, c);
    } else {
      // Counted when it goes out again, not when its timeout passes: with the congestion
      // window, an acknowledgement of the original often arrives before the resend.
      ++counters.retransmits;
      count(p, kReliableRetransmits, 1);
    }
    ++c->send_attempts;
    if (c->rto_ms == 0) {
      c->rto_ms =
          std::max(std::uint32_t{p.rtt} + 4 * std::uint32_t{p.rtt_variance}, config.min_rto_ms);
    }
    if (q.sent_reliable.empty()) q.next_timeout = now_ms + c->rto_ms;
    q.outgoing_reliable.remove(c);
    q.sent_reliable.push_back(c);
    c->in_sent = true;
    c->sent_time_ms = now_ms;
    b.sent_time = true;
    q.reliable_data_in_transit += c->fragment_length;
    ++p.packets_sent;
    put_queued(b, *c);
    return Wrote::sent;
  }

  Wrote write_unreliable_one(Peer& p, Build& b, OutCmd* c) {
    PeerQueues& q = *p.queues;  // c is queued there
    if (c->has_payload() && c->fragment_offset == 0) {
      p.packet_throttle_counter = static_cast<std::uint8_t>(
          (p.packet_throttle_counter + kPacketThrottleCounter) % kPacketThrottleScale);
      if (p.packet_throttle_counter > p.packet_throttle) {
        // The throttle drops the whole message: this command and the rest of its fragments.
        const std::uint16_t rseq = c->reliable_seq;
        const std::uint16_t useq = c->unreliable_seq;
        counters.drops.add(Drop::throttled);
        do {
          q.outgoing_unreliable.remove(c);
          put_out(q, c);
          c = q.outgoing_unreliable.front();
        } while (c != nullptr && c->fragment_offset != 0 && c->reliable_seq == rseq &&
                 c->unreliable_seq == useq);
        return Wrote::dropped;
      }
    }
    if (room(b) < c->wire_size()) return Wrote::full;
    q.outgoing_unreliable.remove(c);
    put_queued(b, *c);
    put_out(q, c);
    return Wrote::sent;
  }

  // An unreliable message sequenced behind a reliable one that has not been transmitted yet
  // must wait for it: an ENet receiver that gets it first holds it and then, releasing a run
  // of reliable messages at once, discards it as late.
  bool waits_for_reliable(const Peer& p, const OutCmd* u) const {
    if (u->channel_id >= p.channel_count || u->unsequenced_flag()) return false;
    const Channel* ch = channel_if(p, u->channel_id);  // never null: u was queued on it
    const std::uint16_t d = ahead(u->reliable_seq, ch != nullptr ? ch->out_reliable_sent : 0);
    return d != 0 && d < 0x8000;
  }

  // Outgoing commands in the order they were queued (retransmissions first, since they are
  // older). Once the reliable side is blocked by its windows, unreliable traffic still flows,
  // except what is sequenced behind a reliable message still waiting.
  void write_commands(Peer& p, Build& b) {
    if (p.queues == nullptr) return;
    PeerQueues& q = *p.queues;
    bool reliable_blocked = false;
    while (true) {
      OutCmd* r = reliable_blocked ? nullptr : q.outgoing_reliable.front();
      OutCmd* u = q.outgoing_unreliable.front();
      if (u != nullptr && reliable_blocked && waits_for_reliable(p, u)) u = nullptr;
      if (r == nullptr && u == nullptr) return;
      Wrote w;
      if (r != nullptr && (u == nullptr || r->queue_order < u->queue_order)) {
        w = write_reliable_one(p, b, r);
        if (w == Wrote::blocked) reliable_blocked = true;
      } else {
        w = write_unreliable_one(p, b, u);
      }
      if (w == Wrote::full) {
        b.more = true;
        return;
      }
    }
  }

  void update_packet_loss(Peer& p) {
    if (!p.loss_epoch_set) {
      p.packet_loss_epoch = epoch_stamp();
      p.loss_epoch_set = true;
    } else if (ms_since(p.packet_loss_epoch) >= kPacketLossInterval && p.packets_sent > 0) {
      const std::uint32_t loss = static_cast<std::uint32_t>(std::uint64_t{p.packets_lost} *
                                                            kPacketLossScale / p.packets_sent);
      const std::uint32_t diff = loss > p.packet_loss ? loss - p.packet_loss : p.packet_loss - loss;
      p.packet_loss_variance = (p.packet_loss_variance * 3 + diff) / 4;
      p.packet_loss = (p.packet_loss * 7 + loss) / 8;
      p.packet_loss_epoch = epoch_stamp();
      p.packets_sent = 0;
      p.packets_lost = 0;
    }
  }

  // One datagram for the peer (enet_protocol_send_outgoing_commands, one iteration). Returns
  // true if a datagram was written; `more` says whether another one is ready to go.
  bool build_datagram(Peer& p, OutDatagram& dg, bool check_timers, bool& more) {
    more = false;
    Build b{&dg, kMaxHeaderSize, kMaxHeaderSize + p.mtu - header_size(true, config.checksum)};
    if (p.has_acks()) write_acks(p, b);
    if (p.queues != nullptr && !p.has_acks()) p.queues->acks_due = 0;
    if (check_timers && !p.sent_empty() && now_ms >= p.queues->next_timeout) {
      if (check_timeouts(p)) return false;  // peer is gone; acks written so far are moot
    }
    write_commands(p, b);
    if (p.state == PeerState::disconnect_later && !p.has_outgoing()) {
      start_disconnect(p, p.event_data);
      write_commands(p, b);
    }
    if (p.sent_empty() && p.outgoing_reliable_empty() && p.connected_like() &&
        now_ms - p.last_receive_time >= ping_interval(p) && room(b) >= command_size(Cmd::ping)) {
      Command ping;
      ping.command = static_cast<std::uint8_t>(Cmd::ping) | kFlagAcknowledge;
      queue_system(p, ping);
      write_commands(p, b);
    }
    if (b.commands == 0) return false;
    // The hello goes last: a plain ENet peer stops reading at it, after the handshake command.
    if (((p.state == PeerState::connecting && p.hello_offered) ||
         (p.state == PeerState::acknowledging_connect && p.hello_agreed)) &&
        room(b) >= kHelloSize) {
      Command hello;
      hello.command = static_cast<std::uint8_t>(Cmd::tern_hello);
      hello.channel_id = kSystemChannel;
      // The client offers what it has; the server answers with what both have.
      hello.hello.features = p.state == PeerState::connecting
                                 ? local_features()
                                 : (p.selective_acks ? kFeatureSelectiveAcks : 0);
      put_command(b, hello, {});
    }
    update_packet_loss(p);

    // Lay the header down right before the commands (2, 4, 6 or 8 bytes).
    const std::size_t hsize = header_size(b.sent_time, config.checksum);
    const std::size_t start = kMaxHeaderSize - hsize;
    Header h;
    h.peer_id = p.outgoing_peer_id;
    h.session = p.outgoing_session;
    h.has_sent_time = b.sent_time;
    h.sent_time = static_cast<std::uint16_t>(now_ms & 0xFFFF);
    encode_header(std::span<std::byte>(dg.bytes.data() + start, hsize), h, config.checksum);
    const std::size_t total = b.pos - start;
    if (config.checksum) {
      write_checksum(std::span<std::byte>(dg.bytes.data() + start, total), hsize - 4,
                     p.outgoing_peer_id < kMaxPeerId ? p.connect_id : 0);
    }
    dg.offset = static_cast<std::uint32_t>(start);
    dg.size = static_cast<std::uint32_t>(total);
    dg.to = p.address;
    count(p, kDatagramsSent, 1);
    count(p, kBytesSent, total);
    ++counters.datagrams_out;
    counters.bytes_out += total;
    if (b.zombie_after && p.state == PeerState::acknowledging_disconnect) {
      recalculate_bandwidth_limits = true;
      emit_disconnect(p, DisconnectReason::remote, p.event_data);
      reset_peer(p);
      return true;
    }
    more = b.more;
    return true;
  }

  void fire_timers() {
    timers.advance(now_ms, [this](base::TimerNode& node) {
      Peer& p = *static_cast<Peer*>(node.owner);
      p.timer_due = true;
      ++counters.peer_timer_runs;
      mark_dirty(p);
    });
  }

  // enet_host_bandwidth_throttle. Scans connected peers once per interval, and only when some
  // bandwidth limit is configured: unlimited hosts (the common case) never scan.
  void bandwidth_throttle() {
    const bool limited = config.outgoing_bandwidth != 0 || bandwidth_limited_peers > 0 ||
                         (recalculate_bandwidth_limits && config.incoming_bandwidth != 0);
    if (!limited) {
      recalculate_bandwidth_limits = false;
      return;
    }
    if (now_ms - bandwidth_throttle_epoch < kBandwidthThrottleInterval) return;
    const std::uint64_t elapsed = now_ms - bandwidth_throttle_epoch;
    bandwidth_throttle_epoch = now_ms;
    std::size_t peers_remaining = connected_peers;
    if (peers_remaining == 0) return;
    std::vector<Peer*>& connected = throttle_scratch;  // reused: the pass runs every second
    connected.clear();
    for (std::uint32_t i = 0; i < slots.size(); ++i) {
      Peer& sp = slots[i];
      if (sp.connected_like()) {
        // The marks mean "set by this pass" (ENet compares epochs with the pass's time stamp).
        sp.incoming_bandwidth_marked = false;
        sp.outgoing_bandwidth_marked = false;
        connected.push_back(&sp);
      }
    }
    std::uint64_t data_total = ~std::uint64_t{0};
    std::uint64_t bandwidth = ~std::uint64_t{0};
    if (config.outgoing_bandwidth != 0) {
      data_total = 0;
      bandwidth = std::uint64_t{config.outgoing_bandwidth} * elapsed / 1000;
      for (Peer* p : connected) data_total += p->outgoing_data_total;
    }
    bool needs_adjustment = bandwidth_limited_peers > 0;
    std::uint64_t throttle_value = 0;
    while (peers_remaining > 0 && needs_adjustment) {
      needs_adjustment = false;
      throttle_value = data_total <= bandwidth ? kPacketThrottleScale
                                               : bandwidth * kPacketThrottleScale /
                                                     std::max<std::uint64_t>(data_total, 1);
      for (Peer* p : connected) {
        if (incoming_bandwidth(*p) == 0 || p->outgoing_bandwidth_marked) continue;
        const std::uint64_t peer_bandwidth = std::uint64_t{incoming_bandwidth(*p)} * elapsed / 1000;
        if (throttle_value * p->outgoing_data_total / kPacketThrottleScale <= peer_bandwidth)
          continue;
        // Below kPacketThrottleScale: this peer's data exceeds its bandwidth.
        p->packet_throttle_limit =
            static_cast<std::uint8_t>(peer_bandwidth * kPacketThrottleScale /
                                      std::max<std::uint32_t>(p->outgoing_data_total, 1));
        if (p->packet_throttle_limit == 0) p->packet_throttle_limit = 1;
        p->packet_throttle = std::min(p->packet_throttle, p->packet_throttle_limit);
        p->outgoing_bandwidth_marked = true;
        p->outgoing_data_total = 0;
        needs_adjustment = true;
        --peers_remaining;
        bandwidth -= std::min(bandwidth, peer_bandwidth);
        data_total -= std::min(data_total, peer_bandwidth);
      }
    }
    if (peers_remaining > 0) {
      throttle_value = data_total <= bandwidth ? kPacketThrottleScale
                                               : bandwidth * kPacketThrottleScale /
                                                     std::max<std::uint64_t>(data_total, 1);
      for (Peer* p : connected) {
        if (p->outgoing_bandwidth_marked) continue;
        p->packet_throttle_limit = static_cast<std::uint8_t>(throttle_value);  // <= 32
        p->packet_throttle = std::min(p->packet_throttle, p->packet_throttle_limit);
        p->outgoing_data_total = 0;
      }
    }
    if (recalculate_bandwidth_limits) {
      recalculate_bandwidth_limits = false;
      peers_remaining = connected_peers;
      std::uint64_t in_bandwidth = config.incoming_bandwidth;
      std::uint64_t bandwidth_limit = 0;
      needs_adjustment = true;
      if (in_bandwidth != 0) {
        while (peers_remaining > 0 && needs_adjustment) {
          needs_adjustment = false;
          bandwidth_limit = in_bandwidth / peers_remaining;
          for (Peer* p : connected) {
            if (p->incoming_bandwidth_marked) continue;
            const std::uint32_t out = outgoing_bandwidth(*p);
            if (out > 0 && out >= bandwidth_limit) continue;
            p->incoming_bandwidth_marked = true;
            needs_adjustment = true;
            --peers_remaining;
            in_bandwidth -= std::min<std::uint64_t>(in_bandwidth, out);
          }
        }
      }
      for (Peer* p : connected) {
        Command cmd;
        cmd.command = static_cast<std::uint8_t>(Cmd::bandwidth_limit) | kFlagAcknowledge;
        cmd.bandwidth.outgoing_bandwidth = config.outgoing_bandwidth;
        cmd.bandwidth.incoming_bandwidth = p->incoming_bandwidth_marked
                                               ? outgoing_bandwidth(*p)
                                               : static_cast<std::uint32_t>(bandwidth_limit);
        queue_system(*p, cmd);
      }
    }
  }

  std::size_t dirty_cursor = 0;

  // A flush after a full receive pass visits hundreds of peers, and by then the commands the
  // pass queued for each have left the cache: the first touch of every peer's queue was a miss
  // that stalled the loop (a sixth of a busy relay's time). Reaching a peer's queue heads is
  // three dependent loads (the peer, its queues, the commands at their ends), so each is asked
  // for a visit before it is needed: the peer three visits ahead, its queues two, the commands
  // one.
  void prefetch_dirty(std::size_t at) {
    constexpr std::size_t kPeerAhead = 3;
    if (at + kPeerAhead < dirty.size()) {
      const auto* bytes = reinterpret_cast<const std::byte*>(&slots[dirty[at + kPeerAhead]]);
      for (std::size_t off = 0; off < sizeof(Peer); off += 64) detail::prefetch_line(bytes + off);
      detail::prefetch_line(bytes + sizeof(Peer) - 1);
    }
    if (at + 2 < dirty.size()) {
      const Peer& p = slots[dirty[at + 2]];
      if (p.queues != nullptr) detail::prefetch_line(p.queues);
      if (p.channel_store != nullptr) detail::prefetch_line(p.channel_store);
    }
    if (at + 1 < dirty.size()) {
      const Peer& p = slots[dirty[at + 1]];
      if (p.queues != nullptr) {
        detail::prefetch_line(p.queues->outgoing_reliable.front());
        detail::prefetch_line(p.queues->outgoing_unreliable.front());
        detail::prefetch_line(p.queues->acks.front());
        detail::prefetch_line(p.queues->sent_reliable.back());  // what the first send links to
      }
    }
  }

  std::size_t flush(std::uint64_t now_us, std::span<OutDatagram> out) {
    now_ms = now_us / 1000;
    releases.flush();
    std::size_t n = 0;
    while (!farewells.empty() && n < out.size()) {
      const Farewell& f = farewells.back();
      out[n].to = f.to;
      out[n].offset = 0;
      out[n].size = f.size;
      std::memcpy(out[n].bytes.data(), f.bytes.data(), f.size);
      ++n;
      ++counters.datagrams_out;
      counters.bytes_out += f.size;
      farewells.pop_back();
    }
    fire_timers();
    bandwidth_throttle();
    while (dirty_cursor < dirty.size()) {
      prefetch_dirty(dirty_cursor);
      const std::uint32_t slot = dirty[dirty_cursor];
      Peer& p = slots[slot];
      if (!p.dirty || p.state == PeerState::disconnected) {
        p.dirty = false;
        ++dirty_cursor;
        continue;
      }
      bool more = true;
      bool check_timers = true;
      while (more) {
        if (n == out.size()) return n;  // resume with this peer on the next call
        if (p.state == PeerState::disconnected) break;
        if (build_datagram(p, out[n], check_timers, more)) ++n;
        check_timers = false;
      }
      p.dirty = false;
      p.timer_due = false;
      if (p.state != PeerState::disconnected) {
        release_queues_if_idle(p);
        schedule(p);
      }
      ++dirty_cursor;
    }
    dirty.clear();
    dirty_cursor = 0;
    return n;
  }

  std::uint64_t next_deadline_us() const {
    if (!events.empty() || !dirty.empty() || !farewells.empty()) return 0;
    std::uint64_t at = kNever;
    at = timers.next_expiry();
    if (config.outgoing_bandwidth != 0 || bandwidth_limited_peers > 0 ||
        (recalculate_bandwidth_limits && config.incoming_bandwidth != 0)) {
      at = std::min<std::uint64_t>(at, bandwidth_throttle_epoch + kBandwidthThrottleInterval);
    }
    return at == kNever ? kNever : at * 1000;
  }

  bool poll_event(Event& out) {
    if (!events.pop(out)) return false;
    if (out.type == EventType::receive) counters.buffered_bytes -= out.packet.size();
    return true;
  }
};

// ---- HostCore forwarding ------------------------------------------------------------------

HostCore::HostCore(const HostConfig& config) : impl_(std::make_unique<Impl>(config)) {}
HostCore::~HostCore() = default;

void HostCore::on_datagram(std::uint64_t now_us, const Endpoint& from,
                           std::span<const std::byte> bytes) {
  impl_->on_datagram(now_us, from, bytes);
}

PeerHandle HostCore::connect(std::uint64_t now_us, const Endpoint& to, std::size_t channel_count,
                             std::uint32_t data) {
  return impl_->connect(now_us, to, channel_count, data);
}

SendResult HostCore::send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                          Packet payload) {
  return impl_->send(peer, channel, delivery, std::move(payload));
}

SendResult HostCore::send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                          std::span<const std::byte> payload) {
  Peer* p = impl_->find(peer);
  if (p == nullptr || p->state != PeerState::connected) return SendResult::not_connected;
  if (channel >= p->channel_count) return SendResult::bad_channel;
  if (payload.size() > impl_->config.max_packet_size) return SendResult::too_large;
  return impl_->send(peer, channel, delivery, Packet::copy_of(payload));
}

std::size_t HostCore::send_many(std::span<const PeerHandle> peers, std::uint8_t channel,
                                Delivery delivery, const Packet& payload, PeerHandle skip,
                                std::size_t* deepest) {
  std::uint32_t n = 0;
  for (const PeerHandle& to : peers) n += to == skip ? 0 : 1;
  Packet::Shares shares(payload, n);
  std::size_t accepted = 0;
  for (const PeerHandle& to : peers) {
    if (to == skip) continue;
    Peer* p = impl_->find(to);
    if (p == nullptr) continue;  // its share goes back when `shares` ends
    if (impl_->send(*p, channel, delivery, shares.take()) == SendResult::ok) ++accepted;
    if (deepest != nullptr && p->queues != nullptr) {
      *deepest = std::max(*deepest, p->queues->queued_bytes);
    }
  }
  return accepted;
}

void HostCore::hold_intake(PeerHandle peer, bool held) {
  Peer* p = impl_->find(peer);
  if (p == nullptr || p->intake_held == held) return;
  if (held) {
    p->intake_held = true;
  } else {
    impl_->release_intake(*p);
  }
}

bool HostCore::intake_held(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && p->intake_held;
}

std::size_t HostCore::queued_bytes(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr && p->queues != nullptr ? p->queues->queued_bytes : 0;
}

void HostCore::disconnect(PeerHandle peer, std::uint32_t data) {
  if (Peer* p = impl_->find(peer)) impl_->start_disconnect(*p, data);
}

void HostCore::disconnect_now(PeerHandle peer, std::uint32_t data) {
  if (Peer* p = impl_->find(peer)) impl_->disconnect_now(*p, data);
}

void HostCore::disconnect_later(PeerHandle peer, std::uint32_t data) {
  if (Peer* p = impl_->find(peer)) impl_->disconnect_later(*p, data);
}

void HostCore::reset(PeerHandle peer) {
  if (Peer* p = impl_->find(peer)) impl_->reset_peer(*p);
}

void HostCore::ping(PeerHandle peer) {
  Peer* p = impl_->find(peer);
  if (p == nullptr || p->state != PeerState::connected) return;
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::ping) | kFlagAcknowledge;
  impl_->queue_system(*p, cmd);
}

void HostCore::configure_throttle(PeerHandle peer, std::uint32_t interval_ms,
                                  std::uint32_t acceleration, std::uint32_t deceleration) {
  Peer* p = impl_->find(peer);
  if (p == nullptr) return;
  impl_->set_throttle_settings(*p, interval_ms, acceleration, deceleration);
  if (p->state != PeerState::connected) return;
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::throttle_configure) | kFlagAcknowledge;
  cmd.throttle.interval = interval_ms;
  cmd.throttle.acceleration = acceleration;
  cmd.throttle.deceleration = deceleration;
  impl_->queue_system(*p, cmd);
}

void HostCore::configure_timeouts(PeerHandle peer, std::uint32_t limit, std::uint32_t minimum_ms,
                                  std::uint32_t maximum_ms) {
  Peer* p = impl_->find(peer);
  if (p == nullptr) return;
  const HostConfig& cfg = impl_->config;
  impl_->set_setting(*p, &PeerExtra::timeout_limit, limit != 0 ? limit : kTimeoutLimit,
                     cfg.timeout_limit);
  impl_->set_setting(*p, &PeerExtra::timeout_minimum,
                     minimum_ms != 0 ? minimum_ms : kTimeoutMinimum, cfg.timeout_minimum_ms);
  impl_->set_setting(*p, &PeerExtra::timeout_maximum,
                     maximum_ms != 0 ? maximum_ms : kTimeoutMaximum, cfg.timeout_maximum_ms);
}

void HostCore::set_ping_interval(PeerHandle peer, std::uint32_t interval_ms) {
  Peer* p = impl_->find(peer);
  if (p == nullptr) return;
  impl_->set_setting(*p, &PeerExtra::ping_interval, interval_ms != 0 ? interval_ms : kPingInterval,
                     impl_->config.ping_interval_ms);
  impl_->schedule(*p);
}

void HostCore::set_bandwidth_limit(std::uint32_t incoming, std::uint32_t outgoing) {
  impl_->config.incoming_bandwidth = incoming;
  impl_->config.outgoing_bandwidth = outgoing;
  impl_->recalculate_bandwidth_limits = true;
}

std::size_t HostCore::flush(std::uint64_t now_us, std::span<OutDatagram> out) {
  return impl_->flush(now_us, out);
}

bool HostCore::poll_event(Event& out) { return impl_->poll_event(out); }

std::uint64_t HostCore::next_deadline_us() const { return impl_->next_deadline_us(); }

bool HostCore::peer_stats(PeerHandle peer, PeerStats& out) const {
  const Peer* p = impl_->find(peer);
  if (p == nullptr) return false;
  out = PeerStats{};
  out.datagrams_sent = Impl::stat(*p, kDatagramsSent);
  out.datagrams_received = Impl::stat(*p, kDatagramsReceived);
  out.bytes_sent = Impl::stat(*p, kBytesSent);
  out.bytes_received = Impl::stat(*p, kBytesReceived);
  out.reliable_retransmits = Impl::stat(*p, kReliableRetransmits);
  out.messages_sent = Impl::stat(*p, kMessagesSent);
  out.messages_received = Impl::stat(*p, kMessagesReceived);
  out.rtt_ms = p->rtt;
  out.rtt_variance_ms = p->rtt_variance;
  out.lowest_rtt_ms = p->lowest_rtt;
  out.packet_loss = p->packet_loss;
  out.packet_loss_variance = p->packet_loss_variance;
  out.packet_throttle = p->packet_throttle;
  out.packet_throttle_limit = p->packet_throttle_limit;
  out.mtu = p->mtu;
  out.window_size = p->window_size;
  out.channel_count = p->channel_count;
  out.selective_acks = p->selective_acks;
  if (const PeerQueues* q = p->queues) {
    out.reliable_in_transit = q->reliable_data_in_transit;
    out.queued_outgoing =
        static_cast<std::uint32_t>(q->outgoing_reliable.size() + q->outgoing_unreliable.size());
  }
  return true;
}

PeerState HostCore::peer_state(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr ? p->state : PeerState::disconnected;
}

std::optional<Endpoint> HostCore::peer_address(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  if (p == nullptr) return std::nullopt;
  return p->address;
}

std::uint32_t HostCore::peer_connect_data(PeerHandle peer) const {
  const Peer* p = impl_->find(peer);
  return p != nullptr ? p->connect_data : 0;
}

std::size_t HostCore::peer_count() const { return impl_->peer_count; }
const HostCounters& HostCore::counters() const { return impl_->counters; }
const HostConfig& HostCore::config() const { return impl_->config; }
std::size_t HostCore::sizeof_peer() { return sizeof(Peer); }

}  // namespace tern::proto
