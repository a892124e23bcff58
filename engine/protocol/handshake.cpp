// The protocol core: CONNECT, VERIFY_CONNECT and the Tern hello: a connection comes up.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::random_u32() {
  // xorshift64*: connect IDs only need to differ between connections.
  random_state ^= random_state >> 12;
  random_state ^= random_state << 25;
  random_state ^= random_state >> 27;
  return static_cast<std::uint32_t>((random_state * 2685821657736338717ull) >> 32);
}

inline void HostCore::Impl::emit_connect(Peer& p) {
  p.app_knows = true;
  Event ev = event_for(p, EventType::connect);
  ev.data = p.connect_data;
  events.push(std::move(ev));
  ++counters.connects;
}

// enet_protocol_notify_connect
inline void HostCore::Impl::notify_connect(Peer& p) {
  recalculate_bandwidth_limits = true;
  set_state(p, PeerState::connected);
  emit_connect(p);
}

// A Tern peer's hello. The connecting side offers its features with its CONNECT; the other
// side answers with the ones both have alongside its VERIFY_CONNECT, and from then on each
// uses what the answer names. Anything else (a repeat, a hello in another state) is ignored.
inline Handled HostCore::Impl::handle_hello(Peer& p, const Command& cmd) {
  const std::uint32_t agreed = cmd.hello.features & understood_features();
  if (p.hello_offered) {
    if (p.state == PeerState::connected) on_features_agreed(p, agreed);
  } else if (p.state == PeerState::acknowledging_connect && agreed != 0) {
    p.hello_agreed = true;
    on_features_agreed(p, agreed);
  }
  return Handled::ok;
}

// A session number for one direction of an accepted connection, as ENet picks it: the one
// after what the client proposes (0xFF: after the slot's last), never the slot's last itself,
// so a stale datagram from the slot's previous connection does not pass for this one's.
inline std::uint8_t next_session(std::uint32_t proposed, std::uint8_t last) {
  constexpr std::uint8_t kSessionValues = kHeaderSessionMask >> kHeaderSessionShift;
  std::uint8_t session = proposed == 0xFF ? last : static_cast<std::uint8_t>(proposed);
  session = static_cast<std::uint8_t>((session + 1) & kSessionValues);
  if (session == last) session = static_cast<std::uint8_t>((session + 1) & kSessionValues);
  return session;
}

// CONNECT or VERIFY_CONNECT, which carry the same fields: our peer ID for the other side, the
// sessions, MTU, window, channels, our bandwidths and the connection's throttle settings.
inline Command HostCore::Impl::handshake_command(Cmd type, const Peer& p,
                                                 std::uint8_t incoming_session,
                                                 std::uint8_t outgoing_session,
                                                 std::uint32_t window,
                                                 std::uint32_t channels) const {
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(type) | kFlagAcknowledge;
  Connect& c = cmd.connect;
  c.outgoing_peer_id = p.incoming_peer_id;
  c.incoming_session = incoming_session;
  c.outgoing_session = outgoing_session;
  c.mtu = p.mtu;
  c.window_size = window;
  c.channel_count = channels;
  c.incoming_bandwidth = config.incoming_bandwidth;
  c.outgoing_bandwidth = config.outgoing_bandwidth;
  c.throttle_interval = throttle_interval(p);
  c.throttle_acceleration = throttle_acceleration(p);
  c.throttle_deceleration = throttle_deceleration(p);
  c.connect_id = p.connect_id;
  return cmd;
}

// enet_protocol_handle_connect (server side). Returns the new peer or nullptr.
inline Peer* HostCore::Impl::handle_connect(const Endpoint& from, const Command& cmd, Drop& why) {
  const Connect& c = cmd.connect;
  if (c.channel_count < kMinChannelCount || c.channel_count > kMaxChannelCount ||
      c.outgoing_peer_id >= kMaxPeerId) {
    why = Drop::bad_handshake;
    return nullptr;
  }
  // A client's indices are distinct among its live connections, so its index finds a
  // retransmitted CONNECT, and a restarted client (same socket, same index, new connect ID)
  // replaces its old connection.
  if (Peer* found = find_accepted(from, static_cast<std::uint16_t>(c.outgoing_peer_id))) {
    Peer& old = *found;
    if (old.outgoing_peer_id == c.outgoing_peer_id && old.state != PeerState::connecting) {
      if (old.connect_id == c.connect_id) {
        why = Drop::duplicate;  // a retransmitted CONNECT; our VERIFY retransmits on its own
        return nullptr;
      }
      if (old.app_knows) emit_disconnect(old, DisconnectReason::replaced, 0);
      if (old.connected_like()) recalculate_bandwidth_limits = true;
      reset_peer(old);
    }
  }
  Peer* pp = allocate_peer(from, static_cast<std::uint16_t>(c.outgoing_peer_id));
  if (pp == nullptr) {
    why = Drop::peer_limit;
    return nullptr;
  }
  Peer& p = *pp;
  const std::uint32_t channel_count = std::min(c.channel_count, config.channel_limit);
  reset_channels(p, channel_count);
  p.state = PeerState::acknowledging_connect;
  p.connect_id = c.connect_id;
  p.outgoing_peer_id = static_cast<std::uint16_t>(c.outgoing_peer_id);
  key_accepted(p);
  set_bandwidths(p, c.incoming_bandwidth, c.outgoing_bandwidth);
  set_throttle_settings(p, c.throttle_interval, c.throttle_acceleration, c.throttle_deceleration);
  p.connect_data = c.data;
  p.event_data = c.data;

  const std::uint8_t incoming_session = next_session(c.incoming_session, p.outgoing_session);
  p.outgoing_session = incoming_session;
  const std::uint8_t outgoing_session = next_session(c.outgoing_session, p.incoming_session);
  p.incoming_session = outgoing_session;

  const std::uint32_t mtu = std::clamp(c.mtu, kMinMtu, kMaxMtu);
  p.mtu = static_cast<std::uint16_t>(std::min<std::uint32_t>(p.mtu, mtu));
  compute_window_from_bandwidth(p);
  std::uint32_t window = config.incoming_bandwidth == 0
                             ? kMaxWindowSize
                             : (config.incoming_bandwidth / kWindowSizeScale) * kMinWindowSize;
  window = std::min(window, c.window_size);
  window = std::clamp(window, kMinWindowSize, kMaxWindowSize);

  queue_system(p, handshake_command(Cmd::verify_connect, p, incoming_session, outgoing_session,
                                    window, channel_count));
  return &p;
}

// enet_protocol_handle_verify_connect (client side).
inline Handled HostCore::Impl::handle_verify_connect(Peer& p, const Command& cmd, Drop& why) {
  if (p.state != PeerState::connecting) return Handled::ok;
  const Connect& c = cmd.connect;
  if (c.channel_count < kMinChannelCount || c.channel_count > kMaxChannelCount ||
      c.throttle_interval != throttle_interval(p) ||
      c.throttle_acceleration != throttle_acceleration(p) ||
      c.throttle_deceleration != throttle_deceleration(p) || c.connect_id != p.connect_id) {
    why = Drop::bad_handshake;
    p.event_data = 0;
    set_state(p, PeerState::zombie);
    if (p.app_knows) emit_disconnect(p, DisconnectReason::refused, 0);
    reset_peer(p);
    return Handled::stop;
  }
  remove_sent_reliable(p, p.connect_seq, kSystemChannel);
  // No channel has carried anything yet: the connection is not up.
  if (c.channel_count < p.channel_count) reset_channels(p, c.channel_count);
  p.outgoing_peer_id = static_cast<std::uint16_t>(c.outgoing_peer_id);
  p.incoming_session = static_cast<std::uint8_t>(c.incoming_session);
  p.outgoing_session = static_cast<std::uint8_t>(c.outgoing_session);
  const std::uint32_t mtu = std::clamp(c.mtu, kMinMtu, kMaxMtu);
  p.mtu = static_cast<std::uint16_t>(std::min<std::uint32_t>(p.mtu, mtu));
  const std::uint32_t window = std::clamp(c.window_size, kMinWindowSize, kMaxWindowSize);
  p.window_size = std::min(p.window_size, window);
  set_bandwidths(p, c.incoming_bandwidth, c.outgoing_bandwidth);
  notify_connect(p);
  return Handled::ok;
}

inline PeerHandle HostCore::Impl::connect(std::uint64_t now_us, const Endpoint& to,
                                          std::size_t channel_count, std::uint32_t data) {
  now_ms = now_us / 1000;
  // Several connections to one server are fine (ENet allows them); each gets its own ID.
  if (peer_count >= config.peer_limit) return PeerHandle{};
  Peer* pp = allocate_peer(to, static_cast<std::uint16_t>(next_client_peer_id++ % kMaxPeerId));
  if (pp == nullptr) return PeerHandle{};
  Peer& p = *pp;
  channel_count = std::clamp<std::size_t>(channel_count, kMinChannelCount, kMaxChannelCount);
  reset_channels(p, static_cast<std::uint32_t>(channel_count));
  p.state = PeerState::connecting;
  p.app_knows = true;
  p.hello_offered = local_features() != 0;
  p.connect_id = random_u32();
  p.connect_data = data;
  p.window_size = config.outgoing_bandwidth == 0
                      ? kMaxWindowSize
                      : (config.outgoing_bandwidth / kWindowSizeScale) * kMinWindowSize;
  p.window_size = std::clamp(p.window_size, kMinWindowSize, kMaxWindowSize);

  Command cmd = handshake_command(Cmd::connect, p, p.incoming_session, p.outgoing_session,
                                  p.window_size, static_cast<std::uint32_t>(channel_count));
  cmd.connect.data = data;
  queue_system(p, cmd);
  p.connect_seq = p.outgoing_reliable_seq;
  return handle_of(p);
}

}  // namespace tern::proto
