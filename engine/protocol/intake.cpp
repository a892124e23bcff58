// The protocol core: admission before the acknowledgement: rate and bandwidth buckets, held intake.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// HostConfig::intake_rate / intake_bandwidth: true when the peer's buckets pay for one more
// message of `bytes`, which they then do.
inline bool HostCore::Impl::meter(Peer& p, std::size_t bytes) {
  if (config.intake_rate == 0 && config.intake_bandwidth == 0) return true;
  return extra(p).intake.take(now_ms, config.intake_rate, config.intake_bandwidth, bytes);
}

// A new reliable command from a peer whose intake is held: kept, neither delivered nor
// acknowledged, so the sender's own window stops it sending more; past
// HostConfig::max_withheld it is not even kept (the sender resends it).
inline Handled HostCore::Impl::withhold_reliable(Peer& p, Channel& ch, const Command& cmd,
                                                 std::uint16_t sent_time, Drop& why) {
  PeerExtra& e = extra(p);
  if (e.withheld >= config.max_withheld || !charge(p, cmd.payload.size(), false, why)) {
    ++counters.intake_refused;
    return Handled::withheld;
  }
  InCmd* c = in_pool.get();
  c->reliable_seq = cmd.reliable_seq;
  c->type = Cmd::send_reliable;
  c->packet = Packet::copy_of(cmd.payload);
  c->accounted = static_cast<std::uint32_t>(cmd.payload.size());
  c->mode = delivery_mode(p, cmd);
  c->ack_withheld = true;
  c->ack_sent_time = sent_time;
  insert_reliable(ch, c);
  ++e.withheld;
  ++counters.intake_withheld;
  return Handled::withheld;
}

// Acknowledges what hold_intake kept and delivers what is now in order.
inline void HostCore::Impl::release_intake(Peer& p) {
  p.intake_held = false;
  if (p.extra != nullptr) p.extra->withheld = 0;
  for (std::uint32_t id = 0; id < p.channel_count; ++id) {
    Channel* ch = channel_if(p, static_cast<std::uint8_t>(id));
    if (ch == nullptr || ch->in_reliable.empty()) continue;
    for (InCmd* c = ch->in_reliable.front(); c != nullptr; c = c->next_) {
      if (!c->ack_withheld) continue;
      c->ack_withheld = false;
      Command ack;
      ack.command = static_cast<std::uint8_t>(Cmd::send_reliable) | kFlagAcknowledge;
      ack.channel_id = static_cast<std::uint8_t>(id);
      ack.reliable_seq = c->reliable_seq;
      queue_ack(p, ack, c->ack_sent_time);
    }
    dispatch_reliable(p, static_cast<std::uint8_t>(id));
  }
  if (p.has_queued()) mark_dirty(p);
  schedule(p);
}

}  // namespace tern::proto
