// HostCore::Impl: the protocol core's state and the map of its modules. Each group of member
// functions below is defined in the file it names; host_core.cpp includes them all into one
// translation unit, where the definitions are inline as they were inside the class.
#pragma once

#include "event_ring.hpp"
#include "half_open.hpp"
#include "host_core.hpp"
#include "intrusive.hpp"
#include "peer_table.hpp"
#include "pointer_index.hpp"
#include "records.hpp"
#include "release_batch.hpp"
#include "source_guard.hpp"
#include "timer_wheel.hpp"
#include "wire.hpp"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <span>
#include <vector>

namespace tern::proto {

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
  std::uint64_t now_us = 0;  // the pacer's clock (congestion_control.cpp)
  OutCmdRuns out_runs;
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
  // Connections a peer's DISCONNECT ended: if our acknowledgement is lost the peer resends
  // it to a connection we no longer have, and without an answer it would time out instead of
  // completing its disconnect. Fixed and small: an entry lives at most timeout_maximum_ms,
  // and the oldest gives way first.
  struct Goodbye {
    Endpoint address;
    std::uint64_t until_ms = 0;
    std::uint32_t connect_id = 0;
    std::uint16_t incoming_peer_id = 0;
    std::uint16_t outgoing_peer_id = 0;
    std::uint8_t incoming_session = 0;
    std::uint8_t outgoing_session = 0;
  };
  std::array<Goodbye, 64> goodbyes{};
  std::size_t next_goodbye = 0;
  std::vector<Peer*> throttle_scratch;
  HalfOpenTable half_open;  // handshakes not yet acknowledged (handshake.cpp)
  SourceGuard guard;        // connect rates and bans per source (handshake.cpp)
  // Secure sessions (secure_sessions.cpp): token nonces seen, handshakes answered, wall time.
  std::unique_ptr<sec::TokenNonceTable> token_nonces;
  std::vector<SecurePending> secure_pending;
  std::uint32_t secure_pending_next = 0;
  std::uint32_t secure_stamp = 0;
  std::int64_t unix_offset_us = 0;
  bool datagram_sealed = false;    // the datagram being handled was opened into open_buf
  bool shedding_connects = false;  // HostCore::shed_connects
  // HostCore::input_read_until, in ms; "never told" reads as the clock.
  std::uint64_t input_read_ms = UINT64_MAX;
  // The time retransmission timeouts are judged at (HostCore::input_read_until).
  std::uint64_t timeout_clock_ms() const {
    if (input_read_ms >= now_ms) return now_ms;
    return std::max(input_read_ms, now_ms - std::min(now_ms, HostCore::kMaxInputLagMs));
  }
  alignas(64) std::array<std::byte, kMaxMtu + 64> open_buf;
  // With lend_payloads, sealed datagrams open here instead, one after another, so their
  // messages can be lent as a plaintext datagram's are: a view stays valid until the caller
  // took every event (the next on_datagram after that starts over at the beginning). Made with
  // the first secure session; a datagram that does not fit opens into open_buf and its
  // messages are copied.
  static constexpr std::size_t kOpenArenaBytes = 128 * 1024;
  std::unique_ptr<std::byte[]> open_arena;
  std::size_t open_arena_used = 0;

  // Offline discovery (discovery.cpp): pings and pongs waiting for the next flush, the info
  // pongs carry, our pings still taking answers, and the answers for the application.
  struct DiscoveryOut {
    Endpoint to;
    std::uint32_t nonce = 0;
    std::uint16_t room = 0;  // info bytes the pong may carry (a ping's padding)
    TernExtKind kind = TernExtKind::none;
  };
  struct DiscoveryPing {
    std::uint32_t nonce = 0;
    std::uint64_t sent_us = 0;
    std::uint32_t answers = 0;
  };
  static constexpr std::size_t kMaxAnswersPerPing = 256;
  static constexpr std::size_t kMaxDiscoveryAnswers = 1024;
  std::vector<DiscoveryOut> discovery_out;
  std::vector<std::byte> discovery_info;
  std::array<DiscoveryPing, 16> discovery_pings{};
  std::vector<DiscoveryAnswer> discovery_answers;
  std::size_t discovery_answer_head = 0;
  std::size_t discovery_queue_capacity() const {
    return std::max<std::size_t>(1, config.discovery_queue);
  }

  // Routing keys (peer_directory.cpp).
  static constexpr std::uint16_t kIdentityKey = 0x8000;
  static constexpr std::uint32_t kNoSlot = ~std::uint32_t{0};

  // A datagram being built (datagram_builder.cpp).
  struct Build {
    OutDatagram* dg;
    std::size_t pos;
    std::size_t limit;
    std::size_t commands = 0;
    bool sent_time = false;
    bool more = false;
    bool zombie_after = false;
    bool paced = false;  // carries bulk reliable data under the pacer
  };
  enum class Wrote { sent, blocked, full, dropped };
  std::size_t dirty_cursor = 0;  // flush() resumes its walk of `dirty` here
  // What queue_outgoing gives the commands of the message send() is queueing.
  Priority sending_priority = Priority::medium;
  bool sending_with_receipt = false;

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

  // Stores a setting in the peer's extra block, which is only taken for a non-default value.
  void set_setting(Peer& p, std::uint32_t PeerExtra::*field, std::uint32_t value,
                   std::uint32_t host_default) {
    if (p.extra == nullptr && value == host_default) return;
    extra(p).*field = value;
  }

  // A per-connection setting: the peer's own once it has an extra block, else the host's.
  static std::uint32_t setting(const Peer& p, std::uint32_t PeerExtra::*field,
                               std::uint32_t host_value) {
    return p.extra != nullptr ? p.extra->*field : host_value;
  }
  std::uint32_t ping_interval(const Peer& p) const {
    return setting(p, &PeerExtra::ping_interval, config.ping_interval_ms);
  }
  // Silence after which we ping: no acknowledgement for a ping interval, as in ENet. The
  // accepting side hears the client's own pings (every interval plus a round trip) and
  // answers them, which proves the path both ways to the client; it pings only to keep its
  // RTT estimate fresh, every few intervals, and then in the datagram that acknowledges a
  // client's ping (heard_ping). One pinger per connection with any client, and still a
  // ping from each side once the other falls silent.
  static constexpr std::uint32_t kAcceptedPingIntervals = 4;
  // With idle pings agreed (idle_pings.cpp) the client's interval is keepalive_interval's,
  // and the accepting side waits two intervals longer than that, so the client's ping comes
  // first and the server's rides with its answer (heard_ping) as before.
  std::uint32_t ping_after(const Peer& p) const {
    if (!p.accepted) return keepalive_interval(p);
    return p.idle_pings ? (config.idle_ping_intervals + 2) * ping_interval(p)
                        : kAcceptedPingIntervals * ping_interval(p);
  }
  // When the next keep-alive ping is due: ping_after after the last acknowledgement, give or
  // take a sixteenth of it on the connecting side, an amount drawn afresh from the
  // connection's id and that acknowledgement's time for every ping (on average the interval
  // itself), then rounded up to the host's next kPingGridMs where that is less than the
  // spread. Connections that began together
  // (a load generator's thousands, or every client reconnecting after a server restart) would
  // otherwise ping in the same millisecond for as long as they live: each round a burst of
  // thousands of pings and acknowledgements on both sides, a stall for whatever queues behind
  // it. Spread but on a grid, a host's pings go out a few dozen at a time in one wake-up each,
  // not one wake-up per ping on either side. The accepting side's pings follow the client's
  // (heard_ping), so they spread with them.
  static constexpr std::uint64_t kPingGridMs = 16;
  std::uint64_t ping_due(const Peer& p) const {
    const std::uint32_t after = ping_after(p);
    const std::uint32_t spread = p.accepted ? 0 : after / 8;
    if (spread == 0) return p.last_receive_time + after;
    std::uint64_t mix =
        ((std::uint64_t{p.connect_id} << 32) ^ p.last_receive_time) * 0x9e3779b97f4a7c15ull;
    mix ^= mix >> 29;
    const std::uint64_t due = p.last_receive_time + after - spread / 2 + mix % spread;
    // A short interval asked for (fast dead-peer detection) keeps its own cadence.
    if (spread < kPingGridMs) return due;
    return (due + kPingGridMs - 1) / kPingGridMs * kPingGridMs;
  }
  bool wants_keepalive_ping(const Peer& p) const {
    return p.state == PeerState::connected && p.sent_empty() && p.outgoing_reliable_empty();
  }
  void queue_keepalive_ping(Peer& p);
  // The answer carries our ping from two and a half intervals of silence on: the client's
  // pings come an interval and a round trip apart, a sixteenth and a grid step more at most
  // (ping_due), so one arrives before our own timer's four intervals run out.
  void heard_ping(Peer& p) {
    const std::uint32_t interval = ping_interval(p);
    if (p.accepted && wants_keepalive_ping(p) &&
        now_ms - p.last_receive_time >= (kAcceptedPingIntervals - 1) * interval - interval / 2) {
      queue_keepalive_ping(p);
    }
  }
  std::uint32_t timeout_limit(const Peer& p) const {
    return setting(p, &PeerExtra::timeout_limit, config.timeout_limit);
  }
  std::uint32_t timeout_minimum(const Peer& p) const {
    return setting(p, &PeerExtra::timeout_minimum, config.timeout_minimum_ms);
  }
  std::uint32_t timeout_maximum(const Peer& p) const {
    return setting(p, &PeerExtra::timeout_maximum, config.timeout_maximum_ms);
  }
  std::uint32_t throttle_interval(const Peer& p) const {
    return setting(p, &PeerExtra::throttle_interval, config.throttle_interval_ms);
  }
  std::uint32_t throttle_acceleration(const Peer& p) const {
    return setting(p, &PeerExtra::throttle_acceleration, config.throttle_acceleration);
  }
  std::uint32_t throttle_deceleration(const Peer& p) const {
    return setting(p, &PeerExtra::throttle_deceleration, config.throttle_deceleration);
  }
  // Announced by the other side (0: none).
  static std::uint32_t incoming_bandwidth(const Peer& p) {
    return setting(p, &PeerExtra::incoming_bandwidth, 0);
  }
  static std::uint32_t outgoing_bandwidth(const Peer& p) {
    return setting(p, &PeerExtra::outgoing_bandwidth, 0);
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

  PeerHandle handle_of(const Peer& p) const { return PeerHandle{p.slot, p.generation}; }

  Event event_for(const Peer& p, EventType type) const {
    Event ev;
    ev.type = type;
    ev.peer = handle_of(p);
    ev.address = p.address;
    return ev;
  }

  static std::uint64_t unacked_key(const Peer& p, std::uint8_t channel, std::uint16_t seq) {
    return std::uint64_t{p.slot} << 24 | std::uint64_t{channel} << 16 | seq;
  }

  // The channel a command is queued on; null for system commands (0xFF), which have none.
  static Channel* command_channel(const Peer& p, std::uint8_t channel_id) {
    return channel_id < p.channel_count ? channel_if(p, channel_id) : nullptr;
  }

  void mark_dirty(Peer& p) {
    if (!p.dirty) {
      p.dirty = true;
      dirty.push_back(p.slot);
    }
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

  std::size_t room(const Build& b) const { return b.limit - b.pos; }

  // ---- peer_blocks.cpp: side blocks: queues, channels, extra settings, taken on first use and
  // returned when idle -------------------------------------------------
  void release_queues_if_idle(Peer& p);
  void release_wide(Channel& ch);
  PeerExtra& extra(Peer& p);
  [[gnu::noinline]] Channel& first_use_of_channel(Peer& p, std::uint8_t id);
  void reset_channels(Peer& p, std::uint32_t count);
  void release_blocks(Peer& p);

  // ---- peer_directory.cpp: which connection a datagram names: slots, peer IDs, address keys; peer
  // allocation and reset ----------------------------------------------
  [[gnu::always_inline]] std::uint32_t route_slot(const Endpoint& from, std::uint16_t id) const;
  Peer* route(const Endpoint& from, std::uint16_t id);
  bool peer_id_taken(const Endpoint& address, std::uint16_t id) const;
  std::uint16_t free_peer_id(const Endpoint& address, std::uint16_t preferred) const;
  Peer* find_accepted(const Endpoint& address, std::uint16_t client_index);
  Peer* allocate_peer(const Endpoint& address, std::uint16_t preferred);
  Peer* take_slot(const Endpoint& address, std::uint16_t peer_id);
  std::uint16_t predicted_peer_id(const Endpoint& address, std::uint16_t preferred) const;
  void key_accepted(Peer& p);
  void erase_key(const base::PeerKey& key, std::uint32_t slot);
  void set_state(Peer& p, PeerState s);
  void reset_peer(Peer& p);

  // ---- handshake.cpp: CONNECT, VERIFY_CONNECT and the Tern hello: a connection comes up
  // ---------------------------------------------------
  std::uint32_t random_u32();
  void emit_connect(Peer& p);
  void notify_connect(Peer& p);
  Handled handle_hello(Peer& p, const Command& cmd);
  Command handshake_command(Cmd type, const Peer& p, std::uint8_t incoming_session,
                            std::uint8_t outgoing_session, std::uint32_t window,
                            std::uint32_t channels) const;
  Peer* handle_connect(const Endpoint& from, const Command& cmd, Drop& why);
  Handled handle_verify_connect(Peer& p, const Command& cmd, Drop& why);
  PeerHandle connect(std::uint64_t now_us, const Endpoint& to, std::size_t channel_count,
                     std::uint32_t data);
  // Before return routability (WIRE.md, "Handshake under attack").
  // The first command of a datagram that names no peer, its checksum checked; false (the
  // reason counted) when there is none.
  bool first_stranger_command(std::span<const std::byte> bytes, const DecodedHeader& dh,
                              CommandDecoder& decoder, Command& cmd);
  void stranger_datagram(const Endpoint& from, const DecodedHeader& dh,
                         std::span<const std::byte> bytes);
  std::uint64_t half_open_hash(const Endpoint& from, std::uint16_t peer_id) const;
  HalfOpen* find_half_open(const Endpoint& from, std::uint16_t peer_id);
  bool id_clashes(const Endpoint& from, std::uint16_t peer_id);
  std::uint64_t source_hash(const Endpoint& key) const;
  bool refused_source(const Endpoint& from, bool connect);
  bool expired(const HalfOpen& e) const;
  struct SecureHello;
  void open_half(const Endpoint& from, const Connect& c, std::uint32_t features, std::size_t bytes,
                 const TokenArrival* token = nullptr);
  bool may_answer(const HalfOpen& e, std::size_t size);
  void send_cookie(HalfOpen& e, SecureHello* secure = nullptr);
  void send_probe(HalfOpen& e);
  Peer* unverified_datagram(const Endpoint& from, const DecodedHeader& dh,
                            std::span<const std::byte>& bytes, bool& skip_ack);

  // ---- secure_sessions.cpp: connect tokens, sealed datagrams (WIRE.md, "Secure sessions")
  struct SecureHello {
    sec::SealState tx;  // the handshake key, at this handshake's own sequence numbers
    std::array<std::uint8_t, 16> challenge;
    bool aes = false;  // the session seals with AES-256-GCM
  };
  static bool looks_sealed(std::span<const std::byte> bytes) {
    return bytes.size() >= 2 && (std::to_integer<std::uint8_t>(bytes[0]) & 0x40) != 0;
  }
  bool decode_sealed_header(std::span<const std::byte> bytes, DecodedHeader& dh, Drop& why);
  bool open_sealed(PeerSecure& s, const DecodedHeader& dh, std::span<const std::byte>& bytes);
  bool peer_datagram_sealed(Peer& p, const DecodedHeader& dh, bool sealed,
                            std::span<const std::byte>& bytes);
  std::uint64_t unix_now_s() const;
  bool check_token(const Endpoint& from, const Command& ext, TokenArrival& out);
  void open_secure_pending(HalfOpen& h, const TokenArrival& token, SecureHello& hello);
  bool start_aes(PeerSecure& s);
  void make_open_arena();
  SecurePending* pending_of(const HalfOpen& h);
  bool seal_farewell(sec::SealState& tx, Farewell& f, std::size_t hsize);
  bool seal_out(Peer& p, OutDatagram& dg, std::size_t start, std::size_t hsize, std::size_t& total);
  void put_secure_token(Peer& p, Build& b);
  Handled handle_secure_challenge(Peer& p, const Command& cmd, Arrival& arrival);
  PeerHandle connect_secure(std::uint64_t now_us, const Endpoint& to, std::size_t channel_count,
                            std::uint32_t data, std::span<const std::uint8_t> sealed_token,
                            const sec::Key& c2s, const sec::Key& s2c,
                            const std::array<std::uint8_t, 16>& salt);
  Peer* promote(HalfOpen& e);

  // ---- disconnect.cpp: disconnects: requested, received, immediate, after the queue drains;
  // farewells --------------------------------------------------
  void emit_disconnect(Peer& p, DisconnectReason reason, std::uint32_t data);
  void notify_disconnect(Peer& p, DisconnectReason reason);
  void queue_farewell(Peer& p, std::uint32_t data);
  Handled handle_disconnect(Peer& p, const Command& cmd);
  void start_disconnect(Peer& p, std::uint32_t data);
  void disconnect_now(Peer& p, std::uint32_t data);
  void disconnect_later(Peer& p, std::uint32_t data);
  void remember_goodbye(const Peer& p);
  bool acknowledge_repeated_disconnect(const Endpoint& from, const DecodedHeader& dh,
                                       std::span<const std::byte> bytes);

  // ---- receive.cpp: incoming messages: memory caps, delivery to events, reliable ordering,
  // unreliable sequencing, unsequenced window -----------------------------------------------------
  void release_in(Peer& p, InCmd* c);
  bool charge(Peer& p, std::size_t bytes, bool reassembly, Drop& why);
  void evict_largest_holder();
  void deliver(Peer& p, std::uint8_t channel, Delivery delivery, InCmd* c);
  [[gnu::always_inline]] void deliver_now(Peer& p, std::uint8_t channel, Delivery delivery,
                                          Packet packet, std::span<const std::byte> lent = {});
  [[gnu::always_inline]] void deliver_from_datagram(Peer& p, std::uint8_t channel,
                                                    Delivery delivery,
                                                    std::span<const std::byte> bytes);
  void dispatch_reliable(Peer& p, std::uint8_t channel_id);
  void dispatch_unreliable(Peer& p, std::uint8_t channel_id);
  static std::uint8_t delivery_mode(const Peer& p, const Command& cmd);
  static Delivery delivery_of(std::uint8_t mode);
  static bool take_sequenced(Channel& ch, std::uint16_t seq);
  void deliver_on_arrival(Peer& p, Channel& ch, std::uint8_t channel_id, std::uint8_t mode,
                          std::uint16_t seq, std::span<const std::byte> bytes, InCmd* c);
  bool insert_reliable(Channel& ch, InCmd* c);
  InCmd* find_reliable(Channel& ch, std::uint16_t seq);
  InCmd* find_or_position_unreliable(Channel& ch, std::uint16_t rseq, std::uint16_t useq,
                                     InCmd*& insert_after);
  Handled handle_send_reliable(Peer& p, const Command& cmd, std::uint16_t sent_time, Drop& why);
  Handled handle_send_unreliable(Peer& p, const Command& cmd, Drop& why);
  Handled handle_send_unsequenced(Peer& p, const Command& cmd);

  // ---- intake.cpp: admission before the acknowledgement: rate and bandwidth buckets, held intake
  // ------------------------------------------------------
  bool meter(Peer& p, std::size_t bytes);
  Handled withhold_reliable(Peer& p, Channel& ch, const Command& cmd, std::uint16_t sent_time,
                            Drop& why);
  void release_intake(Peer& p);

  // ---- reassembly.cpp: fragment sets: validation, assembly, delivery once complete
  // --------------------------------------------------
  void end_reassembly(InCmd* c);
  bool validate_fragment(const Command& cmd, Drop& why) const;
  InCmd* new_fragment_set(Peer& p, const Command& cmd, std::uint16_t rseq, std::uint16_t useq,
                          Cmd type, Drop& why);
  static bool matches_set(const InCmd* set, const Command& cmd, Cmd type);
  bool fill_fragment(InCmd* set, const Command& cmd);
  Handled handle_send_fragment(Peer& p, const Command& cmd, Drop& why);
  Handled handle_send_unreliable_fragment(Peer& p, const Command& cmd, Drop& why);

  // ---- ack_ledger.cpp: acknowledgements: the unacked index, acks received and acks owed
  // --------------------------------------------------
  void track_unacked(Peer& p, OutCmd* c);
  void untrack_unacked(Peer& p, OutCmd* c);
  OutCmd* find_unacked(const Peer& p, std::uint8_t channel_id, std::uint16_t seq) const;
  static OutCmd* find_in_channel(const Channel& ch, std::uint16_t seq);
  Cmd remove_sent_reliable(Peer& p, std::uint16_t seq, std::uint8_t channel_id);
  Cmd remove_acked(Peer& p, OutCmd* found);
  Handled handle_acknowledge(Peer& p, const Command& cmd);
  void queue_ack(Peer& p, const Command& cmd, std::uint16_t sent_time);
  void write_acks(Peer& p, Build& b);

  // ---- send_queue.cpp: the application's messages: fragmenting, sequence numbers, the outgoing
  // queues --------------------------------------------------
  void put_out(PeerQueues& q, OutCmd* c);
  void free_reliable(Peer& p, OutCmd* c);
  void clear_queues(Peer& p);
  void queue_outgoing(Peer& p, const Command& cmd, Packet packet, std::uint32_t offset,
                      std::uint16_t length);
  void queue_system(Peer& p, Command cmd);
  SendResult send(PeerHandle h, std::uint8_t channel_id, Delivery delivery, Packet payload);
  SendResult send(Peer& p, std::uint8_t channel_id, Delivery delivery, Packet payload);
  SendResult send_with_receipt(PeerHandle h, std::uint8_t channel_id, Delivery delivery,
                               Packet payload, std::uint32_t receipt);
  SendResult send_at(PeerHandle h, std::uint8_t channel_id, Delivery delivery, Packet payload,
                     Priority priority, const std::uint32_t* receipt);
  static bool order_before(std::uint32_t a, std::uint32_t b) {
    return static_cast<std::int32_t>(a - b) < 0;
  }
  std::uint32_t next_queue_key(PeerQueues& q, Priority priority);
  void schedule_outgoing(PeerQueues& q, OutCmd* oc);
  static std::uint32_t low_priority_window(const Peer& p, std::uint32_t window);
  void receipt_acked(Peer& p, const OutCmd& c);

  // ---- datagram_builder.cpp: one datagram for a peer: acks, reliable and unreliable commands
  // inside the windows, header, checksum --------------------------------------------
  void put_command(Build& b, const Command& cmd, std::span<const std::byte> payload);
  static Command wire_command(const OutCmd& c);
  void put_queued(Build& b, const OutCmd& c);
  bool fit_oversize(Build& b, const OutCmd& c) const;
  Wrote write_reliable_one(Peer& p, Build& b, OutCmd* c);
  Wrote write_unreliable_one(Peer& p, Build& b, OutCmd* c);
  bool waits_for_reliable(const Peer& p, const OutCmd* u) const;
  void write_commands(Peer& p, Build& b);
  bool build_datagram(Peer& p, OutDatagram& dg, bool& more);

  // ---- retransmit.cpp: retransmission timeouts: lost commands requeued, timed-out peers
  // disconnected --------------------------------------------------
  bool check_timeouts(Peer& p);
  static void requeue_lost(PeerQueues& q, OutCmd* c, OutCmd* insert_after);
  std::uint32_t backed_off_rto(const Peer& p, const OutCmd& c) const;
  void insert_by_deadline(PeerQueues& q, OutCmd* c);
  static void rearm_retransmission_timer(PeerQueues& q);

  // ---- throttle.cpp: RTT samples, packet loss, ENet's packet throttle and bandwidth limits
  // ----------------------------------------------------
  void throttle(Peer& p, std::uint32_t rtt);
  bool take_rtt_sample(Peer& p, std::uint16_t received_sent_time);
  void compute_window_from_bandwidth(Peer& p);
  Handled handle_bandwidth_limit(Peer& p, const Command& cmd);
  Handled handle_throttle_configure(Peer& p, const Command& cmd);
  void update_packet_loss(Peer& p);
  void bandwidth_throttle();
  void throttle_to_bandwidth(const std::vector<Peer*>& connected, std::uint64_t elapsed);
  void announce_bandwidth_limits(const std::vector<Peer*>& connected);

  // ---- timers.cpp: each peer's one timer: deadlines, the timing wheel, the next deadline
  // ------------------------------------------------------
  std::uint64_t peer_deadline(const Peer& p) const;
  [[gnu::always_inline]] void schedule(Peer& p);  // after every datagram and flush visit
  void fire_timers();
  bool run_timers(Peer& p);
  std::uint64_t next_deadline_us() const;

  // ---- command_table.cpp: what every command of a kind is checked for, and who handles it
  struct CommandRule {
    using Handler = Handled (*)(Impl&, Peer&, const Command&, Arrival&);
    Handler handle = nullptr;      // null: not a command of an existing connection
    StateSet states = kAnyState;   // the peer states it is taken in, else wrong_state
    bool needs_channel = false;    // an application channel below the peer's count
    bool carries_message = false;  // a payload of at most HostConfig::max_packet_size
    bool acknowledged = true;      // its acknowledge flag is honoured (never: extensions')
    std::uint32_t feature = 0;     // the extension owning it (kFeature* bit), 0: ENet's
  };
  static constexpr std::size_t kCommandNumbers = static_cast<std::size_t>(Cmd::tern_ext) + 1;
  using CommandRules = std::array<CommandRule, kCommandNumbers>;
  static constexpr CommandRules make_command_rules();
  static const CommandRules kCommandRules;
  Handled dispatch(Peer& p, const Command& cmd, Arrival& arrival);
  template <Cmd C>
  Handled dispatch_as(Peer& p, const Command& cmd, Arrival& arrival);
  void acknowledge_if_asked(Peer& p, const Command& cmd, std::uint16_t sent_time);

  // ---- extensions.cpp: the hook points where the core calls its extensions ----------------
  std::uint32_t local_features() const;
  std::uint32_t understood_features() const;
  std::uint32_t agreed_features(const Peer& p) const;
  std::uint32_t answer_features(std::uint32_t agreed) const;
  void on_features_agreed(Peer& p, std::uint32_t agreed);
  static constexpr void install_extension_commands(CommandRules& rules);
  Handled handle_tern_ext(Peer& p, const Command& cmd, Arrival& arrival);
  void on_reliable_acked(Peer& p, PeerQueues& q, const OutCmd& c);
  void after_acks(Peer& p);
  void on_retransmission_timeouts(Peer& p, PeerQueues& q, std::uint64_t first_sent_ms);
  std::uint64_t extension_deadline(const Peer& p) const;
  bool extension_timers(Peer& p);
  std::size_t extension_datagrams(Peer& p, std::span<OutDatagram> out);
  std::uint32_t extension_send_window(const PeerQueues& q, std::uint8_t channel_id) const;
  // HostConfig::channels: the switch `set` turns its extension off on the channel.
  static bool channel_off(const ChannelSet& set, std::uint8_t channel_id) {
    return channel_id != kSystemChannel && in_channel_set(set, channel_id);
  }
  Priority channel_priority(std::uint8_t channel_id) const;
  void extension_extras(Peer& p, Build& b);
  void extension_commands(Peer& p, Build& b);
  void on_range_written(Peer& p, const PendingAck& a);
  bool fold_behind_range(const Peer& p, AckChunk& chunk, const Command& cmd,
                         std::uint16_t sent_time);
  void on_reliable_arrival(Peer& p, std::uint16_t gap);
  bool extension_holds_queues(const PeerQueues& q) const;
  bool keep_unreliable_copy(Peer& p, PeerQueues& q, OutCmd* c);

  // ---- selective_acks.cpp: extension: ACK_RANGE for up to 33 reliable commands -------------
  std::uint32_t selective_acks_offered() const;
  std::uint32_t selective_acks_agreed(const Peer& p) const;
  void selective_acks_on_agreed(Peer& p, std::uint32_t agreed);
  static constexpr void install_selective_acks(CommandRules& rules);
  static bool acks_in_ranges(const Peer& p, const Command& cmd);
  static bool fold_into_range(AckChunk& chunk, const Command& cmd);
  std::size_t find_range(const Peer& p, std::uint8_t channel_id, std::uint16_t seq,
                         std::uint32_t bits, std::array<OutCmd*, kAckRangeSpan>& found) const;
  Handled handle_ack_range(Peer& p, const Command& cmd, Drop& why);

  // ---- fast_retransmit.cpp: extension: what later acks overtook is resent at once -----------
  void fast_retransmit_after_acks(Peer& p);

  // ---- nodelay.cpp: extension: KCP's backoff and resend rule; acks never held ---------------
  std::uint32_t nodelay_offered() const;
  std::uint32_t nodelay_agreed(const Peer& p) const;
  void nodelay_on_agreed(Peer& p, std::uint32_t agreed);
  bool nodelay_channel(std::uint8_t channel_id) const;
  bool nodelay_resend_rule(std::uint8_t channel_id) const;

  // ---- delivery_modes.cpp: extension: reliable-unordered and reliable-sequenced ------------
  std::uint32_t delivery_modes_offered() const;
  std::uint32_t delivery_modes_agreed(const Peer& p) const;
  void delivery_modes_on_agreed(Peer& p, std::uint32_t agreed);
  std::uint8_t delivery_flags(const Peer& p, Delivery delivery, std::uint8_t channel_id) const;
  // ---- redundancy.cpp: extension: copies of what is unacknowledged, acks repeated ---------
  std::uint32_t redundancy_offered() const;
  std::uint32_t redundancy_agreed(const Peer& p) const;
  void redundancy_on_agreed(Peer& p, std::uint32_t agreed);
  void redundancy_sample(Peer& p, bool lost);
  std::uint32_t redundancy_k(const Peer& p) const;
  std::uint32_t redundancy_budget(const Peer& p) const;
  static std::uint32_t redundancy_loss(const Peer& p);
  void redundancy_on_reliable_arrival(Peer& p, std::uint16_t gap);
  void redundancy_on_base_acked(Peer& p, const OutCmd& c, std::uint16_t echoed);
  void redundancy_on_range_written(Peer& p, const PendingAck& a);
  void redundancy_extras(Peer& p, Build& b);
  static bool redundancy_holds_queues(const PeerQueues& q);
  bool redundancy_keep_unreliable(Peer& p, PeerQueues& q, OutCmd* c);
  void redundancy_unreliable_copies(PeerQueues& q, Build& b, std::uint32_t k,
                                    std::uint16_t& credit_left);
  static bool redundancy_fold_behind(const Peer& p, AckChunk& chunk, const Command& cmd,
                                     std::uint16_t sent_time);

  // ---- blocks.cpp: extension: large blocks as paced slices with a slice-ack bitfield -------
  std::uint32_t blocks_offered() const;
  std::uint32_t blocks_agreed(const Peer& p) const;
  void blocks_on_agreed(Peer& p, std::uint32_t agreed);
  BlockState& block_state(Peer& p);
  static OutBlock* block_out(const Peer& p, std::uint8_t channel);
  SendResult send_block(PeerHandle h, std::uint8_t channel, Packet block);
  std::uint64_t block_rate(const Peer& p, const OutBlock& o) const;
  std::uint64_t block_resend_ms(const Peer& p) const;
  bool next_slice(const Peer& p, OutBlock& o, std::uint32_t& index);
  void write_block_ack(Build& b, InBlock& in);
  void blocks_write(Peer& p, Build& b);
  std::uint64_t blocks_deadline(const Peer& p) const;
  Handled handle_block_slice(Peer& p, const Command& cmd, Arrival& arrival);
  Handled handle_block_ack(Peer& p, const Command& cmd, Arrival& arrival);
  Handled handle_block_refused(Peer& p, const Command& cmd, Arrival& arrival);
  struct BlockAnswer {
    OutBlock* block = nullptr;  // null: return `handled`
    std::uint32_t value = 0;
    Handled handled = Handled::ok;
  };
  BlockAnswer block_answer(Peer& p, const Command& cmd, std::size_t size, Reader& r,
                           Arrival& arrival);
  std::uint32_t block_cap() const;
  void owe_block_refusal(Peer& p, std::uint8_t channel, std::uint16_t id);
  void write_block_refusals(Peer& p, Build& b);
  std::uint32_t block_pipe(const Peer& p, std::uint64_t& expires_ms) const;
  bool blocks_timers(Peer& p);
  void blocks_release(Peer& p);

  // ---- congestion_window.cpp: extension: after a stall, one MTU in transit, regrown --------
  void congestion_window_on_timeouts(const Peer& p, PeerQueues& q, std::uint64_t first_sent_ms);
  void congestion_window_on_acked(PeerQueues& q, const OutCmd& c);
  std::uint32_t congestion_window_limit(const PeerQueues& q, std::uint8_t channel_id) const;

  // ---- congestion_control.cpp: extension: bandwidth and RTT model, pacing, express queue ----
  static bool cc_on(const Peer& p);
  static CongestionState* cc_model(const Peer& p);
  CongestionState& cc_start(Peer& p);
  CongestionState& cc_ready(Peer& p);
  std::uint32_t cc_offered() const;
  std::uint32_t cc_agreed(const Peer& p) const;
  void cc_on_agreed(Peer& p, std::uint32_t agreed);
  void cc_on_rtt(Peer& p, std::uint32_t rtt);
  void cc_on_acked(Peer& p, const OutCmd& c);
  void cc_after_acks(Peer& p);
  void cc_update_model(Peer& p);
  bool cc_allows(Peer& p, const PeerQueues& q, const OutCmd& c);
  void cc_paced_sent(Peer& p, const OutCmd& c);
  std::uint64_t cc_wake_ms(const Peer& p) const;
  bool cc_express(const Peer& p, const Command& cmd, const Channel& ch, std::uint16_t length) const;
  bool cc_channel(const Peer& p, std::uint8_t channel_id) const;
  // ---- idle_pings.cpp: extension: keep-alive pings every few intervals between Tern peers --
  std::uint32_t idle_pings_offered() const;
  std::uint32_t idle_pings_agreed(const Peer& p) const;
  void idle_pings_on_agreed(Peer& p, std::uint32_t agreed);
  std::uint32_t keepalive_interval(const Peer& p) const;
  // ---- pmtu.cpp: extension: path MTU discovery, probes and their acknowledgements --------
  static constexpr std::uint16_t kPmtuStep = 16;  // the search ends when lo and hi are closer
  static constexpr std::uint32_t kPmtuStartMs = 200;
  static constexpr std::uint8_t kPmtuTries = 2;
  static constexpr std::uint32_t kPmtuMinTimeoutMs = 50;
  static constexpr std::uint32_t kPmtuMaxTimeoutMs = 2000;
  static constexpr std::uint32_t kPmtuRecheckMs = 5000;
  std::uint32_t pmtu_offered() const;
  std::uint32_t pmtu_agreed(const Peer& p) const;
  void pmtu_on_agreed(Peer& p, std::uint32_t agreed);
  std::uint16_t pmtu_ceiling() const;
  void pmtu_restart(Peer& p, PeerExtra& x, std::uint16_t hi);
  static std::uint16_t pmtu_next_size(const PeerExtra& x);
  std::uint32_t pmtu_probe_timeout(const Peer& p) const;
  std::uint64_t pmtu_deadline(const Peer& p) const;
  void pmtu_timers(Peer& p);
  static bool pmtu_size_of(const Peer& p, const Command& cmd, Arrival& arrival,
                           std::uint16_t& size);
  Handled handle_mtu_probe(Peer& p, const Command& cmd, Arrival& arrival);
  Handled handle_mtu_probe_ack(Peer& p, const Command& cmd, Arrival& arrival);
  void pmtu_after_timeouts(Peer& p);
  std::size_t pmtu_datagrams(Peer& p, std::span<OutDatagram> out);
  void pmtu_datagram(Peer& p, OutDatagram& dg, TernExtKind kind, std::span<const std::byte> data,
                     std::size_t total);

  // ---- discovery.cpp: extension: unconnected discovery ping and pong ----------------------
  static bool is_unconnected_ext(std::span<const std::byte> bytes, const DecodedHeader& dh);
  void unconnected_datagram(std::uint64_t now_us, const Endpoint& from, const DecodedHeader& dh,
                            std::span<const std::byte> bytes);
  void discovery_on_ping(const Endpoint& from, const Command& cmd, std::size_t ping_bytes);
  bool discovery_rate_pass(const Endpoint& from);
  void discovery_on_pong(std::uint64_t now_us, const Endpoint& from, const Command& cmd);
  std::uint32_t discover(std::uint64_t now_us, const Endpoint& to, std::size_t info_room);
  void set_discovery_info(std::span<const std::byte> info);
  bool poll_discovery(DiscoveryAnswer& out);
  std::size_t flush_discovery(std::span<OutDatagram> out);
  static std::uint32_t read_nonce(std::span<const std::byte> payload);

  // ---- host_core.cpp: orchestration ---------------------------------------------------
  void on_datagram(std::uint64_t now_us, const Endpoint& from, std::span<const std::byte> bytes);
  Peer* route_datagram(const Endpoint& from, const Header& header, Drop& why);
  void after_datagram(Peer& p);
  bool holds_acks(const Peer& p) const;
  void prefetch_dirty(std::size_t at);
  static void prefetch_behind(const OutCmd* next);
  std::size_t flush(std::uint64_t now_us, std::span<OutDatagram> out);
  bool poll_event(Event& out);
};

}  // namespace tern::proto
