// The protocol core, extension "fast retransmit" (HostConfig::fast_retransmit, on by default;
// sender side, nothing on the wire: no feature bit, no commands). It reads the ack ledger's
// newest acknowledged send time (PeerQueues::newest_acked_sent_ms); its hook runs once a
// datagram's acks are all taken.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// HostConfig::fast_retransmit. sent_reliable is in send order for commands sent once
// (retransmit.cpp, insert_by_deadline), so the walk ends at the first command sent too recently to
// have been overtaken (a resent one further back waits for its timeout). What it finds goes back to
// the front of outgoing_reliable, in order, as a timeout would put it, but keeps its retransmission
// timeout (the path is delivering) and leaves the congestion window alone.
inline void HostCore::Impl::fast_retransmit_after_acks(Peer& p) {
  if (p.queues == nullptr || !p.queues->newest_acked_moved) return;
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

}  // namespace tern::proto
