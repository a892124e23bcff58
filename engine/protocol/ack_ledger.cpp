// The protocol core: acknowledgements: the unacked index, acks received and acks owed.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// Once a channel has wide slots its commands go there first, and its own slots only drain:
// behind a backlog the commands a round trip apart then sit in one table, consecutive, and an
// acknowledgement's lookup reads one line of it for several commands, where taking the own
// slots first spread them over both tables (two lines, often cold, per lookup).
inline void HostCore::Impl::track_unacked(Peer& p, OutCmd* c) {
  if (Channel* ch = command_channel(p, c->channel_id)) {
    if (ch->wide != nullptr) {
      if (ch->wide->claim(c) || ch->unacked.claim(c)) return;
    } else {
      if (ch->unacked.claim(c)) return;
      ch->wide = wide_pool.get();
      ++p.queues->wide_channels;  // c is queued there
      if (ch->wide->claim(c)) return;
    }
  }
  unacked.insert(unacked_key(p, c->channel_id, c->reliable_seq), c);
}

inline void HostCore::Impl::untrack_unacked(Peer& p, OutCmd* c) {
  if (Channel* ch = command_channel(p, c->channel_id)) {
    if (ch->wide != nullptr && ch->wide->release(c)) return;
    if (ch->unacked.release(c)) return;
  }
  unacked.erase(unacked_key(p, c->channel_id, c->reliable_seq));
}

inline OutCmd* HostCore::Impl::find_unacked(const Peer& p, std::uint8_t channel_id,
                                            std::uint16_t seq) const {
  if (const Channel* ch = command_channel(p, channel_id)) {
    if (OutCmd* c = find_in_channel(*ch, seq)) return c;
  }
  return unacked.size() != 0 ? unacked.find(unacked_key(p, channel_id, seq)) : nullptr;
}

// The channel's slots, in the order track_unacked fills them.
inline OutCmd* HostCore::Impl::find_in_channel(const Channel& ch, std::uint16_t seq) {
  if (ch.wide != nullptr) {
    if (OutCmd* c = ch.wide->find(seq)) return c;
  }
  return ch.unacked.find(seq);
}

// enet_protocol_remove_sent_reliable_command
inline Cmd HostCore::Impl::remove_sent_reliable(Peer& p, std::uint16_t seq,
                                                std::uint8_t channel_id) {
  // ENet searches sent_reliable, then the timed-out commands waiting at the front of
  // outgoing_reliable for their resend (they can still be acknowledged): exactly the
  // commands the index holds.
  OutCmd* found = p.queues != nullptr ? find_unacked(p, channel_id, seq) : nullptr;
  return found != nullptr ? remove_acked(p, found) : Cmd::none;
}

// A command found in the unacked index (so p.queues holds it) leaves it, acknowledged.
inline Cmd HostCore::Impl::remove_acked(Peer& p, OutCmd* found) {
  PeerQueues& q = *p.queues;
  const std::uint16_t seq = found->reliable_seq;
  const std::uint8_t channel_id = found->channel_id;
  untrack_unacked(p, found);
  const bool was_sent = found->in_sent;
  if (Channel* ch = command_channel(p, channel_id)) {
    const std::uint16_t w = seq_window(seq);
    if (ch->reliable_windows[w] > 0) {
      --ch->reliable_windows[w];
      if (ch->reliable_windows[w] == 0)
        ch->used_reliable_windows &= static_cast<std::uint16_t>(~(1u << w));
    }
  }
  const Cmd type = found->type();
  if (was_sent) {
    q.sent_reliable.remove(found);
    if (found->has_payload()) q.reliable_data_in_transit -= found->fragment_length;
    if (found->send_attempts == 1) {
      if (q.fresh_acks < UINT16_MAX) ++q.fresh_acks;
      if (found->sent_time_ms > q.newest_acked_sent_ms) {
        q.newest_acked_sent_ms = found->sent_time_ms;
        q.newest_acked_moved = true;
      }
    }
    on_reliable_acked(p, q, *found);
  } else {
    // A resend waiting (never express_tail: that one was never sent, so never acknowledged).
    assert(found != q.express_tail);
    q.outgoing_reliable.remove(found);
  }
  if (found->receipt) receipt_acked(p, *found);
  put_out(q, found);
  rearm_retransmission_timer(q);
  return type;
}

inline Handled HostCore::Impl::handle_acknowledge(Peer& p, const Command& cmd) {
  if (p.state == PeerState::disconnected || p.state == PeerState::zombie) return Handled::ok;
  // A late ack of another VERIFY_CONNECT (or probe) of this connection's handshake: its sent
  // time was a cookie, not a time (handshake.cpp). After 65,535 system commands, sequence 1
  // is in flight again and its ack is taken as any other.
  if (config.verify_before_peer && p.accepted && cmd.channel_id == kSystemChannel &&
      cmd.ack.received_reliable_seq == 1 && find_unacked(p, kSystemChannel, 1) == nullptr) {
    return Handled::ok;
  }
  if (!take_rtt_sample(p, cmd.ack.received_sent_time)) return Handled::ok;
  const Cmd acked = remove_sent_reliable(p, cmd.ack.received_reliable_seq, cmd.channel_id);
  if (acked == Cmd::none) counters.drops.add(Drop::unexpected_ack);
  switch (p.state) {
    case PeerState::acknowledging_connect:
      if (acked != Cmd::verify_connect) return Handled::stop;
      notify_connect(p);
      break;
    case PeerState::disconnecting:
      if (acked != Cmd::disconnect) return Handled::stop;
      notify_disconnect(p, DisconnectReason::local);
      break;
    case PeerState::disconnect_later:
      if (!p.has_outgoing()) start_disconnect(p, p.event_data);
      break;
    default: break;
  }
  return Handled::ok;
}

// enet_peer_queue_acknowledgement
inline void HostCore::Impl::queue_ack(Peer& p, const Command& cmd, std::uint16_t sent_time) {
  if (cmd.channel_id < p.channel_count) {
    const Channel* ch = channel_if(p, cmd.channel_id);
    const std::uint16_t in_reliable_seq = ch != nullptr ? ch->in_reliable_seq : 0;
    std::uint32_t window = seq_window(cmd.reliable_seq);
    const std::uint32_t current = seq_window(in_reliable_seq);
    if (cmd.reliable_seq < in_reliable_seq) window += kReliableWindows;
    // Commands that far ahead were discarded; acknowledging them would lose them for good.
    if (window >= current + kFreeReliableWindows - 1 && window <= current + kFreeReliableWindows) {
      return;
    }
  }
  PeerQueues& q = queues(p);
  AckChunk* chunk = q.acks.back();
  const bool ranged = acks_in_ranges(p, cmd);
  if (ranged && chunk != nullptr && fold_into_range(*chunk, cmd)) return;
  if (ranged && chunk != nullptr && fold_behind_range(p, *chunk, cmd, sent_time)) return;
  p.outgoing_data_total += ranged ? kAckRangeSize : kAcknowledgeSize;
  if (chunk == nullptr || chunk->end == AckChunk::kCapacity) {
    chunk = ack_pool.get();
    q.acks.push_back(chunk);
  }
  chunk->acks[chunk->end++] = PendingAck{
      cmd.reliable_seq, sent_time, cmd.channel_id, cmd.type() == Cmd::disconnect, ranged, 0};
}

inline void HostCore::Impl::write_acks(Peer& p, Build& b) {
  PeerQueues& q = queues(p);
  while (AckChunk* chunk = q.acks.front()) {
    for (; chunk->begin < chunk->end; ++chunk->begin) {
      const PendingAck& a = chunk->acks[chunk->begin];
      if (room(b) < (a.is_range ? kAckRangeSize : kAcknowledgeSize)) {
        b.more = true;
        return;
      }
      Command cmd;
      cmd.channel_id = a.channel;
      cmd.reliable_seq = a.reliable_seq;
      if (a.is_range) {
        cmd.command = static_cast<std::uint8_t>(Cmd::ack_range);
        cmd.ack_range.received_sent_time = a.sent_time;
        cmd.ack_range.bits = a.bits;
      } else {
        cmd.command = static_cast<std::uint8_t>(Cmd::acknowledge);
        cmd.ack.received_reliable_seq = a.reliable_seq;
        cmd.ack.received_sent_time = a.sent_time;
      }
      put_command(b, cmd, {});
      ++counters.acks_out;
      if (a.is_range) on_range_written(p, a);
      if (a.is_disconnect) b.zombie_after = true;
    }
    q.acks.remove(chunk);
    ack_pool.put(chunk);
  }
}

}  // namespace tern::proto
