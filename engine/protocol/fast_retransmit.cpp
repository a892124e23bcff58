// The protocol core, extension "fast retransmit" (HostConfig::fast_retransmit, on by default;
// sender side, nothing on the wire: no feature bit, no commands). It reads the ack ledger's
// newest acknowledged send time (PeerQueues::newest_acked_sent_ms); its hook runs once a
// datagram's acks are all taken.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// HostConfig::fast_retransmit. sent_reliable is in send order for commands sent once
// (retransmit.cpp, insert_by_deadline), so the walk ends at the first command sent no earlier
// than the newest acknowledged one; of those before it, one sent more than the margin earlier was
// overtaken. What it finds goes back to the front of outgoing_reliable, in order, as a timeout
// would put it, but keeps its retransmission timeout (the path is delivering) and leaves the
// congestion window alone. On nodelay's channels (nodelay.cpp) the rule is KCP's count of later
// acknowledgements instead of the time margin; on a channel whose switch is off
// (HostConfig::channels) neither rule: its losses wait for their timeout.
inline void HostCore::Impl::fast_retransmit_after_acks(Peer& p) {
  if (p.queues == nullptr) return;
  PeerQueues& q = *p.queues;
  const std::uint16_t fresh_acks = q.fresh_acks;
  q.fresh_acks = 0;
  if (!q.newest_acked_moved && (fresh_acks == 0 || !config.nodelay)) return;
  q.newest_acked_moved = false;
  const bool time_rule = config.fast_retransmit;
  if (!time_rule && !config.nodelay) return;
  const std::uint64_t margin = std::max<std::uint32_t>(p.rtt / 4, 1);
  OutCmd* insert_after = nullptr;
  OutCmd* c = q.sent_reliable.front();
  while (c != nullptr && c->sent_time_ms < q.newest_acked_sent_ms) {
    OutCmd* next = c->next_;
    bool lost = false;
    if (nodelay_resend_rule(c->channel_id)) {
      c->later_acks = static_cast<std::uint8_t>(
          std::min<std::uint32_t>(std::uint32_t{c->later_acks} + fresh_acks, UINT8_MAX));
      lost = c->later_acks >= config.nodelay_resend;
      if (lost) ++counters.nodelay_resends;
    } else {
      lost = time_rule && c->sent_time_ms + margin < q.newest_acked_sent_ms &&
             !channel_off(config.channels.no_fast_retransmit, c->channel_id);
    }
    if (lost) {
      c->later_acks = 0;
      ++p.packets_lost;
      ++counters.fast_retransmits;
      requeue_lost(q, c, insert_after);
      insert_after = c;
    }
    c = next;
  }
  if (insert_after != nullptr) rearm_retransmission_timer(q);
}

}  // namespace tern::proto
