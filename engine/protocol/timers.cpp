// The protocol core: each peer's one timer: deadlines, the timing wheel, the next deadline.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint64_t HostCore::Impl::peer_deadline(const Peer& p) const {
  std::uint64_t deadline = kNever;
  if (!p.sent_empty()) {
    deadline = p.queues->next_timeout;
  } else if (p.connected_like()) {
    deadline = ping_due(p);
  }
  if (p.has_acks() && p.queues->acks_due != 0) deadline = std::min(deadline, p.queues->acks_due);
  deadline = std::min(deadline, extension_deadline(p));
  return std::min(deadline, cc_wake_ms(p));
}

// One timer per peer, moved in O(1) whenever its earliest deadline changes.
inline void HostCore::Impl::schedule(Peer& p) {
  if (p.state == PeerState::disconnected) return;
  const std::uint64_t deadline = peer_deadline(p);
  if (deadline == kNever) {
    timers.cancel(p.timer);
  } else if (!base::TimerWheel::scheduled(p.timer) || p.timer.expiry != deadline) {
    p.timer.owner = &p;
    timers.schedule(p.timer, deadline);
  }
}

inline void HostCore::Impl::fire_timers() {
  timers.advance(now_ms, [this](base::TimerNode& node) {
    Peer& p = *static_cast<Peer*>(node.owner);
    p.timer_due = true;
    ++counters.peer_timer_runs;
    mark_dirty(p);
  });
}

inline std::uint64_t HostCore::Impl::next_deadline_us() const {
  if (!events.empty() || !dirty.empty() || !farewells.empty()) return 0;
  std::uint64_t at = kNever;
  at = timers.next_expiry();
  if (config.outgoing_bandwidth != 0 || bandwidth_limited_peers > 0 ||
      (recalculate_bandwidth_limits && config.incoming_bandwidth != 0)) {
    at = std::min<std::uint64_t>(at, bandwidth_throttle_epoch + kBandwidthThrottleInterval);
  }
  return at == kNever ? kNever : at * 1000;
}

// DESIGN §2 step 8, before a peer's datagrams are built: retransmission timeouts (what timed
// out goes back to the front of the queue; a peer past its limits is disconnected) and the
// keep-alive ping of a connection with nothing in flight or waiting. False when the peer timed
// out and is gone.
inline bool HostCore::Impl::run_timers(Peer& p) {
  if (!p.sent_empty() && now_ms >= p.queues->next_timeout) {
    if (timeout_clock_ms() < p.queues->next_timeout) {
      ++counters.timeouts_deferred;
    } else if (check_timeouts(p)) {
      return false;
    }
  }
  if (wants_keepalive_ping(p) && now_ms >= ping_due(p)) {
    queue_keepalive_ping(p);
  }
  return !extension_timers(p);
}

inline void HostCore::Impl::queue_keepalive_ping(Peer& p) {
  Command ping;
  ping.command = static_cast<std::uint8_t>(Cmd::ping) | kFlagAcknowledge;
  queue_system(p, ping);
  ++counters.pings_out;
}

}  // namespace tern::proto
