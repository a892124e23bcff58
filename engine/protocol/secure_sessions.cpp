// The protocol core: secure sessions (WIRE.md, "Secure sessions"): the connect token a CONNECT
// carries, the sealed VERIFY_CONNECT and its challenge, and sealing and opening every datagram
// of a secure connection. Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

namespace {
// Labels of the key derivations (secure.hpp, derive_key).
constexpr std::uint8_t kLabelHandshakeC2s = 'c';
constexpr std::uint8_t kLabelHandshakeS2c = 's';
constexpr std::uint8_t kLabelSessionC2s = 'C';
constexpr std::uint8_t kLabelSessionS2c = 'S';
constexpr std::uint8_t kLabelChallenge = 'X';
constexpr std::size_t kSaltBytes = 16;
constexpr std::size_t kTokenExtBytes = sec::kTokenBytes + kSaltBytes;
constexpr std::uint8_t kSealedFlag = 0x40;  // the peer word's "compressed" bit (high byte)

std::uint8_t* raw(std::byte* p) { return reinterpret_cast<std::uint8_t*>(p); }
const std::uint8_t* raw(const std::byte* p) { return reinterpret_cast<const std::uint8_t*>(p); }
}  // namespace

inline std::uint64_t HostCore::Impl::unix_now_s() const {
  const std::int64_t us = static_cast<std::int64_t>(now_ms * 1000) + unix_offset_us;
  return us > 0 ? static_cast<std::uint64_t>(us) / 1000000 : 0;
}

// The header of a sealed datagram, read as ENet's with the mark taken off (the mark is what
// ENet calls compression, which no Tern host negotiates).
inline bool HostCore::Impl::decode_sealed_header(std::span<const std::byte> bytes,
                                                 DecodedHeader& dh, Drop& why) {
  if (bytes.size() > kMaxMtu) {
    why = Drop::oversize_datagram;
    return false;
  }
  std::array<std::byte, kMaxHeaderSize> head{};
  const std::size_t n = std::min(bytes.size(), head.size());
  std::memcpy(head.data(), bytes.data(), n);
  head[0] &= ~std::byte{kSealedFlag};
  return decode_header(std::span<const std::byte>(head.data(), n), config.checksum, dh, why);
}

// Opens a sealed datagram (header, mark cleared, then the plaintext) and points `bytes` at it:
// into the open arena, whose messages are lent as a plaintext datagram's would be, or when
// there is none or it is full, into open_buf, whose messages are copied (datagram_sealed)
// because the next sealed datagram reuses it.
inline bool HostCore::Impl::open_sealed(PeerSecure& s, const DecodedHeader& dh,
                                        std::span<const std::byte>& bytes) {
  std::byte* out = open_buf.data();
  bool in_arena = false;
  if (open_arena != nullptr) {
    // No event waiting: the caller has taken every view into the arena.
    if (events.empty()) open_arena_used = 0;
    if (open_arena_used + bytes.size() <= kOpenArenaBytes) {
      out = open_arena.get() + open_arena_used;
      in_arena = true;
    }
  }
  std::size_t n = 0;
  const sec::OpenError e =
      sec::open_datagram_to(s.rx, s.window, raw(bytes.data()), bytes.size(), dh.size, raw(out), n,
                            s.aes != nullptr ? &s.aes->rx : nullptr);
  if (e != sec::OpenError::none) {
    counters.drops.add(e == sec::OpenError::replayed || e == sec::OpenError::too_old
                           ? Drop::replayed
                           : Drop::bad_seal);
    return false;
  }
  out[0] &= ~std::byte{kSealedFlag};
  bytes = std::span<const std::byte>(out, n);
  if (in_arena) open_arena_used += (n + 15) & ~std::size_t{15};
  datagram_sealed = !in_arena;
  ++counters.opened_in;
  return true;
}

// Where sealed datagrams open when their messages may be lent (HostConfig::lend_payloads):
// made once, with the first secure session, never on the per-datagram path.
inline void HostCore::Impl::make_open_arena() {
  if (config.lend_payloads && open_arena == nullptr) {
    open_arena = std::make_unique_for_overwrite<std::byte[]>(kOpenArenaBytes);
  }
}

// A datagram of a connection: sealed exactly when the connection is secure.
inline bool HostCore::Impl::peer_datagram_sealed(Peer& p, const DecodedHeader& dh, bool sealed,
                                                 std::span<const std::byte>& bytes) {
  if (!p.secure) {
    counters.drops.add(Drop::compressed);
    return false;
  }
  // A client holding a token takes nothing in clear, not even a VERIFY_CONNECT: a server
  // that answers in clear (plain policy, or a forger) leaves its connect to time out.
  if (!sealed) {
    counters.drops.add(Drop::bad_seal);
    return false;
  }
  return open_sealed(*p.extra->secure, dh, bytes);
}

// The TERN_EXT secure_token of a CONNECT: the token opens under one of our keys, has not
// expired, names this host and was not used from another address. Counted when refused.
inline bool HostCore::Impl::check_token(const Endpoint& from, const Command& ext,
                                        TokenArrival& out) {
  Drop why = Drop::bad_token;
  if (ext.payload.size() == kTokenExtBytes) {
    const auto token = std::span<const std::uint8_t>(raw(ext.payload.data()), sec::kTokenBytes);
    const std::uint64_t now_s = unix_now_s();
    if (sec::open_token(token, config.token_keys, now_s, out.header, out.contents) ==
        sec::TokenError::none) {
      bool listed = false;
      for (std::size_t i = 0; i < config.secure_address_count && i < 4; ++i) {
        listed = listed || out.contents.lists(config.secure_addresses[i]);
      }
      if (listed) {
        if (token_nonces == nullptr) token_nonces = std::make_unique<sec::TokenNonceTable>();
        if (token_nonces->remember(out.header, from, now_s) == sec::TokenError::none) {
          std::memcpy(out.salt.data(), raw(ext.payload.data()) + sec::kTokenBytes, kSaltBytes);
          out.offers_aes = (ext.ext.flags & kSecureFlagAes) != 0;
          return true;
        }
        why = Drop::token_reused;
      }
    }
  }
  ++counters.tokens_refused;
  counters.drops.add(why);
  return false;
}

// The half-open entry's secure part: the keys its VERIFY_CONNECT is sealed with, the
// challenge it carries, and the session keys both sides derive from that challenge.
inline void HostCore::Impl::open_secure_pending(HalfOpen& h, const TokenArrival& token,
                                                SecureHello& hello) {
  if (secure_pending.empty()) {
    secure_pending.resize(std::max<std::size_t>(config.secure_pending_capacity, 1));
  }
  const std::uint32_t slot =
      secure_pending_next++ % static_cast<std::uint32_t>(secure_pending.size());
  SecurePending& sp = secure_pending[slot];
  // Stamps stay below 2^30, so stamp << 32 stays below the sequence limit.
  secure_stamp = secure_stamp + 1 < (1u << 30) ? secure_stamp + 1 : 1;
  sp.stamp = secure_stamp;
  const sec::TokenContents& c = token.contents;
  const sec::Key c2s =
      sec::derive_key(c.client_to_server, kLabelHandshakeC2s, token.salt.data(), token.salt.size());
  const sec::Key s2c =
      sec::derive_key(c.server_to_client, kLabelHandshakeS2c, token.salt.data(), token.salt.size());
  // The VERIFY_CONNECT at sequence numbers no other handshake of this host uses: a client
  // that resent its CONNECT gets one per CONNECT, under the same key.
  hello.tx.key = s2c;
  hello.tx.next_seq = std::uint64_t{sp.stamp} << 32;
  // Unguessable without the token key (which is secret) and the datagram it travels in
  // (sealed): only a client that received our VERIFY_CONNECT can derive the session keys.
  std::array<std::uint8_t, sec::kTokenNonceBytes + kSaltBytes + 4> msg{};
  std::memcpy(msg.data(), token.header.nonce.data(), sec::kTokenNonceBytes);
  std::memcpy(msg.data() + sec::kTokenNonceBytes, token.salt.data(), kSaltBytes);
  std::memcpy(msg.data() + sec::kTokenNonceBytes + kSaltBytes, &sp.stamp, 4);
  const sec::Key derived =
      sec::derive_key(config.token_keys.keys[0].key, kLabelChallenge, msg.data(), msg.size());
  std::memcpy(hello.challenge.data(), derived.data(), hello.challenge.size());
  PeerSecure& s = sp.secure;
  s = PeerSecure{};
  s.tx.key = sec::derive_key(s2c, kLabelSessionS2c, hello.challenge.data(), 16);
  s.rx = sec::derive_key(c2s, kLabelSessionC2s, hello.challenge.data(), 16);
  s.sealing = true;
  make_open_arena();
  hello.aes = token.offers_aes && config.secure_aes && start_aes(s);
  s.client_id = c.client_id;
  s.user_data_len = c.user_data_len;
  s.user_data = c.user_data;
  h.secure_slot = slot + 1;
  h.secure_stamp = sp.stamp;
  ++counters.tokens_accepted;
}

// The session's keys (tx.key, rx: final) expanded for AES-256-GCM, which seals from now on.
// False, ChaCha20-Poly1305 kept, when this CPU has no AES-NI. On the handshake path only.
inline bool HostCore::Impl::start_aes(PeerSecure& s) {
  if (!sec::aes_available()) return false;
  s.aes = std::make_unique<sec::AesKeys>();
  if (!sec::expand_aes(s.tx.key, s.aes->tx) || !sec::expand_aes(s.rx, s.aes->rx)) {
    s.aes.reset();
    return false;
  }
  s.tx.aes = &s.aes->tx;
  return true;
}

inline SecurePending* HostCore::Impl::pending_of(const HalfOpen& h) {
  if (h.secure_slot == 0 || h.secure_slot > secure_pending.size()) return nullptr;
  SecurePending& sp = secure_pending[h.secure_slot - 1];
  return sp.stamp == h.secure_stamp && sp.stamp != 0 ? &sp : nullptr;
}

// A farewell (a VERIFY_CONNECT, probe or DISCONNECT built outside the queues) sealed in place;
// f.bytes has room for the overhead.
inline bool HostCore::Impl::seal_farewell(sec::SealState& tx, Farewell& f, std::size_t hsize) {
  if (f.size + sec::kDatagramOverhead > f.bytes.size()) return false;
  f.bytes[0] |= std::byte{kSealedFlag};
  const std::size_t n = sec::seal_datagram(tx, raw(f.bytes.data()), hsize, f.size - hsize);
  if (n == 0) return false;
  f.size = static_cast<std::uint32_t>(n);
  ++counters.sealed_out;
  return true;
}

// A built datagram of a secure connection, sealed in place: the mark, then the sequence
// number after the header and the tag after the commands (its MTU left room for both).
inline bool HostCore::Impl::seal_out(Peer& p, OutDatagram& dg, std::size_t start, std::size_t hsize,
                                     std::size_t& total) {
  std::uint8_t* base = raw(dg.bytes.data()) + start;
  base[0] |= kSealedFlag;
  const std::size_t n = sec::seal_datagram(p.extra->secure->tx, base, hsize, total - hsize);
  if (n == 0) return false;
  total = n;
  ++counters.sealed_out;
  return true;
}

// The CONNECT's token and salt, after the hello (a plain ENet server stops at the hello).
inline void HostCore::Impl::put_secure_token(Peer& p, Build& b) {
  const PeerSecure* s = p.extra != nullptr ? p.extra->secure.get() : nullptr;
  if (s == nullptr || s->connect_ext == nullptr || room(b) < 8 + kTokenExtBytes) return;
  Command ext;
  ext.command = static_cast<std::uint8_t>(Cmd::tern_ext);
  ext.channel_id = kSystemChannel;
  ext.ext.kind = static_cast<std::uint8_t>(TernExtKind::secure_token);
  ext.ext.flags = config.secure_aes && sec::aes_available() ? kSecureFlagAes : 0;
  ext.ext.data_length = static_cast<std::uint16_t>(kTokenExtBytes);
  put_command(b, ext,
              std::span<const std::byte>(reinterpret_cast<const std::byte*>(s->connect_ext->data()),
                                         kTokenExtBytes));
}

// The server's challenge, first in its sealed VERIFY_CONNECT: the client's keys become the
// session's. Taken once, while connecting; the server side ignores it.
inline Handled HostCore::Impl::handle_secure_challenge(Peer& p, const Command& cmd,
                                                       Arrival& arrival) {
  if (!p.secure) {
    arrival.why = Drop::extension_not_agreed;
    return Handled::stop;
  }
  PeerSecure& s = *p.extra->secure;
  if (p.accepted || s.sealing || p.state != PeerState::connecting) return Handled::ok;
  if (cmd.payload.size() != 16) {
    arrival.why = Drop::bad_handshake;
    return Handled::stop;
  }
  // AES-256-GCM only when we offered it: a server cannot choose what we cannot do.
  const bool aes = (cmd.ext.flags & kSecureFlagAes) != 0;
  if (aes && !(config.secure_aes && sec::aes_available())) {
    arrival.why = Drop::bad_handshake;
    return Handled::stop;
  }
  const std::uint8_t* challenge = raw(cmd.payload.data());
  s.tx.key = sec::derive_key(s.tx.key, kLabelSessionC2s, challenge, 16);
  s.tx.next_seq = 0;
  s.rx = sec::derive_key(s.rx, kLabelSessionS2c, challenge, 16);
  s.window = sec::ReplayWindow{};
  if (aes && !start_aes(s)) {
    arrival.why = Drop::bad_handshake;
    return Handled::stop;
  }
  s.sealing = true;
  make_open_arena();
  s.connect_ext.reset();
  return Handled::ok;
}

inline PeerHandle HostCore::Impl::connect_secure(std::uint64_t now_us, const Endpoint& to,
                                                 std::size_t channel_count, std::uint32_t data,
                                                 std::span<const std::uint8_t> sealed_token,
                                                 const sec::Key& c2s, const sec::Key& s2c,
                                                 const std::array<std::uint8_t, 16>& salt) {
  if (sealed_token.size() != sec::kTokenBytes) return PeerHandle{};
  const PeerHandle h = connect(now_us, to, channel_count, data);
  Peer* p = find(h);
  if (p == nullptr) return h;
  auto s = std::make_unique<PeerSecure>();
  s->tx.key = sec::derive_key(c2s, kLabelHandshakeC2s, salt.data(), salt.size());
  s->rx = sec::derive_key(s2c, kLabelHandshakeS2c, salt.data(), salt.size());
  s->connect_ext = std::make_unique<std::array<std::uint8_t, kTokenExtBytes>>();
  std::memcpy(s->connect_ext->data(), sealed_token.data(), sec::kTokenBytes);
  std::memcpy(s->connect_ext->data() + sec::kTokenBytes, salt.data(), kSaltBytes);
  extra(*p).secure = std::move(s);
  p->secure = true;
  return h;
}

}  // namespace tern::proto
