// The protocol core: incoming messages: memory caps, delivery to events, reliable ordering,
// unreliable sequencing, unsequenced window. Part of host_core.cpp's translation unit (see
// README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline void HostCore::Impl::release_in(Peer& p, InCmd* c) {
  end_reassembly(c);
  p.total_waiting_data -= c->accounted;
  counters.buffered_bytes -= c->accounted;
  in_pool.put(c);
}

inline bool HostCore::Impl::charge(Peer& p, std::size_t bytes, bool reassembly, Drop& why) {
  if (p.total_waiting_data + bytes > config.max_waiting_data) {
    why = Drop::waiting_data_cap;
    return false;
  }
  const std::size_t reassembly_budget = config.memory_cap / 4 * 3;
  if (counters.buffered_bytes + bytes > config.memory_cap ||
      (reassembly && counters.reassembly_bytes + bytes > reassembly_budget)) {
    why = Drop::memory_cap;
    evict_largest_holder();
    return false;
  }
  p.total_waiting_data += bytes;
  counters.buffered_bytes += bytes;
  if (reassembly) counters.reassembly_bytes += bytes;
  return true;
}

// Under the memory cap, the connection sitting on the most undelivered data goes: a flood of
// never-completed fragment sets would otherwise hold the host's memory for as long as its
// sender keeps acknowledging. The scan is O(peers) but runs only when the cap is hit, and
// each eviction frees the largest holding there is.
inline void HostCore::Impl::evict_largest_holder() {
  Peer* hog = nullptr;
  for (std::uint32_t i = 0; i < slots.size(); ++i) {
    Peer& sp = slots[i];
    if (sp.state != PeerState::disconnected &&
        (hog == nullptr || sp.total_waiting_data > hog->total_waiting_data)) {
      hog = &sp;
    }
  }
  if (hog == nullptr || hog->total_waiting_data == 0) return;  // it is all in the event queue
  ++counters.evictions;
  queue_farewell(*hog, 0);
  if (hog->app_knows) emit_disconnect(*hog, DisconnectReason::evicted, 0);
  if (hog->connected_like()) recalculate_bandwidth_limits = true;
  reset_peer(*hog);
}

// A message that waited in a reorder list or a fragment set: its buffer moves to the event
// queue, which keeps the bytes charged to the host until the application takes them.
inline void HostCore::Impl::deliver(Peer& p, std::uint8_t channel, Delivery delivery, InCmd* c) {
  Packet packet = std::move(c->packet);
  release_in(p, c);
  deliver_now(p, channel, delivery, std::move(packet));
}

// `lent`: the message's bytes in the datagram being handled, when `packet` is empty
// (HostConfig::lend_payloads); they are not held here, so not charged to buffered_bytes.
inline void HostCore::Impl::deliver_now(Peer& p, std::uint8_t channel, Delivery delivery,
                                        Packet packet, std::span<const std::byte> lent) {
  counters.buffered_bytes += packet.size();
  ++counters.messages_in;
  count(p, kMessagesReceived, 1);
  // Filled where it waits: one message, one event written, not built and then moved.
  static_assert(sizeof(Event) == 64, "every field of Event is set below: add the new one");
  Event& ev = events.append();
  ev.type = EventType::receive;
  ev.peer = handle_of(p);
  ev.address = p.address;
  ev.channel = channel;
  ev.delivery = delivery;
  ev.reason = DisconnectReason::none;
  ev.data = 0;
  ev.packet = std::move(packet);
  ev.lent = lent;
}

// A message taken whole from the datagram being handled: lent when the caller allows it,
// else copied.
inline void HostCore::Impl::deliver_from_datagram(Peer& p, std::uint8_t channel, Delivery delivery,
                                                  std::span<const std::byte> bytes) {
  if (config.lend_payloads && !datagram_sealed) {
    deliver_now(p, channel, delivery, Packet{}, bytes);
  } else {
    deliver_now(p, channel, delivery, Packet::copy_of(bytes));
  }
}

// enet_peer_dispatch_incoming_reliable_commands
// Unlike ENet, which releases a run of reliable messages and only then the unreliable ones
// sequenced behind the last of them, unreliable messages held behind each reliable message
// are released right after it: the same order, fewer needless drops. A message of another
// delivery mode that was taken on arrival only moves the sequence on.
inline void HostCore::Impl::dispatch_reliable(Peer& p, std::uint8_t channel_id) {
  if (p.intake_held) return;  // release_intake dispatches
  Channel& ch = channel(p, channel_id);
  while (InCmd* c = ch.in_reliable.front()) {
    if (c->fragments_remaining > 0 ||
        c->reliable_seq != static_cast<std::uint16_t>(ch.in_reliable_seq + 1)) {
      break;
    }
    const bool take =
        !c->delivered && (c->mode != kFlagTernSequenced || take_sequenced(ch, c->reliable_seq));
    ch.in_reliable_seq = c->reliable_seq;
    if (c->fragment_count > 0) {
      ch.in_reliable_seq = static_cast<std::uint16_t>(ch.in_reliable_seq + c->fragment_count - 1);
    }
    ch.in_reliable.remove(c);
    if (take) {
      deliver(p, channel_id, delivery_of(c->mode), c);
    } else {
      if (!c->delivered) counters.drops.add(Drop::stale_sequenced);
      release_in(p, c);
    }
    ch.in_unreliable_seq = 0;
    if (!ch.in_unreliable.empty()) dispatch_unreliable(p, channel_id);
  }
}

// ---- delivery modes (kFeatureDeliveryModes) -------------------------------------------------

// What a reliable command asks of its receiver; ENet's in-order delivery unless agreed.
inline std::uint8_t HostCore::Impl::delivery_mode(const Peer& p, const Command& cmd) {
  if (!p.delivery_modes) return 0;
  if ((cmd.command & kFlagTernUnordered) != 0) return kFlagTernUnordered;
  return cmd.command & kFlagTernSequenced;
}

inline Delivery HostCore::Impl::delivery_of(std::uint8_t mode) {
  if (mode == kFlagTernUnordered) return Delivery::reliable_unordered;
  if (mode == kFlagTernSequenced) return Delivery::reliable_sequenced;
  return Delivery::reliable;
}

// A reliable-sequenced message is taken only if newer than every one taken on its channel
// (`seq` must still be ahead of the delivered sequence number).
inline bool HostCore::Impl::take_sequenced(Channel& ch, std::uint16_t seq) {
  const std::uint16_t newest = ahead(ch.in_sequenced_newest, ch.in_reliable_seq);
  if (newest != 0 && newest < 0x8000 && ahead(seq, ch.in_reliable_seq) <= newest) return false;
  ch.in_sequenced_newest = seq;
  return true;
}

// A whole message of another mode, out of order: delivered now (or, sequenced and stale,
// dropped); what stays on the reorder list holds its sequence number until the ones before
// it arrive. `c` is a complete fragment set already on the list, or null for a single
// command, whose placeholder is made here.
inline void HostCore::Impl::deliver_on_arrival(Peer& p, Channel& ch, std::uint8_t channel_id,
                                               std::uint8_t mode, std::uint16_t seq,
                                               std::span<const std::byte> bytes, InCmd* c) {
  const bool take = mode == kFlagTernUnordered || take_sequenced(ch, seq);
  if (c == nullptr) {
    if (take) {
      deliver_from_datagram(p, channel_id, delivery_of(mode), bytes);
    } else {
      counters.drops.add(Drop::stale_sequenced);
    }
    c = in_pool.get();
    c->reliable_seq = seq;
    c->type = Cmd::send_reliable;
    c->mode = mode;
    c->delivered = true;
    insert_reliable(ch, c);
    return;
  }
  Packet packet = std::move(c->packet);
  c->bitmap = Packet{};
  p.total_waiting_data -= c->accounted;
  counters.buffered_bytes -= c->accounted;
  c->accounted = 0;
  c->delivered = true;
  if (take) {
    deliver_now(p, channel_id, delivery_of(mode), std::move(packet));
  } else {
    counters.drops.add(Drop::stale_sequenced);
  }
}

// Unreliable messages are sequenced behind the reliable message they followed: deliverable
// once that reliable sequence number is current, and only if newer than the last delivered.
inline void HostCore::Impl::dispatch_unreliable(Peer& p, std::uint8_t channel_id) {
  Channel& ch = channel(p, channel_id);
  InCmd* c = ch.in_unreliable.front();
  while (c != nullptr) {
    InCmd* next = c->next_;
    if (c->reliable_seq == ch.in_reliable_seq) {
      if (c->unreliable_seq <= ch.in_unreliable_seq) {
        ch.in_unreliable.remove(c);
        counters.drops.add(Drop::late_unreliable);
        release_in(p, c);
      } else if (c->fragments_remaining == 0) {
        ch.in_unreliable_seq = c->unreliable_seq;
        ch.in_unreliable.remove(c);
        deliver(p, channel_id, Delivery::unreliable, c);
      }
      // else: an incomplete set for the current sequence waits for its other fragments
    } else if (!in_receive_window(c->reliable_seq, ch.in_reliable_seq)) {
      ch.in_unreliable.remove(c);
      counters.drops.add(Drop::late_unreliable);
      release_in(p, c);
    } else {
      break;  // sorted: everything further waits for a later reliable message
    }
    c = next;
  }
}

// Inserts into the sorted reliable reorder list; nullptr return = duplicate.
inline bool HostCore::Impl::insert_reliable(Channel& ch, InCmd* c) {
  const std::uint16_t key = ahead(c->reliable_seq, ch.in_reliable_seq);
  InCmd* pos = ch.in_reliable.back();
  while (pos != nullptr) {
    const std::uint16_t k = ahead(pos->reliable_seq, ch.in_reliable_seq);
    if (k == key) return false;
    if (k < key) break;
    pos = ch.in_reliable.prev(pos);
  }
  ch.in_reliable.insert_after(pos, c);
  return true;
}

inline InCmd* HostCore::Impl::find_reliable(Channel& ch, std::uint16_t seq) {
  const std::uint16_t key = ahead(seq, ch.in_reliable_seq);
  for (InCmd* pos = ch.in_reliable.back(); pos != nullptr; pos = ch.in_reliable.prev(pos)) {
    const std::uint16_t k = ahead(pos->reliable_seq, ch.in_reliable_seq);
    if (k == key) return pos;
    if (k < key) break;
  }
  return nullptr;
}

// Sorted by (reliable sequence ahead of current, unreliable sequence).
inline InCmd* HostCore::Impl::find_or_position_unreliable(Channel& ch, std::uint16_t rseq,
                                                          std::uint16_t useq,
                                                          InCmd*& insert_after) {
  const std::uint16_t key = ahead(rseq, ch.in_reliable_seq);
  InCmd* pos = ch.in_unreliable.back();
  while (pos != nullptr) {
    const std::uint16_t k = ahead(pos->reliable_seq, ch.in_reliable_seq);
    if (k < key || (k == key && pos->unreliable_seq < useq)) break;
    if (k == key && pos->unreliable_seq == useq) {
      insert_after = pos;
      return pos;
    }
    pos = ch.in_unreliable.prev(pos);
  }
  insert_after = pos;
  return nullptr;
}

inline Handled HostCore::Impl::handle_send_reliable(Peer& p, const Command& cmd,
                                                    std::uint16_t sent_time, Drop& why) {
  Channel& ch = channel(p, cmd.channel_id);
  if (p.state == PeerState::disconnect_later) return Handled::ok;  // discarded, still acked
  if (!in_receive_window(cmd.reliable_seq, ch.in_reliable_seq)) {
    // Behind the delivered sequence number: a retransmission we already have.
    const bool behind = ahead(cmd.reliable_seq, ch.in_reliable_seq) >= 0x8000;
    counters.drops.add(behind ? Drop::duplicate : Drop::out_of_window);
    return Handled::ok;
  }
  if (cmd.reliable_seq == ch.in_reliable_seq) {
    counters.drops.add(Drop::duplicate);
    return Handled::ok;
  }
  if (InCmd* have = find_reliable(ch, cmd.reliable_seq)) {
    counters.drops.add(Drop::duplicate);
    if (!have->ack_withheld) return Handled::ok;
    // Still held: acknowledged on release, with the newest send time (a smaller RTT sample).
    have->ack_sent_time = sent_time;
    return Handled::withheld;
  }
  on_reliable_arrival(p, ch.in_reliable.empty()
                             ? static_cast<std::uint16_t>(cmd.reliable_seq - ch.in_reliable_seq - 1)
                             : std::uint16_t{0});
  const std::size_t len = cmd.payload.size();
  if (!meter(p, len)) {
    ++counters.intake_over_limit;
    return Handled::withheld;  // neither kept nor acknowledged: the sender resends it
  }
  if (p.intake_held) return withhold_reliable(p, ch, cmd, sent_time, why);
  if (!charge(p, len, false, why)) return Handled::stop;  // no ack: the sender retries later
  const std::uint8_t mode = delivery_mode(p, cmd);
  if (ch.in_reliable.empty() &&
      cmd.reliable_seq == static_cast<std::uint16_t>(ch.in_reliable_seq + 1)) {
    // The next message in order with nothing held before it, the usual case: delivered
    // straight away, as dispatch_reliable would, without a stay on the reorder list.
    p.total_waiting_data -= len;
    counters.buffered_bytes -= len;
    const bool take = mode != kFlagTernSequenced || take_sequenced(ch, cmd.reliable_seq);
    ch.in_reliable_seq = cmd.reliable_seq;
    if (take) {
      deliver_from_datagram(p, cmd.channel_id, delivery_of(mode), cmd.payload);
    } else {
      counters.drops.add(Drop::stale_sequenced);
    }
    ch.in_unreliable_seq = 0;
    if (!ch.in_unreliable.empty()) dispatch_unreliable(p, cmd.channel_id);
    return Handled::ok;
  }
  if (mode != 0) {
    p.total_waiting_data -= len;
    counters.buffered_bytes -= len;
    deliver_on_arrival(p, ch, cmd.channel_id, mode, cmd.reliable_seq, cmd.payload, nullptr);
    dispatch_reliable(p, cmd.channel_id);  // its placeholder may be next in order
    return Handled::ok;
  }
  InCmd* c = in_pool.get();
  c->reliable_seq = cmd.reliable_seq;
  c->type = Cmd::send_reliable;
  c->packet = Packet::copy_of(cmd.payload);
  c->accounted = static_cast<std::uint32_t>(len);
  insert_reliable(ch, c);
  dispatch_reliable(p, cmd.channel_id);
  return Handled::ok;
}

inline Handled HostCore::Impl::handle_send_unreliable(Peer& p, const Command& cmd, Drop& why) {
  Channel& ch = channel(p, cmd.channel_id);
  if (p.state == PeerState::disconnect_later) return Handled::ok;
  const std::uint16_t rseq = cmd.reliable_seq;
  const std::uint16_t useq = cmd.unreliable.unreliable_seq;
  if (!in_receive_window(rseq, ch.in_reliable_seq)) {
    counters.drops.add(Drop::late_unreliable);
    return Handled::ok;
  }
  if (rseq == ch.in_reliable_seq) {
    if (useq <= ch.in_unreliable_seq) {
      counters.drops.add(Drop::late_unreliable);
      return Handled::ok;
    }
    if (!meter(p, cmd.payload.size())) {
      counters.drops.add(Drop::over_limit);
      return Handled::ok;
    }
    // Deliverable at once; anything older still waiting (fragment sets) is now late.
    ch.in_unreliable_seq = useq;
    deliver_from_datagram(p, cmd.channel_id, Delivery::unreliable, cmd.payload);
    dispatch_unreliable(p, cmd.channel_id);
    return Handled::ok;
  }
  // Follows a reliable message not yet delivered: hold it until then.
  InCmd* after = nullptr;
  if (find_or_position_unreliable(ch, rseq, useq, after) != nullptr) {
    counters.drops.add(Drop::duplicate);
    return Handled::ok;
  }
  const std::size_t len = cmd.payload.size();
  if (!meter(p, len)) {
    counters.drops.add(Drop::over_limit);
    return Handled::ok;
  }
  if (!charge(p, len, false, why)) {
    counters.drops.add(why);
    return Handled::ok;  // unreliable: dropping it is the contract
  }
  InCmd* c = in_pool.get();
  c->reliable_seq = rseq;
  c->unreliable_seq = useq;
  c->type = Cmd::send_unreliable;
  c->packet = Packet::copy_of(cmd.payload);
  c->accounted = static_cast<std::uint32_t>(len);
  ch.in_unreliable.insert_after(after, c);
  return Handled::ok;
}

inline Handled HostCore::Impl::handle_send_unsequenced(Peer& p, const Command& cmd) {
  if (p.state == PeerState::disconnect_later) return Handled::ok;
  std::uint32_t group = cmd.unsequenced.unsequenced_group;
  const std::uint32_t index = group % kUnsequencedWindowSize;
  const std::uint16_t incoming_group = p.unsequenced != nullptr ? p.unsequenced->incoming_group : 0;
  if (group < incoming_group) group += 0x10000;
  if (group >= static_cast<std::uint32_t>(incoming_group) +
                   kFreeUnsequencedWindows * kUnsequencedWindowSize) {
    counters.drops.add(Drop::out_of_window);
    return Handled::ok;
  }
  group &= 0xFFFF;
  if (p.unsequenced == nullptr) p.unsequenced = unsequenced_pool.get();
  UnsequencedWindow& window = *p.unsequenced;
  if (group - index != window.incoming_group) {
    window.incoming_group = static_cast<std::uint16_t>(group - index);
    window.bits.fill(0);
  } else if (window.bits[index / 32] & (1u << (index % 32))) {
    counters.drops.add(Drop::duplicate);
    return Handled::ok;
  }
  if (!meter(p, cmd.payload.size())) {
    counters.drops.add(Drop::over_limit);
    return Handled::ok;
  }
  window.bits[index / 32] |= 1u << (index % 32);
  deliver_from_datagram(p, cmd.channel_id, Delivery::unsequenced, cmd.payload);
  return Handled::ok;
}

}  // namespace tern::proto
