// Helpers shared by the unit tests: exact-size heap copies and a seeded, printed RNG.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

namespace tern::test {

// A heap block of exactly the given size. Decoders are run on these rather than on views into
// larger buffers so that AddressSanitizer reports any read past the end as a heap overflow.
class HeapBytes {
 public:
  explicit HeapBytes(std::span<const std::byte> bytes)
      : size_(bytes.size()), data_(new std::byte[bytes.size()]) {
    if (size_ != 0) std::memcpy(data_.get(), bytes.data(), size_);
  }
  std::span<const std::byte> view() const { return {data_.get(), size_}; }
  std::span<std::byte> mutable_view() { return {data_.get(), size_}; }

 private:
  std::size_t size_;
  std::unique_ptr<std::byte[]> data_;
};

// The seed comes from TERN_TEST_SEED when set, so a failure printed by CI can be replayed.
inline std::uint64_t test_seed(std::uint64_t fallback) {
  std::uint64_t seed = fallback;
  if (const char* env = std::getenv("TERN_TEST_SEED"); env != nullptr && *env != '\0') {
    seed = std::strtoull(env, nullptr, 0);
  }
  std::printf("[ seed     ] TERN_TEST_SEED=%llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

inline std::vector<std::byte> random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::vector<std::byte> out(n);
  for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
  return out;
}

inline std::span<const std::byte> as_bytes(const std::vector<std::byte>& v) {
  return {v.data(), v.size()};
}

}  // namespace tern::test
