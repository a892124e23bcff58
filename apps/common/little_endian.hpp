// Fixed-width fields the measuring apps stamp into their messages (send times, sequence
// numbers, client IDs), little-endian whatever the machine. One move each: byte-at-a-time
// loops stayed loops in the release build, ~100 instructions of every echo in tern-ping's
// flood client. The caller checks that the field fits.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace tern::app {

template <class T>
T swap_unless_little_endian(T v) {
  static_assert(std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>);
  if constexpr (std::endian::native == std::endian::little) {
    return v;
  } else if constexpr (sizeof(T) == 8) {
    return __builtin_bswap64(v);
  } else {
    return __builtin_bswap32(v);
  }
}

template <class T>
void store_le(std::span<std::byte> bytes, std::size_t at, T v) {
  v = swap_unless_little_endian(v);
  std::memcpy(bytes.data() + at, &v, sizeof v);
}

template <class T>
T load_le(std::span<const std::byte> bytes, std::size_t at) {
  T v;
  std::memcpy(&v, bytes.data() + at, sizeof v);
  return swap_unless_little_endian(v);
}

}  // namespace tern::app
