// The protocol core, extension "selective acks" (HostConfig::selective_acks, on by default;
// WIRE.md, "Extensions"): one ACK_RANGE acknowledges up to 33 reliable commands of a channel
// instead of an ACKNOWLEDGE each. Negotiated with kFeatureSelectiveAcks in the hello; its
// state is the connection's Peer::selective_acks; it owns the ACK_RANGE command, and the ack
// ledger asks it whether and how to fold an acknowledgement into a range.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::selective_acks_offered() const {
  return config.selective_acks ? kFeatureSelectiveAcks : 0;
}

inline std::uint32_t HostCore::Impl::selective_acks_agreed(const Peer& p) const {
  return p.selective_acks ? kFeatureSelectiveAcks : 0;
}

inline void HostCore::Impl::selective_acks_on_agreed(Peer& p, std::uint32_t agreed) {
  p.selective_acks = (agreed & kFeatureSelectiveAcks) != 0;
}

// Its own checks come in the extension's order (agreed, channel, state): see handle_ack_range.
constexpr void HostCore::Impl::install_selective_acks(CommandRules& rules) {
  rules[static_cast<std::size_t>(Cmd::ack_range)] = {
      .handle = [](Impl& core, Peer& p, const Command& cmd,
                   Arrival& a) { return core.handle_ack_range(p, cmd, a.why); },
      .acknowledged = false,
      .feature = kFeatureSelectiveAcks};
}

// Ranges cover the application channels of a connection that agreed to them.
inline bool HostCore::Impl::acks_in_ranges(const Peer& p, const Command& cmd) {
  return p.selective_acks && cmd.channel_id < p.channel_count;
}

// Into the last pending range when it covers this sequence number: most acks of a burst cost
// one bit. The range keeps the sent time of the first datagram it acknowledged: the sender's
// one RTT sample then includes the time acks were held (ack_delay_ms), as ENet's one sample
// per command would, and its retransmission timeout covers the hold. With the newest sent
// time the sample missed the hold, and a sender whose acks were held retransmitted what had
// arrived.
inline bool HostCore::Impl::fold_into_range(AckChunk& chunk, const Command& cmd) {
  if (chunk.end == chunk.begin) return false;
  PendingAck& last = chunk.acks[chunk.end - 1];
  const auto ahead = static_cast<std::uint16_t>(cmd.reliable_seq - last.reliable_seq);
  if (!last.is_range || last.channel != cmd.channel_id || ahead >= kAckRangeSpan) return false;
  if (ahead != 0) last.bits |= 1u << (ahead - 1);
  return true;
}

// The commands a range names, found before any is freed. They were written a round trip
// ago, and a relay sends megabytes in that time, so they have left the cache and so have
// the messages they hold: asking for all of them first lets the misses overlap, where
// freeing them one by one would wait out each in turn (two waits per command: its own line,
// then its message's reference count).
inline std::size_t HostCore::Impl::find_range(const Peer& p, std::uint8_t channel_id,
                                              std::uint16_t seq, std::uint32_t bits,
                                              std::array<OutCmd*, kAckRangeSpan>& found) const {
  const Channel* ch = channel_if(p, channel_id);
  if (ch != nullptr) {
    for_each_in_range(seq, bits,
                      [&](std::uint16_t s) { detail::prefetch_line(find_in_channel(*ch, s)); });
  }
  std::size_t n = 0;
  for_each_in_range(seq, bits, [&](std::uint16_t s) {
    OutCmd* c = find_unacked(p, channel_id, s);  // indexed commands are queued: p.queues
    if (c != nullptr) c->packet.prefetch();
    found[n++] = c;
  });
  return n;
}

// Selective acks (WIRE.md, "Extensions"): one command acknowledges up to 33 commands of one
// channel. They only cover application channels, so the handshake and disconnect states,
// which wait for system commands, never see one; one RTT sample stands for the range.
inline Handled HostCore::Impl::handle_ack_range(Peer& p, const Command& cmd, Drop& why) {
  // Understanding is enough to accept them: a client that offered selective acks takes
  // ranges even if the server's hello never reached it (the server agreed; only we do not
  // know). Sending them waits for the agreement.
  if (!p.selective_acks && !p.hello_offered) {
    why = Drop::extension_not_agreed;
    return Handled::stop;
  }
  if (cmd.channel_id >= p.channel_count) {
    why = Drop::bad_channel;
    return Handled::stop;
  }
  if (!p.connected_like()) {
    why = Drop::wrong_state;
    return Handled::stop;
  }
  // A repeated range (redundancy) carries the sent time of the datagram it first answered:
  // no RTT sample from it, and what it names was mostly acknowledged already.
  // A client that offered redundancy honours the mark even if the server's answer was lost.
  const bool repeat = (cmd.command & kFlagUnsequenced) != 0 &&
                      (p.redundancy || (p.hello_offered && config.redundancy));
  if (!repeat && !take_rtt_sample(p, cmd.ack_range.received_sent_time)) return Handled::ok;
  std::array<OutCmd*, kAckRangeSpan> found;
  const std::size_t n = find_range(p, cmd.channel_id, cmd.reliable_seq, cmd.ack_range.bits, found);
  if (!repeat && n > 0 && found[0] != nullptr) {
    redundancy_on_base_acked(p, *found[0], cmd.ack_range.received_sent_time);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (found[i] == nullptr) {
      // With redundancy the copies of a command are acknowledged too, after the first.
      if (!p.redundancy) counters.drops.add(Drop::unexpected_ack);
    } else {
      if (repeat) ++counters.repeated_acks_useful;
      remove_acked(p, found[i]);
    }
  }
  if (p.state == PeerState::disconnect_later && !p.has_outgoing())
    start_disconnect(p, p.event_data);
  return Handled::ok;
}

}  // namespace tern::proto
