// A fixed-size log-linear latency histogram for the measuring apps' hot paths.
//
// Recording is one index computation and one increment into a preallocated array: no locks,
// no allocation, so each thread keeps its own and the histograms are merged at the end.
// Values below 256 are exact; above, each power of two is split into 128 buckets, so a
// reported percentile is within 1% of a value that was measured. The maximum is exact.
#pragma once

#include "common/latency.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace tern::app {

class LatencyHistogram {
 public:
  static constexpr unsigned kSubBits = 7;
  static constexpr std::size_t kExact = std::size_t{1} << (kSubBits + 1);  // 256
  static constexpr std::size_t kBuckets =
      kExact + (64 - kSubBits - 1) * (std::size_t{1} << kSubBits);

  void record(std::uint64_t value) {
    ++counts_[index_of(value)];
    ++count_;
    if (value > max_) max_ = value;
  }
  void merge(const LatencyHistogram& other);
  std::uint64_t count() const { return count_; }
  std::uint64_t max() const { return max_; }

  // Nearest-rank percentile (as summarize()), read as the middle of the bucket that holds
  // that rank, clamped to the exact maximum. 0 when empty.
  double percentile(double p) const;
  // The usual percentiles with every value multiplied by `scale` (1e-3: ns recorded, us shown).
  LatencySummary summary(double scale) const;

  static std::size_t index_of(std::uint64_t v) {
    if (v < kExact) return static_cast<std::size_t>(v);
    const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(v));
    const unsigned shift = msb - kSubBits;
    return kExact + (msb - kSubBits - 1) * (std::size_t{1} << kSubBits) +
           static_cast<std::size_t>((v >> shift) - (std::uint64_t{1} << kSubBits));
  }

 private:
  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t max_ = 0;
};

}  // namespace tern::app
