// Self-describing test payloads: every message carries the (stream, channel, delivery,
// sequence, size) it was sent with, followed by bytes derived from that tag, so a receiver can
// tell a lost, duplicated, reordered, truncated or corrupted message apart without any side
// channel to the sender.
//
// Messages shorter than the tag carry only the derived bytes; their receiver must know which
// tag to expect (a reliable channel's next sequence number does).
#pragma once

#include <tern/packet.hpp>
#include <tern/types.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>

namespace tern::simtest {

struct Tag {
  std::uint32_t stream = 0;  // which connection (or test) the message belongs to
  std::uint8_t channel = 0;
  Delivery delivery = Delivery::reliable;
  std::uint32_t seq = 0;   // per (stream, channel, delivery), starting at 0
  std::uint32_t size = 0;  // total message size in bytes
  friend bool operator==(const Tag&, const Tag&) = default;
};

inline constexpr std::uint32_t kTagMagic = 0x5445524Eu;  // "TERN"
inline constexpr std::size_t kTagSize = 18;

namespace detail {

inline void put32(std::byte* p, std::uint32_t v) {
  p[0] = std::byte(v >> 24);
  p[1] = std::byte(v >> 16);
  p[2] = std::byte(v >> 8);
  p[3] = std::byte(v);
}
inline std::uint32_t get32(const std::byte* p) {
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The body is a keyed stream rather than a repeating pattern, so bytes that land at the wrong
// offset (a fragment placed one slot off, a stale buffer reused) do not compare equal by luck.
inline std::uint64_t body_key(const Tag& t) {
  std::uint64_t k = mix(t.stream);
  k = mix(k ^ (std::uint64_t{t.channel} << 8) ^ static_cast<std::uint64_t>(t.delivery));
  k = mix(k ^ t.seq);
  return mix(k ^ t.size);
}

// Byte i of the body is byte (i % 8) of word (i / 8) of the keyed stream.
template <typename Fn>
inline void for_each_body_word(const Tag& t, std::size_t n, Fn&& fn) {
  std::uint64_t state = body_key(t) | 1u;
  for (std::size_t i = 0; i < n; i += 8) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    fn(i, state * 0x2545F4914F6CDD1Dull);
  }
}

}  // namespace detail

// Writes the message for `t` into out (out.size() must equal t.size).
inline void fill_payload(std::span<std::byte> out, const Tag& t) {
  std::size_t body_at = 0;
  if (out.size() >= kTagSize) {
    detail::put32(out.data(), kTagMagic);
    detail::put32(out.data() + 4, t.stream);
    out[8] = std::byte(t.channel);
    out[9] = std::byte(static_cast<std::uint8_t>(t.delivery));
    detail::put32(out.data() + 10, t.seq);
    detail::put32(out.data() + 14, t.size);
    body_at = kTagSize;
  }
  const std::size_t body = out.size() - body_at;
  detail::for_each_body_word(t, body, [&](std::size_t i, std::uint64_t w) {
    const std::size_t n = body - i < 8 ? body - i : 8;
    for (std::size_t b = 0; b < n; ++b) out[body_at + i + b] = std::byte(w >> (8 * b));
  });
}

inline Packet make_payload(const Tag& t) {
  Packet p = Packet::allocate(t.size);
  fill_payload(p.mutable_bytes(), t);
  return p;
}

// The tag a message claims to carry (nullopt for short or foreign messages). Claims only:
// check_payload is what proves the bytes match.
inline std::optional<Tag> read_tag(std::span<const std::byte> in) {
  if (in.size() < kTagSize || detail::get32(in.data()) != kTagMagic) return std::nullopt;
  Tag t;
  t.stream = detail::get32(in.data() + 4);
  t.channel = static_cast<std::uint8_t>(in[8]);
  t.delivery = static_cast<Delivery>(static_cast<std::uint8_t>(in[9]));
  t.seq = detail::get32(in.data() + 10);
  t.size = detail::get32(in.data() + 14);
  return t;
}

// True when `in` is exactly the message fill_payload writes for `t`.
inline bool check_payload(std::span<const std::byte> in, const Tag& t) {
  if (in.size() != t.size) return false;
  std::size_t body_at = 0;
  if (in.size() >= kTagSize) {
    auto claimed = read_tag(in);
    if (!claimed || !(*claimed == t)) return false;
    body_at = kTagSize;
  }
  const std::size_t body = in.size() - body_at;
  bool ok = true;
  detail::for_each_body_word(t, body, [&](std::size_t i, std::uint64_t w) {
    if (!ok) return;
    const std::size_t n = body - i < 8 ? body - i : 8;
    for (std::size_t b = 0; b < n; ++b) {
      if (in[body_at + i + b] != std::byte(w >> (8 * b))) {
        ok = false;
        return;
      }
    }
  });
  return ok;
}

}  // namespace tern::simtest
