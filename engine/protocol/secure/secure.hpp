// Secure sessions (WIRE.md, "Secure sessions"): connect tokens sealed under a key the token
// issuer shares with the servers, and the per-datagram AEAD with its replay window.
//
// Pure computation over caller-owned buffers: no clock (times are arguments, unix seconds),
// no allocation, no system call except libsodium's random source when a token is minted.
#pragma once

#include <tern/endpoint.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace tern::proto::sec {

using Key = std::array<std::uint8_t, 32>;

// "TERNTOK1": a token from another protocol or format version is refused before any crypto.
inline constexpr std::uint64_t kTokenProtocolId = 0x5445524e544f4b31ull;
inline constexpr std::size_t kMaxTokenServers = 8;
inline constexpr std::size_t kUserDataBytes = 256;
inline constexpr std::size_t kTokenNonceBytes = 24;
inline constexpr std::size_t kTagBytes = 16;
// protocol id, create, expire (u64 each), key id (u32), nonce.
inline constexpr std::size_t kTokenPublicBytes = 8 + 8 + 8 + 4 + kTokenNonceBytes;
// family (4 or 6, 0 = unused), address (16, IPv4 mapped), port (u16).
inline constexpr std::size_t kTokenAddressBytes = 1 + 16 + 2;
// client id, timeout, server count, servers, two keys, user data length, user data. Fixed size,
// so a token's length says nothing about what it holds.
inline constexpr std::size_t kTokenPrivateBytes =
    8 + 4 + 1 + kMaxTokenServers * kTokenAddressBytes + 32 + 32 + 2 + kUserDataBytes;
inline constexpr std::size_t kTokenBytes = kTokenPublicBytes + kTokenPrivateBytes + kTagBytes;

struct TokenKey {
  std::uint32_t id = 0;
  Key key{};
};

// The keys a server accepts: the current one and, during a rotation, the previous one.
struct KeyRing {
  std::array<TokenKey, 2> keys{};
  std::size_t count = 0;
  const TokenKey* find(std::uint32_t id) const {
    for (std::size_t i = 0; i < count; ++i) {
      if (keys[i].id == id) return &keys[i];
    }
    return nullptr;
  }
};

struct TokenHeader {
  std::uint64_t protocol_id = kTokenProtocolId;
  std::uint64_t create_s = 0;
  std::uint64_t expire_s = 0;
  std::uint32_t key_id = 0;
  std::array<std::uint8_t, kTokenNonceBytes> nonce{};
};

struct TokenContents {
  std::uint64_t client_id = 0;
  std::uint32_t timeout_s = 0;
  std::uint8_t server_count = 0;
  std::array<Endpoint, kMaxTokenServers> servers{};
  Key client_to_server{};
  Key server_to_client{};
  std::uint16_t user_data_len = 0;
  std::array<std::uint8_t, kUserDataBytes> user_data{};

  bool lists(const Endpoint& server) const;
};

enum class TokenError : std::uint8_t {
  none,
  truncated,     // not exactly kTokenBytes
  bad_protocol,  // another protocol id or version
  unknown_key,   // key id in no slot of the ring
  forged,        // the AEAD did not open: wrong key, or any byte changed
  expired,       // now >= expire
  bad_contents,  // opened, but a count or length is out of range
  wrong_server,  // this server's address is not listed
  reused,        // seen before from another source address
};
const char* token_error_name(TokenError e);

// Writes the token into out. The nonce must be fresh for every token under a key (mint_token
// draws it from libsodium's random source); the public part is the associated data.
void seal_token(const TokenKey& key, const TokenHeader& header, const TokenContents& contents,
                std::span<std::uint8_t, kTokenBytes> out);
// Parses and authenticates; header is filled as soon as it parsed, contents only on none.
TokenError open_token(std::span<const std::uint8_t> bytes, const KeyRing& ring, std::uint64_t now_s,
                      TokenHeader& header, TokenContents& contents);
// A fresh nonce from libsodium's random source, then seal_token.
void mint_token(const TokenKey& key, std::uint64_t now_s, std::uint64_t expire_s,
                const TokenContents& contents, std::span<std::uint8_t, kTokenBytes> out);

// Token nonces seen recently and the source each came from, so a token captured on the path
// cannot be used from another address while it is valid. Bounded: sets of kWays chosen by the
// nonce (random, and authenticated before it gets here); a full set loses the entry that
// expires first (of those, the oldest). An attacker cannot fill it without valid tokens.
class TokenNonceTable {
 public:
  static constexpr std::size_t kSets = 1024;
  static constexpr std::size_t kWays = 4;
  // none when first seen, or seen before from `from`; reused otherwise.
  TokenError remember(const TokenHeader& header, const Endpoint& from, std::uint64_t now_s);

 private:
  struct Entry {
    std::array<std::uint8_t, kTokenNonceBytes> nonce{};
    Endpoint from{};
    std::uint64_t expire_s = 0;  // 0: free
    std::uint64_t order = 0;     // insertion count: ties on expiry lose the oldest
  };
  std::array<Entry, kSets * kWays> entries_{};
  std::uint64_t inserted_ = 0;
};

// ---- Datagrams -------------------------------------------------------------------------
// clear header | sequence (u64, big-endian) | ciphertext | tag (16). The header is the
// associated data; the nonce is four zero bytes and the sequence (each direction has its own
// key, so the pair never repeats under one key).
inline constexpr std::size_t kSeqBytes = 8;
inline constexpr std::size_t kDatagramOverhead = kSeqBytes + kTagBytes;
// A sender stops here (the connection must end or be rekeyed) and a receiver refuses
// anything at or past it, so the counter can never wrap onto a used nonce.
inline constexpr std::uint64_t kSeqLimit = std::uint64_t{1} << 62;

// AES-256-GCM's expanded key (libsodium's crypto_aead_aes256gcm_state), made once per session
// key: a connection that agreed AES-256-GCM seals and opens with it instead of ChaCha20-Poly1305
// under `key` (WIRE.md, "Secure sessions", the cipher).
struct alignas(16) AesState {
  std::array<std::uint8_t, 512> bytes{};
};
// A session's two directions, kept together in one block so the pointers SealState holds stay
// put when the connection's records move.
struct AesKeys {
  AesState tx;
  AesState rx;
};
// True when this CPU runs AES-256-GCM in hardware (AES-NI and carry-less multiply), the only
// case in which a host offers or accepts it.
bool aes_available();
// Expands `key` for AES-256-GCM; false when the CPU cannot (aes_available()).
bool expand_aes(const Key& key, AesState& out);

struct SealState {
  Key key{};
  std::uint64_t next_seq = 0;
  std::uint64_t limit = kSeqLimit;
  const AesState* aes = nullptr;  // AES-256-GCM with this expanded key; null: ChaCha20-Poly1305
};

// In place: buf holds header_len bytes of header then payload_len bytes of plaintext and has
// room for kDatagramOverhead more. Returns the sealed length, or 0 once the sequence reached
// the limit (nothing written). The cipher is state.aes's (above).
std::size_t seal_datagram(SealState& state, std::uint8_t* buf, std::size_t header_len,
                          std::size_t payload_len);

// Sequence numbers already taken, over the last kWindow below the highest accepted.
class ReplayWindow {
 public:
  static constexpr std::uint64_t kWindow = 1024;
  enum class Verdict : std::uint8_t { fresh, replayed, too_old, past_limit };
  Verdict check(std::uint64_t seq) const;
  // Only after the datagram authenticated: an unauthenticated one must not move the window.
  void accept(std::uint64_t seq);
  std::uint64_t highest_plus_one() const { return next_; }

 private:
  std::uint64_t next_ = 0;  // highest accepted + 1; 0 before the first
  std::array<std::uint64_t, kWindow / 64> bits_{};
};

enum class OpenError : std::uint8_t { none, truncated, replayed, too_old, past_limit, forged };
const char* open_error_name(OpenError e);

// buf[0, len) sealed, opened into out (at least len - kDatagramOverhead bytes, not
// overlapping buf except exactly out == buf + kSeqBytes): the header, then the plaintext.
// With `aes` (the session agreed AES-256-GCM) under that expanded key, else ChaCha20-Poly1305
// under `key`.
OpenError open_datagram_to(const Key& key, ReplayWindow& window, const std::uint8_t* buf,
                           std::size_t len, std::size_t header_len, std::uint8_t* out,
                           std::size_t& out_len, const AesState* aes = nullptr);

// False when built without libsodium (the stub): nothing can be minted, opened or sealed.
bool available();

// Random bytes from libsodium's source (a system call: connection set-up only).
void random_bytes(std::uint8_t* out, std::size_t n);

// A key for one use derived from a secret key: keyed BLAKE2b of a label byte and `data`.
// Session keys are derived per connect (the client's salt) and per handshake (the server's
// challenge), so no sequence number is ever used twice under one key.
Key derive_key(const Key& key, std::uint8_t label, const std::uint8_t* data, std::size_t n);

// In place: buf[0, len) is a sealed datagram whose clear header is header_len bytes. On none
// the plaintext datagram (header then payload) is buf[kSeqBytes, kSeqBytes + out_len): the
// header is moved up to meet the payload rather than the payload down.
OpenError open_datagram(const Key& key, ReplayWindow& window, std::uint8_t* buf, std::size_t len,
                        std::size_t header_len, std::size_t& out_len,
                        const AesState* aes = nullptr);

}  // namespace tern::proto::sec
