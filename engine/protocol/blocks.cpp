// The protocol core, extension "large blocks" (HostConfig::blocks, on by default; WIRE.md,
// "Large blocks"): Fiedler's chunks. Negotiated with kFeatureBlocks in the hello. A block is
// cut into slices sized to the MTU, each sent as a tern_ext block_slice (not acknowledged
// through ENet's acks); the receiver answers block_ack with the first slice it lacks and a
// 256-bit field (after it, or ending at the newest slice received: they alternate), and the
// sender resends what stays unacknowledged for a retransmission timeout (or at once when later
// acks overtook it), paced to block_rate(): congestion control's pacing rate where the
// connection agreed it (slice acks feed its model), a fixed pace otherwise. One block in
// flight per channel each way; to a peer that did not agree a block goes as a reliable
// message. A block above the receiver's cap is answered with block_refused, which ends it
// at the sender with an event; a peer that acknowledges no slice for timeout_maximum is
// timed out, as for any reliable command. Part of host_core.cpp's translation unit (see
// README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::blocks_offered() const {
  return config.blocks ? kFeatureBlocks : 0;
}

inline std::uint32_t HostCore::Impl::blocks_agreed(const Peer& p) const {
  return p.blocks ? kFeatureBlocks : 0;
}

inline void HostCore::Impl::blocks_on_agreed(Peer& p, std::uint32_t agreed) {
  p.blocks = config.blocks && (agreed & kFeatureBlocks) != 0;
}

inline BlockState& HostCore::Impl::block_state(Peer& p) {
  PeerExtra& e = extra(p);
  if (!e.blocks) e.blocks = std::make_unique<BlockState>();
  return *e.blocks;
}

inline OutBlock* HostCore::Impl::block_out(const Peer& p, std::uint8_t channel) {
  if (p.extra == nullptr || !p.extra->blocks) return nullptr;
  for (OutBlock& o : p.extra->blocks->out) {
    if (o.channel == channel) return &o;
  }
  return nullptr;
}

namespace {

// New slices go at most this far past the first unacknowledged one: the two places an ack's
// field reports from (right after the base, or ending at the newest slice received) then
// cover every slice in flight between them.
constexpr std::uint32_t kBlockWindow = 2 * kBlockAckSpan;
// sent_ms of a slice later acks showed lost: due at once.
constexpr std::uint64_t kResendNow = 0;
// How far ahead of now congestion control's pacer clock may be for a slice to go: the
// timer wheel's tick, as for bulk reliable messages.
constexpr std::uint64_t kBlockPaceSlackUs = 1000;

bool bit(const std::vector<std::uint64_t>& bits, std::uint32_t i) {
  return (bits[i / 64] >> (i % 64) & 1) != 0;
}
void set_bit(std::vector<std::uint64_t>& bits, std::uint32_t i) {
  bits[i / 64] |= std::uint64_t{1} << (i % 64);
}
std::uint32_t slice_length(std::uint64_t total, std::uint32_t slice_size, std::uint32_t count,
                           std::uint32_t index) {
  return index + 1 < count ? slice_size
                           : static_cast<std::uint32_t>(total - std::uint64_t{index} * slice_size);
}

}  // namespace

inline SendResult HostCore::Impl::send_block(PeerHandle h, std::uint8_t channel_id, Packet block) {
  Peer* p = find(h);
  if (p == nullptr || p->state != PeerState::connected) return SendResult::not_connected;
  if (channel_id >= p->channel_count) return SendResult::bad_channel;
  // ENet has no blocks: a reliable message in fragments, as large as max_packet_size allows.
  if (!p->blocks || block.size() == 0) {
    return send(*p, channel_id, Delivery::reliable, std::move(block));
  }
  if (block.size() > config.max_block_size) return SendResult::too_large;
  if (block_out(*p, channel_id) != nullptr) return SendResult::block_busy;
  BlockState& s = block_state(*p);
  if (block.size() > s.peer_cap) return SendResult::too_large;
  if (s.out.empty()) s.progress_ms = now_ms;
  if (cc_on(*p)) cc_ready(*p);
  OutBlock& o = s.out.emplace_back();
  o.channel = channel_id;
  o.id = s.next_id++;
  // One slice and its command fill a datagram, checksum and sent time included.
  o.slice_size = static_cast<std::uint16_t>(p->mtu - header_size(true, config.checksum) -
                                            kTernExtSize - kBlockSliceHeader);
  o.count = static_cast<std::uint32_t>((block.size() + o.slice_size - 1) / o.slice_size);
  o.acked.assign((o.count + 63) / 64, 0);
  o.sent_ms.assign(o.count, kNever);
  o.resent.assign((o.count + 63) / 64, 0);
  o.data = std::move(block);
  ++counters.messages_out;
  count(*p, kMessagesSent, 1);
  mark_dirty(*p);
  return SendResult::ok;
}

// The sender's pace, bytes per second: a configured rate, else congestion control's pacing
// rate where the connection agreed it, else 256 slices per round trip: what one ack field
// covers.
inline std::uint64_t HostCore::Impl::block_rate(const Peer& p, const OutBlock& o) const {
  if (config.block_rate != 0) return config.block_rate;
  if (const CongestionState* cc = cc_model(p); cc != nullptr && cc->pacing_rate != 0) {
    return cc->pacing_rate;
  }
  // The smoothed RTT without its variance: slices sent in paced bursts sample a spread of
  // round trips, and a rate that shrank with that spread ran at half the ack field per RTT.
  const BlockState& s = *p.extra->blocks;
  const std::uint32_t rtt = s.srtt_ms != 0 ? s.srtt_ms : std::uint32_t{p.rtt};
  return std::uint64_t{kBlockAckSpan} * o.slice_size * 1000 / std::max<std::uint32_t>(rtt, 1);
}

// A slice unacknowledged this long after it went is sent again. The margin over the round
// trip is at least half of it: on a steady path the variance is near 0, and a timeout of the
// bare round trip resent nearly every slice just before its ack came.
inline std::uint64_t HostCore::Impl::block_resend_ms(const Peer& p) const {
  const BlockState& s = *p.extra->blocks;
  const std::uint64_t rtt = s.srtt_ms != 0 ? s.srtt_ms : p.rtt;
  const std::uint64_t var = s.srtt_ms != 0 ? s.rttvar_ms : p.rtt_variance;
  return std::max<std::uint64_t>(rtt + std::max(4 * var, rtt / 2),
                                 std::max<std::uint32_t>(config.min_rto_ms, 2));
}

// The next slice to send: first a resend (a slice unacknowledged for a retransmission
// timeout, or that later acks showed lost), else the next new one while it is within
// kBlockWindow of the base, so a loss at the base does not stall the transfer while its
// resend travels.
inline bool HostCore::Impl::next_slice(const Peer& p, OutBlock& o, std::uint32_t& index) {
  const std::uint64_t resend = block_resend_ms(p);
  for (std::uint32_t i = o.base; i < o.next_new; ++i) {
    if (bit(o.acked, i)) continue;
    if (o.sent_ms[i] == kResendNow || now_ms >= o.sent_ms[i] + resend) {
      index = i;
      return true;
    }
  }
  if (o.next_new < std::min<std::uint64_t>(o.count, std::uint64_t{o.base} + 1 + kBlockWindow)) {
    index = o.next_new;
    return true;
  }
  return false;
}

inline void HostCore::Impl::write_block_ack(Build& b, InBlock& in) {
  // Every other ack reports the newest slices received instead of those right after the base:
  // the sender learns of fresh arrivals (its RTT samples, and what they show lost) even while
  // a loss at the base holds the base back.
  std::uint32_t field = in.base + 1;
  in.newest_field = !in.newest_field;
  if (in.newest_field && in.newest >= in.base + kBlockAckSpan)
    field = in.newest + 1 - kBlockAckSpan;
  std::array<std::byte, kBlockAckData> data{};
  Writer w(data);
  w.u16(in.id);
  w.u16(0);
  w.u32(in.base);
  w.u32(field);
  for (std::uint32_t word = 0; word < kBlockAckSpan / 32; ++word) {
    std::uint32_t bits = 0;
    for (std::uint32_t j = 0; j < 32; ++j) {
      const std::uint64_t i = std::uint64_t{field} + word * 32 + j;
      if (i < in.count && (in.done || bit(in.have, static_cast<std::uint32_t>(i)))) {
        bits |= 1u << j;
      }
    }
    w.u32(bits);
  }
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::tern_ext);
  cmd.channel_id = in.channel;
  cmd.ext.kind = static_cast<std::uint8_t>(TernExtKind::block_ack);
  cmd.ext.flags = 0;
  cmd.ext.data_length = static_cast<std::uint16_t>(kBlockAckData);
  put_command(b, cmd, data);
  in.ack_owed = false;
  ++counters.block_acks_out;
}

// Slice bytes in flight: sent, unacknowledged, neither shown lost by later acks nor past
// their resend time; `expires_ms` is when the first of them reaches its resend time.
inline std::uint32_t HostCore::Impl::block_pipe(const Peer& p, std::uint64_t& expires_ms) const {
  const std::uint64_t resend = block_resend_ms(p);
  std::uint64_t bytes = 0;
  expires_ms = kNever;
  for (const OutBlock& o : p.extra->blocks->out) {
    for (std::uint32_t i = o.base; i < o.next_new; ++i) {
      if (bit(o.acked, i) || o.sent_ms[i] == kResendNow || now_ms >= o.sent_ms[i] + resend) {
        continue;
      }
      bytes += slice_length(o.data.size(), o.slice_size, o.count, i);
      expires_ms = std::min(expires_ms, o.sent_ms[i] + resend);
    }
  }
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(bytes, UINT32_MAX));
}

// Acks and refusals owed first (small, and they keep the other side's blocks moving), then
// slices while the datagram has room and the pace allows; the blocks take turns at going
// first. Where congestion control paces (agreed, and no block_rate configured) a slice also
// waits for room in its window, counting the connection's reliable bytes in transit, and
// takes its turn on its pacer clock, the one bulk reliable messages go by: the two share the
// rate the model measured from both their acknowledgements.
inline void HostCore::Impl::blocks_write(Peer& p, Build& b) {
  if (p.extra == nullptr || !p.extra->blocks) return;
  BlockState& s = *p.extra->blocks;
  if (s.refusals_owed) write_block_refusals(p, b);
  if (s.acks_owed) {
    s.acks_owed = false;
    for (InBlock& in : s.in) {
      if (!in.ack_owed) continue;
      if (room(b) < kTernExtSize + kBlockAckData || b.commands >= kMaxPacketCommands) {
        s.acks_owed = true;
        b.more = true;
        break;
      }
      write_block_ack(b, in);
    }
  }
  if (s.out.empty()) return;
  const std::uint64_t rate = std::max<std::uint64_t>(block_rate(p, s.out.front()), 1);
  // A wake-up may come some milliseconds late (a socket host sleeps in whole ones): ten
  // milliseconds of the rate may go at once, so lateness does not cost throughput.
  const double burst = std::max<double>(16.0 * s.out.front().slice_size, rate / 100.0);
  CongestionState* cc = config.block_rate == 0 ? cc_model(p) : nullptr;
  std::uint64_t pace_us = 0;  // congestion control: when the next slice may go
  std::uint64_t expires_ms = kNever;
  std::uint32_t pipe = 0;
  if (cc != nullptr) {
    pipe = block_pipe(p, expires_ms);
    const auto burst_us = static_cast<std::uint64_t>(burst * 1e6 / static_cast<double>(rate));
    pace_us = std::max(cc->pace_next_us, now_us > burst_us ? now_us - burst_us : 0);
  } else {
    if (s.tokens_ms == 0) s.tokens = burst;
    s.tokens = std::min(burst, s.tokens + static_cast<double>(rate) *
                                              static_cast<double>(now_ms - s.tokens_ms) / 1000.0);
    s.tokens_ms = now_ms;
  }
  s.next_due_ms = kNever;
  // Held back by the pace, the window or the datagram's room: the transfer has more to send
  // than it sent, so this round's delivery rate measures the path, not the application.
  auto backlogged = [&] {
    if (cc != nullptr) {
      cc->round_app_limited = false;
      cc->block_in_flight = pipe;
    }
  };
  const std::size_t blocks = s.out.size();
  std::size_t idle = 0;  // blocks in a row with nothing due
  for (std::size_t k = s.rotate % blocks; idle < blocks; k = (k + 1) % blocks) {
    OutBlock& o = s.out[k];
    std::uint32_t i = 0;
    if (!next_slice(p, o, i)) {
      ++idle;
      continue;
    }
    idle = 0;
    const std::uint32_t len = slice_length(o.data.size(), o.slice_size, o.count, i);
    if (cc != nullptr) {
      const std::uint32_t transit =
          pipe + (p.queues != nullptr ? p.queues->reliable_data_in_transit : 0);
      if (transit + len > std::max<std::uint32_t>(cc->cwnd, p.mtu)) {
        // An ack wakes the peer; else the first slice in flight reaching its resend time.
        ++counters.cwnd_limited;
        s.next_due_ms = expires_ms != kNever ? expires_ms : now_ms + block_resend_ms(p);
        return backlogged();
      }
      if (pace_us > now_us + kBlockPaceSlackUs) {
        ++counters.pacer_waits;
        s.next_due_ms =
            std::max<std::uint64_t>((pace_us - kBlockPaceSlackUs + 999) / 1000, now_ms + 1);
        return backlogged();
      }
    } else if (s.tokens < len) {  // paced: the timer comes back when the bucket holds a slice
      s.next_due_ms = now_ms + static_cast<std::uint64_t>((len - s.tokens) * 1000.0 / rate) + 1;
      return;
    }
    if (room(b) < kTernExtSize + kBlockSliceHeader + len || b.commands >= kMaxPacketCommands) {
      b.more = true;
      return backlogged();
    }
    std::array<std::byte, kBlockSliceHeader> header{};
    Writer w(header);
    w.u16(o.id);
    w.u16(o.slice_size);
    w.u32(static_cast<std::uint32_t>(o.data.size()));
    w.u32(o.count);
    w.u32(i);
    Command cmd;
    cmd.command = static_cast<std::uint8_t>(Cmd::tern_ext);
    cmd.channel_id = o.channel;
    cmd.ext.kind = static_cast<std::uint8_t>(TernExtKind::block_slice);
    cmd.ext.flags = 0;
    cmd.ext.data_length = static_cast<std::uint16_t>(kBlockSliceHeader + len);
    put_command(b, cmd, header);
    std::memcpy(b.dg->bytes.data() + b.pos, o.data.bytes().data() + std::size_t{i} * o.slice_size,
                len);
    b.pos += len;
    if (o.sent_ms[i] != kNever) {
      ++counters.block_slices_resent;
      set_bit(o.resent, i);
    }
    o.sent_ms[i] = now_ms;
    if (i == o.next_new) ++o.next_new;
    ++counters.block_slices_sent;
    if (cc != nullptr) {
      pace_us += std::uint64_t{len} * 1'000'000 / rate;
      cc->pace_next_us = pace_us;
      pipe += len;
      expires_ms = std::min(expires_ms, now_ms + block_resend_ms(p));
    } else {
      s.tokens -= len;
    }
    s.rotate = static_cast<std::uint8_t>(k + 1);
  }
  // Nothing due now: the earliest resend in any block's window.
  if (cc != nullptr) {
    cc->round_app_limited = true;
    cc->block_in_flight = pipe;
  }
  const std::uint64_t resend = block_resend_ms(p);
  for (const OutBlock& o : s.out) {
    for (std::uint32_t i = o.base; i < o.next_new; ++i) {
      if (!bit(o.acked, i)) {
        s.next_due_ms = std::min(s.next_due_ms, o.sent_ms[i] + resend);
      }
    }
  }
}

inline std::uint64_t HostCore::Impl::blocks_deadline(const Peer& p) const {
  if (!p.extra->blocks || p.extra->blocks->out.empty()) return kNever;
  return std::min(p.extra->blocks->next_due_ms, p.extra->blocks->progress_ms + timeout_maximum(p));
}

// A slice from the peer. Every field is checked against the others and against what this
// host allows before anything is allocated; a block's buffer is taken with its first slice.
inline Handled HostCore::Impl::handle_block_slice(Peer& p, const Command& cmd, Arrival& arrival) {
  auto refuse = [&](Drop why) {
    arrival.why = why;
    return Handled::stop;
  };
  if (!p.blocks) return refuse(Drop::extension_not_agreed);
  if (!p.connected_like()) return refuse(Drop::wrong_state);
  if (cmd.channel_id >= p.channel_count) return refuse(Drop::bad_channel);
  Reader r(cmd.payload);
  std::uint16_t id = 0, slice_size = 0;
  std::uint32_t total = 0, count = 0, index = 0;
  if (!r.read_u16(id) || !r.read_u16(slice_size) || !r.read_u32(total) || !r.read_u32(count) ||
      !r.read_u32(index)) {
    return refuse(Drop::block_malformed);
  }
  if (total > config.max_block_size) {
    owe_block_refusal(p, cmd.channel_id, id);
    return refuse(Drop::block_too_large);
  }
  if (total == 0 || slice_size == 0 || slice_size > kMaxMtu ||
      count != (std::uint64_t{total} + slice_size - 1) / slice_size) {
    return refuse(Drop::block_malformed);
  }
  if (index >= count) return refuse(Drop::block_slice_out_of_range);
  if (r.remaining() != slice_length(total, slice_size, count, index)) {
    return refuse(Drop::block_malformed);
  }
  BlockState& s = block_state(p);
  InBlock* in = nullptr;
  for (InBlock& b : s.in) {
    if (b.channel == cmd.channel_id) in = &b;
  }
  if (in != nullptr && in->id == id) {
    if (in->total != total || in->slice_size != slice_size) return refuse(Drop::block_mismatch);
    if (in->done || bit(in->have, index)) {
      // A copy the sender resent before our ack reached it: ack again, keep nothing.
      counters.drops.add(Drop::duplicate);
      in->ack_owed = s.acks_owed = true;
      mark_dirty(p);
      return Handled::ok;
    }
  } else {
    // A new block on the channel: only once the previous one there is complete (one in
    // flight per channel), within this peer's share and the host's memory cap.
    if (in != nullptr && !in->done) return refuse(Drop::block_mismatch);
    if (s.in_bytes + total > config.max_block_size) return refuse(Drop::block_memory);
    if (counters.buffered_bytes + total > config.memory_cap) {
      // Past the host's whole memory cap it can never be taken: refused as too large.
      if (total > config.memory_cap) owe_block_refusal(p, cmd.channel_id, id);
      return refuse(Drop::memory_cap);
    }
    if (in == nullptr) in = &s.in.emplace_back();
    *in = InBlock{};
    in->data = Packet::allocate(total);
    in->have.assign((count + 63) / 64, 0);
    in->total = total;
    in->count = count;
    in->id = id;
    in->slice_size = slice_size;
    in->channel = cmd.channel_id;
    s.in_bytes += total;
    counters.buffered_bytes += total;
  }
  std::memcpy(in->data.mutable_bytes().data() + std::size_t{index} * slice_size,
              cmd.payload.data() + kBlockSliceHeader, r.remaining());
  set_bit(in->have, index);
  ++in->received;
  in->newest = std::max(in->newest, index);
  while (in->base < in->count && bit(in->have, in->base)) ++in->base;
  in->ack_owed = s.acks_owed = true;
  mark_dirty(p);
  if (in->received == in->count) {
    in->done = true;
    s.in_bytes -= in->total;
    counters.buffered_bytes -= in->total;  // deliver_now charges it again, as any message
    in->have = {};
    ++counters.blocks_received;
    deliver_now(p, in->channel, Delivery::reliable, std::move(in->data));
  }
  return Handled::ok;
}

// A receiver's answer about a block we are sending (its ack, its refusal), `size` bytes: the
// ID, a zero and a u32 (an ack's base, a refusal's cap), read from `r`. No block when the
// answer is malformed or not agreed (arrival.why says which) or names none in flight: late,
// for a block already ended or never sent, counted as an unexpected ack.
inline HostCore::Impl::BlockAnswer HostCore::Impl::block_answer(Peer& p, const Command& cmd,
                                                                std::size_t size, Reader& r,
                                                                Arrival& arrival) {
  BlockAnswer answer;
  if (!p.blocks || cmd.payload.size() != size) {
    arrival.why = !p.blocks ? Drop::extension_not_agreed : Drop::block_malformed;
    answer.handled = Handled::stop;
    return answer;
  }
  std::uint16_t id = 0, zero = 0;
  r.read_u16(id);
  r.read_u16(zero);
  r.read_u32(answer.value);
  OutBlock* o = block_out(p, cmd.channel_id);
  if (o == nullptr || o->id != id) {
    counters.drops.add(Drop::unexpected_ack);
    return answer;
  }
  answer.block = o;
  return answer;
}

// The receiver's ack of a block we are sending: everything below `base`, and the slices its
// field names after it.
inline Handled HostCore::Impl::handle_block_ack(Peer& p, const Command& cmd, Arrival& arrival) {
  Reader r(cmd.payload);
  const BlockAnswer answer = block_answer(p, cmd, kBlockAckData, r, arrival);
  OutBlock* o = answer.block;
  if (o == nullptr) return answer.handled;
  const std::uint32_t base = answer.value;
  auto refuse = [&](Drop why) {
    arrival.why = why;
    return Handled::stop;
  };
  std::uint32_t field = 0;
  r.read_u32(field);
  if (base > o->count || (base < o->count && field <= base)) {
    return refuse(Drop::block_malformed);
  }
  // The newest send among the slices it names, and whether this ack is the first to name that
  // one and it went once (Karn): then now minus its send is a round trip.
  std::uint64_t newest_any = 0;
  bool newest_fresh = false;
  std::uint64_t delivered = 0;  // slice bytes this ack is the first to name
  auto take = [&](std::uint32_t i) {
    const bool fresh = !bit(o->acked, i) && !bit(o->resent, i);
    if (!bit(o->acked, i)) delivered += slice_length(o->data.size(), o->slice_size, o->count, i);
    set_bit(o->acked, i);
    const std::uint64_t sent = o->sent_ms[i];
    if (sent != kNever && sent != kResendNow && sent > newest_any) {
      newest_any = sent;
      newest_fresh = fresh;
    }
  };
  for (std::uint32_t i = o->base; i < base; ++i) take(i);
  std::array<std::uint32_t, kBlockAckSpan / 32> words{};
  for (std::uint32_t word = 0; word < words.size(); ++word) {
    r.read_u32(words[word]);
    std::uint32_t bits = words[word];
    for (std::uint32_t j = 0; bits != 0 && j < 32; ++j, bits >>= 1) {
      const std::uint64_t i = std::uint64_t{field} + word * 32 + j;
      if ((bits & 1) != 0 && i < o->count) take(static_cast<std::uint32_t>(i));
    }
  }
  BlockState& s = *p.extra->blocks;
  // Fast resend: a slice this ack says is missing (the base, or a clear bit of its field) and
  // that went well before the newest one it names (a quarter of the round trip, at least 2 ms:
  // reordering margin) was lost; it goes again without waiting for its timeout.
  if (newest_any != 0 && base < o->count) {
    const std::uint32_t rtt = s.srtt_ms != 0 ? s.srtt_ms : p.rtt;
    const std::uint64_t margin = std::max<std::uint32_t>(rtt / 4, 2);
    auto lost = [&](std::uint32_t i) {
      if (i < o->next_new && !bit(o->acked, i) && o->sent_ms[i] != kResendNow &&
          o->sent_ms[i] + margin < newest_any) {
        o->sent_ms[i] = kResendNow;
      }
    };
    lost(base);
    const std::uint32_t field_end =
        std::min<std::uint64_t>(o->next_new, std::uint64_t{field} + kBlockAckSpan);
    for (std::uint32_t i = field; i < field_end; ++i) {
      if ((words[(i - field) / 32] >> ((i - field) % 32) & 1) == 0) lost(i);
    }
  }
  const std::uint64_t newest_sent = newest_fresh ? newest_any : 0;
  if (newest_sent != 0 && now_ms >= newest_sent) {
    // RFC 6298's smoothing, in whole milliseconds.
    const auto sample =
        static_cast<std::uint32_t>(std::min<std::uint64_t>(now_ms - newest_sent, 60'000));
    if (s.srtt_ms == 0) {
      s.srtt_ms = std::max<std::uint32_t>(sample, 1);
      s.rttvar_ms = sample / 2;
    } else {
      const std::uint32_t diff = sample > s.srtt_ms ? sample - s.srtt_ms : s.srtt_ms - sample;
      s.rttvar_ms = (3 * s.rttvar_ms + diff) / 4;
      s.srtt_ms = std::max<std::uint32_t>((7 * s.srtt_ms + sample) / 8, 1);
    }
    cc_on_rtt(p, std::max<std::uint32_t>(sample, 1));
  }
  if (delivered != 0) {
    s.progress_ms = now_ms;
    // Congestion control's delivery rate counts slices as it counts reliable payload; the
    // round closes after the datagram (after_acks).
    if (CongestionState* cc = cc_model(p); cc != nullptr) cc->delivered += delivered;
  }
  while (o->base < o->count && bit(o->acked, o->base)) ++o->base;
  if (o->base == o->count) {
    ++counters.blocks_sent;
    s.out.erase(s.out.begin() + (o - s.out.data()));
  }
  mark_dirty(p);
  return Handled::ok;
}

// The largest block this host takes from a peer: its cap, and never more than its memory.
inline std::uint32_t HostCore::Impl::block_cap() const {
  return static_cast<std::uint32_t>(
      std::min<std::uint64_t>(config.max_block_size, config.memory_cap));
}

// A slice of a block above our cap: its sender is told (block_refused), once per block, and
// again a round trip later while its slices keep coming (the answer is not acknowledged).
inline void HostCore::Impl::owe_block_refusal(Peer& p, std::uint8_t channel, std::uint16_t id) {
  BlockState& s = block_state(p);
  BlockRefusal* r = nullptr;
  for (BlockRefusal& x : s.refusals) {
    if (x.channel == channel) r = &x;
  }
  if (r == nullptr) {
    r = &s.refusals.emplace_back();
  } else if (r->id == id &&
             (r->owed || (r->answered_ms != 0 &&
                          now_ms < r->answered_ms + std::max<std::uint32_t>(p.rtt, 1)))) {
    return;
  }
  r->id = id;
  r->channel = channel;
  r->owed = s.refusals_owed = true;
  mark_dirty(p);
}

inline void HostCore::Impl::write_block_refusals(Peer& p, Build& b) {
  BlockState& s = *p.extra->blocks;
  s.refusals_owed = false;
  for (BlockRefusal& r : s.refusals) {
    if (!r.owed) continue;
    if (room(b) < kTernExtSize + kBlockRefusedData || b.commands >= kMaxPacketCommands) {
      s.refusals_owed = true;
      b.more = true;
      return;
    }
    std::array<std::byte, kBlockRefusedData> data{};
    Writer w(data);
    w.u16(r.id);
    w.u16(0);
    w.u32(block_cap());
    Command cmd;
    cmd.command = static_cast<std::uint8_t>(Cmd::tern_ext);
    cmd.channel_id = r.channel;
    cmd.ext.kind = static_cast<std::uint8_t>(TernExtKind::block_refused);
    cmd.ext.flags = 0;
    cmd.ext.data_length = static_cast<std::uint16_t>(kBlockRefusedData);
    put_command(b, cmd, data);
    r.owed = false;
    r.answered_ms = std::max<std::uint64_t>(now_ms, 1);
  }
}

// The receiver refused the block we are sending on the channel: it is above its cap. The
// block ends here, with an event naming that cap, and send_block to this peer refuses
// anything larger from now on (too_large) instead of sending it.
inline Handled HostCore::Impl::handle_block_refused(Peer& p, const Command& cmd, Arrival& arrival) {
  if (p.blocks && !p.connected_like()) {
    arrival.why = Drop::wrong_state;
    return Handled::stop;
  }
  Reader r(cmd.payload);
  const BlockAnswer answer = block_answer(p, cmd, kBlockRefusedData, r, arrival);
  OutBlock* o = answer.block;
  if (o == nullptr) return answer.handled;
  const std::uint32_t cap = answer.value;
  if (o->data.size() <= cap) {  // it fits what it names
    arrival.why = Drop::block_malformed;
    return Handled::stop;
  }
  BlockState& s = *p.extra->blocks;
  s.peer_cap = cap;
  const std::uint8_t channel = o->channel;
  s.out.erase(s.out.begin() + (o - s.out.data()));
  ++counters.blocks_refused;
  Event ev = event_for(p, EventType::block_refused);
  ev.channel = channel;
  ev.data = cap;
  events.push(std::move(ev));
  mark_dirty(p);
  return Handled::ok;
}

// A peer that acknowledges none of our slices for timeout_maximum is gone for the transfer,
// though it may answer pings (a path that drops full-size datagrams, a receiver that keeps
// refusing for memory): it times out as it would for a reliable command. True when it did.
inline bool HostCore::Impl::blocks_timers(Peer& p) {
  if (p.extra == nullptr || !p.extra->blocks) return false;
  const BlockState& s = *p.extra->blocks;
  if (s.out.empty() || now_ms - s.progress_ms < timeout_maximum(p)) return false;
  ++counters.block_timeouts;
  notify_disconnect(p, DisconnectReason::timeout);
  return true;
}

// The connection ends: blocks in progress give back what they charged to the host.
inline void HostCore::Impl::blocks_release(Peer& p) {
  if (p.extra == nullptr || !p.extra->blocks) return;
  counters.buffered_bytes -= p.extra->blocks->in_bytes;
  p.extra->blocks.reset();
}

}  // namespace tern::proto
