// The protocol core: extension: ACK_RANGE, one command acknowledging up to 33 reliable commands.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

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
    for_each_in_range(seq, bits, [&](std::uint16_t s) {
      OutCmd* c = ch->unacked.find(s);
      if (c == nullptr && ch->wide != nullptr) c = ch->wide->find(s);
      detail::prefetch_line(c);
    });
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
  if (!take_rtt_sample(p, cmd.ack_range.received_sent_time)) return Handled::ok;
  std::array<OutCmd*, kAckRangeSpan> found;
  const std::size_t n = find_range(p, cmd.channel_id, cmd.reliable_seq, cmd.ack_range.bits, found);
  for (std::size_t i = 0; i < n; ++i) {
    if (found[i] == nullptr) {
      counters.drops.add(Drop::unexpected_ack);
    } else {
      remove_acked(p, found[i]);
    }
  }
  if (p.state == PeerState::disconnect_later && !p.has_outgoing())
    start_disconnect(p, p.event_data);
  return Handled::ok;
}

}  // namespace tern::proto
