// The protocol core: retransmission timeouts: lost commands requeued, timed-out peers disconnected.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// enet_protocol_check_timeouts, with one departure: the walk stops at the first command
// still inside its timeout. ENet walks the whole of sent_reliable on every check; under
// load that list holds a window's worth of commands per peer, each check touches all of
// them (cache misses on a linked list): the slower a sender gets, the more it has in flight
// and the costlier each check, a collapse ENet shares. The list is in send order, so
// what lies behind the first live command was sent later; one whose own (smaller) timeout
// has passed is resent when the commands ahead of it expire or are acknowledged, as TCP's
// single retransmission timer would. Nothing on the wire changes.
// True when the peer timed out (and is gone).
inline bool HostCore::Impl::check_timeouts(Peer& p) {
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
  if (insert_after != nullptr) on_retransmission_timeouts(p, q, first_sent_ms);
  rearm_retransmission_timer(q);
  return false;
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

// The retransmission deadline is the front's: the in-flight list is in send order.
inline void HostCore::Impl::rearm_retransmission_timer(PeerQueues& q) {
  if (OutCmd* front = q.sent_reliable.front()) q.next_timeout = front->sent_time_ms + front->rto_ms;
}

}  // namespace tern::proto
