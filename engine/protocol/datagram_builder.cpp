// The protocol core: one datagram for a peer: acks, reliable and unreliable commands inside the
// windows, header, checksum. Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline void HostCore::Impl::put_command(Build& b, const Command& cmd,
                                        std::span<const std::byte> payload) {
  std::span<std::byte> out(b.dg->bytes.data() + b.pos, b.limit - b.pos);
  const std::size_t n = encode_command(out, cmd);
  b.pos += n;
  if (!payload.empty()) {
    std::memcpy(b.dg->bytes.data() + b.pos, payload.data(), payload.size());
    b.pos += payload.size();
  }
  ++b.commands;
}

// The wire command a queued one stands for (see OutCmd).
inline Command HostCore::Impl::wire_command(const OutCmd& c) {
  Command cmd;
  cmd.command = c.command;
  cmd.channel_id = c.channel_id;
  cmd.reliable_seq = c.reliable_seq;
  switch (c.type()) {
    case Cmd::disconnect: cmd.disconnect.data = c.body; break;
    case Cmd::send_reliable: cmd.reliable.data_length = c.fragment_length; break;
    case Cmd::send_unreliable:
      cmd.unreliable.unreliable_seq = c.unreliable_seq;
      cmd.unreliable.data_length = c.fragment_length;
      break;
    case Cmd::send_unsequenced:
      cmd.unsequenced.unsequenced_group = static_cast<std::uint16_t>(c.body);
      cmd.unsequenced.data_length = c.fragment_length;
      break;
    case Cmd::send_fragment:
    case Cmd::send_unreliable_fragment: {
      const std::uint32_t total = static_cast<std::uint32_t>(c.packet.size());
      const std::uint32_t full_length = c.body >> 16;
      cmd.fragment.start_seq = static_cast<std::uint16_t>(c.body);
      cmd.fragment.data_length = c.fragment_length;
      cmd.fragment.fragment_count = (total + full_length - 1) / full_length;
      cmd.fragment.fragment_number = c.fragment_offset / full_length;
      cmd.fragment.total_length = total;
      cmd.fragment.fragment_offset = c.fragment_offset;
      break;
    }
    default: break;
  }
  return cmd;
}

inline void HostCore::Impl::put_queued(Build& b, const OutCmd& c) {
  if (c.encoded) {
    std::memcpy(b.dg->bytes.data() + b.pos, c.packet.bytes().data(), c.packet.size());
    b.pos += c.packet.size();
    ++b.commands;
    return;
  }
  put_command(b, wire_command(c),
              c.packet ? c.packet.bytes().subspan(c.fragment_offset, c.fragment_length)
                       : std::span<const std::byte>());
}

// A command cut for a larger MTU than the connection has now (path MTU discovery lowered
// it) fits no datagram of the current size: it goes alone, in a datagram made as large as it
// needs, rather than waiting forever.
inline bool HostCore::Impl::fit_oversize(Build& b, const OutCmd& c) const {
  if (b.commands != 0 || kMaxHeaderSize + c.wire_size() <= b.limit) return false;
  if (b.pos + c.wire_size() > kMaxHeaderSize + kMaxMtu - header_size(true, config.checksum)) {
    return false;
  }
  b.limit = b.pos + c.wire_size();
  return true;
}

// Behind a backlog the queue is cold and walking it is a chain of misses, and each command's
// payload (taken from a receive buffer hundreds of messages ago) is one more. `next` was asked
// for while the command before this one was written, so it is read now: the command after it
// and the payload of `next` are asked for while this one is written.
inline void HostCore::Impl::prefetch_behind(const OutCmd* next) {
  if (next == nullptr) return;
  if (const OutCmd* after = IntrusiveList<OutCmd>::next(next)) detail::prefetch_line(after);
  // An encoded command's size is the packet's own: 64 bytes stand for it, as they cover all
  // four such commands.
  if (next->encoded) return next->packet.prefetch_payload(0, 64);
  next->packet.prefetch_payload(next->fragment_offset, next->fragment_length);
}

// A reliable command, if the reliable windows and the throttled send window allow it.
inline HostCore::Impl::Wrote HostCore::Impl::write_reliable_one(Peer& p, Build& b, OutCmd* c) {
  PeerQueues& q = *p.queues;  // c is queued there
  prefetch_behind(q.outgoing_reliable.next(c));
  Channel* ch = command_channel(p, c->channel_id);
  const std::uint16_t w = seq_window(c->reliable_seq);
  if (ch != nullptr && c->send_attempts < 1 && c->reliable_seq % kReliableWindowSize == 0) {
    const std::uint32_t span_mask = (1u << (kFreeReliableWindows + 2)) - 1;
    const std::uint32_t blocked_windows = (span_mask << w) | (span_mask >> (kReliableWindows - w));
    if (ch->reliable_windows[(w + kReliableWindows - 1) % kReliableWindows] >=
            kReliableWindowSize ||
        (ch->used_reliable_windows & blocked_windows) != 0) {
      return Wrote::blocked;  // the receiver may still hold the window we would reuse
    }
  }
  // Congestion control replaces ENet's window and throttle for bulk; express messages pass.
  const bool cc = c->has_payload() && cc_channel(p, c->channel_id);
  const bool paced = cc && !c->express;
  if (paced) {
    if (!cc_allows(p, q, *c)) return Wrote::blocked;
  } else if (c->has_payload() && !cc) {
    const std::uint32_t throttled = config.throttle_reliable_window && !config.nodelay
                                        ? (p.packet_throttle * p.window_size) / kPacketThrottleScale
                                        : p.window_size;
    std::uint32_t window = std::max<std::uint32_t>(
        std::min(throttled, extension_send_window(q, c->channel_id)), p.mtu);
    if (c->priority == Priority::low) window = low_priority_window(p, window);
    if (q.reliable_data_in_transit + c->fragment_length > window) {
      return Wrote::blocked;
    }
  }
  if (room(b) < c->wire_size() && !fit_oversize(b, *c)) return Wrote::full;
  if (paced) {
    cc_paced_sent(p, *c);
    b.paced = true;
    if (c->send_attempts == 0 && ch != nullptr && ch->bulk_unsent > 0) --ch->bulk_unsent;
  }
  if (ch != nullptr && c->send_attempts < 1) {
    ch->used_reliable_windows |= static_cast<std::uint16_t>(1u << w);
    ++ch->reliable_windows[w];
    ch->out_reliable_sent = c->reliable_seq;
  }
  if (c->send_attempts == 0) {
    if (order_before(q.order_floor, c->queue_order)) q.order_floor = c->queue_order;
    track_unacked(p, c);
  } else {
    // Counted when it goes out again, not when its timeout passes: with the congestion
    // window, an acknowledgement of the original often arrives before the resend.
    ++counters.retransmits;
    count(p, kReliableRetransmits, 1);
  }
  ++c->send_attempts;
  if (c->rto_ms == 0) {
    c->rto_ms =
        std::max(std::uint32_t{p.rtt} + 4 * std::uint32_t{p.rtt_variance}, config.min_rto_ms);
  }
  q.outgoing_reliable.remove(c);
  if (c == q.express_tail) q.express_tail = nullptr;  // it was the front: none left behind it
  c->sent_time_ms = now_ms;
  insert_by_deadline(q, c);
  c->in_sent = true;
  b.sent_time = true;
  q.reliable_data_in_transit += c->fragment_length;
  ++p.packets_sent;
  put_queued(b, *c);
  return Wrote::sent;
}

inline HostCore::Impl::Wrote HostCore::Impl::write_unreliable_one(Peer& p, Build& b, OutCmd* c) {
  PeerQueues& q = *p.queues;  // c is queued there
  prefetch_behind(q.outgoing_unreliable.next(c));
  if (c->has_payload() && c->fragment_offset == 0) {
    p.packet_throttle_counter = static_cast<std::uint8_t>(
        (p.packet_throttle_counter + kPacketThrottleCounter) % kPacketThrottleScale);
    if (p.packet_throttle_counter > p.packet_throttle) {
      // The throttle drops the whole message: this command and the rest of its fragments.
      const std::uint16_t rseq = c->reliable_seq;
      const std::uint16_t useq = c->unreliable_seq;
      counters.drops.add(Drop::throttled);
      do {
        q.outgoing_unreliable.remove(c);
        put_out(q, c);
        c = q.outgoing_unreliable.front();
      } while (c != nullptr && c->fragment_offset != 0 && c->reliable_seq == rseq &&
               c->unreliable_seq == useq);
      return Wrote::dropped;
    }
  }
  if (room(b) < c->wire_size() && !fit_oversize(b, *c)) return Wrote::full;
  q.outgoing_unreliable.remove(c);
  if (order_before(q.order_floor, c->queue_order)) q.order_floor = c->queue_order;
  put_queued(b, *c);
  if (!keep_unreliable_copy(p, q, c)) put_out(q, c);
  return Wrote::sent;
}

// Priorities: a low-priority (bulk) command leaves two MTUs of the reliable window to the
// other levels, so a message of a higher one queued behind a full window of bulk goes out in
// the next datagram instead of waiting for acknowledgements. Never below one MTU, so bulk
// still moves when the window is that small (the others then share it with it).
inline std::uint32_t HostCore::Impl::low_priority_window(const Peer& p, std::uint32_t window) {
  const std::uint32_t reserve = 2 * std::uint32_t{p.mtu};
  return window > reserve + p.mtu ? window - reserve : p.mtu;
}

// An unreliable message sequenced behind a reliable one that has not been transmitted yet
// must wait for it: an ENet receiver that gets it first holds it and then, releasing a run
// of reliable messages at once, discards it as late.
inline bool HostCore::Impl::waits_for_reliable(const Peer& p, const OutCmd* u) const {
  if (u->channel_id >= p.channel_count || u->unsequenced_flag()) return false;
  const Channel* ch = channel_if(p, u->channel_id);  // never null: u was queued on it
  const std::uint16_t d = ahead(u->reliable_seq, ch != nullptr ? ch->out_reliable_sent : 0);
  return d != 0 && d < 0x8000;
}

// Outgoing commands in the order they were queued (retransmissions first, since they are
// older). Once the reliable side is blocked by its windows, unreliable traffic still flows,
// except what is sequenced behind a reliable message still waiting.
inline void HostCore::Impl::write_commands(Peer& p, Build& b) {
  if (p.queues == nullptr) return;
  PeerQueues& q = *p.queues;
  CongestionState* cc = cc_model(p);
  if (cc != nullptr) {
    cc->pace_waiting = false;  // set again if the pacer holds bulk back
    // Out of bulk to send: this round's delivery rate says what the application offered.
    if (q.outgoing_reliable.empty()) cc->round_app_limited = true;
  }
  bool reliable_blocked = false;
  while (true) {
    OutCmd* r = reliable_blocked ? nullptr : q.outgoing_reliable.front();
    OutCmd* u = q.outgoing_unreliable.front();
    if (u != nullptr && reliable_blocked && waits_for_reliable(p, u)) u = nullptr;
    if (r == nullptr && u == nullptr) {
      if (cc != nullptr && q.outgoing_reliable.empty()) cc->round_app_limited = true;
      return;
    }
    Wrote w;
    if (r != nullptr && (u == nullptr || order_before(r->queue_order, u->queue_order))) {
      w = write_reliable_one(p, b, r);
      if (w == Wrote::blocked) reliable_blocked = true;
    } else {
      w = write_unreliable_one(p, b, u);
    }
    if (w == Wrote::full) {
      b.more = true;
      return;
    }
  }
}

// One datagram for the peer (enet_protocol_send_outgoing_commands, one iteration). Returns
// true if a datagram was written; `more` says whether another one is ready to go.
inline bool HostCore::Impl::build_datagram(Peer& p, OutDatagram& dg, bool& more) {
  more = false;
  Build b{&dg, kMaxHeaderSize, kMaxHeaderSize + p.mtu - header_size(true, config.checksum)};
  if (p.has_acks()) write_acks(p, b);
  if (p.queues != nullptr && !p.has_acks()) p.queues->acks_due = 0;
  write_commands(p, b);
  if (p.state == PeerState::disconnect_later && !p.has_outgoing()) {
    start_disconnect(p, p.event_data);
    write_commands(p, b);
  }
  if (p.state == PeerState::connected || p.state == PeerState::disconnect_later) {
    extension_commands(p, b);
  }
  if (b.commands == 0) return false;
  extension_extras(p, b);
  // The hello goes last: a plain ENet peer stops reading at it, after the handshake command.
  if (((p.state == PeerState::connecting && p.hello_offered) ||
       (p.state == PeerState::acknowledging_connect && p.hello_agreed)) &&
      room(b) >= kHelloSize) {
    Command hello;
    hello.command = static_cast<std::uint8_t>(Cmd::tern_hello);
    hello.channel_id = kSystemChannel;
    // The client offers what it has; the server answers with what both have.
    hello.hello.features = p.state == PeerState::connecting ? local_features() : agreed_features(p);
    put_command(b, hello, {});
  }
  if (p.secure && p.state == PeerState::connecting) put_secure_token(p, b);
  update_packet_loss(p);
  if (b.paced) ++counters.paced_datagrams;

  // Lay the header down right before the commands (2, 4, 6 or 8 bytes).
  const std::size_t hsize = header_size(b.sent_time, config.checksum);
  const std::size_t start = kMaxHeaderSize - hsize;
  Header h;
  h.peer_id = p.outgoing_peer_id;
  h.session = p.outgoing_session;
  h.has_sent_time = b.sent_time;
  h.sent_time = static_cast<std::uint16_t>(now_ms & 0xFFFF);
  encode_header(std::span<std::byte>(dg.bytes.data() + start, hsize), h, config.checksum);
  std::size_t total = b.pos - start;
  if (config.checksum) {
    write_checksum(std::span<std::byte>(dg.bytes.data() + start, total), hsize - 4,
                   p.outgoing_peer_id < kMaxPeerId ? p.connect_id : 0);
  }
  if (p.secure && p.extra->secure->sealing && !seal_out(p, dg, start, hsize, total)) {
    // The sequence numbers ran out: the connection ends rather than reuse one.
    if (p.app_knows) emit_disconnect(p, DisconnectReason::refused, 0);
    reset_peer(p);
    return false;
  }
  dg.offset = static_cast<std::uint32_t>(start);
  dg.size = static_cast<std::uint32_t>(total);
  dg.to = p.address;
  count(p, kDatagramsSent, 1);
  count(p, kBytesSent, total);
  ++counters.datagrams_out;
  counters.bytes_out += total;
  if (b.zombie_after && p.state == PeerState::acknowledging_disconnect) {
    remember_goodbye(p);
    recalculate_bandwidth_limits = true;
    emit_disconnect(p, DisconnectReason::remote, p.event_data);
    reset_peer(p);
    return true;
  }
  more = b.more;
  return true;
}

}  // namespace tern::proto
