// tern::relay::Relay: rooms on the sharded runtime.
//
// A client joins the room named by its connect data (0 = none). Every message a member sends
// goes to every other member on the same channel with the same delivery, payload untouched and
// stored once however many copies leave. Members of one room may sit on different shards: each
// shard keeps its own members of every room plus how many each other shard has, learned from
// join/leave messages on the cross-shard rings, and forwards a message once per other shard
// that has members; that shard fans it out to its own. In broadcast rooms only the earliest
// member still present (the streamer) reaches everyone; the others reach the streamer only.
// What a full ring refuses waits in a per-target queue, and so does everything after it, sent
// in order as the ring drains: joins, leaves, bans and reliable copies are never lost;
// unreliable copies are shed (cross_shard_full) rather than queued behind them.
//
// The promise (DESIGN §8): a reliable message the relay acknowledged reaches every member that
// stays connected, in order per sender and channel. Overload is met before the acknowledgement:
// when a room's fan-out backs up (a member's backlog past overload.hold_backlog, or the queue to
// another shard past overload.overflow_limit) every member of the room is held
// (HostCore::hold_intake: its new reliable messages are kept unacknowledged, so its own ENet
// window stops it) until the backlog halves. The rate and bandwidth limits are met before the
// acknowledgement too, by the core (HostConfig::intake_rate): a reliable message over them is
// left unacknowledged for its sender to resend, an unreliable one dropped. A member that cannot
// keep up (its backlog reaches limits.member_backlog, or it keeps its room held for
// overload.slow_member_ms) is disconnected with data kSlowConsumer. Unreliable copies are shed
// first: past half a member's backlog, or over the rate limits.
//
// KCP members (apps/relay/README.md) cannot be left unacknowledged: KCP acknowledges what
// arrives in its window. They are held (overload, rate, bandwidth) through that window instead
// (KcpCore::hold, KcpConfig::intake_rate): their messages wait acknowledged and in order, never
// dropped, while the window they advertise closes on their sender. A KCP message the relay
// cannot relay (no room yet, over message_size) ends its session, and a session the relay ends
// stays refused by the KCP core, so its client's later messages are not acknowledged either.
#pragma once

#include "bans.hpp"
#include "config.hpp"
#include "drop_reasons.hpp"
#include "payload_filter.hpp"
#include "shard.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace tern::relay {

// Every one is counted; none is a reliable copy the relay acknowledged (those are delivered or
// their receiver disconnected).
#define TERN_RELAY_DROPS(X)                                                                \
  X(no_room, "message from a client in no room (an acknowledged one disconnects: data 6)") \
  X(room_full, "connect refused: the room is at its size limit")                           \
  X(peer_limit, "connect refused: the relay is at its peer limit")                         \
  X(too_large, "message larger than limits.message_size (a reliable one disconnects)")     \
  X(send_failed, "unreliable copy shed: the member's backlog is past half member_backlog") \
  X(cross_shard_full, "unreliable copy shed: the queue to another shard was not empty")    \
  X(filtered, "message dropped by a payload filter rule (message scope)")                  \
  X(banned, "client disconnected or connect refused: its address is banned")

// Disconnect data the relay sends with the reasons it turns a client away.
inline constexpr std::uint32_t kRefusedPeerLimit = 0;
inline constexpr std::uint32_t kRefusedRoomFull = 1;
inline constexpr std::uint32_t kSlowConsumer = 2;     // could not keep up with its room
inline constexpr std::uint32_t kMessageTooLarge = 3;  // sent a reliable message over the limit
inline constexpr std::uint32_t kKicked = 4;           // POST /admin/kick
inline constexpr std::uint32_t kBanned = 5;           // its address is banned (POST /admin/ban)
// A member in no room (connect data 0, or a KCP member before its join) sent a message the
// relay acknowledged (any KCP message, an ENet reliable one): it reached no one, so the client
// cannot stay as if it had been relayed.
inline constexpr std::uint32_t kNotJoined = 6;

enum class RelayDrop : std::uint8_t { TERN_RELAY_DROPS(TERN_DROP_ENUMERATOR) count_ };
inline constexpr std::array kRelayDropReasons{TERN_RELAY_DROPS(TERN_DROP_REASON)};
constexpr const auto& drop_reasons(RelayDrop) { return kRelayDropReasons; }
inline constexpr std::size_t kRelayDropCount = base::kDropReasons<RelayDrop>;
using base::drop_name;
// Counted by one shard, read by any thread (/metrics, the stop summary).
using RelayDropCounters = base::DropCounters<RelayDrop, std::atomic<std::uint64_t>>;

// Published by each shard (single writer, relaxed), read by /metrics and the summary.
struct RelayShardStats {
  std::atomic<std::uint64_t> messages_in{0};  // accepted from members for relaying
  std::atomic<std::uint64_t> copies_out{0};   // copies handed to the protocol core
  std::atomic<std::uint64_t> members{0};      // this shard's peers that are in a room
  std::atomic<std::uint64_t> rooms{0};        // rooms with a member anywhere, as this shard sees
  RelayDropCounters drops;
  // Joins, leaves and bans a full ring refused, held and sent again in order (never lost).
  std::atomic<std::uint64_t> control_held{0};
  // Running bans the engine's full ban table let go of to take a new one.
  std::atomic<std::uint64_t> bans_displaced{0};
  // Overload (see the header comment).
  std::atomic<std::uint64_t> reliable_queued{0};      // reliable copies a full ring made wait
  std::atomic<std::uint64_t> overflow{0};             // messages waiting for rings (gauge)
  std::atomic<std::uint64_t> overflow_high_water{0};  // the most that ever waited
  std::atomic<std::uint64_t> backlog_high_water{0};   // the deepest member backlog seen, bytes
  std::atomic<std::uint64_t> holds{0};                // times a member's intake was held
  std::atomic<std::uint64_t> held{0};                 // members held now (gauge)
  std::atomic<std::uint64_t> rooms_held{0};           // rooms held now on this shard (gauge)
  std::atomic<std::uint64_t> slow_consumers{0};       // members disconnected, kSlowConsumer
  std::atomic<std::uint64_t> abusive{0};              // disconnected, kMessageTooLarge
};

// A room's traffic: messages and payload bytes its members sent, copies and bytes the relay sent
// them, summed over the shards. Counted since the room last had a member (a room that empties
// is forgotten, and starts again from zero).
struct RoomTraffic {
  std::uint32_t room = 0;
  std::uint64_t members = 0;
  std::uint64_t messages_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t copies_out = 0;
  std::uint64_t bytes_out = 0;
  void add(const RoomTraffic& o) {
    members += o.members;
    messages_in += o.messages_in;
    bytes_in += o.bytes_in;
    copies_out += o.copies_out;
    bytes_out += o.bytes_out;
  }
};

// One connected client: where it is, and what it sent for relaying since it connected.
struct PeerTraffic {
  Endpoint address;
  std::uint32_t room = 0;
  std::uint32_t shard = 0;
  std::uint64_t messages_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint32_t rtt_ms = 0;
  std::uint64_t backlog = 0;  // bytes queued to it, in flight or unacknowledged
  bool held = false;          // its intake is held (back-pressure)
};

// The busiest rooms and clients, with the rest summed, so /metrics has a bounded number of
// series however many rooms and clients there are.
struct TopTraffic {
  std::vector<RoomTraffic> rooms;  // most bytes_out first
  RoomTraffic other_rooms;         // every other room, summed (room 0)
  std::size_t room_count = 0;
  std::vector<PeerTraffic> talkers;  // most bytes_in first
  PeerTraffic other_talkers;         // every other client, summed
  bool complete = true;              // every shard answered
};

struct BanInfo {
  BanTarget target;
  std::uint64_t remaining_ms = 0;
  bool until_removed = false;  // a bans-file line without seconds
};

class Relay {
 public:
  explicit Relay(const RelayConfig& config);
  ~Relay();
  Relay(const Relay&) = delete;
  Relay& operator=(const Relay&) = delete;

  // Loads the filter rules (if configured) and starts the shards; false with a reason.
  bool start(std::string& error);
  // Compiles the rules file again and swaps it in on every shard; on failure the running
  // rules stay and `error` says why (FILE:LINE, or the rule id, line and Hyperscan's message).
  // Any thread. False also when the relay has no filter (built without Hyperscan, or no
  // rules file configured).
  bool reload_rules(std::string& error);
  bool filtering() const;
  // Graceful: every peer is disconnected and given up to drain_timeout_ms to acknowledge.
  // True when all left in time.
  bool stop();

  // Runs `task` on shard `shard`'s thread between poll iterations (any thread).
  bool post(std::size_t shard, rt::ShardTask task) { return group_.post(shard, std::move(task)); }
  Endpoint local_endpoint() const { return group_.local_endpoint(); }
  // The KCP port ([kcp]); empty without one.
  Endpoint kcp_endpoint() const { return group_.kcp_endpoint(); }
  std::size_t shards() const { return group_.size(); }
  std::string driver_name() const { return group_.driver_name(0); }
  rt::ShardCounters counters(std::size_t shard) const { return group_.counters(shard); }
  rt::ShardCounters total() const { return group_.total(); }
  const RelayShardStats& stats(std::size_t shard) const { return *stats_[shard]; }
  std::uint64_t drops(RelayDrop d) const;
  std::uint64_t messages_in() const;
  std::uint64_t copies_out() const;
  std::uint64_t rooms() const;  // shard 0's view
  // Prometheus text exposition of everything above.
  std::string metrics_text() const;

  // Operations (admin endpoint, traffic metrics). Any thread but the shards': each asks every
  // shard on its own thread (a posted task, so shard state is only ever touched by its shard)
  // and waits up to kAskTimeout for the answers. `complete` is false when a shard did not answer
  // in time (stalled, or the relay is stopping); its part is then missing. Kicks and bans a
  // late shard has not answered still happen when it runs the task.
  static constexpr std::chrono::milliseconds kAskTimeout{1000};
  TopTraffic top_traffic(std::size_t rooms, std::size_t talkers);
  // Prometheus text for top_traffic: per-room and per-client series for the busiest ones
  // only, plus an "other" series each.
  std::string traffic_metrics_text(std::size_t rooms, std::size_t talkers);
  std::vector<RoomTraffic> room_list(bool& complete);  // every room, by room number
  // The clients in `room` (every connected client with none), at most `limit`.
  std::vector<PeerTraffic> peer_list(std::optional<std::uint32_t> room, std::size_t limit,
                                     bool& complete);
  // Disconnects the client at `peer` (address and port) with data kKicked; how many were.
  std::size_t kick(const Endpoint& peer, bool& complete);
  // Bans `target` (an address, any port, or a prefix) for `seconds` (0: until unbanned) in the
  // engine's ban list on every shard: its connected clients are disconnected with data kBanned
  // now, and its handshakes get no answer at all until then. Returns how many were
  // disconnected. A full set of the engine's table forgets its soonest-ending ban
  // (HostConfig::ban_capacity).
  std::size_t ban(const BanTarget& target, std::uint32_t seconds, bool& complete);
  bool unban(const BanTarget& target, bool& complete);  // true if it was banned
  std::vector<BanInfo> bans(bool& complete);
  // Reads [security] bans_file again and applies it (main thread: start-up, SIGHUP). On a bad
  // file the bans stay as they were and `error` says "FILE:LINE: reason".
  bool load_bans_file(std::string& error, std::size_t* kicked);
  bool has_bans_file() const { return !config_.bans_path.empty(); }

 private:
  struct ShardState;

  void on_event(rt::Shard& s, Event& ev);
  void on_message(rt::Shard& s, rt::ShardMessage& m);
  struct Member;
  // KCP members (room_rule "join"): "join:<room>" with the room in decimal, 1..2^32-1.
  static std::optional<std::uint32_t> parse_join(std::span<const std::byte> payload);
  void join_room(rt::Shard& s, Member& m, std::uint32_t room_id);
  void relay_message(rt::Shard& s, Event& ev, Member* m);
  // Membership and bans must reach every shard, in order: what a full ring refuses waits in a
  // per-target queue (and so does everything after it) and is retried every iteration.
  // Reliable copies and control messages wait too; unreliable copies are shed instead.
  void send_control(rt::Shard& s, std::size_t target, rt::ShardMessage message);
  void forward(rt::Shard& s, std::size_t target, rt::ShardMessage message);
  std::uint64_t tick(rt::Shard& s);
  void update_discovery(rt::Shard& s, ShardState& st);
  void drain_overflow(rt::Shard& s);
  // Overload: a room's pressure, its members' holds, slow consumers.
  struct Room;
  void fanned_out(rt::Shard& s, std::uint32_t room_id, Room& room, std::size_t deepest);
  void after_refusals(rt::Shard& s, Room& room, Delivery delivery, std::size_t size,
                      std::size_t refused);
  void set_local_pressure(rt::Shard& s, std::uint32_t room_id, Room& room, bool on);
  static void recheck_later(ShardState& st, std::uint32_t room_id, Room& room);
  void update_room_hold(rt::Shard& s, Room& room);
  void set_hold(rt::Shard& s, Member& m, bool on);
  void recheck_rooms(rt::Shard& s);
  void drop_member(rt::Shard& s, Member& m, std::uint32_t data);
  void leave_room(rt::Shard& s, Member& m);
  std::size_t filter_batch(rt::Shard& s, std::span<rt::RxFrame> frames);
  void share_new_bans(rt::Shard& s);
  std::size_t apply_ban(rt::Shard& s, const BanTarget& target, std::uint64_t until_us);
  void apply_bans_file(std::vector<BanLine> lines, std::size_t* kicked);
  void filter_metrics(std::ostream& o) const;
  void port_metrics(std::ostream& o) const;
  template <class R>
  std::vector<R> ask_shards(std::function<R(rt::Shard&)> question, bool& complete);

  RelayConfig config_;
  rt::ShardGroup group_;
  std::vector<std::unique_ptr<ShardState>> state_;
  std::vector<BanLine> file_bans_;  // the bans file as last applied (main thread)
  std::vector<std::unique_ptr<RelayShardStats>> stats_;
  std::atomic<std::uint64_t> peers_{0};       // connected clients, all shards
  std::atomic<std::uint32_t> join_order_{0};  // orders joins across shards
  PayloadFilter filter_;                      // enabled with rules_path
};

}  // namespace tern::relay
