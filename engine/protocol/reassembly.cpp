// The protocol core: fragment sets: validation, assembly, delivery once complete.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline void HostCore::Impl::end_reassembly(InCmd* c) {
  if (c->reassembling) {
    counters.reassembly_bytes -= c->accounted;
    c->reassembling = false;
  }
}

inline bool HostCore::Impl::validate_fragment(const Command& cmd, Drop& why) const {
  const SendFragment& f = cmd.fragment;
  const std::uint32_t len = f.data_length;
  if (len == 0) {
    why = Drop::fragment_past_total;
    return false;
  }
  if (f.fragment_count == 0 || f.fragment_count > kMaxFragmentCount ||
      f.total_length < f.fragment_count) {
    why = Drop::fragment_count_invalid;
    return false;
  }
  if (f.fragment_number >= f.fragment_count) {
    why = Drop::fragment_number_out_of_range;
    return false;
  }
  if (f.total_length > config.max_packet_size) {
    why = Drop::message_too_large;
    return false;
  }
  if (f.fragment_offset >= f.total_length || len > f.total_length - f.fragment_offset) {
    why = Drop::fragment_past_total;
    return false;
  }
  return true;
}

inline InCmd* HostCore::Impl::new_fragment_set(Peer& p, const Command& cmd, std::uint16_t rseq,
                                               std::uint16_t useq, Cmd type, Drop& why) {
  const SendFragment& f = cmd.fragment;
  const std::size_t bitmap_bytes = (std::size_t{f.fragment_count} + 31) / 32 * 4;
  if (!charge(p, f.total_length + bitmap_bytes, true, why)) return nullptr;
  InCmd* c = in_pool.get();
  c->reliable_seq = rseq;
  c->unreliable_seq = useq;
  c->type = type;
  c->fragment_count = f.fragment_count;
  c->fragments_remaining = f.fragment_count;
  // Zeroed: overlapping fragments can complete a set without writing every byte, and the
  // pool's buffers still hold other connections' messages.
  c->packet = Packet::allocate(f.total_length);
  std::memset(c->packet.mutable_bytes().data(), 0, f.total_length);
  c->bitmap = Packet::allocate(bitmap_bytes);
  std::memset(c->bitmap.mutable_bytes().data(), 0, bitmap_bytes);
  c->accounted = static_cast<std::uint32_t>(f.total_length + bitmap_bytes);
  c->reassembling = true;
  return c;
}

// Every fragment must agree with the set started under its start sequence number.
inline bool HostCore::Impl::matches_set(const InCmd* set, const Command& cmd, Cmd type) {
  return set->type == type && set->packet.size() == cmd.fragment.total_length &&
         set->fragment_count == cmd.fragment.fragment_count;
}

// Copies one fragment into its set; false if it was already there.
inline bool HostCore::Impl::fill_fragment(InCmd* set, const Command& cmd) {
  const SendFragment& f = cmd.fragment;
  auto* bits = reinterpret_cast<std::uint32_t*>(set->bitmap.mutable_bytes().data());
  const std::uint32_t word = f.fragment_number / 32;
  const std::uint32_t bit = 1u << (f.fragment_number % 32);
  if (bits[word] & bit) return false;
  bits[word] |= bit;
  --set->fragments_remaining;
  if (set->fragments_remaining == 0) end_reassembly(set);
  std::memcpy(set->packet.mutable_bytes().data() + f.fragment_offset, cmd.payload.data(),
              cmd.payload.size());
  return true;
}

inline Handled HostCore::Impl::handle_send_fragment(Peer& p, const Command& cmd, Drop& why) {
  Channel& ch = channel(p, cmd.channel_id);
  const std::uint16_t start = cmd.fragment.start_seq;
  if (!in_receive_window(start, ch.in_reliable_seq) || start == ch.in_reliable_seq) {
    // A set already delivered (its retransmitted fragments are still acknowledged).
    counters.drops.add(Drop::duplicate);
    return Handled::ok;
  }
  if (!validate_fragment(cmd, why)) return Handled::stop;
  if (p.state == PeerState::disconnect_later) return Handled::ok;
  InCmd* set = find_reliable(ch, start);
  if (set != nullptr && set->delivered) {
    counters.drops.add(Drop::duplicate);  // a set taken on arrival (delivery modes)
    return Handled::ok;
  }
  if (set != nullptr) {
    if (!matches_set(set, cmd, Cmd::send_fragment)) {
      why = Drop::fragment_mismatch;
      return Handled::stop;
    }
  } else {
    if (!meter(p, cmd.fragment.total_length)) {
      ++counters.intake_over_limit;
      return Handled::withheld;
    }
    if (p.intake_held) {
      // No new set while held: only sets already started fill up (and wait for release).
      ++counters.intake_refused;
      return Handled::withheld;
    }
    set = new_fragment_set(p, cmd, start, 0, Cmd::send_fragment, why);
    if (set == nullptr) return Handled::stop;
    set->mode = delivery_mode(p, cmd);
    insert_reliable(ch, set);
  }
  if (!fill_fragment(set, cmd)) {
    counters.drops.add(Drop::duplicate);
    return Handled::ok;
  }
  if (set->fragments_remaining == 0) {
    const bool in_order = start == static_cast<std::uint16_t>(ch.in_reliable_seq + 1);
    if (set->mode != 0 && !in_order && !p.intake_held) {
      deliver_on_arrival(p, ch, cmd.channel_id, set->mode, start, {}, set);
    }
    dispatch_reliable(p, cmd.channel_id);
  }
  return Handled::ok;
}

inline Handled HostCore::Impl::handle_send_unreliable_fragment(Peer& p, const Command& cmd,
                                                               Drop& why) {
  Channel& ch = channel(p, cmd.channel_id);
  const std::uint16_t rseq = cmd.reliable_seq;
  const std::uint16_t start = cmd.fragment.start_seq;
  if (!in_receive_window(rseq, ch.in_reliable_seq) ||
      (rseq == ch.in_reliable_seq && start <= ch.in_unreliable_seq)) {
    counters.drops.add(Drop::late_unreliable);
    return Handled::ok;
  }
  if (!validate_fragment(cmd, why)) return Handled::stop;
  if (p.state == PeerState::disconnect_later) return Handled::ok;
  InCmd* after = nullptr;
  InCmd* set = find_or_position_unreliable(ch, rseq, start, after);
  if (set != nullptr) {
    if (!matches_set(set, cmd, Cmd::send_unreliable_fragment)) {
      why = Drop::fragment_mismatch;
      return Handled::stop;
    }
  } else {
    if (!meter(p, cmd.fragment.total_length)) {
      counters.drops.add(Drop::over_limit);
      return Handled::ok;
    }
    set = new_fragment_set(p, cmd, rseq, start, Cmd::send_unreliable_fragment, why);
    if (set == nullptr) {
      counters.drops.add(why);
      return Handled::ok;
    }
    ch.in_unreliable.insert_after(after, set);
  }
  if (!fill_fragment(set, cmd)) {
    counters.drops.add(Drop::duplicate);
    return Handled::ok;
  }
  if (set->fragments_remaining == 0) dispatch_unreliable(p, cmd.channel_id);
  return Handled::ok;
}

}  // namespace tern::proto
