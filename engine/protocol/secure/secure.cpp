// Tokens and datagram AEAD over libsodium (secure.hpp; WIRE.md, "Secure sessions").
#include "secure/secure.hpp"

#include <sodium.h>

#include <cstring>

namespace tern::proto::sec {
namespace {

// Once per process, before any AEAD: sodium_init picks the fastest implementation this CPU
// has and opens the random source; it is idempotent and thread-safe.
[[maybe_unused]] const int g_sodium_ready = sodium_init();

static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == kTokenNonceBytes);
static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == kTagBytes);
static_assert(crypto_aead_chacha20poly1305_ietf_ABYTES == kTagBytes);
static_assert(crypto_aead_chacha20poly1305_ietf_NPUBBYTES == 12);
static_assert(crypto_aead_aes256gcm_ABYTES == kTagBytes);
static_assert(crypto_aead_aes256gcm_NPUBBYTES == 12);
static_assert(sizeof(crypto_aead_aes256gcm_state) == sizeof(AesState));
static_assert(alignof(AesState) >= 16);

void put64(std::uint8_t* p, std::uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}
void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<std::uint8_t>(v);
}
void put16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v >> 8);
  p[1] = static_cast<std::uint8_t>(v);
}
std::uint64_t get64(const std::uint8_t* p) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}
std::uint32_t get32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         p[3];
}
std::uint16_t get16(const std::uint8_t* p) {
  return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

void write_header(const TokenHeader& h, std::uint8_t* p) {
  put64(p, h.protocol_id);
  put64(p + 8, h.create_s);
  put64(p + 16, h.expire_s);
  put32(p + 24, h.key_id);
  std::memcpy(p + 28, h.nonce.data(), kTokenNonceBytes);
}

void write_contents(const TokenContents& c, std::uint8_t* p) {
  std::memset(p, 0, kTokenPrivateBytes);
  put64(p, c.client_id);
  put32(p + 8, c.timeout_s);
  p[12] = c.server_count;
  std::uint8_t* a = p + 13;
  for (std::size_t i = 0; i < kMaxTokenServers; ++i, a += kTokenAddressBytes) {
    if (i >= c.server_count) continue;
    a[0] = c.servers[i].is_v4() ? 4 : 6;
    std::memcpy(a + 1, c.servers[i].addr.data(), 16);
    put16(a + 17, c.servers[i].port);
  }
  std::memcpy(a, c.client_to_server.data(), 32);
  std::memcpy(a + 32, c.server_to_client.data(), 32);
  put16(a + 64, c.user_data_len);
  std::memcpy(a + 66, c.user_data.data(), kUserDataBytes);
}

bool read_contents(const std::uint8_t* p, TokenContents& c) {
  c.client_id = get64(p);
  c.timeout_s = get32(p + 8);
  c.server_count = p[12];
  if (c.server_count == 0 || c.server_count > kMaxTokenServers) return false;
  const std::uint8_t* a = p + 13;
  for (std::size_t i = 0; i < kMaxTokenServers; ++i, a += kTokenAddressBytes) {
    if (i >= c.server_count) continue;
    if (a[0] != 4 && a[0] != 6) return false;
    std::memcpy(c.servers[i].addr.data(), a + 1, 16);
    c.servers[i].port = get16(a + 17);
    if ((a[0] == 4) != c.servers[i].is_v4()) return false;
  }
  std::memcpy(c.client_to_server.data(), a, 32);
  std::memcpy(c.server_to_client.data(), a + 32, 32);
  c.user_data_len = get16(a + 64);
  if (c.user_data_len > kUserDataBytes) return false;
  std::memcpy(c.user_data.data(), a + 66, kUserDataBytes);
  return true;
}

}  // namespace

bool TokenContents::lists(const Endpoint& server) const {
  for (std::size_t i = 0; i < server_count && i < kMaxTokenServers; ++i) {
    if (servers[i] == server) return true;
  }
  return false;
}

const char* token_error_name(TokenError e) {
  switch (e) {
    case TokenError::none: return "none";
    case TokenError::truncated: return "truncated";
    case TokenError::bad_protocol: return "bad_protocol";
    case TokenError::unknown_key: return "unknown_key";
    case TokenError::forged: return "forged";
    case TokenError::expired: return "expired";
    case TokenError::bad_contents: return "bad_contents";
    case TokenError::wrong_server: return "wrong_server";
    case TokenError::reused: return "reused";
  }
  return "?";
}

void seal_token(const TokenKey& key, const TokenHeader& header, const TokenContents& contents,
                std::span<std::uint8_t, kTokenBytes> out) {
  std::uint8_t* p = out.data();
  write_header(header, p);
  std::uint8_t plain[kTokenPrivateBytes];
  write_contents(contents, plain);
  unsigned long long clen = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(p + kTokenPublicBytes, &clen, plain, sizeof plain, p,
                                             kTokenPublicBytes, nullptr, header.nonce.data(),
                                             key.key.data());
  sodium_memzero(plain, sizeof plain);
}

TokenError open_token(std::span<const std::uint8_t> bytes, const KeyRing& ring, std::uint64_t now_s,
                      TokenHeader& header, TokenContents& contents) {
  if (bytes.size() != kTokenBytes) return TokenError::truncated;
  const std::uint8_t* p = bytes.data();
  header.protocol_id = get64(p);
  header.create_s = get64(p + 8);
  header.expire_s = get64(p + 16);
  header.key_id = get32(p + 24);
  std::memcpy(header.nonce.data(), p + 28, kTokenNonceBytes);
  if (header.protocol_id != kTokenProtocolId) return TokenError::bad_protocol;
  // Cheap refusals first: an expired or unknown-key token costs no decryption.
  if (now_s >= header.expire_s) return TokenError::expired;
  const TokenKey* key = ring.find(header.key_id);
  if (key == nullptr) return TokenError::unknown_key;
  std::uint8_t plain[kTokenPrivateBytes];
  unsigned long long plen = 0;
  if (crypto_aead_xchacha20poly1305_ietf_decrypt(
          plain, &plen, nullptr, p + kTokenPublicBytes, kTokenPrivateBytes + kTagBytes, p,
          kTokenPublicBytes, header.nonce.data(), key->key.data()) != 0) {
    return TokenError::forged;
  }
  const bool ok = read_contents(plain, contents);
  sodium_memzero(plain, sizeof plain);
  return ok ? TokenError::none : TokenError::bad_contents;
}

void mint_token(const TokenKey& key, std::uint64_t now_s, std::uint64_t expire_s,
                const TokenContents& contents, std::span<std::uint8_t, kTokenBytes> out) {
  TokenHeader header;
  header.create_s = now_s;
  header.expire_s = expire_s;
  header.key_id = key.id;
  randombytes_buf(header.nonce.data(), header.nonce.size());
  seal_token(key, header, contents, out);
}

TokenError TokenNonceTable::remember(const TokenHeader& header, const Endpoint& from,
                                     std::uint64_t now_s) {
  std::uint64_t h;
  std::memcpy(&h, header.nonce.data(), 8);
  Entry* set = &entries_[(h % kSets) * kWays];
  Entry* victim = &set[0];
  for (std::size_t i = 0; i < kWays; ++i) {
    Entry& e = set[i];
    if (e.expire_s > now_s && e.nonce == header.nonce) {
      return e.from == from ? TokenError::none : TokenError::reused;
    }
    if (e.expire_s <= now_s) {
      victim = &e;  // free or expired: take it
    } else if (victim->expire_s > now_s &&
               (e.expire_s < victim->expire_s ||
                (e.expire_s == victim->expire_s && e.order < victim->order))) {
      victim = &e;
    }
  }
  victim->order = ++inserted_;
  victim->nonce = header.nonce;
  victim->from = from;
  victim->expire_s = header.expire_s;
  return TokenError::none;
}

// ---- Datagrams -------------------------------------------------------------------------

namespace {
void datagram_nonce(std::uint64_t seq, std::uint8_t (&nonce)[12]) {
  std::memset(nonce, 0, 4);
  put64(nonce + 4, seq);
}
}  // namespace

std::size_t seal_datagram(SealState& state, std::uint8_t* buf, std::size_t header_len,
                          std::size_t payload_len) {
  if (state.next_seq >= state.limit) return 0;
  const std::uint64_t seq = state.next_seq++;
  std::uint8_t* body = buf + header_len + kSeqBytes;
  std::memmove(body, buf + header_len, payload_len);
  put64(buf + header_len, seq);
  std::uint8_t nonce[12];
  datagram_nonce(seq, nonce);
  unsigned long long maclen = 0;
  if (state.aes != nullptr) {
    crypto_aead_aes256gcm_encrypt_detached_afternm(
        body, body + payload_len, &maclen, body, payload_len, buf, header_len, nullptr, nonce,
        reinterpret_cast<const crypto_aead_aes256gcm_state*>(state.aes->bytes.data()));
  } else {
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(body, body + payload_len, &maclen, body,
                                                       payload_len, buf, header_len, nullptr, nonce,
                                                       state.key.data());
  }
  return header_len + kDatagramOverhead + payload_len;
}

ReplayWindow::Verdict ReplayWindow::check(std::uint64_t seq) const {
  if (seq >= kSeqLimit) return Verdict::past_limit;
  if (seq >= next_) return Verdict::fresh;
  if (next_ - seq > kWindow) return Verdict::too_old;
  const std::uint64_t slot = seq % kWindow;
  return (bits_[slot / 64] >> (slot % 64)) & 1 ? Verdict::replayed : Verdict::fresh;
}

void ReplayWindow::accept(std::uint64_t seq) {
  if (seq >= next_) {
    // The slots from next_ to seq held numbers a whole window older: they leave it now.
    if (seq - next_ >= kWindow) {
      bits_.fill(0);
    } else {
      for (std::uint64_t s = next_; s < seq; ++s) {
        const std::uint64_t slot = s % kWindow;
        bits_[slot / 64] &= ~(std::uint64_t{1} << (slot % 64));
      }
    }
    next_ = seq + 1;
  }
  const std::uint64_t slot = seq % kWindow;
  bits_[slot / 64] |= std::uint64_t{1} << (slot % 64);
}

const char* open_error_name(OpenError e) {
  switch (e) {
    case OpenError::none: return "none";
    case OpenError::truncated: return "truncated";
    case OpenError::replayed: return "replayed";
    case OpenError::too_old: return "too_old";
    case OpenError::past_limit: return "past_limit";
    case OpenError::forged: return "forged";
  }
  return "?";
}

OpenError open_datagram_to(const Key& key, ReplayWindow& window, const std::uint8_t* buf,
                           std::size_t len, std::size_t header_len, std::uint8_t* out,
                           std::size_t& out_len, const AesState* aes) {
  if (len < header_len + kDatagramOverhead) return OpenError::truncated;
  const std::uint64_t seq = get64(buf + header_len);
  // The window is asked before the AEAD so a replay flood costs no decryption.
  switch (window.check(seq)) {
    case ReplayWindow::Verdict::fresh: break;
    case ReplayWindow::Verdict::replayed: return OpenError::replayed;
    case ReplayWindow::Verdict::too_old: return OpenError::too_old;
    case ReplayWindow::Verdict::past_limit: return OpenError::past_limit;
  }
  const std::size_t payload_len = len - header_len - kDatagramOverhead;
  const std::uint8_t* body = buf + header_len + kSeqBytes;
  std::uint8_t nonce[12];
  datagram_nonce(seq, nonce);
  const int rc =
      aes != nullptr
          ? crypto_aead_aes256gcm_decrypt_detached_afternm(
                out + header_len, nullptr, body, payload_len, body + payload_len, buf, header_len,
                nonce, reinterpret_cast<const crypto_aead_aes256gcm_state*>(aes->bytes.data()))
          : crypto_aead_chacha20poly1305_ietf_decrypt_detached(out + header_len, nullptr, body,
                                                               payload_len, body + payload_len, buf,
                                                               header_len, nonce, key.data());
  if (rc != 0) return OpenError::forged;
  window.accept(seq);
  std::memmove(out, buf, header_len);
  out_len = header_len + payload_len;
  return OpenError::none;
}

OpenError open_datagram(const Key& key, ReplayWindow& window, std::uint8_t* buf, std::size_t len,
                        std::size_t header_len, std::size_t& out_len, const AesState* aes) {
  if (len < header_len + kDatagramOverhead) return OpenError::truncated;
  // out + header_len == the ciphertext: libsodium decrypts in place when the two coincide.
  return open_datagram_to(key, window, buf, len, header_len, buf + kSeqBytes, out_len, aes);
}

bool available() { return g_sodium_ready >= 0; }

bool aes_available() { return g_sodium_ready >= 0 && crypto_aead_aes256gcm_is_available() == 1; }

bool expand_aes(const Key& key, AesState& out) {
  if (!aes_available()) return false;
  crypto_aead_aes256gcm_beforenm(reinterpret_cast<crypto_aead_aes256gcm_state*>(out.bytes.data()),
                                 key.data());
  return true;
}

void random_bytes(std::uint8_t* out, std::size_t n) { randombytes_buf(out, n); }

Key derive_key(const Key& key, std::uint8_t label, const std::uint8_t* data, std::size_t n) {
  Key out;
  crypto_generichash_state st;
  crypto_generichash_init(&st, key.data(), key.size(), out.size());
  crypto_generichash_update(&st, &label, 1);
  crypto_generichash_update(&st, data, n);
  crypto_generichash_final(&st, out.data(), out.size());
  return out;
}

}  // namespace tern::proto::sec
