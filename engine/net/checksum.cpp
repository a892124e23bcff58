// RFC 1071 internet checksum: 8 bytes per step with end-around carry, byte-order independent
// summation (RFC 1071 §2(B)) so the loads are native and one swap at the end fixes the order.
#include "net.hpp"

#include <bit>
#include <cstring>

namespace tern::net {

namespace {

// acc += v with the carry out of bit 63 added back in (one's-complement addition).
inline std::uint64_t add_carry(std::uint64_t acc, std::uint64_t v) {
  acc += v;
  return acc + (acc < v ? 1 : 0);
}

}  // namespace

std::uint32_t checksum_add(std::span<const std::byte> data, std::uint32_t sum) {
  const std::byte* p = data.data();
  std::size_t n = data.size();
  std::uint64_t acc = 0;
  // Two independent accumulators let the adds of consecutive words overlap.
  std::uint64_t acc2 = 0;
  while (n >= 16) {
    std::uint64_t a, b;
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + 8, 8);
    acc = add_carry(acc, a);
    acc2 = add_carry(acc2, b);
    p += 16;
    n -= 16;
  }
  acc = add_carry(acc, acc2);
  if (n >= 8) {
    std::uint64_t a;
    std::memcpy(&a, p, 8);
    acc = add_carry(acc, a);
    p += 8;
    n -= 8;
  }
  if (n >= 4) {
    std::uint32_t a;
    std::memcpy(&a, p, 4);
    acc = add_carry(acc, a);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    std::uint16_t a;
    std::memcpy(&a, p, 2);
    acc = add_carry(acc, a);
    p += 2;
    n -= 2;
  }
  if (n == 1) {
    // The odd byte is the high (first) byte of a zero-padded big-endian word; in native order
    // that is the low byte on a little-endian machine.
    const std::uint64_t b = std::to_integer<std::uint8_t>(*p);
    acc = add_carry(acc, std::endian::native == std::endian::little ? b : b << 8);
  }
  return checksum_fold(std::uint64_t{checksum_to_host_order(checksum_fold(acc))} + sum);
}

std::uint16_t internet_checksum(std::span<const std::byte> data) {
  return static_cast<std::uint16_t>(~checksum_add(data) & 0xffff);
}

std::uint32_t pseudo_header_sum_v4(std::uint32_t src, std::uint32_t dst, std::uint8_t protocol,
                                   std::uint16_t length) {
  const std::uint64_t s =
      std::uint64_t{src >> 16} + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + protocol + length;
  return checksum_fold(s);
}

std::uint32_t pseudo_header_sum_v6(const std::array<std::uint8_t, 16>& src,
                                   const std::array<std::uint8_t, 16>& dst, std::uint8_t protocol,
                                   std::uint32_t length) {
  std::uint64_t s = std::uint64_t{length >> 16} + (length & 0xffff) + protocol;
  for (std::size_t i = 0; i < 16; i += 2) {
    s += (std::uint32_t{src[i]} << 8) | src[i + 1];
    s += (std::uint32_t{dst[i]} << 8) | dst[i + 1];
  }
  return checksum_fold(s);
}

}  // namespace tern::net
