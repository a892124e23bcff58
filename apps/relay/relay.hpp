// tern::relay::Relay: rooms on the sharded runtime.
//
// A client joins the room named by its connect data (0 = none). Every message a member sends
// goes to every other member on the same channel with the same delivery, payload untouched and
// stored once however many copies leave. Members of one room may sit on different shards: each
// shard keeps its own members of every room plus how many each other shard has, learned from
// join/leave messages on the cross-shard rings, and forwards a message once per other shard
// that has members; that shard fans it out to its own. In broadcast rooms only the earliest
// member still present (the streamer) reaches everyone; the others reach the streamer only.
// A forwarded message a full ring refuses is dropped and counted (cross_shard_full), like any
// datagram lost in transit; a join, leave or ban is held and sent again, in order, until the
// ring takes it, since a lost one would leave the shards' views of a room different for good.
#pragma once

#include "config.hpp"
#include "shard.hpp"

#if TERN_RELAY_HAVE_FILTER
#include "filter.hpp"
#endif

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace tern::relay {

#define TERN_RELAY_DROPS(X)                                            \
  X(no_room, "message from a client that joined no room")              \
  X(room_full, "connect refused: the room is at its size limit")       \
  X(peer_limit, "connect refused: the relay is at its peer limit")     \
  X(rate_limited, "message over the per-peer message rate")            \
  X(bandwidth_limited, "message over the per-peer incoming bandwidth") \
  X(too_large, "message larger than limits.message_size")              \
  X(send_failed, "the protocol core refused a copy (queue or state)")  \
  X(cross_shard_full, "a shard's ring to another shard was full")      \
  X(filtered, "message dropped by a payload filter rule (message scope)")

enum class RelayDrop : std::uint8_t {
#define TERN_RELAY_DROP_ENUM(name, text) name,
  TERN_RELAY_DROPS(TERN_RELAY_DROP_ENUM)
#undef TERN_RELAY_DROP_ENUM
      count_
};
inline constexpr std::size_t kRelayDropCount = static_cast<std::size_t>(RelayDrop::count_);
const char* relay_drop_name(RelayDrop d);
const char* relay_drop_help(RelayDrop d);

// Published by each shard (single writer, relaxed), read by /metrics and the summary.
struct RelayShardStats {
  std::atomic<std::uint64_t> messages_in{0};  // accepted from members for relaying
  std::atomic<std::uint64_t> copies_out{0};   // copies handed to the protocol core
  std::atomic<std::uint64_t> members{0};      // this shard's peers that are in a room
  std::atomic<std::uint64_t> rooms{0};        // rooms with a member anywhere, as this shard sees
  std::array<std::atomic<std::uint64_t>, kRelayDropCount> drops{};
  // Joins, leaves and bans a full ring refused, held and sent again in order (never lost).
  std::atomic<std::uint64_t> control_held{0};
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

 private:
  struct ShardState;

  void on_event(rt::Shard& s, Event& ev);
  void on_message(rt::Shard& s, rt::ShardMessage& m);
  // Membership and bans must reach every shard, in order: what a full ring refuses waits in a
  // per-target queue (and so does everything after it) and is retried every iteration.
  void send_control(rt::Shard& s, std::size_t target, rt::ShardMessage message);
  void retry_held(rt::Shard& s);
  std::size_t filter_batch(rt::Shard& s, std::span<rt::RxFrame> frames);
  void share_new_bans(rt::Shard& s);
  void filter_metrics(std::ostream& o) const;
  void port_metrics(std::ostream& o) const;

  RelayConfig config_;
  rt::ShardGroup group_;
  std::vector<std::unique_ptr<ShardState>> state_;
  std::vector<std::unique_ptr<RelayShardStats>> stats_;
  std::atomic<std::uint64_t> peers_{0};       // connected clients, all shards
  std::atomic<std::uint32_t> join_order_{0};  // orders joins across shards
#if TERN_RELAY_HAVE_FILTER
  filter::FilterHub hub_;
  std::vector<std::unique_ptr<filter::ShardFilter>> filters_;  // one per shard
#endif
};

}  // namespace tern::relay
