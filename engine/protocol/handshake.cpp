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
  // Tokens are checked only before return routability (verify_before_peer).
  if (config.security == Security::required) {
    why = Drop::token_required;
    return nullptr;
  }
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

// ---- before return routability (WIRE.md, "Handshake under attack") ------------------------
//
// A CONNECT from a source we have no peer for takes no peer slot: what it asked for goes into
// a bounded table (half_open.hpp) and the source gets a VERIFY_CONNECT whose header sent time
// is a random cookie. Only its acknowledgement of that VERIFY_CONNECT, from the same address
// and port, naming the peer ID and session we gave and echoing the cookie, makes a peer. A
// source that never reads what we send (a forged address) never has the cookie.

// Entries are found by what the client's answer carries: its address and port, and the peer
// ID we gave it.
inline std::uint64_t HostCore::Impl::half_open_hash(const Endpoint& from,
                                                    std::uint16_t peer_id) const {
  return by_address.hash(base::PeerKey(from, kIdentityKey | peer_id));
}

inline HalfOpen* HostCore::Impl::find_half_open(const Endpoint& from, std::uint16_t peer_id) {
  return half_open.find(half_open_hash(from, peer_id), [&](const HalfOpen& e) {
    return e.used() && e.address == from && e.peer_id == peer_id;
  });
}

// An expired handshake of the same source and ID gives its place to the new one, so that an
// answer never finds two.
inline bool HostCore::Impl::id_clashes(const Endpoint& from, std::uint16_t peer_id) {
  HalfOpen* e = find_half_open(from, peer_id);
  if (e == nullptr) return false;
  if (!expired(*e)) return true;
  half_open.release(*e);
  counters.half_open = half_open.size();
  return false;
}

inline bool HostCore::Impl::expired(const HalfOpen& e) const {
  return now_ms - e.created_ms > config.half_open_timeout_ms;
}

inline std::uint64_t HostCore::Impl::source_hash(const Endpoint& key) const {
  return by_address.hash(base::PeerKey(key, 0x7FFF));
}

// Bans, then (for a CONNECT) the per-address and per-prefix buckets; true: drop, counted.
inline bool HostCore::Impl::refused_source(const Endpoint& from, bool connect) {
  if (guard.has_bans()) {
    if (guard.covers(from, now_ms, [this](const Endpoint& k) { return source_hash(k); })) {
      ++counters.connects_banned;
      counters.drops.add(Drop::banned);
      return true;
    }
  }
  if (!connect) return false;
  bool pass = true;
  if (config.connect_rate_per_address > 0) {
    const Endpoint a = SourceGuard::address_of(from);
    pass = guard.take(a, source_hash(a), now_ms, config.connect_rate_per_address,
                      config.connect_burst_per_address, config.source_table_capacity);
  }
  if (pass && config.connect_rate_per_prefix > 0) {
    const Endpoint p = SourceGuard::prefix_of(from);
    pass = guard.take(p, source_hash(p), now_ms, config.connect_rate_per_prefix,
                      config.connect_burst_per_prefix, config.source_table_capacity);
  }
  if (pass) return false;
  ++counters.connects_rate_limited;
  counters.drops.add(Drop::rate_limited);
  return true;
}

// A datagram without a peer ID: it may only open a connection. Its CONNECT (and the Tern
// hello after it) is answered without a peer; nothing else in it is read.
inline bool HostCore::Impl::first_stranger_command(std::span<const std::byte> bytes,
                                                   const DecodedHeader& dh, CommandDecoder& decoder,
                                                   Command& cmd) {
  if (config.checksum && !verify_checksum(bytes, dh, 0)) {
    counters.drops.add(Drop::bad_checksum);
    return false;
  }
  Drop why = Drop::count_;
  if (!decoder.next(cmd, why)) {
    if (!decoder.at_end()) counters.drops.add(why);
    return false;
  }
  ++counters.commands_in;
  return true;
}

inline void HostCore::Impl::stranger_datagram(const Endpoint& from, const DecodedHeader& dh,
                                              std::span<const std::byte> bytes) {
  CommandDecoder decoder(bytes, dh.size);
  Command cmd;
  if (!first_stranger_command(bytes, dh, decoder, cmd)) return;
  Drop why = Drop::count_;
  if (cmd.type() != Cmd::connect) {
    counters.drops.add(Drop::unknown_peer);
    return;
  }
  if (shedding_connects) {
    ++counters.connects_shed;
    counters.drops.add(Drop::connect_shed);
    return;
  }
  if (refused_source(from, true)) return;
  const Connect c = cmd.connect;
  if (c.channel_count < kMinChannelCount || c.channel_count > kMaxChannelCount ||
      c.outgoing_peer_id >= kMaxPeerId) {
    counters.drops.add(Drop::bad_handshake);
    return;
  }
  std::uint32_t features = 0;
  // After the CONNECT: the hello, then (secure sessions) the token; nothing else is read.
  Command token_cmd;
  bool has_token = false;
  for (int i = 0; i < 2 && decoder.next(cmd, why); ++i) {
    ++counters.commands_in;
    if (cmd.type() == Cmd::tern_hello) {
      features = cmd.hello.features & understood_features();
    } else {
      has_token = cmd.type() == Cmd::tern_ext &&
                  cmd.ext.kind == static_cast<std::uint8_t>(TernExtKind::secure_token);
      token_cmd = cmd;
      break;
    }
  }
  // A CONNECT that reached us twice, the second after its connection came up. One with a new
  // connect ID (a restarted client) replaces the connection only once it is acknowledged:
  // a forged one must not end an established peer.
  if (const Peer* old = find_accepted(from, c.outgoing_peer_id);
      old != nullptr && old->outgoing_peer_id == c.outgoing_peer_id &&
      old->state != PeerState::connecting && old->connect_id == c.connect_id) {
    counters.drops.add(Drop::duplicate);
    return;
  }
  if (peer_count >= config.peer_limit) {
    counters.drops.add(Drop::peer_limit);
    return;
  }
  if (config.security != Security::plain) {
    // Last, as it costs a decryption: the token, or (required) nothing at all.
    if (has_token) {
      TokenArrival token;
      if (!check_token(from, token_cmd, token)) return;
      open_half(from, c, features, bytes.size(), &token);
      return;
    }
    if (config.security == Security::required) {
      counters.drops.add(Drop::token_required);
      return;
    }
  }
  open_half(from, c, features, bytes.size());
}

// A retransmitted CONNECT gets an entry and a VERIFY_CONNECT of its own: whichever the client
// acknowledges first makes the connection, and the others find it there (promote()).
inline void HostCore::Impl::open_half(const Endpoint& from, const Connect& c,
                                      std::uint32_t features, std::size_t bytes,
                                      const TokenArrival* token) {
  if (!half_open.allocated()) half_open.allocate(config.half_open_capacity);
  counters.unverified_bytes_in += bytes;
  // The ID the slot it will most likely take carries, so that its datagrams find it by
  // indexing. When one of this source's handshakes has it already (a client opening several
  // connections at once), the client's own index, distinct among its connections, then IDs
  // at random.
  std::uint16_t id = predicted_peer_id(from, c.outgoing_peer_id);
  for (int tries = 0; id != kMaxPeerId && id_clashes(from, id); ++tries) {
    const auto hint =
        static_cast<std::uint16_t>(tries == 0 ? c.outgoing_peer_id : random_u32() % kMaxPeerId);
    id = tries < 8 ? free_peer_id(from, hint) : kMaxPeerId;
  }
  if (id == kMaxPeerId) {
    counters.drops.add(Drop::peer_limit);
    return;
  }
  bool evicted = false;
  const std::uint64_t created_ms = std::max<std::uint64_t>(now_ms, 1);
  HalfOpen& h = half_open.claim(half_open_hash(from, id), created_ms, evicted);
  if (evicted) ++counters.half_open_evicted;
  ++counters.half_open_created;
  counters.half_open = half_open.size();
  h = HalfOpen{};
  h.address = from;
  h.peer_id = id;
  h.bytes_in = static_cast<std::uint32_t>(std::min<std::size_t>(bytes, kMaxMtu));
  h.created_ms = created_ms;
  h.features = features;
  h.connect = c;
  h.connect.channel_count = std::min(c.channel_count, config.channel_limit);
  h.connect.mtu = std::min(config.mtu, std::clamp(c.mtu, kMinMtu, kMaxMtu));
  std::uint32_t window = config.incoming_bandwidth == 0
                             ? kMaxWindowSize
                             : (config.incoming_bandwidth / kWindowSizeScale) * kMinWindowSize;
  window = std::min(window, c.window_size);
  h.window = std::clamp(window, kMinWindowSize, kMaxWindowSize);
  // Sessions as ENet picks them for the slot; the cookie from the PRNG and the keyed hash.
  const bool reused = id < slots.size() && slots[id].state == PeerState::disconnected;
  h.out_session = next_session(c.incoming_session, reused ? slots[id].outgoing_session : 0xFF);
  h.in_session = next_session(c.outgoing_session, reused ? slots[id].incoming_session : 0xFF);
  h.cookie = static_cast<std::uint16_t>(
      random_u32() ^
      by_address.hash(base::PeerKey(from, static_cast<std::uint16_t>(c.connect_id))));
  if (token != nullptr) {
    SecureHello hello;
    open_secure_pending(h, *token, hello);
    send_cookie(h, &hello);
    return;
  }
  send_cookie(h);
}

// Every reply to an unverified source: never more bytes than it sent us (no amplification),
// and never more queued replies than the table has entries (memory bounded under a flood).
inline bool HostCore::Impl::may_answer(const HalfOpen& e, std::size_t size) {
  if (e.bytes_out + size > e.bytes_in) {
    ++counters.amplification_capped;
    return false;
  }
  if (farewells.size() >= half_open.capacity()) {
    ++counters.replies_dropped;
    return false;
  }
  return true;
}

// The VERIFY_CONNECT (and hello, and a secure handshake's challenge) for a handshake.
inline void HostCore::Impl::send_cookie(HalfOpen& e, SecureHello* secure) {
  const std::size_t size = header_size(true, config.checksum) + command_size(Cmd::verify_connect) +
                           (e.features != 0 ? kHelloSize : 0) +
                           (secure != nullptr ? 8 + 16 + sec::kDatagramOverhead : 0);
  if (!may_answer(e, size)) return;
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::verify_connect) | kFlagAcknowledge;
  cmd.channel_id = kSystemChannel;
  cmd.reliable_seq = 1;  // the first reliable command of the connection, as a peer's would be
  Connect& c = cmd.connect;
  c = e.connect;
  c.outgoing_peer_id = e.peer_id;
  c.incoming_session = e.out_session;
  c.outgoing_session = e.in_session;
  c.window_size = e.window;
  c.incoming_bandwidth = config.incoming_bandwidth;
  c.outgoing_bandwidth = config.outgoing_bandwidth;
  Farewell f;
  f.to = e.address;
  Header h;
  h.peer_id = e.connect.outgoing_peer_id;
  h.session = e.out_session;
  h.has_sent_time = true;
  h.sent_time = e.cookie;
  std::size_t n = encode_header(f.bytes, h, config.checksum);
  const std::size_t hsize = n;
  if (secure != nullptr) {
    // First, so the client has the session keys when it takes the VERIFY_CONNECT.
    Command ext;
    ext.command = static_cast<std::uint8_t>(Cmd::tern_ext);
    ext.channel_id = kSystemChannel;
    ext.ext.kind = static_cast<std::uint8_t>(TernExtKind::secure_challenge);
    ext.ext.flags = secure->aes ? kSecureFlagAes : 0;
    ext.ext.data_length = static_cast<std::uint16_t>(secure->challenge.size());
    n += encode_command(std::span<std::byte>(f.bytes).subspan(n), ext);
    std::memcpy(f.bytes.data() + n, secure->challenge.data(), secure->challenge.size());
    n += secure->challenge.size();
  }
  n += encode_command(std::span<std::byte>(f.bytes).subspan(n), cmd);
  if (e.features != 0) {
    // The answer a peer that agreed to them would give (handle_hello, agreed_features).
    Command hello;
    hello.command = static_cast<std::uint8_t>(Cmd::tern_hello);
    hello.channel_id = kSystemChannel;
    hello.hello.features = answer_features(e.features);
    n += encode_command(std::span<std::byte>(f.bytes).subspan(n), hello);
  }
  f.size = static_cast<std::uint32_t>(n);
  if (config.checksum) {
    write_checksum(std::span<std::byte>(f.bytes.data(), n), 4, e.connect.connect_id);
  }
  if (secure != nullptr && !seal_farewell(secure->tx, f, hsize)) return;
  farewells.push_back(f);
  e.bytes_out += f.size;
  e.cookie_ms = now_ms;
  ++counters.cookies_sent;
  counters.unverified_bytes_out += f.size;
}

inline void HostCore::Impl::send_probe(HalfOpen& e) {
  SecurePending* sp = pending_of(e);
  if (e.secure_slot != 0 && sp == nullptr) return;
  const std::size_t size = header_size(true, config.checksum) + command_size(Cmd::ping) +
                           (sp != nullptr ? sec::kDatagramOverhead : 0);
  if (!may_answer(e, size)) return;
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::ping) | kFlagAcknowledge;
  cmd.channel_id = kSystemChannel;
  cmd.reliable_seq = 1;
  Farewell f;
  f.to = e.address;
  Header h;
  h.peer_id = e.connect.outgoing_peer_id;
  h.session = e.out_session;
  h.has_sent_time = true;
  h.sent_time = e.cookie;
  std::size_t n = encode_header(f.bytes, h, config.checksum);
  const std::size_t hsize = n;
  n += encode_command(std::span<std::byte>(f.bytes).subspan(n), cmd);
  f.size = static_cast<std::uint32_t>(n);
  if (config.checksum) {
    write_checksum(std::span<std::byte>(f.bytes.data(), n), 4, e.connect.connect_id);
  }
  if (sp != nullptr && !seal_farewell(sp->secure.tx, f, hsize)) return;
  farewells.push_back(f);
  e.bytes_out += f.size;
  ++counters.cookies_sent;
  counters.unverified_bytes_out += f.size;
}

// A datagram naming a peer ID no connection from its source has: perhaps the answer to a
// VERIFY_CONNECT. Returns the peer it made, and then skip_ack (the acknowledgement of a
// VERIFY_CONNECT the peer never queued).
inline Peer* HostCore::Impl::unverified_datagram(const Endpoint& from, const DecodedHeader& dh,
                                                 std::span<const std::byte>& bytes,
                                                 bool& skip_ack) {
  HalfOpen* e = find_half_open(from, dh.header.peer_id);
  if (e == nullptr) {
    counters.drops.add(Drop::unknown_peer);
    return nullptr;
  }
  if (refused_source(from, false)) return nullptr;
  counters.unverified_bytes_in += bytes.size();
  if (expired(*e)) {
    ++counters.cookies_expired;
    counters.drops.add(Drop::expired_cookie);
    half_open.release(*e);
    counters.half_open = half_open.size();
    return nullptr;
  }
  e->bytes_in += static_cast<std::uint32_t>(std::min<std::size_t>(bytes.size(), kMaxMtu));
  if (dh.header.session != e->in_session) {
    counters.drops.add(Drop::bad_session);
    return nullptr;
  }
  // A secure handshake is answered only in datagrams sealed with the session keys, which only
  // the client that read our VERIFY_CONNECT (its challenge) can derive.
  if (e->secure_slot != 0) {
    SecurePending* sp = pending_of(*e);
    if (sp == nullptr) {
      counters.drops.add(Drop::unknown_peer);
      return nullptr;
    }
    if (!looks_sealed(bytes)) {
      counters.drops.add(Drop::bad_seal);
      return nullptr;
    }
    if (!open_sealed(sp->secure, dh, bytes)) return nullptr;
  } else if (looks_sealed(bytes)) {
    counters.drops.add(Drop::compressed);
    return nullptr;
  }
  if (config.checksum && !verify_checksum(bytes, dh, e->connect.connect_id)) {
    counters.drops.add(Drop::bad_checksum);
    return nullptr;
  }
  CommandDecoder decoder(bytes, dh.size);
  Command cmd;
  Drop why = Drop::count_;
  while (decoder.next(cmd, why)) {
    if (cmd.type() != Cmd::acknowledge || cmd.channel_id != kSystemChannel ||
        cmd.ack.received_reliable_seq != 1) {
      continue;
    }
    if (cmd.ack.received_sent_time != e->cookie) {
      ++counters.cookies_invalid;
      counters.drops.add(Drop::invalid_cookie);
      return nullptr;
    }
    Peer* p = promote(*e);
    skip_ack = p != nullptr;
    return p;
  }
  // It has our VERIFY_CONNECT (it names the ID and session we gave) but its ack was lost, and
  // an ENet client does not resend acks: a PING carrying the cookie, as the VERIFY_CONNECT's
  // sequence number, for it to acknowledge. At 8 bytes, the datagram that prompts it pays.
  counters.drops.add(Drop::unverified);
  send_probe(*e);
  return nullptr;
}

// The handshake acknowledged: the connection it asked for, as handle_connect would have made
// it, up at once (ENet's server is connected on that same ack).
inline Peer* HostCore::Impl::promote(HalfOpen& e) {
  const HalfOpen h = e;
  half_open.release(e);
  counters.half_open = half_open.size();
  const Connect& c = h.connect;
  if (Peer* old = find_accepted(h.address, c.outgoing_peer_id)) {
    if (old->outgoing_peer_id == c.outgoing_peer_id && old->state != PeerState::connecting) {
      if (old->connect_id == c.connect_id) {  // another VERIFY_CONNECT of that handshake
        counters.drops.add(Drop::duplicate);
        return nullptr;
      }
      if (old->app_knows) emit_disconnect(*old, DisconnectReason::replaced, 0);
      if (old->connected_like()) recalculate_bandwidth_limits = true;
      reset_peer(*old);
    }
  }
  if (peer_count >= config.peer_limit) {
    counters.drops.add(Drop::peer_limit);
    return nullptr;
  }
  if (peer_id_taken(h.address, h.peer_id)) {
    counters.drops.add(Drop::unknown_peer);
    return nullptr;
  }
  Peer& p = *take_slot(h.address, h.peer_id);
  reset_channels(p, c.channel_count);
  p.connect_id = c.connect_id;
  p.outgoing_peer_id = c.outgoing_peer_id;
  key_accepted(p);
  set_bandwidths(p, c.incoming_bandwidth, c.outgoing_bandwidth);
  set_throttle_settings(p, c.throttle_interval, c.throttle_acceleration, c.throttle_deceleration);
  p.connect_data = c.data;
  p.event_data = c.data;
  p.outgoing_session = h.out_session;
  p.incoming_session = h.in_session;
  p.mtu = static_cast<std::uint16_t>(c.mtu);
  compute_window_from_bandwidth(p);
  p.outgoing_reliable_seq = 1;  // the VERIFY_CONNECT's
  if (SecurePending* sp = pending_of(h)) {
    extra(p).secure = std::make_unique<PeerSecure>(std::move(sp->secure));
    sp->stamp = 0;
    p.secure = true;
    p.mtu = static_cast<std::uint16_t>(p.mtu - sec::kDatagramOverhead);
  }
  if (h.features != 0) {
    p.hello_agreed = true;
    on_features_agreed(p, h.features);
  }
  take_rtt_sample(p, static_cast<std::uint16_t>(h.cookie_ms));
  ++counters.peers_promoted;
  notify_connect(p);
  return &p;
}

// enet_protocol_handle_verify_connect (client side).
inline Handled HostCore::Impl::handle_verify_connect(Peer& p, const Command& cmd, Drop& why) {
  if (p.state != PeerState::connecting) return Handled::ok;
  const Connect& c = cmd.connect;
  // A secure connect needs the challenge before the VERIFY_CONNECT (secure_sessions.cpp).
  if ((p.secure && !p.extra->secure->sealing) || c.channel_count < kMinChannelCount ||
      c.channel_count > kMaxChannelCount || c.throttle_interval != throttle_interval(p) ||
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
  if (p.secure) p.mtu = static_cast<std::uint16_t>(p.mtu - sec::kDatagramOverhead);
  const std::uint32_t window = std::clamp(c.window_size, kMinWindowSize, kMaxWindowSize);
  p.window_size = std::min(p.window_size, window);
  set_bandwidths(p, c.incoming_bandwidth, c.outgoing_bandwidth);
  notify_connect(p);
  return Handled::ok;
}

inline PeerHandle HostCore::Impl::connect(std::uint64_t now_us, const Endpoint& to,
                                          std::size_t channel_count, std::uint32_t data) {
  now_ms = now_us / 1000;
  this->now_us = now_us;
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
