// The protocol core: retransmission timeouts: lost commands requeued, timed-out peers disconnected.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// enet_protocol_check_timeouts, with two departures. The walk stops at the first command
// still inside its timeout. ENet walks the whole of sent_reliable on every check; under
// load that list holds a window's worth of commands per peer, each check touches all of
// them (cache misses on a linked list): the slower a sender gets, the more it has in flight
// and the costlier each check, a collapse ENet shares. The list is in send order with resent
// commands sorted among themselves (insert_by_deadline), so what lies behind the first live
// command is, but for a few, due later. Nothing on the wire changes. And a peer is not given up
// after the attempt limit and the minimum timeout while its datagrams keep arriving (below):
// on a lossy link ENet drops connections that are alive. True when the peer timed out (and
// is gone).
inline bool HostCore::Impl::check_timeouts(Peer& p) {
  PeerQueues& q = queues(p);
  // Not the clock: an ack may wait unread in our input (HostCore::input_read_until).
  const std::uint64_t at_ms = timeout_clock_ms();
  const std::uint64_t first_sent_ms =
      q.sent_reliable.empty() ? 0 : q.sent_reliable.front()->sent_time_ms;
  OutCmd* insert_after = nullptr;
  OutCmd* c = q.sent_reliable.front();
  while (c != nullptr) {
    OutCmd* next = c->next_;
    if (c->sent_time_ms + c->rto_ms > at_ms) break;
    if (q.earliest_timeout == 0 || c->sent_time_ms < q.earliest_timeout) {
      q.earliest_timeout = c->sent_time_ms;
    }
    if (at_ms - q.earliest_timeout >= timeout_maximum(p)) {
      notify_disconnect(p, DisconnectReason::timeout);
      return true;
    }
    if ((std::uint64_t{1} << std::min<std::uint32_t>(c->send_attempts - 1, 62)) >=
            timeout_limit(p) &&
        at_ms - q.earliest_timeout >= timeout_minimum(p)) {
      // ENet gives up here. A peer whose datagrams still arrive is alive and only our
      // commands or its acks are being lost: keep trying (until the maximum) as long as
      // it was heard from since the previous timeout.
      if (!p.heard_since_timeout) {
        notify_disconnect(p, DisconnectReason::timeout);
        return true;
      }
      p.heard_since_timeout = false;
    }
    ++p.packets_lost;
    c->rto_ms = backed_off_rto(p, *c);
    requeue_lost(q, c, insert_after);
    insert_after = c;
    c = next;
  }
  if (insert_after != nullptr) on_retransmission_timeouts(p, q, first_sent_ms);
  rearm_retransmission_timer(q);
  return false;
}

// ENet doubles a command's own timeout at each expiry. One first sent before any RTT sample
// (ENet's 500 ms default) then backs off from that stale value, to 16 s by its sixth try on
// a 10 ms path, and everything it holds up on its channel waits as long. The doubling
// applies to the current estimate instead when that is the smaller. On nodelay's channels
// the factor is 1.5, as KCP's nodelay has it.
inline std::uint32_t HostCore::Impl::backed_off_rto(const Peer& p, const OutCmd& c) const {
  const std::uint64_t current =
      std::max(std::uint32_t{p.rtt} + 4 * std::uint32_t{p.rtt_variance}, config.min_rto_ms);
  const std::uint32_t attempts = std::min<std::uint32_t>(c.send_attempts, 20);
  std::uint64_t grown = std::uint64_t{c.rto_ms} * 2;
  std::uint64_t backed = current << attempts;
  if (nodelay_channel(c.channel_id)) {
    grown = std::uint64_t{c.rto_ms} * 3 / 2 + 1;
    backed = current;
    for (std::uint32_t i = 0; i < attempts; ++i) backed = backed * 3 / 2 + 1;
  }
  return static_cast<std::uint32_t>(std::min({grown, backed, std::uint64_t{UINT32_MAX}}));
}

// A command taken as lost leaves the in-flight list for outgoing_reliable, behind
// `insert_after` (its front when null), so lost commands keep their send order and go out
// before anything queued later. It stays in the unacked index: a late ack still frees it.
inline void HostCore::Impl::requeue_lost(PeerQueues& q, OutCmd* c, OutCmd* insert_after) {
  if (c->has_payload()) q.reliable_data_in_transit -= c->fragment_length;
  q.sent_reliable.remove(c);
  c->in_sent = false;
  q.outgoing_reliable.insert_after(insert_after, c);
}

// In flight, in send order except that a resent command (its timeout doubled) goes behind
// the resent ones due after it. Kept in plain send order, one command resent with a long
// timeout held up every later one behind it whose own timeout had long passed, and a
// connection whose acks were lost a few times went silent for seconds. Commands sent once
// stay in send order (their timeouts differ only as the RTT estimate moves), and the walk
// is bounded: a loss storm's resends cost a few steps per send, never one per command.
inline void HostCore::Impl::insert_by_deadline(PeerQueues& q, OutCmd* c) {
  constexpr int kMaxSteps = 16;
  const std::uint64_t due = c->sent_time_ms + c->rto_ms;
  OutCmd* after = q.sent_reliable.back();
  for (int step = 0; step < kMaxSteps && after != nullptr && after->send_attempts > 1 &&
                     after->sent_time_ms + after->rto_ms > due;
       ++step) {
    after = IntrusiveList<OutCmd>::prev(after);
  }
  q.sent_reliable.insert_after(after, c);
  if (after == nullptr) q.next_timeout = due;
}

// The retransmission deadline is the front's.
inline void HostCore::Impl::rearm_retransmission_timer(PeerQueues& q) {
  if (OutCmd* front = q.sent_reliable.front()) q.next_timeout = front->sent_time_ms + front->rto_ms;
}

}  // namespace tern::proto
