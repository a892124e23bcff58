// splitmix64's finaliser: spreads a low-entropy value (a clock reading, an index) over all 64
// bits, for seeding per-host and per-shard generators.
#pragma once

#include <cstdint>

namespace tern::base {

inline std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace tern::base
