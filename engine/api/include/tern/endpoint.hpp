// tern::Endpoint: a UDP address (IPv4 or IPv6) and port.
//
// Dependency-free vocabulary type shared by every layer (protocol, runtime, drivers, api).
// IPv4 addresses are stored as IPv4-mapped IPv6 (::ffff:a.b.c.d) so that one 18-byte key
// identifies a peer regardless of whether it arrived on an IPv4 or a dual-stack socket.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace tern {

struct Endpoint {
  std::array<std::uint8_t, 16> addr{};  // network byte order, IPv4 mapped into ::ffff:0:0/96
  std::uint16_t port = 0;               // host byte order

  static Endpoint v4(std::uint32_t host_order_addr, std::uint16_t port) {
    Endpoint e;
    e.set_v4(host_order_addr, port);
    return e;
  }
  // In place, as two 8-byte stores: the frame parser fills two per datagram (DPDK driver),
  // and assigning a temporary built byte by byte costs a 16-byte load of bytes just stored,
  // which stalls on store forwarding (~15 cycles a time).
  void set_v4(std::uint32_t host_order_addr, std::uint16_t port_host_order) {
    // The mapped tail 00 00 ff ff a b c d computed as one word, not assembled from bytes, which
    // the compiler kept as byte stores (with v4_host_order's byte loads: dpdk_frame_bench's
    // rx_burst took 478 instructions a frame, 440 without).
    const std::uint64_t head = 0;
    std::uint64_t word;
    if constexpr (std::endian::native == std::endian::little) {
      word = (std::uint64_t{__builtin_bswap32(host_order_addr)} << 32) | 0xffff0000u;
    } else {
      word = (std::uint64_t{0xffff} << 32) | host_order_addr;
    }
    std::memcpy(addr.data(), &head, 8);
    std::memcpy(addr.data() + 8, &word, 8);
    port = port_host_order;
  }
  static Endpoint v6(const std::uint8_t (&bytes)[16], std::uint16_t port) {
    Endpoint e;
    std::memcpy(e.addr.data(), bytes, 16);
    e.port = port;
    return e;
  }

  // Both run once or more per datagram; written as word compares because GCC turns the
  // byte-array forms into calls to memcmp.
  bool is_v4() const {
    static constexpr std::uint8_t mapped[4] = {0, 0, 0xff, 0xff};
    std::uint64_t head;
    std::uint32_t mark, want;
    std::memcpy(&head, addr.data(), 8);
    std::memcpy(&mark, addr.data() + 8, 4);
    std::memcpy(&want, mapped, 4);
    return head == 0 && mark == want;
  }
  std::uint32_t v4_host_order() const {
    std::uint32_t v;
    std::memcpy(&v, addr.data() + 12, 4);
    return std::endian::native == std::endian::little ? __builtin_bswap32(v) : v;
  }
  bool is_unspecified() const {
    for (std::size_t i = 0; i < 16; ++i) {
      if (i >= 10 && i < 12) continue;
      if (addr[i] != 0) return false;
    }
    return true;
  }

  friend bool operator==(const Endpoint& a, const Endpoint& b) {
    std::uint64_t a0, a1, b0, b1;
    std::memcpy(&a0, a.addr.data(), 8);
    std::memcpy(&a1, a.addr.data() + 8, 8);
    std::memcpy(&b0, b.addr.data(), 8);
    std::memcpy(&b1, b.addr.data() + 8, 8);
    return ((a0 ^ b0) | (a1 ^ b1)) == 0 && a.port == b.port;
  }

  // "1.2.3.4:5", "[::1]:5"
  std::string to_string() const;
  // Accepts "1.2.3.4:5", "[::1]:5", "localhost:5", "*:5" (IPv6 any, dual stack), "0.0.0.0:5".
  // Numeric only except for "localhost"; returns nullopt on anything malformed.
  static std::optional<Endpoint> parse(std::string_view text);
};

struct EndpointHash {
  std::size_t operator()(const Endpoint& e) const noexcept {
    // FNV-1a over the 18 key bytes, then a final avalanche: cheap and good enough for an
    // open-addressed table keyed by attacker-chosen addresses only when seeded (runtime does that).
    std::uint64_t h = 1469598103934665603ull;
    for (auto b : e.addr) h = (h ^ b) * 1099511628211ull;
    h = (h ^ (e.port & 0xff)) * 1099511628211ull;
    h = (h ^ (e.port >> 8)) * 1099511628211ull;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return static_cast<std::size_t>(h);
  }
};

}  // namespace tern

template <>
struct std::hash<tern::Endpoint> : tern::EndpointHash {};
