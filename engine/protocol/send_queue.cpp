// The protocol core: the application's messages: fragmenting, sequence numbers, the outgoing
// queues. Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// Every OutCmd goes back through here, so PeerQueues::queued_bytes stays exact.
inline void HostCore::Impl::put_out(PeerQueues& q, OutCmd* c) {
  q.queued_bytes -= c->fragment_length;
  if (c->packet) releases.add(std::move(c->packet).into_raw());
  out_runs.put(q.out_run, c);
}

inline void HostCore::Impl::free_reliable(Peer& p, OutCmd* c) {
  if (c->send_attempts > 0) untrack_unacked(p, c);
  put_out(*p.queues, c);
}

inline void HostCore::Impl::clear_queues(Peer& p) {
  if (PeerQueues* q = p.queues) {
    while (OutCmd* c = q->outgoing_reliable.pop_front()) free_reliable(p, c);
    q->express_tail = nullptr;
    while (OutCmd* c = q->outgoing_unreliable.pop_front()) put_out(*q, c);
    while (OutCmd* c = q->unreliable_copies.pop_front()) put_out(*q, c);
    while (OutCmd* c = q->sent_reliable.pop_front()) free_reliable(p, c);
    while (AckChunk* c = q->acks.pop_front()) ack_pool.put(c);
    q->reliable_data_in_transit = 0;
  }
  for_each_channel(p, [&](Channel& ch) {
    while (InCmd* c = ch.in_reliable.pop_front()) release_in(p, c);
    while (InCmd* c = ch.in_unreliable.pop_front()) release_in(p, c);
    ch.bulk_unsent = 0;
  });
}

// enet_peer_setup_outgoing_command: assigns sequence numbers at queue time.
inline void HostCore::Impl::queue_outgoing(Peer& p, const Command& cmd, Packet packet,
                                           std::uint32_t offset, std::uint16_t length) {
  PeerQueues& q = queues(p);
  OutCmd* oc = out_runs.get(q.out_run);
  oc->command = cmd.command;
  oc->channel_id = cmd.channel_id;
  oc->packet = std::move(packet);
  oc->fragment_offset = offset;
  oc->fragment_length = length;
  q.queued_bytes += length;
  oc->priority = sending_priority;
  oc->receipt = sending_with_receipt;
  p.outgoing_data_total += static_cast<std::uint32_t>(command_size(cmd.type()) + length);
  if (cmd.channel_id == kSystemChannel) {
    ++p.outgoing_reliable_seq;
    oc->reliable_seq = p.outgoing_reliable_seq;
    oc->unreliable_seq = 0;
  } else {
    Channel& ch = channel(p, cmd.channel_id);
    if (cmd.needs_ack()) {
      ++ch.out_reliable_seq;
      ch.out_unreliable_seq = 0;
      oc->reliable_seq = ch.out_reliable_seq;
      oc->unreliable_seq = 0;
    } else if (cmd.unsequenced_flag()) {
      ++p.outgoing_unsequenced_group;
      oc->reliable_seq = 0;
      oc->unreliable_seq = 0;
    } else {
      if (offset == 0) ++ch.out_unreliable_seq;
      oc->reliable_seq = ch.out_reliable_seq;
      oc->unreliable_seq = ch.out_unreliable_seq;
    }
  }
  switch (cmd.type()) {
    case Cmd::send_unsequenced: oc->body = p.outgoing_unsequenced_group; break;
    case Cmd::send_fragment:
    case Cmd::send_unreliable_fragment: {
      const SendFragment& f = cmd.fragment;
      const std::uint32_t full_length =
          f.fragment_number == 0 ? f.data_length : f.fragment_offset / f.fragment_number;
      oc->body = std::uint32_t{f.start_seq} | full_length << 16;
      break;
    }
    case Cmd::disconnect: oc->body = cmd.disconnect.data; break;
    case Cmd::connect:
    case Cmd::verify_connect:
    case Cmd::bandwidth_limit:
    case Cmd::throttle_configure: {
      Command whole = cmd;
      whole.reliable_seq = oc->reliable_seq;
      oc->packet = Packet::allocate(command_size(cmd.type()));
      encode_command(oc->packet.mutable_bytes(), whole);
      oc->encoded = true;
      break;
    }
    default: break;
  }
  if (cmd.needs_ack()) {
    Channel* ch =
        cmd.channel_id == kSystemChannel || !oc->has_payload() || !cc_channel(p, cmd.channel_id)
            ? nullptr
            : &channel(p, cmd.channel_id);
    // Express is the default level's fast lane; a message given a priority is scheduled by it.
    if (ch != nullptr && oc->priority == Priority::medium && cc_express(p, cmd, *ch, length)) {
      // Ahead of bulk (and of its resends), behind the express messages queued before it
      // (those waiting, or resends of sent ones at the front).
      oc->express = true;
      oc->queue_order = next_queue_key(q, oc->priority);
      OutCmd* after = nullptr;
      if (OutCmd* front = q.outgoing_reliable.front(); front != nullptr && front->express) {
        after = q.express_tail;
        if (after == nullptr) {  // only resends: they are sent in one go, the walk is short
          after = front;
          while (after->next_ != nullptr && after->next_->express) after = after->next_;
        }
      }
      q.outgoing_reliable.insert_after(after, oc);
      q.express_tail = oc;
    } else {
      if (ch != nullptr) ++ch->bulk_unsent;
      schedule_outgoing(q, oc);
    }
  } else {
    schedule_outgoing(q, oc);
  }
  mark_dirty(p);
}

// Priorities: each command gets a scheduling key, and its outgoing list is kept in key order
// except that a command never passes one of its own channel (nor one already sent once, a
// resend waiting at the front). So a channel's reliable sequence numbers go out in order, as
// ENet's reliable windows and in-order delivery need, and what priority reorders is only
// messages of different channels (and a channel's unreliable messages against another's).
// Congestion control's express messages stay ahead of everything scheduled here.
// Keys are RakNet's weighting by send count: a level's key advances by its step per command,
// so under a backlog of every level, high gets 3 commands out for medium's 1 and low's 1/3,
// and a lower level is never starved: a higher one's keys catch up with it. A level that was
// idle restarts one step past the newest command written, not from its old key (it would
// otherwise run ahead of the others until it caught up). Immediate's step is 0: every such
// command sorts before every queued one of another level. With one level only the keys
// increase with every call: the order of the calls, ENet's.
inline std::uint32_t HostCore::Impl::next_queue_key(PeerQueues& q, Priority priority) {
  constexpr std::array<std::uint32_t, 4> kStep = {0, 1, 3, 9};
  const auto level = static_cast<std::size_t>(priority);
  const std::uint32_t restart = q.order_floor + kStep[level];
  const std::uint32_t key =
      order_before(q.next_order[level], restart) ? restart : q.next_order[level];
  q.next_order[level] = key + kStep[level];
  return key;
}

inline void HostCore::Impl::schedule_outgoing(PeerQueues& q, OutCmd* oc) {
  const std::uint32_t key = next_queue_key(q, oc->priority);
  oc->queue_order = key;
  IntrusiveList<OutCmd>& list = oc->needs_ack() ? q.outgoing_reliable : q.outgoing_unreliable;
  // From the back: with one level in use the first step stops, and a message passes only
  // what is queued after its key.
  OutCmd* after = list.back();
  while (after != nullptr && order_before(key, after->queue_order) &&
         after->channel_id != oc->channel_id && after->send_attempts == 0 && !after->express) {
    after = list.prev(after);
  }
  list.insert_after(after, oc);
}

inline void HostCore::Impl::queue_system(Peer& p, Command cmd) {
  cmd.channel_id = kSystemChannel;
  queue_outgoing(p, cmd, Packet{}, 0, 0);
}

inline SendResult HostCore::Impl::send(PeerHandle h, std::uint8_t channel_id, Delivery delivery,
                                       Packet payload) {
  Peer* p = find(h);
  if (p == nullptr) return SendResult::not_connected;
  return send(*p, channel_id, delivery, std::move(payload));
}

// send() or send_with_receipt() with the message's commands scheduled at `priority`.
inline SendResult HostCore::Impl::send_at(PeerHandle h, std::uint8_t channel_id, Delivery delivery,
                                          Packet payload, Priority priority,
                                          const std::uint32_t* receipt) {
  sending_priority = priority;
  const SendResult r =
      receipt != nullptr ? send_with_receipt(h, channel_id, delivery, std::move(payload), *receipt)
                         : send(h, channel_id, delivery, std::move(payload));
  sending_priority = Priority::medium;
  return r;
}

// queue_outgoing marks the message's commands (reliable deliveries only ever go to
// outgoing_reliable, where a priority may have put them ahead of others); `start` is the
// first one's sequence number.
inline SendResult HostCore::Impl::send_with_receipt(PeerHandle h, std::uint8_t channel_id,
                                                    Delivery delivery, Packet payload,
                                                    std::uint32_t receipt) {
  if (!is_reliable(delivery)) return SendResult::not_reliable;
  Peer* p = find(h);
  if (p == nullptr) return SendResult::not_connected;
  const std::uint16_t before = p->channel_count > channel_id && p->state == PeerState::connected
                                   ? channel(*p, channel_id).out_reliable_seq
                                   : 0;
  sending_with_receipt = true;
  const SendResult r = send(*p, channel_id, delivery, std::move(payload));
  sending_with_receipt = false;
  if (r != SendResult::ok) return r;
  const auto commands =
      static_cast<std::uint16_t>(channel(*p, channel_id).out_reliable_seq - before);
  extra(*p).receipts.push_back({.id = receipt,
                                .commands_left = commands,
                                .start_seq = static_cast<std::uint16_t>(before + 1),
                                .channel = channel_id});
  return SendResult::ok;
}

// One command of a message sent with a receipt was acknowledged; the receipt goes out with
// the message's last. Acknowledgements come mostly in send order, so the search is short.
inline void HostCore::Impl::receipt_acked(Peer& p, const OutCmd& c) {
  if (p.extra == nullptr) return;
  auto& receipts = p.extra->receipts;
  const std::uint16_t start =
      c.type() == Cmd::send_fragment ? static_cast<std::uint16_t>(c.body & 0xFFFF) : c.reliable_seq;
  for (auto it = receipts.begin(); it != receipts.end(); ++it) {
    if (it->channel != c.channel_id || it->start_seq != start) continue;
    if (--it->commands_left == 0) {
      Event ev = event_for(p, EventType::receipt);
      ev.channel = it->channel;
      ev.data = it->id;
      events.push(std::move(ev));
      receipts.erase(it);
    }
    return;
  }
}

inline SendResult HostCore::Impl::send(Peer& p, std::uint8_t channel_id, Delivery delivery,
                                       Packet payload) {
  if (p.state != PeerState::connected) return SendResult::not_connected;
  if (channel_id >= p.channel_count) return SendResult::bad_channel;
  const std::size_t size = payload.size();
  if (size > config.max_packet_size) return SendResult::too_large;
  // The receiver is not keeping up: refuse rather than hold without bound. An empty queue
  // takes any message, so one larger than the limit still goes.
  if (config.max_queued != 0 && p.queues != nullptr && p.queues->queued_bytes != 0 &&
      p.queues->queued_bytes + size >
          (is_reliable(delivery) ? config.max_queued : config.max_queued / 2)) {
    ++counters.queue_full;
    return SendResult::queue_full;
  }
  Channel& ch = channel(p, channel_id);
  std::size_t fragment_length = p.mtu - 4 - kFragmentCommandSize;
  if (config.checksum) fragment_length -= 4;
  ++counters.messages_out;
  count(p, kMessagesSent, 1);
  if (size > fragment_length) {
    const std::size_t fragment_count = (size + fragment_length - 1) / fragment_length;
    if (fragment_count > kMaxFragmentCount) return SendResult::too_large;
    Command frag;
    std::uint16_t start;
    if (delivery == Delivery::unreliable && ch.out_unreliable_seq < 0xFFFF) {
      frag.command = static_cast<std::uint8_t>(Cmd::send_unreliable_fragment);
      start = static_cast<std::uint16_t>(ch.out_unreliable_seq + 1);
    } else {
      frag.command = static_cast<std::uint8_t>(Cmd::send_fragment) | kFlagAcknowledge |
                     delivery_flags(p, delivery, channel_id);
      start = static_cast<std::uint16_t>(ch.out_reliable_seq + 1);
    }
    frag.channel_id = channel_id;
    frag.fragment.start_seq = start;
    frag.fragment.fragment_count = static_cast<std::uint32_t>(fragment_count);
    frag.fragment.total_length = static_cast<std::uint32_t>(size);
    std::size_t offset = 0;
    for (std::uint32_t number = 0; offset < size; ++number) {
      const std::size_t len = std::min(fragment_length, size - offset);
      frag.fragment.fragment_number = number;
      frag.fragment.fragment_offset = static_cast<std::uint32_t>(offset);
      frag.fragment.data_length = static_cast<std::uint16_t>(len);
      queue_outgoing(p, frag, payload, static_cast<std::uint32_t>(offset),
                     static_cast<std::uint16_t>(len));
      offset += len;
    }
    return SendResult::ok;
  }
  Command cmd;
  cmd.channel_id = channel_id;
  if (delivery == Delivery::unsequenced) {
    cmd.command = static_cast<std::uint8_t>(Cmd::send_unsequenced) | kFlagUnsequenced;
    cmd.unsequenced.data_length = static_cast<std::uint16_t>(size);
  } else if (is_reliable(delivery) || ch.out_unreliable_seq >= 0xFFFF) {
    cmd.command = static_cast<std::uint8_t>(Cmd::send_reliable) | kFlagAcknowledge |
                  delivery_flags(p, delivery, channel_id);
    cmd.reliable.data_length = static_cast<std::uint16_t>(size);
  } else {
    cmd.command = static_cast<std::uint8_t>(Cmd::send_unreliable);
    cmd.unreliable.data_length = static_cast<std::uint16_t>(size);
  }
  queue_outgoing(p, cmd, std::move(payload), 0, static_cast<std::uint16_t>(size));
  return SendResult::ok;
}

}  // namespace tern::proto
