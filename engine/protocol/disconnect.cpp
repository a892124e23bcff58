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

}  // namespace tern::proto
