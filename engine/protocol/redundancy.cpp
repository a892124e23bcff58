// The protocol core, extension "redundancy" (HostConfig::redundancy, off by default; WIRE.md,
// "Extensions"): a datagram to a peer that agreed carries again the last K reliable commands
// still unacknowledged, and the ack ranges of the last datagrams, so one lost datagram costs
// neither a retransmission timeout nor an acknowledgement. The copies keep their sequence
// numbers: the receiver takes them as ENet takes any duplicate (acknowledged, not delivered
// again). K follows the loss the connection measures and the copies are paid from a credit
// that only the datagrams' own bytes earn, so they never exceed the configured share of them.
// Negotiated with kFeatureRedundancy: a plain ENet peer never gets a copy.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::redundancy_offered() const {
  return config.redundancy ? kFeatureRedundancy : 0;
}

inline std::uint32_t HostCore::Impl::redundancy_agreed(const Peer& p) const {
  return p.redundancy ? kFeatureRedundancy : 0;
}

// Both sides must want it: the copies cost the receiver's bandwidth as well as ours.
inline void HostCore::Impl::redundancy_on_agreed(Peer& p, std::uint32_t agreed) {
  p.redundancy = config.redundancy && (agreed & kFeatureRedundancy) != 0;
  if (p.redundancy) extra(p);  // its state lives there
}

// One sample of the loss estimate: did a command's first copy arrive? A moving average with
// a gain of 1/32, so one loss among 32 clean samples reads about 3%.
inline void HostCore::Impl::redundancy_sample(Peer& p, bool lost) {
  if (!p.redundancy) return;
  PeerExtra& e = *p.extra;  // taken when agreed
  const std::uint32_t l = e.redundancy_loss;
  e.redundancy_loss = static_cast<std::uint16_t>(lost ? l + (0xFFFFu - l) / 32 : l - l / 32);
}

inline std::uint32_t HostCore::Impl::redundancy_loss(const Peer& p) {
  return p.redundancy && p.extra != nullptr ? p.extra->redundancy_loss : 0;
}

// More copies than this would not fit the budget anyway (each costs about what its datagram
// earned), and the rule's loop runs once per datagram.
inline constexpr std::uint32_t kRedundancyMaxK = 8;

// Copies per command: the fewest for which a command is lost (all of its copies lost, each
// with the measured probability) less than once in a thousand. Below 1% measured loss, none:
// a clean path pays nothing.
inline std::uint32_t HostCore::Impl::redundancy_k(const Peer& p) const {
  const std::uint32_t loss = redundancy_loss(p);
  if (loss < kPacketLossScale / 100) return 0;
  std::uint32_t k = 0;
  std::uint32_t residual = loss;
  const std::uint32_t max_k = std::min(config.redundancy_max_k, kRedundancyMaxK);
  while (residual > kPacketLossScale / 1000 && k < max_k) {
    residual = static_cast<std::uint32_t>((std::uint64_t{residual} * loss) >> 16);
    ++k;
  }
  return k;
}

// A reliable command arrived on an application channel (receive.cpp): the first past a gap
// shows the commands in the gap lost on the way (or overtaken), one sample each, capped so a
// reordered burst does not read as total loss.
inline void HostCore::Impl::redundancy_on_reliable_arrival(Peer& p, std::uint16_t gap) {
  if (!p.redundancy) return;
  for (std::uint16_t i = 0; i < std::min<std::uint16_t>(gap, 4); ++i) redundancy_sample(p, true);
  redundancy_sample(p, false);
}

// An ack range names `c` as its base: the range's sent time is that of the datagram that
// carried the copy that arrived. If that is not the datagram of the command's first copy (or
// the command had to be resent), the first copy was lost.
inline void HostCore::Impl::redundancy_on_base_acked(Peer& p, const OutCmd& c,
                                                     std::uint16_t echoed) {
  if (!p.redundancy) return;
  redundancy_sample(p, c.send_attempts > 1 || static_cast<std::uint16_t>(c.sent_time_ms) != echoed);
}

// A datagram carries its new commands, then the copies of older ones, so its acks come as a
// range of the new ones followed by the copies, just behind that range's base. They join it
// (the base moves back) when they came in the same datagram: the range's sent time is theirs
// too, and the sender's loss sample from the base stays exact. Without this each datagram
// with copies cost the receiver one more range.
inline bool HostCore::Impl::redundancy_fold_behind(const Peer& p, AckChunk& chunk,
                                                   const Command& cmd, std::uint16_t sent_time) {
  if (!p.redundancy || chunk.end == chunk.begin) return false;
  PendingAck& last = chunk.acks[chunk.end - 1];
  if (!last.is_range || last.channel != cmd.channel_id || last.sent_time != sent_time) {
    return false;
  }
  const auto behind = static_cast<std::uint16_t>(last.reliable_seq - cmd.reliable_seq);
  if (behind == 0 || behind >= kAckRangeSpan) return false;
  if (behind < 32 && (last.bits >> (32 - behind)) != 0) return false;  // the span would overflow
  last.bits = (behind < 32 ? last.bits << behind : 0) | (1u << (behind - 1));
  last.reliable_seq = cmd.reliable_seq;
  return true;
}

// An ack range was written (ack_ledger.cpp): kept to ride in the next datagrams, if the
// connection sees loss.
inline void HostCore::Impl::redundancy_on_range_written(Peer& p, const PendingAck& a) {
  if (config.redundancy_ack_repeats == 0 || redundancy_k(p) == 0 ||
      channel_off(config.channels.no_redundancy, a.channel)) {
    return;
  }
  PeerQueues& q = *p.queues;  // acks are written from there
  const std::size_t slot = q.repeat_left[0] <= q.repeat_left[1] ? 0 : 1;
  q.repeat_acks[slot] = a;
  q.repeat_left[slot] =
      static_cast<std::uint8_t>(std::min<std::uint32_t>(config.redundancy_ack_repeats, 254) + 1);
}

// The datagram's own commands are written: the credit earns its share of them, then the
// extras it can pay for go after them (repeated ranges first: they are small and free what
// the peer would otherwise resend).
// A receiver that only acknowledges would return its queues block after each datagram of
// acks, and with it the ranges still to repeat: it keeps the block until they have ridden
// (in the datagrams of its next acks, or its next ping).
inline bool HostCore::Impl::redundancy_holds_queues(const PeerQueues& q) {
  return (q.repeat_left[0] | q.repeat_left[1]) != 0 || !q.unreliable_copies.empty();
}

// Unreliable messages keep at most this many for copies: the newest matter, an older copy
// would mostly arrive behind a newer message and be dropped as late.
inline constexpr std::size_t kUnreliableCopiesKept = 8;

// An unreliable or unsequenced message (whole, not a fragment) just written is kept for K
// later datagrams. The receiver drops the extra copies by ENet's rules: an unreliable copy
// is not newer than what its channel delivered (or is already held, or sequenced behind a
// reliable message delivered since), an unsequenced one is already in the window.
inline bool HostCore::Impl::redundancy_keep_unreliable(Peer& p, PeerQueues& q, OutCmd* c) {
  if (!p.redundancy || !p.connected_like() || !c->has_payload() ||
      channel_off(config.channels.no_redundancy, c->channel_id)) {
    return false;
  }
  const Cmd type = c->type();
  if (type != Cmd::send_unreliable && type != Cmd::send_unsequenced) return false;
  const std::uint32_t k = redundancy_k(p);
  if (k == 0) return false;
  c->send_attempts = static_cast<std::uint16_t>(k);
  c->sent_time_ms = now_ms;
  q.unreliable_copies.push_back(c);
  if (q.unreliable_copies.size() > kUnreliableCopiesKept) {
    put_out(q, q.unreliable_copies.pop_front());
  }
  return true;
}

// The kept unreliable messages, newest first, each once per datagram until its copies are
// spent; all let go once the path is clean.
inline void HostCore::Impl::redundancy_unreliable_copies(PeerQueues& q, Build& b, std::uint32_t k,
                                                         std::uint16_t& credit_left) {
  OutCmd* c = q.unreliable_copies.back();
  while (c != nullptr) {
    OutCmd* older = q.unreliable_copies.prev(c);
    if (k == 0) {
      q.unreliable_copies.remove(c);
      put_out(q, c);
    } else if (c->sent_time_ms != now_ms) {
      const std::size_t size = c->wire_size();
      if (size > credit_left || room(b) < size) break;
      put_queued(b, *c);
      credit_left = static_cast<std::uint16_t>(credit_left - size);
      ++counters.redundant_sent;
      ++counters.redundant_unreliable_sent;
      if (--c->send_attempts == 0) {
        q.unreliable_copies.remove(c);
        put_out(q, c);
      }
    }
    c = older;
  }
}

// The budget, percent: redundancy_budget_percent while the loss estimate is below 5%, rising
// linearly to redundancy_high_loss_budget_percent (by default the same: a flat budget) at 20%.
// At heavy loss a message whose datagram and copy are both lost waits a round trip for its
// resend, and one resend in five is lost again: a 30% budget pays for a copy of about one
// message in four, and the p99 is the second resend's. Not the default: the estimate counts
// an ack of a copy as a loss of the original, so more copies read as more loss, and at 5%
// random loss each way the budget climbs too (perf/JOURNAL.md: 1.40x libenet's bytes).
inline std::uint32_t HostCore::Impl::redundancy_budget(const Peer& p) const {
  const std::uint32_t low = std::min<std::uint32_t>(config.redundancy_budget_percent, 100);
  const std::uint32_t high =
      std::clamp<std::uint32_t>(config.redundancy_high_loss_budget_percent, low, 100);
  const std::uint32_t loss = redundancy_loss(p);
  constexpr std::uint32_t kFrom = kPacketLossScale * 5 / 100, kTo = kPacketLossScale * 20 / 100;
  if (loss <= kFrom || high == low) return low;
  if (loss >= kTo) return high;
  return low + (high - low) * (loss - kFrom) / (kTo - kFrom);
}

inline void HostCore::Impl::redundancy_extras(Peer& p, Build& b) {
  if (!p.redundancy || p.queues == nullptr || !p.connected_like()) return;
  PeerQueues& q = *p.queues;
  std::uint16_t& credit_left = extra(p).redundancy_credit;  // extra: taken when agreed
  // Nine tenths of the budget: the rest is kept for what the copies cost the other side
  // beyond the acks charged to them (a datagram of acks for a copy that arrived alone).
  const std::uint32_t own = static_cast<std::uint32_t>(b.pos - kMaxHeaderSize + 4);
  const std::uint32_t credit = credit_left + own * redundancy_budget(p) * 9 / 1000;
  credit_left = static_cast<std::uint16_t>(std::min<std::uint32_t>(credit, p.mtu));
  const std::uint32_t k = redundancy_k(p);
  for (std::size_t i = 0; i < q.repeat_acks.size(); ++i) {
    if (q.repeat_left[i] == 0) continue;
    if (k == 0) {
      q.repeat_left[i] = 0;  // the path turned clean: the first copy is enough
      continue;
    }
    if (q.repeat_left[i] > config.redundancy_ack_repeats) {  // written in this very datagram
      --q.repeat_left[i];
      continue;
    }
    if (room(b) < kAckRangeSize || credit_left < kAckRangeSize) break;
    const PendingAck& a = q.repeat_acks[i];
    Command cmd;
    // The unsequenced flag marks a repeat: its sent time is old, so the sender takes no RTT
    // sample from it and does not count what it names again as unexpected.
    cmd.command = static_cast<std::uint8_t>(Cmd::ack_range) | kFlagUnsequenced;
    cmd.channel_id = a.channel;
    cmd.reliable_seq = a.reliable_seq;
    cmd.ack_range.received_sent_time = a.sent_time;
    cmd.ack_range.bits = a.bits;
    put_command(b, cmd, {});
    credit_left = static_cast<std::uint16_t>(credit_left - kAckRangeSize);
    --q.repeat_left[i];
    ++counters.acks_repeated;
  }
  redundancy_unreliable_copies(q, b, k, credit_left);
  if (k == 0) return;
  // The newest commands in flight, newest first: the in-flight list is ordered by deadline,
  // which follows send order but for commands whose timeout grew; those were resent already.
  // Bounded: behind a backlog sent in this very millisecond the walk stops early.
  std::uint32_t copies = 0;
  std::uint32_t looked = 0;
  for (OutCmd* c = q.sent_reliable.back(); c != nullptr && copies < k && looked < k + 16;
       c = q.sent_reliable.prev(c), ++looked) {
    if (c->sent_time_ms == now_ms || !c->has_payload()) continue;  // just sent, or a system one
    if (channel_off(config.channels.no_redundancy, c->channel_id)) continue;
    const std::size_t size = c->wire_size();
    // A copy is paid with the ack it may draw from the receiver as well: a copy that arrives
    // alone, or behind another range, costs the receiver a range of its own.
    if (size + kAckRangeSize > credit_left) break;
    if (room(b) < size) break;
    put_queued(b, *c);
    b.sent_time = true;  // the receiver acknowledges the copy with this datagram's sent time
    credit_left = static_cast<std::uint16_t>(credit_left - size - kAckRangeSize);
    ++copies;
    ++counters.redundant_sent;
  }
}

}  // namespace tern::proto
