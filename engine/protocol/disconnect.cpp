// The protocol core: disconnects: requested, received, immediate, after the queue drains;
// farewells. Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline void HostCore::Impl::emit_disconnect(Peer& p, DisconnectReason reason, std::uint32_t data) {
  Event ev = event_for(p, EventType::disconnect);
  ev.reason = reason;
  ev.data = data;
  events.push(std::move(ev));
  ++counters.disconnects;
  if (reason == DisconnectReason::timeout) ++counters.timeouts;
}

// enet_protocol_notify_disconnect
inline void HostCore::Impl::notify_disconnect(Peer& p, DisconnectReason reason) {
  if (p.state >= PeerState::connection_pending) recalculate_bandwidth_limits = true;
  if (p.state != PeerState::connecting && p.state < PeerState::connection_succeeded) {
    reset_peer(p);  // a half-open connection the application never saw
    return;
  }
  const bool tell = p.app_knows;
  const std::uint32_t data = reason == DisconnectReason::remote ? p.event_data : 0;
  if (tell) emit_disconnect(p, reason, data);
  reset_peer(p);
}

// Builds a one-command datagram sent outside the connection's queues (disconnect_now, and
// disconnecting a connection that never completed): ENet flushes these immediately.
inline void HostCore::Impl::queue_farewell(Peer& p, std::uint32_t data) {
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::disconnect) | kFlagUnsequenced;
  cmd.channel_id = kSystemChannel;
  cmd.reliable_seq = ++p.outgoing_reliable_seq;
  cmd.disconnect.data = data;
  Farewell f;
  f.to = p.address;
  Header h;
  h.peer_id = p.outgoing_peer_id;
  h.session = p.outgoing_session;
  std::size_t n = encode_header(f.bytes, h, config.checksum);
  const std::size_t hsize = n;
  n += encode_command(std::span<std::byte>(f.bytes).subspan(n), cmd);
  f.size = static_cast<std::uint32_t>(n);
  if (config.checksum) {
    write_checksum(std::span<std::byte>(f.bytes.data(), n), 2,
                   p.outgoing_peer_id < kMaxPeerId ? p.connect_id : 0);
  }
  if (p.secure && p.extra->secure->sealing && !seal_farewell(p.extra->secure->tx, f, hsize)) {
    return;
  }
  farewells.push_back(f);
}

// enet_protocol_handle_disconnect
inline Handled HostCore::Impl::handle_disconnect(Peer& p, const Command& cmd) {
  if (p.state == PeerState::disconnected || p.state == PeerState::zombie ||
      p.state == PeerState::acknowledging_disconnect) {
    return Handled::ok;
  }
  clear_queues(p);
  p.event_data = cmd.disconnect.data;
  if (p.state == PeerState::connection_succeeded || p.state == PeerState::disconnecting ||
      p.state == PeerState::connecting) {
    const DisconnectReason reason =
        p.state == PeerState::connecting ? DisconnectReason::refused : DisconnectReason::remote;
    if (p.app_knows) emit_disconnect(p, reason, p.event_data);
    reset_peer(p);
  } else if (!p.connected_like()) {
    if (p.state == PeerState::connection_pending) recalculate_bandwidth_limits = true;
    reset_peer(p);
  } else if (cmd.needs_ack()) {
    set_state(p, PeerState::acknowledging_disconnect);  // zombie once the ack is sent
  } else {
    recalculate_bandwidth_limits = true;
    emit_disconnect(p, DisconnectReason::remote, p.event_data);
    reset_peer(p);
  }
  return Handled::ok;
}

// enet_peer_disconnect
inline void HostCore::Impl::start_disconnect(Peer& p, std::uint32_t data) {
  if (p.state == PeerState::disconnecting || p.state == PeerState::disconnected ||
      p.state == PeerState::acknowledging_disconnect || p.state == PeerState::zombie) {
    return;
  }
  clear_queues(p);
  if (p.connected_like()) {
    Command cmd;
    cmd.command = static_cast<std::uint8_t>(Cmd::disconnect) | kFlagAcknowledge;
    cmd.disconnect.data = data;
    queue_system(p, cmd);
    recalculate_bandwidth_limits = true;
    set_state(p, PeerState::disconnecting);
    schedule(p);
  } else {
    queue_farewell(p, data);
    reset_peer(p);
  }
}

inline void HostCore::Impl::disconnect_now(Peer& p, std::uint32_t data) {
  if (p.state != PeerState::zombie && p.state != PeerState::disconnecting) {
    clear_queues(p);
    queue_farewell(p, data);
  }
  if (p.connected_like()) recalculate_bandwidth_limits = true;
  reset_peer(p);
}

inline void HostCore::Impl::disconnect_later(Peer& p, std::uint32_t data) {
  if (p.connected_like() && p.has_outgoing()) {
    set_state(p, PeerState::disconnect_later);
    p.event_data = data;
  } else {
    start_disconnect(p, data);
  }
}

// The ack of a peer's DISCONNECT was sent and the connection ends: remember how to answer
// the DISCONNECT again should that ack be lost.
inline void HostCore::Impl::remember_goodbye(const Peer& p) {
  Goodbye& g = goodbyes[next_goodbye];
  next_goodbye = (next_goodbye + 1) % goodbyes.size();
  g.address = p.address;
  g.until_ms = now_ms + config.timeout_maximum_ms;
  g.connect_id = p.connect_id;
  g.incoming_peer_id = p.incoming_peer_id;
  g.outgoing_peer_id = p.outgoing_peer_id;
  g.incoming_session = p.incoming_session;
  g.outgoing_session = p.outgoing_session;
}

// A datagram naming a connection we no longer have: if it resends the DISCONNECT that ended
// one (address, port, peer ID and session all match a goodbye), acknowledge it again, so the
// peer completes its disconnect instead of timing out. The answer (an ACKNOWLEDGE behind a
// header) is never larger than the datagram it answers.
inline bool HostCore::Impl::acknowledge_repeated_disconnect(const Endpoint& from,
                                                            const DecodedHeader& dh,
                                                            std::span<const std::byte> bytes) {
  if (!dh.header.has_sent_time) return false;
  const Goodbye* found = nullptr;
  for (const Goodbye& g : goodbyes) {
    if (g.until_ms > now_ms && g.incoming_peer_id == dh.header.peer_id && g.address == from &&
        g.incoming_session == dh.header.session) {
      found = &g;
      break;
    }
  }
  if (found == nullptr) return false;
  if (config.checksum && !verify_checksum(bytes, dh, found->connect_id)) return false;
  CommandDecoder decoder(bytes, dh.size);
  Command cmd;
  Drop why = Drop::count_;
  while (decoder.next(cmd, why)) {
    if (cmd.type() != Cmd::disconnect || !cmd.needs_ack() || cmd.channel_id != kSystemChannel) {
      continue;
    }
    Command ack;
    ack.command = static_cast<std::uint8_t>(Cmd::acknowledge);
    ack.channel_id = kSystemChannel;
    ack.reliable_seq = cmd.reliable_seq;
    ack.ack.received_reliable_seq = cmd.reliable_seq;
    ack.ack.received_sent_time = dh.header.sent_time;
    Farewell f;
    f.to = from;
    Header h;
    h.peer_id = found->outgoing_peer_id;
    h.session = found->outgoing_session;
    h.has_sent_time = true;
    h.sent_time = static_cast<std::uint16_t>(now_ms);
    std::size_t n = encode_header(f.bytes, h, config.checksum);
    n += encode_command(std::span<std::byte>(f.bytes).subspan(n), ack);
    // Bounded like the handshake's replies: a flood of forged resends queues no more.
    constexpr std::size_t kMaxQueuedReplies = 1024;
    if (n > bytes.size() || farewells.size() >= kMaxQueuedReplies) return false;
    f.size = static_cast<std::uint32_t>(n);
    if (config.checksum) {
      write_checksum(std::span<std::byte>(f.bytes.data(), n), 4, found->connect_id);
    }
    farewells.push_back(f);
    ++counters.disconnects_reacknowledged;
    return true;
  }
  return false;
}

}  // namespace tern::proto
