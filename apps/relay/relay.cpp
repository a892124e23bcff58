// The relay's per-shard room bookkeeping and fan-out.
#include "relay.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace tern::relay {

namespace {

// Cross-shard message kinds, in the top byte of ShardMessage::tag; the sending shard sits in
// bits 32..47 and the room in the low 32 bits.
enum Kind : std::uint64_t {
  kJoin = 1,      // peer (on the sending shard) joined the room; data = its join order
  kLeave = 2,     // peer left the room
  kFanout = 3,    // deliver the packet to every local member of the room
  kToPeer = 4,    // deliver the packet to `peer` (the streamer of a broadcast room) only
  kBan = 5,       // the packet holds a ban's address (16 bytes), end (8 bytes, shard clock
                  // microseconds) and prefix length (1 byte)
  kPressure = 6,  // the sending shard's members of the room are past hold_backlog (data 1) or
                  // no longer (data 0)
};

constexpr std::uint64_t kNever = ~std::uint64_t{0};

// The room a connect token names in its user data ("room=N", N from 1 to 2^32 - 1), which an
// issuer vouches for, unlike the connect data a client picks itself. Anything else: none.
std::optional<std::uint32_t> token_room(std::span<const std::uint8_t> user_data) {
  constexpr std::string_view kPrefix = "room=";
  const std::string_view text(reinterpret_cast<const char*>(user_data.data()), user_data.size());
  if (text.size() <= kPrefix.size() || text.substr(0, kPrefix.size()) != kPrefix) {
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (char ch : text.substr(kPrefix.size())) {
    if (ch < '0' || ch > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(ch - '0');
    if (v > 0xffffffffu) return std::nullopt;
  }
  if (v == 0) return std::nullopt;
  return static_cast<std::uint32_t>(v);
}
constexpr std::uint64_t kRecheckUs = 1000;  // how often held rooms are looked at again
constexpr std::uint64_t kRetryUs = 50;      // and queues a full ring refused

std::uint64_t make_tag(Kind kind, std::size_t shard, std::uint32_t room) {
  return (std::uint64_t{kind} << 56) | (std::uint64_t{shard & 0xffff} << 32) | room;
}
Kind tag_kind(std::uint64_t tag) { return static_cast<Kind>(tag >> 56); }
std::size_t tag_shard(std::uint64_t tag) { return static_cast<std::size_t>((tag >> 32) & 0xffff); }
std::uint32_t tag_room(std::uint64_t tag) { return static_cast<std::uint32_t>(tag); }

void bump(std::atomic<std::uint64_t>& a, std::uint64_t by = 1) {
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace

// One member of a broadcast room anywhere in the relay; the smallest join order streams.
struct Streamer {
  std::uint32_t order = 0;
  std::uint32_t shard = 0;
  PeerHandle peer;
};

// A first-in first-out queue that keeps its storage: it allocates only to grow past the most it
// ever held, so queueing for a full ring is no allocation per message.
template <class T>
class Fifo {
 public:
  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  T& front() { return slots_[head_]; }
  void pop_front() {
    slots_[head_] = T{};
    head_ = head_ + 1 == slots_.size() ? 0 : head_ + 1;
    --size_;
  }
  void push_back(T&& value) {
    if (size_ == slots_.size()) grow();
    std::size_t at = head_ + size_;
    if (at >= slots_.size()) at -= slots_.size();
    slots_[at] = std::move(value);
    ++size_;
  }

 private:
  void grow() {
    std::vector<T> bigger(std::max<std::size_t>(16, slots_.size() * 2));
    for (std::size_t i = 0; i < size_; ++i) {
      std::size_t at = head_ + i;
      if (at >= slots_.size()) at -= slots_.size();
      bigger[i] = std::move(slots_[at]);
    }
    slots_ = std::move(bigger);
    head_ = 0;
  }
  std::vector<T> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

struct Relay::Room {
  std::vector<PeerHandle> local;        // members on this shard
  std::vector<std::uint32_t> on_shard;  // members per shard (this one included)
  std::uint32_t total = 0;              // members on all shards
  bool broadcast = false;
  std::vector<Streamer> members;  // broadcast rooms only, every shard's members
  // Overload. A member here is past overload.hold_backlog; the room fanned out while a queue to
  // another shard was past overload.overflow_limit; other shards report their own members past
  // hold_backlog. Any of them holds every member here.
  bool local_pressure = false;
  bool overflow_pressure = false;
  std::uint32_t remote_pressure = 0;
  bool held = false;
  bool rechecking = false;  // listed in ShardState::pressured
  // Traffic (RoomTraffic): this shard's members' messages, and the copies this shard sent.
  std::uint64_t messages_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t copies_out = 0;
  std::uint64_t bytes_out = 0;

  const Streamer* streamer() const {
    const Streamer* first = nullptr;
    for (const Streamer& m : members) {
      if (first == nullptr || static_cast<std::int32_t>(m.order - first->order) < 0) first = &m;
    }
    return first;
  }
};

// Per peer slot of this shard's core: which room, and whether it is held.
struct Relay::Member {
  PeerHandle peer;
  std::uint32_t room = 0;
  std::uint32_t order = 0;
  bool counted = false;             // holds one of the relay's max_peers places
  bool leaving = false;             // the relay disconnected it; already out of its room
  bool held = false;                // its intake is held (its room's fan-out is backed up)
  std::uint64_t over_since_us = 0;  // backlog past hold_backlog since (0: it is not)
  Endpoint address;                 // for the admin endpoint's kicks, bans and listings
  std::uint64_t messages_in = 0;    // accepted for relaying (top talkers)
  std::uint64_t bytes_in = 0;
};

struct Relay::ShardState {
  std::unordered_map<std::uint32_t, Room> rooms;
  std::vector<Member> members;      // by PeerHandle::slot
  std::vector<Member> kcp_members;  // KCP sessions, by their slot without Shard::kKcpPeer
  std::size_t shard_count = 1;
  // By target shard: what its ring refused, and everything sent to it after that, in order.
  std::vector<Fifo<rt::ShardMessage>> waiting;
  std::size_t waiting_total = 0;
  std::vector<std::uint32_t> pressured;  // rooms with local or overflow pressure (rechecked)
  std::uint64_t next_recheck_us = 0;
  std::uint64_t held = 0;
  std::uint64_t rooms_held = 0;
  // [discovery]: the player count this shard's core last answered with, and the text it
  // answers with (reserved once, so rewriting it allocates nothing).
  std::uint64_t discovery_players = ~std::uint64_t{0};
  std::string discovery_text;

  Member* member(PeerHandle p) {
    std::vector<Member>& list = rt::Shard::is_kcp(p) ? kcp_members : members;
    const std::uint32_t slot = p.slot & ~rt::Shard::kKcpPeer;
    if (slot >= list.size() || list[slot].peer != p) return nullptr;
    return &list[slot];
  }
  // The record for a peer that just connected, made if its slot is new.
  Member& slot_for(PeerHandle p) {
    std::vector<Member>& list = rt::Shard::is_kcp(p) ? kcp_members : members;
    const std::uint32_t slot = p.slot & ~rt::Shard::kKcpPeer;
    if (slot >= list.size()) list.resize(slot + 1);
    return list[slot];
  }
};

Relay::Relay(const RelayConfig& config)
    : config_(config), group_([&] {
        rt::ShardGroupOptions o;
        o.open_driver = rt::open_driver;
        o.bind = config.listen;
        o.shards = config.shards != 0 ? config.shards : std::thread::hardware_concurrency();
        o.driver = config.driver == "uring" ? rt::DriverKind::uring : rt::DriverKind::socket;
        if (config.driver == "dpdk") {
          // The process set the port up (app::DpdkSession, main.cpp); the shards take the
          // configured IPv4 address and listen's UDP port.
          o.driver = rt::DriverKind::dpdk;
          o.bind = Endpoint::v4(0, config.listen.port);
        }
        o.idle = config.idle == "busy" ? rt::IdlePolicy::busy_poll : rt::IdlePolicy::wait_deadline;
        o.busy_poll_only_connected = true;  // a server: no spinning with no one connected
        o.pin = config.pin;
        o.socket_receive_buffer = static_cast<int>(config.receive_buffer);
        // Each shard may hold every peer (the kernel's hash need not be even); the relay-wide
        // limit is enforced on connect across shards. The headroom lets a shard that already
        // holds them all still complete the handshake of one more, so the relay can turn it
        // away with a disconnect: a core at its own limit drops a connect without a word, as
        // ENet does, and the client only learns of it when its attempt times out.
        o.host.peer_limit = std::size_t{config.max_peers} +
                            std::max<std::size_t>(16, std::size_t{config.max_peers} / 16);
        o.host.channel_limit = config.channels;
        // The rate limits are metered by the core before the acknowledgement: a reliable message
        // over them is not acknowledged (its sender's window holds it back), an unreliable one
        // is dropped.
        o.host.intake_rate = config.max_message_rate;
        o.host.intake_bandwidth = config.max_peer_bandwidth;
        o.host.incoming_bandwidth = config.incoming_bandwidth;
        o.host.outgoing_bandwidth = config.outgoing_bandwidth;
        o.host.max_packet_size = std::max<std::uint32_t>(config.max_message_size, 1);
        o.host.max_queued = config.member_backlog;
        o.host.checksum = config.checksum;
        o.host.selective_acks = config.selective_acks;
        o.host.pmtu = config.path_mtu;
        o.host.ack_delay_ms = config.ack_delay_ms;
        o.host.fast_retransmit = config.fast_retransmit;
        o.host.congestion_window = config.congestion_window;
        o.host.min_rto_ms = config.min_rto_ms;
        o.host.throttle_reliable_window = config.throttle_window;
        o.host.channels = proto::channel_switches(config.channel_rules);
        o.host.verify_before_peer = config.verify_before_peer;
        o.host.half_open_capacity = config.half_open_capacity;
        o.host.half_open_timeout_ms = config.half_open_timeout_ms;
        o.host.connect_rate_per_address = config.connect_rate_per_address;
        o.host.connect_burst_per_address = config.connect_burst_per_address;
        o.host.connect_rate_per_prefix = config.connect_rate_per_prefix;
        o.host.connect_burst_per_prefix = config.connect_burst_per_prefix;
        o.host.discovery = config.discovery;
        o.host.discovery_rate_per_address = config.discovery_rate_per_address;
        o.host.discovery_burst_per_address = 2.0 * config.discovery_rate_per_address;
        o.host.discovery_rate_per_prefix = config.discovery_rate_per_prefix;
        o.host.discovery_burst_per_prefix = 2.0 * config.discovery_rate_per_prefix;
        if (config.security_policy != "plain") {
          o.host.security = config.security_policy == "required" ? proto::Security::required
                                                                 : proto::Security::optional;
          for (const tern::TokenKey& k : config.token_keys) {
            if (o.host.token_keys.count == o.host.token_keys.keys.size()) break;
            o.host.token_keys.keys[o.host.token_keys.count++] = proto::sec::TokenKey{k.id, k.key};
          }
          tern::Endpoint at = config.public_address.value_or(o.bind);
          if (at.is_unspecified()) at = tern::Endpoint::v4(0x7f000001u, o.bind.port);
          o.host.secure_addresses[0] = at;
          o.host.secure_address_count = 1;
          o.host.secure_aes = config.secure_aes;
        }
        o.cross_ring_limit = config.ring_limit;
        if (config.kcp) {
          o.kcp_listen = true;
          o.kcp_bind = config.listen;
          o.kcp_bind.port = config.kcp_port;
          // Like the ENet core's peer_limit: each shard may hold every member.
          o.kcp.session_limit = o.host.peer_limit;
          o.kcp.mtu = config.kcp_mtu;
          o.kcp.snd_wnd = config.kcp_send_window;
          o.kcp.rcv_wnd = config.kcp_receive_window;
          o.kcp.nodelay = static_cast<int>(config.kcp_nodelay);
          o.kcp.interval_ms = config.kcp_interval_ms;
          o.kcp.fast_resend = config.kcp_resend;
          o.kcp.no_cwnd = config.kcp_nc;
          o.kcp.idle_timeout_ms = config.kcp_idle_timeout_ms;
          o.kcp.send_fec = config.kcp_fec;
          o.kcp.fec_data_shards = config.kcp_fec_data_shards;
          o.kcp.fec_parity_shards = config.kcp_fec_parity_shards;
          // Copies wait in a member's send queue up to member_backlog, as for ENet members
          // (max_queued); the segment cap only has to be above it in segments of any size.
          o.kcp.max_queued_bytes = config.member_backlog;
          o.kcp.max_queued_segments = 1u << 20;
          // Metered through the session's window: over them, messages wait acknowledged and
          // in order, and the window the session advertises closes on its sender.
          o.kcp.intake_rate = config.max_message_rate;
          o.kcp.intake_bandwidth = config.max_peer_bandwidth;
        }
        return o;
      }()) {
  const std::size_t n = std::max<std::size_t>(
      1, config.shards != 0 ? config.shards : std::thread::hardware_concurrency());
  for (std::size_t i = 0; i < n; ++i) {
    auto st = std::make_unique<ShardState>();
    st->shard_count = n;
    st->members.resize(std::min<std::size_t>(config.max_peers, 65536));
    st->waiting.resize(n);
    st->discovery_text.reserve(config.discovery_name.size() + config.discovery_info.size() + 96);
    state_.push_back(std::move(st));
    stats_.push_back(std::make_unique<RelayShardStats>());
  }
  group_.set_event_handler([this](rt::Shard& s, Event& ev) { on_event(s, ev); });
  group_.set_message_handler([this](rt::Shard& s, rt::ShardMessage& m) { on_message(s, m); });
  group_.set_tick_handler([this](rt::Shard& s) { return tick(s); });
  if (!config_.rules_path.empty()) {
    filter_.enable(n);
    group_.set_batch_filter(
        [this](rt::Shard& s, std::span<rt::RxFrame> frames) { return filter_batch(s, frames); });
  }
}

Relay::~Relay() { group_.stop(std::chrono::milliseconds(0)); }

bool Relay::start(std::string& error) {
  if (!config_.rules_path.empty() && !filter_.load(config_.rules_path, error)) return false;
  // Read before the shards start, so that a bad file stops the relay before any client
  // arrives; applied once they run (through their task queues).
  std::vector<BanLine> lines;
  if (!config_.bans_path.empty() && !read_bans_file(config_.bans_path, lines, error)) {
    return false;
  }
  if (!group_.start(error)) return false;
  if (!config_.bans_path.empty()) apply_bans_file(std::move(lines), nullptr);
  return true;
}

bool Relay::filtering() const { return filter_.enabled(); }

bool Relay::reload_rules(std::string& error) {
  if (filtering()) return filter_.load(config_.rules_path, error);
  error = "no filter rules configured";
  return false;
}

// The datagram scope: every received burst, before the protocol decodes it. Dropped frames are
// counted in the filter's totals.
std::size_t Relay::filter_batch(rt::Shard& s, std::span<rt::RxFrame> frames) {
  const std::size_t keep = filter_.keep_datagrams(s.index(), frames, s.now_us() / 1000);
  if (filter_.has_new_bans(s.index())) share_new_bans(s);
  return keep;
}

// A ban one shard's rules decided goes into the one ban list on every shard: the kernel may
// steer the same address (other ports) anywhere.
void Relay::share_new_bans(rt::Shard& s) {
  std::array<FilterBan, 16> bans;
  std::size_t n;
  while ((n = filter_.take_new_bans(s.index(), bans)) != 0) {
    for (std::size_t i = 0; i < n; ++i) {
      BanTarget target;
      target.address = bans[i].source;
      target.address.port = 0;
      const std::uint64_t until_us = bans[i].until_ms * 1000;
      apply_ban(s, target, until_us);
      for (std::size_t t = 0; t < group_.size(); ++t) {
        if (t == s.index()) continue;
        Packet p = Packet::allocate(25);
        std::memcpy(p.mutable_bytes().data(), target.address.addr.data(), 16);
        std::memcpy(p.mutable_bytes().data() + 16, &until_us, 8);
        p.mutable_bytes()[24] = static_cast<std::byte>(target.prefix_bits);
        rt::ShardMessage msg;
        msg.tag = make_tag(kBan, s.index(), 0);
        msg.packet = std::move(p);
        send_control(s, t, std::move(msg));
      }
    }
  }
}

// Into the engine's list (refusing handshakes from then on), and the target's connected
// clients are disconnected with data kBanned, each counted as drops_total{reason="banned"}.
std::size_t Relay::apply_ban(rt::Shard& s, const BanTarget& target, std::uint64_t until_us) {
  if (!s.ban(target.address, until_us, target.prefix_bits)) {
    bump(stats_[s.index()]->bans_displaced);
  }
  std::size_t kicked = 0;
  ShardState& st = *state_[s.index()];
  for (auto* list : {&st.members, &st.kcp_members}) {
    for (Member& m : *list) {
      if (!m.counted || m.leaving || !covers(target, m.address)) continue;
      if (s.peer_state(m.peer) != PeerState::connected) continue;
      drop_member(s, m, kBanned);
      stats_[s.index()]->drops.add(RelayDrop::banned);
      ++kicked;
    }
  }
  return kicked;
}

bool Relay::stop() { return group_.stop(std::chrono::milliseconds(config_.drain_timeout_ms)); }

void Relay::on_event(rt::Shard& s, Event& ev) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  auto drop = [&](RelayDrop d) { stats.drops.add(d); };

  switch (ev.type) {
    case EventType::connect: {
      Member& m = st.slot_for(ev.peer);
      m = Member{};
      m.peer = ev.peer;
      m.address = ev.address;
      // Refused members are `leaving`: a KCP session's messages of the same burst, already
      // acknowledged, follow this event and must not join a room.
      // A handshake already under way when the ban came.
      if (s.banned(ev.address)) {
        drop(RelayDrop::banned);
        m.leaving = true;
        s.disconnect(ev.peer, kBanned);
        return;
      }
      if (peers_.fetch_add(1, std::memory_order_relaxed) >= config_.max_peers) {
        peers_.fetch_sub(1, std::memory_order_relaxed);
        drop(RelayDrop::peer_limit);
        m.leaving = true;
        s.disconnect(ev.peer, kRefusedPeerLimit);
        return;
      }
      m.counted = true;
      // A KCP member names its room in its first message (room_rule "join"), or by its conv.
      if (rt::Shard::is_kcp(ev.peer) && config_.kcp_room_rule == "join") return;
      // An ENet member's room: its token's "room=N" when it came with one, else its connect data.
      join_room(s, m,
                rt::Shard::is_kcp(ev.peer)
                    ? ev.data
                    : token_room(s.peer_user_data(ev.peer)).value_or(ev.data));
      return;
    }

    case EventType::disconnect: {
      Member* m = st.member(ev.peer);
      if (m == nullptr) return;
      if (m->counted) peers_.fetch_sub(1, std::memory_order_relaxed);
      if (!m->leaving) leave_room(s, *m);
      if (m->held) {
        --st.held;
        stats.held.store(st.held, std::memory_order_relaxed);
      }
      *m = Member{};
      return;
    }

    case EventType::receive: {
      Member* m = st.member(ev.peer);
      if (m != nullptr && rt::Shard::is_kcp(ev.peer)) {
        if (m->room == 0 && !m->leaving && config_.kcp_room_rule == "join") {
          const std::optional<std::uint32_t> room_id = parse_join(ev.payload());
          if (!room_id) return relay_message(s, ev, m);  // no_room: ends the session
          join_room(s, *m, *room_id);
          return;
        }
        // KCP is one reliable ordered stream: its messages reach ENet members reliably on the
        // configured channel.
        ev.channel = static_cast<std::uint8_t>(config_.kcp_channel);
        ev.delivery = Delivery::reliable;
      }
      return relay_message(s, ev, m);
    }

    default: return;
  }
}

std::optional<std::uint32_t> Relay::parse_join(std::span<const std::byte> payload) {
  constexpr std::string_view kPrefix = "join:";
  if (payload.size() <= kPrefix.size() || payload.size() > kPrefix.size() + 10) return {};
  if (std::memcmp(payload.data(), kPrefix.data(), kPrefix.size()) != 0) return {};
  std::uint64_t room = 0;
  for (std::size_t i = kPrefix.size(); i < payload.size(); ++i) {
    const auto c = static_cast<char>(payload[i]);
    if (c < '0' || c > '9') return {};
    room = room * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (room == 0 || room > 0xffffffffu) return {};
  return static_cast<std::uint32_t>(room);
}

void Relay::join_room(rt::Shard& s, Member& m, std::uint32_t room_id) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  auto drop = [&](RelayDrop d) { stats.drops.add(d); };
  const std::size_t me = s.index();
  const PeerHandle peer = m.peer;
  if (room_id == 0) return;
  Room& room = st.rooms[room_id];
  if (room.total >= config_.max_room_size) {
    if (room.total == 0) st.rooms.erase(room_id);
    drop(RelayDrop::room_full);
    drop_member(s, m, kRefusedRoomFull);
    return;
  }
  if (room.on_shard.empty()) {
    room.on_shard.assign(st.shard_count, 0);
    room.broadcast = std::any_of(config_.broadcast_rooms.begin(), config_.broadcast_rooms.end(),
                                 [&](const RoomRange& r) { return r.contains(room_id); });
  }
  m.room = room_id;
  m.order = join_order_.fetch_add(1, std::memory_order_relaxed);
  room.local.push_back(peer);
  ++room.on_shard[me];
  ++room.total;
  if (room.broadcast) {
    room.members.push_back(Streamer{m.order, static_cast<std::uint32_t>(me), peer});
  }
  if (room.held) set_hold(s, m, true);
  bump(stats.members);
  stats.rooms.store(st.rooms.size(), std::memory_order_relaxed);
  for (std::size_t t = 0; t < st.shard_count; ++t) {
    if (t == me) continue;
    rt::ShardMessage msg;
    msg.tag = make_tag(kJoin, me, room_id);
    msg.peer = peer;
    msg.data = m.order;
    send_control(s, t, std::move(msg));
  }
}

void Relay::relay_message(rt::Shard& s, Event& ev, Member* m) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  auto drop = [&](RelayDrop d) { stats.drops.add(d); };
  const std::size_t me = s.index();
  const bool reliable = is_reliable(ev.delivery);
  if (m == nullptr || m->room == 0) {
    drop(RelayDrop::no_room);
    // Acknowledged already (every KCP message, an ENet reliable one): relayed to no one, so
    // the sender must not stay on as if it had been (a refused one is `leaving` already).
    if (m != nullptr && (reliable || rt::Shard::is_kcp(ev.peer))) drop_member(s, *m, kNotJoined);
    return;
  }
  if (ev.packet.size() > config_.max_message_size) {
    drop(RelayDrop::too_large);
    // Acknowledged already: relayed to no one, so the sender must not stay on as if it had
    // been (the core's max_packet_size refuses most such messages before the ack).
    if (reliable) {
      bump(stats.abusive);
      drop_member(s, *m, kMessageTooLarge);
    }
    return;
  }
  if (filter_.enabled()) {
    const bool dropped =
        filter_.drops_message(me, ev.address, ev.packet.bytes(), s.now_us() / 1000);
    if (filter_.has_new_bans(me)) share_new_bans(s);
    if (dropped) return drop(RelayDrop::filtered);
  }
  const std::uint32_t room_id = m->room;
  auto it = st.rooms.find(room_id);
  if (it == st.rooms.end()) return;
  Room& room = it->second;
  bump(stats.messages_in);
  const std::uint64_t size = ev.packet.size();
  ++room.messages_in;
  room.bytes_in += size;
  ++m->messages_in;
  m->bytes_in += size;
  std::uint64_t copies = 0;

  if (room.broadcast) {
    const Streamer* first = room.streamer();
    if (first != nullptr && !(first->shard == me && first->peer == ev.peer)) {
      // A spectator speaks: only the streamer hears it.
      if (first->shard == me) {
        const PeerHandle to = first->peer;
        std::size_t deepest = 0;
        copies = s.send_many(std::span(&to, 1), ev.channel, ev.delivery, ev.packet, PeerHandle{},
                             &deepest);
        room.copies_out += copies;
        room.bytes_out += copies * size;
        if (copies == 0) after_refusals(s, room, ev.delivery, ev.packet.size(), 1);
        fanned_out(s, room_id, room, deepest);
      } else {
        rt::ShardMessage msg;
        msg.tag = make_tag(kToPeer, me, room_id);
        msg.peer = first->peer;
        msg.channel = ev.channel;
        msg.delivery = ev.delivery;
        msg.packet = ev.packet;
        forward(s, first->shard, std::move(msg));
      }
      bump(stats.copies_out, copies);
      return;
    }
  }
  // One reference-count add for the room's copies, not one per copy.
  const auto others = static_cast<std::size_t>(std::count_if(
      room.local.begin(), room.local.end(), [&](const PeerHandle& to) { return to != ev.peer; }));
  std::size_t deepest = 0;
  copies = s.send_many(room.local, ev.channel, ev.delivery, ev.packet, ev.peer, &deepest);
  room.copies_out += copies;
  room.bytes_out += copies * size;
  if (copies != others) {
    after_refusals(s, room, ev.delivery, ev.packet.size(), others - copies);
  }
  for (std::size_t t = 0; t < st.shard_count; ++t) {
    if (t == me || room.on_shard[t] == 0) continue;
    rt::ShardMessage msg;
    msg.tag = make_tag(kFanout, me, room_id);
    msg.channel = ev.channel;
    msg.delivery = ev.delivery;
    msg.packet = ev.packet;  // one more reference, not a copy
    forward(s, t, std::move(msg));
    if (st.waiting[t].size() >= config_.overflow_limit && !room.overflow_pressure) {
      room.overflow_pressure = true;
      update_room_hold(s, room);
      recheck_later(st, room_id, room);
    }
  }
  fanned_out(s, room_id, room, deepest);
  bump(stats.copies_out, copies);
  return;
}

void Relay::on_message(rt::Shard& s, rt::ShardMessage& m) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  const std::uint32_t room_id = tag_room(m.tag);
  const std::size_t from = tag_shard(m.tag);
  switch (tag_kind(m.tag)) {
    case kJoin: {
      Room& room = st.rooms[room_id];
      if (room.on_shard.empty()) {
        room.on_shard.assign(st.shard_count, 0);
        room.broadcast = std::any_of(config_.broadcast_rooms.begin(), config_.broadcast_rooms.end(),
                                     [&](const RoomRange& r) { return r.contains(room_id); });
      }
      if (from < room.on_shard.size()) ++room.on_shard[from];
      ++room.total;
      if (room.broadcast) {
        room.members.push_back(Streamer{m.data, static_cast<std::uint32_t>(from), m.peer});
      }
      stats.rooms.store(st.rooms.size(), std::memory_order_relaxed);
      return;
    }
    case kLeave: {
      auto it = st.rooms.find(room_id);
      if (it == st.rooms.end()) return;
      Room& room = it->second;
      if (from < room.on_shard.size() && room.on_shard[from] > 0) --room.on_shard[from];
      if (room.total > 0) --room.total;
      if (room.broadcast) {
        std::erase_if(room.members,
                      [&](const Streamer& x) { return x.shard == from && x.peer == m.peer; });
      }
      if (room.total == 0) {
        if (room.held) --st.rooms_held;
        st.rooms.erase(it);
      }
      stats.rooms.store(st.rooms.size(), std::memory_order_relaxed);
      stats.rooms_held.store(st.rooms_held, std::memory_order_relaxed);
      return;
    }
    case kPressure: {
      auto it = st.rooms.find(room_id);
      if (it == st.rooms.end()) return;
      Room& room = it->second;
      if (m.data != 0) {
        ++room.remote_pressure;
      } else if (room.remote_pressure > 0) {
        --room.remote_pressure;
      }
      update_room_hold(s, room);
      return;
    }
    case kFanout: {
      auto it = st.rooms.find(room_id);
      if (it == st.rooms.end()) return;
      Room& room = it->second;
      std::size_t deepest = 0;
      const std::size_t n = room.local.size();
      const std::size_t copies =
          s.send_many(room.local, m.channel, m.delivery, m.packet, PeerHandle{}, &deepest);
      room.copies_out += copies;
      room.bytes_out += copies * m.packet.size();
      if (copies != n) after_refusals(s, room, m.delivery, m.packet.size(), n - copies);
      fanned_out(s, room_id, room, deepest);
      bump(stats.copies_out, copies);
      return;
    }
    case kBan: {
      if (m.packet.size() == 25) {
        BanTarget target;
        std::uint64_t until_us;
        std::memcpy(target.address.addr.data(), m.packet.bytes().data(), 16);
        std::memcpy(&until_us, m.packet.bytes().data() + 16, 8);
        target.prefix_bits = static_cast<unsigned>(m.packet.bytes()[24]);
        apply_ban(s, target, until_us);
      }
      return;
    }
    case kToPeer: {
      Member* to = st.member(m.peer);
      if (to == nullptr || to->leaving) return;  // the streamer left meanwhile
      auto it = st.rooms.find(to->room);
      if (it == st.rooms.end()) return;
      std::size_t deepest = 0;
      const PeerHandle peer = m.peer;
      if (s.send_many(std::span(&peer, 1), m.channel, m.delivery, m.packet, PeerHandle{},
                      &deepest) == 1) {
        bump(stats.copies_out);
        ++it->second.copies_out;
        it->second.bytes_out += m.packet.size();
      } else {
        after_refusals(s, it->second, m.delivery, m.packet.size(), 1);
      }
      fanned_out(s, it->first, it->second, deepest);
      return;
    }
  }
}

// ---- cross-shard queues ------------------------------------------------------------------

void Relay::send_control(rt::Shard& s, std::size_t target, rt::ShardMessage message) {
  ShardState& st = *state_[s.index()];
  Fifo<rt::ShardMessage>& q = st.waiting[target];
  if (q.empty() && s.offer_to_shard(target, message)) return;
  q.push_back(std::move(message));
  ++st.waiting_total;
  bump(stats_[s.index()]->control_held);
}

void Relay::forward(rt::Shard& s, std::size_t target, rt::ShardMessage message) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  Fifo<rt::ShardMessage>& q = st.waiting[target];
  if (q.empty() && s.offer_to_shard(target, message)) return;
  if (!is_reliable(message.delivery)) {
    // Shed rather than queued: nothing overtakes what waits, and the queue is for what must
    // arrive.
    stats.drops.add(RelayDrop::cross_shard_full);
    return;
  }
  q.push_back(std::move(message));
  ++st.waiting_total;
  bump(stats.reliable_queued);
  if (st.waiting_total > stats.overflow_high_water.load(std::memory_order_relaxed)) {
    stats.overflow_high_water.store(st.waiting_total, std::memory_order_relaxed);
  }
}

void Relay::drain_overflow(rt::Shard& s) {
  ShardState& st = *state_[s.index()];
  if (st.waiting_total == 0) return;
  for (std::size_t t = 0; t < st.waiting.size(); ++t) {
    Fifo<rt::ShardMessage>& q = st.waiting[t];
    while (!q.empty() && s.offer_to_shard(t, q.front())) {
      q.pop_front();
      --st.waiting_total;
    }
  }
}

// Once per poll iteration (rt::ShardTickHandler).
std::uint64_t Relay::tick(rt::Shard& s) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  drain_overflow(s);
  stats.overflow.store(st.waiting_total, std::memory_order_relaxed);
  if (config_.discovery) update_discovery(s, st);
  const std::uint64_t now = s.now_us();
  std::uint64_t next = kNever;
  if (!st.pressured.empty()) {
    if (now >= st.next_recheck_us) {
      recheck_rooms(s);
      st.next_recheck_us = now + kRecheckUs;
    }
    if (!st.pressured.empty()) next = st.next_recheck_us;
  }
  // The other shard makes room in its ring as it drains it, without telling us: look again soon.
  if (st.waiting_total != 0) next = std::min(next, now + kRetryUs);
  return next;
}

// The discovery answer names the clients connected to the whole relay; each shard's core
// answers the pings its socket receives, so each rewrites its text when the count moved.
void Relay::update_discovery(rt::Shard& s, ShardState& st) {
  const std::uint64_t players = peers_.load(std::memory_order_relaxed);
  if (players == st.discovery_players) return;
  st.discovery_players = players;
  char number[24];
  std::string& t = st.discovery_text;
  t.assign("name=").append(config_.discovery_name).append("\nplayers=");
  t.append(number, std::to_chars(number, number + sizeof number, players).ptr);
  t.append("\nmax_players=");
  t.append(number, std::to_chars(number, number + sizeof number, config_.max_peers).ptr);
  t.append("\n").append(config_.discovery_info);
  s.set_discovery_info(std::as_bytes(std::span(t.data(), t.size())));
}

// ---- overload ------------------------------------------------------------------------------

void Relay::recheck_later(ShardState& st, std::uint32_t room_id, Room& room) {
  if (room.rechecking) return;
  room.rechecking = true;
  st.pressured.push_back(room_id);
}

void Relay::fanned_out(rt::Shard& s, std::uint32_t room_id, Room& room, std::size_t deepest) {
  RelayShardStats& stats = *stats_[s.index()];
  if (deepest > stats.backlog_high_water.load(std::memory_order_relaxed)) {
    stats.backlog_high_water.store(deepest, std::memory_order_relaxed);
  }
  if (deepest >= config_.hold_threshold() && !room.local_pressure) {
    set_local_pressure(s, room_id, room, true);
  }
}

// Some copies of one message were refused. A member leaving anyway is not counted; an
// unreliable copy was shed (its member's backlog is past half member_backlog); a reliable copy
// means the member's backlog is at member_backlog: it cannot keep up and is disconnected, so
// it is not left connected with a hole in its stream.
void Relay::after_refusals(rt::Shard& s, Room& room, Delivery delivery, std::size_t size,
                           std::size_t refused) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  std::vector<PeerHandle> slow;
  std::size_t leaving = 0;
  for (const PeerHandle& p : room.local) {
    if (s.peer_state(p) != PeerState::connected) {
      ++leaving;
    } else if (is_reliable(delivery) && config_.member_backlog != 0 &&
               s.queued_bytes(p) + size > config_.member_backlog) {
      slow.push_back(p);
    }
  }
  if (!is_reliable(delivery)) {
    const std::size_t shed = refused - std::min(refused, leaving);
    stats.drops.add(RelayDrop::send_failed, shed);
    return;
  }
  for (const PeerHandle& p : slow) {
    if (Member* m = st.member(p)) {
      bump(stats.slow_consumers);
      drop_member(s, *m, kSlowConsumer);
    }
  }
}

void Relay::set_local_pressure(rt::Shard& s, std::uint32_t room_id, Room& room, bool on) {
  ShardState& st = *state_[s.index()];
  if (room.local_pressure == on) return;
  room.local_pressure = on;
  // Every shard knows every room with a member anywhere (joins go to all), and the order of
  // the queue keeps a room's join ahead of its pressure.
  for (std::size_t t = 0; t < st.shard_count; ++t) {
    if (t == s.index()) continue;
    rt::ShardMessage msg;
    msg.tag = make_tag(kPressure, s.index(), room_id);
    msg.data = on ? 1 : 0;
    send_control(s, t, std::move(msg));
  }
  update_room_hold(s, room);
  if (on) recheck_later(st, room_id, room);
}

void Relay::update_room_hold(rt::Shard& s, Room& room) {
  ShardState& st = *state_[s.index()];
  const bool want = room.local_pressure || room.overflow_pressure || room.remote_pressure > 0;
  if (want == room.held) return;
  room.held = want;
  if (want) {
    ++st.rooms_held;
  } else {
    --st.rooms_held;
  }
  stats_[s.index()]->rooms_held.store(st.rooms_held, std::memory_order_relaxed);
  for (const PeerHandle& p : room.local) {
    if (Member* m = st.member(p)) set_hold(s, *m, want);
  }
}

void Relay::set_hold(rt::Shard& s, Member& m, bool on) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  if (m.held == on) return;
  m.held = on;
  // Released: what it sent meanwhile is acknowledged and delivered now (events before the flush).
  s.hold_intake(m.peer, on);
  if (on) {
    ++st.held;
    bump(stats.holds);
  } else {
    --st.held;
  }
  stats.held.store(st.held, std::memory_order_relaxed);
}

// Every kRecheckUs while any room here is under pressure: is it over, and which members keep it
// on for too long.
void Relay::recheck_rooms(rt::Shard& s) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  const std::uint64_t now = s.now_us();
  const std::size_t hold = config_.hold_threshold();
  const std::uint64_t slow_us = std::uint64_t{config_.slow_member_ms} * 1000;
  std::vector<PeerHandle> slow;
  // At most one room leaves a hold per pass while anything waits on the queue to other shards.
  // A released room's members have their held messages (up to HostConfig::max_withheld each)
  // delivered and fanned out at once; every room released together put all of those into that
  // queue, far past overflow_limit. One room a pass bounds the queue near overflow_limit / 2
  // plus one room's held messages, and the rest follow a pass (kRecheckUs) apart.
  bool released = false;
  for (std::size_t i = 0; i < st.pressured.size();) {
    const std::uint32_t room_id = st.pressured[i];
    auto it = st.rooms.find(room_id);
    if (it == st.rooms.end()) {
      st.pressured[i] = st.pressured.back();
      st.pressured.pop_back();
      continue;
    }
    Room& room = it->second;
    if (room.local_pressure) {
      std::size_t deepest = 0;
      slow.clear();
      for (const PeerHandle& p : room.local) {
        Member* m = st.member(p);
        if (m == nullptr) continue;
        const std::size_t backlog = s.queued_bytes(p);
        deepest = std::max(deepest, backlog);
        if (backlog < hold) {
          m->over_since_us = 0;
        } else if (m->over_since_us == 0) {
          m->over_since_us = now;
        } else if (now - m->over_since_us >= slow_us) {
          slow.push_back(p);
        }
      }
      for (const PeerHandle& p : slow) {
        if (Member* m = st.member(p)) {
          bump(stats.slow_consumers);
          drop_member(s, *m, kSlowConsumer);
        }
      }
      // drop_member may have emptied the room (erased): look it up again.
      it = st.rooms.find(room_id);
      if (it == st.rooms.end()) continue;  // erased: dropped from the list on the next pass
      if (!slow.empty()) {
        deepest = 0;
        for (const PeerHandle& p : it->second.local) {
          deepest = std::max(deepest, s.queued_bytes(p));
        }
      }
      if (deepest < hold / 2 && !(released && st.waiting_total != 0)) {
        set_local_pressure(s, room_id, it->second, false);
        released = released || !it->second.held;
      }
    }
    Room& r = it->second;
    if (r.overflow_pressure && !released) {
      bool clear = true;
      for (std::size_t t = 0; t < st.shard_count; ++t) {
        if (t != s.index() && r.on_shard[t] != 0 &&
            st.waiting[t].size() > config_.overflow_limit / 2) {
          clear = false;
        }
      }
      if (clear) {
        r.overflow_pressure = false;
        update_room_hold(s, r);
        released = !r.held;
      }
    }
    if (!r.local_pressure && !r.overflow_pressure) {
      r.rechecking = false;
      st.pressured[i] = st.pressured.back();
      st.pressured.pop_back();
      continue;
    }
    ++i;
  }
}

// Out of its room at once (no copy reaches it after the one it missed), then disconnected
// gracefully with `data`; its disconnect event finds it gone from the room already.
void Relay::drop_member(rt::Shard& s, Member& m, std::uint32_t data) {
  if (m.leaving) return;
  leave_room(s, m);
  m.leaving = true;
  s.disconnect(m.peer, data);
}

void Relay::leave_room(rt::Shard& s, Member& m) {
  ShardState& st = *state_[s.index()];
  RelayShardStats& stats = *stats_[s.index()];
  const std::size_t me = s.index();
  // m.room stays: what the member sent before it left was acknowledged, and still goes to the
  // room (a member leaving is no longer in room.local, so it gets nothing more).
  const std::uint32_t room_id = m.room;
  if (room_id == 0) return;
  auto it = st.rooms.find(room_id);
  if (it == st.rooms.end()) return;
  Room& room = it->second;
  std::erase(room.local, m.peer);
  --room.on_shard[me];
  --room.total;
  if (room.broadcast) {
    std::erase_if(room.members,
                  [&](const Streamer& x) { return x.shard == me && x.peer == m.peer; });
  }
  if (room.local.empty() && room.local_pressure) set_local_pressure(s, room_id, room, false);
  if (room.total == 0) {
    if (room.held) --st.rooms_held;
    st.rooms.erase(it);
  }
  stats.members.store(stats.members.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  stats.rooms.store(st.rooms.size(), std::memory_order_relaxed);
  stats.rooms_held.store(st.rooms_held, std::memory_order_relaxed);
  for (std::size_t t = 0; t < st.shard_count; ++t) {
    if (t == me) continue;
    rt::ShardMessage msg;
    msg.tag = make_tag(kLeave, me, room_id);
    msg.peer = m.peer;
    send_control(s, t, std::move(msg));
  }
}

std::uint64_t Relay::drops(RelayDrop d) const {
  std::uint64_t n = 0;
  for (const auto& s : stats_) n += s->drops[d];
  return n;
}

std::uint64_t Relay::messages_in() const {
  std::uint64_t n = 0;
  for (const auto& s : stats_) n += s->messages_in.load();
  return n;
}

std::uint64_t Relay::copies_out() const {
  std::uint64_t n = 0;
  for (const auto& s : stats_) n += s->copies_out.load();
  return n;
}

std::uint64_t Relay::rooms() const { return stats_.empty() ? 0 : stats_[0]->rooms.load(); }

namespace {

// One per-shard family of /metrics: where each shard's value comes from, one of a shard
// counter, a relay counter or a value derived from the shard counters.
struct ShardMetric {
  const char* name;
  const char* type;
  const char* help;
  std::uint64_t rt::ShardCounters::*shard = nullptr;
  std::atomic<std::uint64_t> RelayShardStats::*relay = nullptr;
  double (*derived)(const rt::ShardCounters&) = nullptr;
};

using SC = rt::ShardCounters;
using RS = RelayShardStats;

double busy_seconds(const SC& c) {
  return static_cast<double>(c.loop_time_us - std::min(c.loop_time_us, c.idle_poll_us)) / 1e6;
}

// Before tern_relay_rooms: the connections, then the KCP port's own counters ([kcp] only).
// The families without "kcp" in their names are the ENet port's, except the relay's (messages,
// copies, drops, members), which count both.
const ShardMetric kPeerMetrics[] = {
    {"tern_relay_peers", "gauge", "Connections the shard's protocol core holds.", &SC::peers},
};
const ShardMetric kKcpMetrics[] = {
    {"tern_relay_kcp_sessions", "gauge", "KCP sessions the shard's KCP core holds.",
     &SC::kcp_sessions},
    {"tern_relay_kcp_datagrams_in_total", "counter", "UDP datagrams received on the KCP port.",
     &SC::kcp_datagrams_in},
    {"tern_relay_kcp_datagrams_out_total", "counter", "UDP datagrams sent from the KCP port.",
     &SC::kcp_datagrams_out},
    {"tern_relay_kcp_bytes_in_total", "counter", "UDP payload bytes received on the KCP port.",
     &SC::kcp_bytes_in},
    {"tern_relay_kcp_bytes_out_total", "counter", "UDP payload bytes sent from the KCP port.",
     &SC::kcp_bytes_out},
    {"tern_relay_kcp_messages_in_total", "counter", "Messages KCP members sent (joins included).",
     &SC::kcp_messages_in},
    {"tern_relay_kcp_messages_out_total", "counter", "Messages queued to KCP members.",
     &SC::kcp_messages_out},
    {"tern_relay_kcp_connects_total", "counter", "KCP sessions opened.", &SC::kcp_connects},
    {"tern_relay_kcp_timeouts_total", "counter",
     "KCP sessions ended by a dead link or idle timeout.", &SC::kcp_timeouts},
    {"tern_relay_kcp_retransmits_total", "counter",
     "KCP segments sent again (timeout or fast resend).", &SC::kcp_retransmits},
    {"tern_relay_kcp_protocol_drops_total", "counter",
     "KCP datagrams and segments refused (malformed, wrong conv, window, limits).", &SC::kcp_drops},
    {"tern_relay_kcp_refused_total", "counter",
     "KCP segments of sessions the relay ended, dropped unacknowledged (in protocol drops too).",
     &SC::kcp_refused},
    {"tern_relay_kcp_intake_waits_total", "counter",
     "KCP messages held in the session's window for limits.message_rate or peer_bandwidth.",
     &SC::kcp_intake_waits},
};
// After tern_relay_rooms.
const ShardMetric kShardMetrics[] = {
    {"tern_relay_datagrams_in_total", "counter", "UDP datagrams received.", &SC::datagrams_in},
    {"tern_relay_datagrams_out_total", "counter", "UDP datagrams sent.", &SC::datagrams_out},
    {"tern_relay_bytes_in_total", "counter", "UDP payload bytes received.", &SC::bytes_in},
    {"tern_relay_bytes_out_total", "counter", "UDP payload bytes sent.", &SC::bytes_out},
    {"tern_relay_commands_in_total", "counter",
     "ENet commands decoded (messages, acknowledgements, pings...).", &SC::commands_in},
    {"tern_relay_acks_out_total", "counter",
     "Acknowledgement commands sent (a selective-ack range counts once).", &SC::acks_out},
    {"tern_relay_messages_in_total", "counter", "Messages accepted from members.", nullptr,
     &RS::messages_in},
    {"tern_relay_messages_relayed_total", "counter", "Copies forwarded to members.", nullptr,
     &RS::copies_out},
    {"tern_relay_protocol_drops_total", "counter",
     "Datagrams and commands the protocol core refused (malformed, unknown peer, caps).",
     &SC::drops},
    {"tern_relay_busy_seconds_total", "counter",
     "Time the shard spent working: its poll iterations less those that found nothing.", nullptr,
     nullptr, busy_seconds},
    {"tern_relay_retransmits_total", "counter",
     "Reliable commands sent again: lost on the way, or queueing delay beyond the RTO.",
     &SC::retransmits},
    {"tern_relay_fast_retransmits_total", "counter",
     "Reliable commands found lost because later ones were acknowledged (resent before "
     "their timeout).",
     &SC::fast_retransmits},
    {"tern_relay_timeouts_deferred_total", "counter",
     "Retransmission timeouts put off while the relay read behind its input (the acks may be "
     "waiting unread).",
     &SC::timeouts_deferred},
    {"tern_relay_pacer_waits_total", "counter",
     "Times congestion control's pacer held a member's reliable bulk back.", &SC::pacer_waits},
    {"tern_relay_cwnd_limited_total", "counter",
     "Times congestion control's window held a member's reliable bulk back.", &SC::cwnd_limited},
    {"tern_relay_discovery_pings_total", "counter",
     "Discovery pings received ([discovery]), answered or not.", &SC::discovery_pings_in},
    {"tern_relay_discovery_answers_total", "counter",
     "Discovery pings answered (never with more bytes than the ping).", &SC::discovery_pongs_out},
    {"tern_relay_discovery_refused_total", "counter",
     "Discovery pings not answered: discovery off, banned, over a rate, queue full.",
     &SC::discovery_refused},
    {"tern_relay_half_open", "gauge", "Half-open handshakes held now (gauge).", &SC::half_open},
    {"tern_relay_half_open_created_total", "counter",
     "CONNECTs from unknown sources given a half-open entry.", &SC::half_open_created},
    {"tern_relay_half_open_evicted_total", "counter", "Half-open entries pushed out by newer ones.",
     &SC::half_open_evicted},
    {"tern_relay_cookies_sent_total", "counter", "VERIFY_CONNECTs sent to unverified sources.",
     &SC::cookies_sent},
    {"tern_relay_connects_rate_limited_total", "counter",
     "CONNECTs over [security] connect_rate_per_address or _per_prefix, unanswered.",
     &SC::connects_rate_limited},
    {"tern_relay_connects_shed_total", "counter",
     "CONNECTs unanswered while the shard read far behind its input (a flood): clients resend.",
     &SC::connects_shed},
    {"tern_relay_connects_banned_total", "counter",
     "Handshake datagrams from banned addresses or prefixes, unanswered.", &SC::connects_banned},
    {"tern_relay_bans_displaced_total", "counter",
     "Running bans a full set of the ban table let go of for a new one.", nullptr,
     &RS::bans_displaced},
    {"tern_relay_cookies_invalid_total", "counter",
     "Acks of a VERIFY_CONNECT with the wrong cookie.", &SC::cookies_invalid},
    {"tern_relay_cookies_expired_total", "counter", "Datagrams for a handshake past its timeout.",
     &SC::cookies_expired},
    {"tern_relay_amplification_capped_total", "counter",
     "Replies not sent: more than the unverified source sent.", &SC::amplification_capped},
    {"tern_relay_peers_promoted_total", "counter", "Handshakes acknowledged: peers made.",
     &SC::peers_promoted},
    {"tern_relay_unverified_bytes_in_total", "counter", "Bytes from sources not yet verified.",
     &SC::unverified_bytes_in},
    {"tern_relay_unverified_bytes_out_total", "counter", "Bytes sent to them.",
     &SC::unverified_bytes_out},
    {"tern_relay_peer_timeouts_total", "counter",
     "Clients disconnected because they stopped acknowledging.", &SC::timeouts},
    {"tern_relay_control_held_total", "counter",
     "Joins, leaves and bans a full cross-shard ring refused; held and sent in order.", nullptr,
     &RS::control_held},
    {"tern_relay_reliable_queued_total", "counter",
     "Reliable copies a full cross-shard ring refused; held and sent in order.", nullptr,
     &RS::reliable_queued},
    {"tern_relay_overflow", "gauge", "Messages waiting for room in the rings to other shards.",
     nullptr, &RS::overflow},
    {"tern_relay_overflow_high_water", "gauge",
     "The most messages that ever waited for the rings to other shards.", nullptr,
     &RS::overflow_high_water},
    {"tern_relay_backlog_high_water_bytes", "gauge",
     "The deepest member backlog (queued, in flight, unacknowledged) seen after a fan-out.",
     nullptr, &RS::backlog_high_water},
    {"tern_relay_holds_total", "counter",
     "Times a member's new reliable messages were held unacknowledged (back-pressure).", nullptr,
     &RS::holds},
    {"tern_relay_over_limit_refused_total", "counter",
     "Reliable messages over limits.message_rate or peer_bandwidth, left unacknowledged "
     "(the sender resends them).",
     &SC::over_limit_refused},
    {"tern_relay_over_limit_dropped_total", "counter",
     "Unreliable messages over limits.message_rate or peer_bandwidth, dropped.",
     &SC::over_limit_dropped},
    {"tern_relay_senders_held", "gauge", "Members whose intake is held now.", nullptr, &RS::held},
    {"tern_relay_rooms_held", "gauge",
     "Rooms whose members are held now (a backlog here or on another shard).", nullptr,
     &RS::rooms_held},
    {"tern_relay_slow_consumers_total", "counter",
     "Members disconnected because they could not keep up (disconnect data 2).", nullptr,
     &RS::slow_consumers},
    {"tern_relay_abusive_total", "counter",
     "Members disconnected for a reliable message over limits.message_size (data 3).", nullptr,
     &RS::abusive},
    {"tern_relay_rx_kernel_dropped_total", "counter",
     "Datagrams the kernel dropped because the shard's socket receive buffer was full "
     "(relay.receive_buffer): the relay fell behind its input.",
     &SC::rx_kernel_dropped},
    {"tern_relay_tx_dropped_total", "counter",
     "Datagrams the driver could not send (full transmit queue, unresolved next hop).",
     &SC::tx_dropped},
    {"tern_relay_tx_waits_total", "counter",
     "Flushes put off because the transmit queue was full (DPDK): delay, not loss.", &SC::tx_waits},
    {"tern_relay_tx_backlog", "gauge",
     "Datagrams held for a full transmit queue (DPDK), sent before new ones.", &SC::tx_backlog},
    {"tern_relay_tokens_accepted_total", "counter",
     "CONNECTs whose connect token was good ([security]): secure handshakes answered.",
     &SC::tokens_accepted},
    {"tern_relay_tokens_refused_total", "counter",
     "Connect tokens refused: forged, expired, unknown key, wrong server, reused.",
     &SC::tokens_refused},
    {"tern_relay_sealed_out_total", "counter",
     "Datagrams sealed (encrypted) for secure connections.", &SC::sealed_out},
    {"tern_relay_opened_in_total", "counter",
     "Sealed datagrams that authenticated and were opened.", &SC::opened_in},
    {"tern_relay_seal_refused_total", "counter",
     "Datagrams refused on secure connections: not authentic, clear, or replayed.",
     &SC::seal_refused},
};

}  // namespace

std::string Relay::metrics_text() const {
  std::ostringstream o;
  const std::size_t n = group_.size();
  auto family = [&](const char* name, const char* type, const char* help) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  std::vector<rt::ShardCounters> counters(n);
  for (std::size_t i = 0; i < n; ++i) counters[i] = group_.counters(i);
  auto per_shard = [&](std::span<const ShardMetric> table) {
    for (const ShardMetric& m : table) {
      family(m.name, m.type, m.help);
      for (std::size_t i = 0; i < n; ++i) {
        o << m.name << "{shard=\"" << i << "\"} ";
        if (m.shard != nullptr) {
          o << counters[i].*m.shard;
        } else if (m.relay != nullptr) {
          o << ((*stats_[i]).*m.relay).load();
        } else {
          o << m.derived(counters[i]);
        }
        o << '\n';
      }
    }
  };
  per_shard(kPeerMetrics);
  if (config_.kcp) per_shard(kKcpMetrics);
  family("tern_relay_rooms", "gauge", "Rooms with at least one member.");
  o << "tern_relay_rooms " << rooms() << '\n';
  per_shard(kShardMetrics);
  port_metrics(o);
  family("tern_relay_drops_total", "counter",
         "Messages and connects the relay refused, by reason.");
  for (std::size_t d = 0; d < kRelayDropCount; ++d) {
    o << "tern_relay_drops_total{reason=\"" << drop_name(static_cast<RelayDrop>(d)) << "\"} "
      << drops(static_cast<RelayDrop>(d)) << '\n';
  }
  filter_metrics(o);
  family("tern_relay_loop_seconds", "histogram",
         "Time each poll iteration of a shard spent working (sleep excluded).");
  for (std::size_t i = 0; i < n; ++i) {
    const rt::ShardCounters c = group_.counters(i);
    std::uint64_t cumulative = 0;
    for (std::size_t b = 0; b < rt::kLoopTimeBuckets; ++b) {
      cumulative += c.loop_time[b];
      o << "tern_relay_loop_seconds_bucket{shard=\"" << i << "\",le=\"";
      if (b + 1 == rt::kLoopTimeBuckets) {
        o << "+Inf";
      } else {
        o << static_cast<double>(rt::loop_time_bucket_bound_us(b)) / 1e6;
      }
      o << "\"} " << cumulative << '\n';
    }
    o << "tern_relay_loop_seconds_sum{shard=\"" << i << "\"} "
      << static_cast<double>(c.loop_time_us) / 1e6 << '\n';
    o << "tern_relay_loop_seconds_count{shard=\"" << i << "\"} " << cumulative << '\n';
  }
  return o.str();
}

// The device's own counters (DPDK ports); the shard on the port's first queue reports them.
// Kernel sockets have no port of their own, so nothing is written for them.
void Relay::port_metrics(std::ostream& o) const {
  const rt::PortStats p = group_.total().port;
  if (p.link < 0) return;
  auto metric = [&](const char* name, const char* type, const char* help, auto value) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n'
      << name << ' ' << value << '\n';
  };
  metric("tern_relay_port_link_up", "gauge", "1 when the port's link is up.", p.link);
  metric("tern_relay_port_link_speed_mbps", "gauge", "The link speed the port reports.",
         p.link_speed_mbps);
  metric("tern_relay_port_rx_packets_total", "counter", "Frames the port received.", p.rx_packets);
  metric("tern_relay_port_tx_packets_total", "counter", "Frames the port sent.", p.tx_packets);
  metric("tern_relay_port_rx_missed_total", "counter",
         "Frames the port turned away because the receive ring was full.", p.rx_missed);
  metric("tern_relay_port_rx_no_mbuf_total", "counter", "Frames lost for want of a receive buffer.",
         p.rx_no_mbuf);
  metric("tern_relay_port_rx_errors_total", "counter", "Receive errors the port counted.",
         p.rx_errors);
  metric("tern_relay_port_tx_errors_total", "counter", "Transmit errors the port counted.",
         p.tx_errors);
}

void Relay::filter_metrics(std::ostream& o) const { filter_.metrics(o); }

// ---- operations: the admin endpoint and the traffic metrics ---------------------------------
//
// Called from the HTTP thread. Shard state is read and changed only by a task posted to the
// shard, so the per-packet path keeps its plain shard-local counters (Room and Member) and
// takes no lock; each answer waits in its own slot until the asking thread takes it.

template <class R>
std::vector<R> Relay::ask_shards(std::function<R(rt::Shard&)> question, bool& complete) {
  // One whole object per shard: std::vector<bool> packs its elements into shared words, so
  // two shards answering at once would write the same memory.
  struct Slot {
    R value{};
  };
  struct Answers {
    explicit Answers(std::size_t n) : values(n), ready(n) {}
    std::vector<Slot> values;
    std::vector<std::atomic<bool>> ready;
  };
  const std::size_t n = group_.size();
  // Shared with the tasks: a shard that answers after the deadline writes into a slot nobody
  // reads any more, not into freed memory.
  auto answers = std::make_shared<Answers>(n);
  std::vector<bool> asked(n);
  for (std::size_t i = 0; i < n; ++i) {
    asked[i] = group_.post(i, [answers, question, i](rt::Shard& s) {
      answers->values[i].value = question(s);
      answers->ready[i].store(true, std::memory_order_release);
    });
  }
  auto all_answered = [&] {
    for (std::size_t i = 0; i < n; ++i) {
      if (asked[i] && !answers->ready[i].load(std::memory_order_acquire)) return false;
    }
    return true;
  };
  const auto deadline = std::chrono::steady_clock::now() + kAskTimeout;
  while (!all_answered() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::vector<R> out;
  complete = true;
  for (std::size_t i = 0; i < n; ++i) {
    if (answers->ready[i].load(std::memory_order_acquire)) {
      out.push_back(std::move(answers->values[i].value));
    } else {
      complete = false;
    }
  }
  return out;
}

namespace {

bool busier_room(const RoomTraffic& a, const RoomTraffic& b) {
  if (a.bytes_out != b.bytes_out) return a.bytes_out > b.bytes_out;
  if (a.bytes_in != b.bytes_in) return a.bytes_in > b.bytes_in;
  return a.room < b.room;
}

bool louder_talker(const PeerTraffic& a, const PeerTraffic& b) {
  if (a.bytes_in != b.bytes_in) return a.bytes_in > b.bytes_in;
  if (a.messages_in != b.messages_in) return a.messages_in > b.messages_in;
  return a.address.to_string() < b.address.to_string();
}

void add_talker(PeerTraffic& sum, const PeerTraffic& t) {
  sum.messages_in += t.messages_in;
  sum.bytes_in += t.bytes_in;
  sum.backlog += t.backlog;
}

// The first `keep` of `all` by `better`, in order; the rest summed into `other` by `add`.
template <class T, class Better, class Add>
void keep_top(std::vector<T>& all, std::size_t keep, Better better, T& other, Add add) {
  keep = std::min(keep, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(keep), all.end(),
                    better);
  for (std::size_t i = keep; i < all.size(); ++i) add(other, all[i]);
  all.resize(keep);
}

}  // namespace

TopTraffic Relay::top_traffic(std::size_t rooms, std::size_t talkers) {
  struct ShardTraffic {
    std::vector<RoomTraffic> rooms;
    std::vector<PeerTraffic> talkers;  // this shard's loudest `talkers`
    PeerTraffic other;
  };
  bool complete = true;
  const std::vector<ShardTraffic> answers = ask_shards<ShardTraffic>(
      [this, talkers](rt::Shard& s) {
        ShardState& st = *state_[s.index()];
        ShardTraffic out;
        out.rooms.reserve(st.rooms.size());
        for (const auto& [id, room] : st.rooms) {
          if (room.local.empty() && room.messages_in == 0 && room.copies_out == 0) continue;
          out.rooms.push_back(RoomTraffic{id, room.local.size(), room.messages_in, room.bytes_in,
                                          room.copies_out, room.bytes_out});
        }
        for (const auto* list : {&st.members, &st.kcp_members})
          for (const Member& m : *list) {
            if (!m.counted || m.leaving || s.peer_state(m.peer) != PeerState::connected) continue;
            PeerTraffic t;
            t.address = m.address;
            t.room = m.room;
            t.shard = static_cast<std::uint32_t>(s.index());
            t.messages_in = m.messages_in;
            t.bytes_in = m.bytes_in;
            out.talkers.push_back(t);
          }
        // A client lives on one shard, so the relay's loudest are among each shard's loudest.
        keep_top(out.talkers, talkers, louder_talker, out.other, add_talker);
        return out;
      },
      complete);
  TopTraffic top;
  top.complete = complete;
  std::unordered_map<std::uint32_t, RoomTraffic> merged;
  for (const ShardTraffic& a : answers) {
    for (const RoomTraffic& r : a.rooms) {
      RoomTraffic& into = merged[r.room];
      into.room = r.room;
      into.add(r);
    }
    top.talkers.insert(top.talkers.end(), a.talkers.begin(), a.talkers.end());
    add_talker(top.other_talkers, a.other);
  }
  top.room_count = merged.size();
  top.rooms.reserve(merged.size());
  for (const auto& [id, r] : merged) top.rooms.push_back(r);
  keep_top(top.rooms, rooms, busier_room, top.other_rooms,
           [](RoomTraffic& sum, const RoomTraffic& r) { sum.add(r); });
  keep_top(top.talkers, talkers, louder_talker, top.other_talkers, add_talker);
  return top;
}

std::string Relay::traffic_metrics_text(std::size_t rooms, std::size_t talkers) {
  const TopTraffic top = top_traffic(rooms, talkers);
  std::ostringstream o;
  auto family = [&](const char* name, const char* type, const char* help) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
  };
  family("tern_relay_traffic_complete", "gauge",
         "1 when every shard answered for the room and talker series below (else a stalled "
         "shard's part is missing).");
  o << "tern_relay_traffic_complete " << (top.complete ? 1 : 0) << '\n';
  family("tern_relay_room_count", "gauge", "Rooms with a member or traffic, over all shards.");
  o << "tern_relay_room_count " << top.room_count << '\n';
  // The busiest rooms (metrics.top_rooms) by bytes sent to their members, one series each;
  // every other room in room="other".
  auto room_family = [&](const char* name, const char* type, const char* help, auto value) {
    family(name, type, help);
    for (const RoomTraffic& r : top.rooms) {
      o << name << "{room=\"" << r.room << "\"} " << value(r) << '\n';
    }
    o << name << "{room=\"other\"} " << value(top.other_rooms) << '\n';
  };
  room_family("tern_relay_room_members", "gauge", "Members of the busiest rooms.",
              [](const RoomTraffic& r) { return r.members; });
  room_family("tern_relay_room_messages_in_total", "counter",
              "Messages the busiest rooms' members sent for relaying.",
              [](const RoomTraffic& r) { return r.messages_in; });
  room_family("tern_relay_room_bytes_in_total", "counter",
              "Payload bytes the busiest rooms' members sent for relaying.",
              [](const RoomTraffic& r) { return r.bytes_in; });
  room_family("tern_relay_room_copies_out_total", "counter",
              "Copies the relay sent to the busiest rooms' members.",
              [](const RoomTraffic& r) { return r.copies_out; });
  room_family("tern_relay_room_bytes_out_total", "counter",
              "Payload bytes the relay sent to the busiest rooms' members (the ranking).",
              [](const RoomTraffic& r) { return r.bytes_out; });
  // The loudest clients (metrics.top_talkers) by payload bytes sent; the rest in peer="other".
  auto talker_family = [&](const char* name, const char* help, auto value) {
    family(name, "counter", help);
    for (const PeerTraffic& t : top.talkers) {
      o << name << "{peer=\"" << t.address.to_string() << "\",room=\"" << t.room << "\"} "
        << value(t) << '\n';
    }
    o << name << "{peer=\"other\",room=\"\"} " << value(top.other_talkers) << '\n';
  };
  talker_family("tern_relay_talker_messages_in_total",
                "Messages the loudest clients sent for relaying since they connected.",
                [](const PeerTraffic& t) { return t.messages_in; });
  talker_family("tern_relay_talker_bytes_in_total",
                "Payload bytes the loudest clients sent for relaying since they connected (the "
                "ranking).",
                [](const PeerTraffic& t) { return t.bytes_in; });
  return o.str();
}

std::vector<RoomTraffic> Relay::room_list(bool& complete) {
  const auto answers = ask_shards<std::vector<RoomTraffic>>(
      [this](rt::Shard& s) {
        std::vector<RoomTraffic> out;
        for (const auto& [id, room] : state_[s.index()]->rooms) {
          out.push_back(RoomTraffic{id, room.local.size(), room.messages_in, room.bytes_in,
                                    room.copies_out, room.bytes_out});
        }
        return out;
      },
      complete);
  std::unordered_map<std::uint32_t, RoomTraffic> merged;
  for (const auto& a : answers) {
    for (const RoomTraffic& r : a) {
      RoomTraffic& into = merged[r.room];
      into.room = r.room;
      into.add(r);
    }
  }
  std::vector<RoomTraffic> out;
  for (const auto& [id, r] : merged) out.push_back(r);
  std::sort(out.begin(), out.end(),
            [](const RoomTraffic& a, const RoomTraffic& b) { return a.room < b.room; });
  return out;
}

std::vector<PeerTraffic> Relay::peer_list(std::optional<std::uint32_t> room, std::size_t limit,
                                          bool& complete) {
  const auto answers = ask_shards<std::vector<PeerTraffic>>(
      [this, room, limit](rt::Shard& s) {
        std::vector<PeerTraffic> out;
        ShardState& st = *state_[s.index()];
        for (const auto* list : {&st.members, &st.kcp_members})
          for (const Member& m : *list) {
            if (out.size() >= limit) break;
            if (!m.counted || m.leaving || s.peer_state(m.peer) != PeerState::connected) continue;
            if (room && m.room != *room) continue;
            PeerTraffic t;
            t.address = m.address;
            t.room = m.room;
            t.shard = static_cast<std::uint32_t>(s.index());
            t.messages_in = m.messages_in;
            t.bytes_in = m.bytes_in;
            PeerStats ps;
            if (s.peer_stats(m.peer, ps)) t.rtt_ms = ps.rtt_ms;
            t.backlog = s.queued_bytes(m.peer);
            t.held = m.held;
            out.push_back(t);
          }
        return out;
      },
      complete);
  std::vector<PeerTraffic> out;
  for (const auto& a : answers) out.insert(out.end(), a.begin(), a.end());
  std::sort(out.begin(), out.end(), [](const PeerTraffic& a, const PeerTraffic& b) {
    if (a.room != b.room) return a.room < b.room;
    return a.address.to_string() < b.address.to_string();
  });
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::size_t Relay::kick(const Endpoint& peer, bool& complete) {
  const auto answers = ask_shards<std::size_t>(
      [this, peer](rt::Shard& s) {
        std::size_t kicked = 0;
        ShardState& st = *state_[s.index()];
        for (auto* list : {&st.members, &st.kcp_members})
          for (Member& m : *list) {
            if (!m.counted || m.leaving || !(m.address == peer)) continue;
            if (s.peer_state(m.peer) != PeerState::connected) continue;
            drop_member(s, m, kKicked);
            ++kicked;
          }
        return kicked;
      },
      complete);
  std::size_t kicked = 0;
  for (std::size_t n : answers) kicked += n;
  return kicked;
}

std::size_t Relay::ban(const BanTarget& target, std::uint32_t seconds, bool& complete) {
  const auto answers = ask_shards<std::size_t>(
      [this, target, seconds](rt::Shard& s) {
        const std::uint64_t until_us =
            seconds == 0 ? kNever : s.now_us() + std::uint64_t{seconds} * 1'000'000;
        return apply_ban(s, target, until_us);
      },
      complete);
  std::size_t kicked = 0;
  for (std::size_t k : answers) kicked += k;
  return kicked;
}

bool Relay::unban(const BanTarget& target, bool& complete) {
  const auto answers = ask_shards<bool>(
      [target](rt::Shard& s) {
        const auto running = s.bans();
        const bool was = std::any_of(running.begin(), running.end(), [&](const auto& b) {
          return b.prefix_bits == target.prefix_bits && b.address == target.address;
        });
        s.unban(target.address, target.prefix_bits);
        return was;
      },
      complete);
  return std::any_of(answers.begin(), answers.end(), [](bool b) { return b; });
}

std::vector<BanInfo> Relay::bans(bool& complete) {
  const auto answers = ask_shards<std::vector<BanInfo>>(
      [](rt::Shard& s) {
        const std::uint64_t now_us = s.now_us();
        std::vector<BanInfo> out;
        for (const auto& b : s.bans()) {
          BanInfo info;
          info.target = BanTarget{b.address, b.prefix_bits};
          info.until_removed = b.until_us >= kNever / 2;
          info.remaining_ms =
              info.until_removed || b.until_us <= now_us ? 0 : (b.until_us - now_us) / 1000;
          out.push_back(info);
        }
        return out;
      },
      complete);
  // Every shard holds the same bans, set by one task each; should their ends differ by the
  // moments the tasks ran, the longest is what a client meets.
  std::vector<BanInfo> out;
  for (const auto& a : answers) {
    for (const BanInfo& b : a) {
      auto it = std::find_if(out.begin(), out.end(),
                             [&](const BanInfo& o) { return o.target == b.target; });
      if (it == out.end()) {
        out.push_back(b);
      } else {
        it->remaining_ms = std::max(it->remaining_ms, b.remaining_ms);
      }
    }
  }
  return out;
}

// The file's lines become bans on every shard. A line already applied with the same length
// keeps its running ban (its seconds count from the load that first saw it); a line gone from
// the file lifts its ban. Main thread only (start-up and SIGHUP).
bool Relay::load_bans_file(std::string& error, std::size_t* kicked) {
  std::vector<BanLine> lines;
  if (!read_bans_file(config_.bans_path, lines, error)) return false;
  apply_bans_file(std::move(lines), kicked);
  return true;
}

void Relay::apply_bans_file(std::vector<BanLine> lines, std::size_t* kicked) {
  bool complete = true;
  std::size_t k = 0;
  for (const BanLine& old : file_bans_) {
    const bool kept = std::any_of(lines.begin(), lines.end(),
                                  [&](const BanLine& l) { return l.target == old.target; });
    if (!kept) unban(old.target, complete);
  }
  for (const BanLine& line : lines) {
    const bool same = std::any_of(file_bans_.begin(), file_bans_.end(), [&](const BanLine& o) {
      return o.target == line.target && o.seconds == line.seconds;
    });
    if (!same) k += ban(line.target, line.seconds, complete);
  }
  file_bans_ = std::move(lines);
  if (kicked != nullptr) *kicked = k;
}

}  // namespace tern::relay
