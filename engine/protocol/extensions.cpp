// The protocol core: the hook points where the core hands control to Tern's extensions. Each
// calls, in order, every extension that uses it; an extension is added by writing its file and
// adding its calls here (README.md, "Adding an extension"). Everything is inline in one
// translation unit, so a hook costs what its extensions' code costs.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// ---- the hello: what we offer, and what each connection agreed to --------------------------

// What a connecting hello offers. Idle pings alone send no hello: a host with every other
// extension off behaves exactly as ENet (HostConfig::selective_acks).
inline std::uint32_t HostCore::Impl::local_features() const {
  const std::uint32_t others = selective_acks_offered() | nodelay_offered() |
                               delivery_modes_offered() | redundancy_offered() | blocks_offered() |
                               cc_offered() | pmtu_offered();
  return others != 0 ? others | idle_pings_offered() : 0;
}

// What a hello may name that we take up: what we offer, and what we honour for the other side
// without using it ourselves.
inline std::uint32_t HostCore::Impl::understood_features() const {
  return local_features() | kFeatureNodelay;
}

// The features a hello's answer names for this connection (the server's VERIFY side).
inline std::uint32_t HostCore::Impl::agreed_features(const Peer& p) const {
  return selective_acks_agreed(p) | nodelay_agreed(p) | delivery_modes_agreed(p) |
         redundancy_agreed(p) | blocks_agreed(p) | cc_agreed(p) | pmtu_agreed(p) |
         idle_pings_agreed(p);
}

// What agreed_features names for a connection once on_features_agreed took `agreed`, without a
// peer to set: the half-open handshake answers before there is one, and agreeing has effects
// (redundancy takes a PeerExtra block) that a stand-in peer would leak once per CONNECT.
inline std::uint32_t HostCore::Impl::answer_features(std::uint32_t agreed) const {
  std::uint32_t out = agreed & (kFeatureSelectiveAcks | kFeatureDeliveryModes | kFeatureBlocks);
  if ((agreed & kFeatureNodelay) != 0 || config.nodelay) out |= kFeatureNodelay;
  if (config.redundancy && (agreed & kFeatureRedundancy) != 0) out |= kFeatureRedundancy;
  if (config.congestion_control && (agreed & kFeatureCongestion) != 0) out |= kFeatureCongestion;
  if (config.pmtu && (agreed & kFeaturePmtu) != 0) out |= kFeaturePmtu;
  out |= agreed & local_features() & kFeatureIdlePings;
  return out;
}

inline void HostCore::Impl::on_features_agreed(Peer& p, std::uint32_t agreed) {
  selective_acks_on_agreed(p, agreed);
  nodelay_on_agreed(p, agreed);
  delivery_modes_on_agreed(p, agreed);
  redundancy_on_agreed(p, agreed);
  blocks_on_agreed(p, agreed);
  cc_on_agreed(p, agreed);
  pmtu_on_agreed(p, agreed);
  idle_pings_on_agreed(p, agreed);
}

// ---- commands: the extensions' rules in the command table (command_table.cpp) -------------

constexpr void HostCore::Impl::install_extension_commands(CommandRules& rules) {
  install_selective_acks(rules);
  // One command carries every later extension; its kind names the owner (wire.hpp,
  // TernExtKind), which checks its own agreement. Never acknowledged through ENet's acks:
  // a kind that needs delivery acknowledges in its own format.
  rules[static_cast<std::size_t>(Cmd::tern_ext)] = {
      .handle = [](Impl& core, Peer& p, const Command& cmd,
                   Arrival& a) { return core.handle_tern_ext(p, cmd, a); },
      .acknowledged = false,
      .feature = kAnyFeature};
}

// A tern_ext command of an existing connection, by kind. From a peer that neither agreed to
// an extension nor was offered one (a plain ENet peer), no kind is taken.
inline Handled HostCore::Impl::handle_tern_ext(Peer& p, const Command& cmd, Arrival& arrival) {
  if (agreed_features(p) == 0 && !p.hello_offered && !p.secure) {
    arrival.why = Drop::extension_not_agreed;
    return Handled::stop;
  }
  switch (static_cast<TernExtKind>(cmd.ext.kind)) {
    case TernExtKind::block_slice: return handle_block_slice(p, cmd, arrival);
    case TernExtKind::block_ack: return handle_block_ack(p, cmd, arrival);
    case TernExtKind::block_refused: return handle_block_refused(p, cmd, arrival);
    case TernExtKind::mtu_probe: return handle_mtu_probe(p, cmd, arrival);
    case TernExtKind::mtu_probe_ack: return handle_mtu_probe_ack(p, cmd, arrival);
    // A resent CONNECT's token reaches the connection it made: already taken.
    case TernExtKind::secure_token: return Handled::ok;
    case TernExtKind::secure_challenge: return handle_secure_challenge(p, cmd, arrival);
    default: arrival.why = Drop::unknown_ext_kind; return Handled::stop;
  }
}

// ---- acknowledgements (ack_ledger.cpp) ----------------------------------------------------

// A reliable command in flight was acknowledged, before it is freed.
inline void HostCore::Impl::on_reliable_acked(Peer& p, PeerQueues& q, const OutCmd& c) {
  congestion_window_on_acked(q, c);
  cc_on_acked(p, c);
}

// A datagram's commands have all been handled (host_core.cpp, after_datagram): its acks
// may have shown commands in flight to be lost.
inline void HostCore::Impl::after_acks(Peer& p) {
  fast_retransmit_after_acks(p);
  cc_after_acks(p);
}

// ---- retransmission (retransmit.cpp) ------------------------------------------------------

// Commands in flight timed out and went back to the queue; `first_sent_ms` is when the
// oldest of them was sent.
inline void HostCore::Impl::on_retransmission_timeouts(Peer& p, PeerQueues& q,
                                                       std::uint64_t first_sent_ms) {
  congestion_window_on_timeouts(p, q, first_sent_ms);
  pmtu_after_timeouts(p);
}

// ---- timers (timers.cpp) and datagrams of their own (host_core.cpp, flush) ---------------

// The earliest time an extension needs the peer's timers to run or has something to send
// (kNever: none): a path MTU probe, a large block's next slices.
inline std::uint64_t HostCore::Impl::extension_deadline(const Peer& p) const {
  if (p.extra == nullptr) return kNever;
  return std::min(pmtu_deadline(p), blocks_deadline(p));
}

// The peer's timers run (before its datagrams are built). True when an extension timed the
// peer out (it is gone).
inline bool HostCore::Impl::extension_timers(Peer& p) {
  pmtu_timers(p);
  return blocks_timers(p);
}

// After the peer's datagrams: ones an extension builds whole (path MTU probes). Returns how
// many it wrote into `out` (what does not fit waits for the next flush).
inline std::size_t HostCore::Impl::extension_datagrams(Peer& p, std::span<OutDatagram> out) {
  return pmtu_datagrams(p, out);
}

// ---- the datagram builder (datagram_builder.cpp) ------------------------------------------

// Reliable payload bytes the extensions let be in transit, on top of ENet's windows, for a
// command of the channel.
inline std::uint32_t HostCore::Impl::extension_send_window(const PeerQueues& q,
                                                           std::uint8_t channel_id) const {
  return congestion_window_limit(q, channel_id);
}

// ---- per-channel switches (HostConfig::channels) ----------------------------------------
// Each extension asks channel_off (core_impl.hpp) about its own switch where it acts on a
// channel's message; the default priority is the scheduler's, asked here by send().

inline Priority HostCore::Impl::channel_priority(std::uint8_t channel_id) const {
  if (channel_off(config.channels.priority_high, channel_id)) return Priority::high;
  if (channel_off(config.channels.priority_low, channel_id)) return Priority::low;
  return Priority::medium;
}

// The datagram's own commands are written and it is not empty: what the extensions add to
// it (before the hello, which goes last).
inline void HostCore::Impl::extension_extras(Peer& p, Build& b) { redundancy_extras(p, b); }

// The datagram's own commands are written: what extensions send on their own (it may be all
// the datagram carries). They set b.more when they have more ready than fits.
inline void HostCore::Impl::extension_commands(Peer& p, Build& b) { blocks_write(p, b); }

// ---- acknowledgements owed (ack_ledger.cpp) -----------------------------------------------

// An acknowledgement just behind the last pending range (selective_acks folds those ahead).
inline bool HostCore::Impl::fold_behind_range(const Peer& p, AckChunk& chunk, const Command& cmd,
                                              std::uint16_t sent_time) {
  return redundancy_fold_behind(p, chunk, cmd, sent_time);
}

// An ack range was written into a datagram.
inline void HostCore::Impl::on_range_written(Peer& p, const PendingAck& a) {
  redundancy_on_range_written(p, a);
}

// An unreliable command was written: true if an extension keeps it (to send again) instead
// of it being freed now.
inline bool HostCore::Impl::keep_unreliable_copy(Peer& p, PeerQueues& q, OutCmd* c) {
  return redundancy_keep_unreliable(p, q, c);
}

// ---- side blocks (peer_blocks.cpp) --------------------------------------------------------

// An otherwise idle queues block an extension still needs (its state lives there).
inline bool HostCore::Impl::extension_holds_queues(const PeerQueues& q) const {
  return redundancy_holds_queues(q);
}

// ---- incoming messages (receive.cpp) ------------------------------------------------------

// A new reliable command arrived on an application channel, `gap` sequence numbers past the
// next one expected (0: in order, or while earlier ones are held).
inline void HostCore::Impl::on_reliable_arrival(Peer& p, std::uint16_t gap) {
  redundancy_on_reliable_arrival(p, gap);
}

}  // namespace tern::proto
