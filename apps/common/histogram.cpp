#include "common/histogram.hpp"

#include <algorithm>
#include <cmath>

namespace tern::app {

namespace {

// Lowest value and width of bucket `i` (the inverse of index_of).
void bucket_range(std::size_t i, std::uint64_t& low, std::uint64_t& width) {
  constexpr std::size_t kSub = std::size_t{1} << LatencyHistogram::kSubBits;
  if (i < LatencyHistogram::kExact) {
    low = i;
    width = 1;
    return;
  }
  const std::size_t k = i - LatencyHistogram::kExact;
  const unsigned msb = static_cast<unsigned>(k / kSub) + LatencyHistogram::kSubBits + 1;
  const unsigned shift = msb - LatencyHistogram::kSubBits;
  low = (std::uint64_t{kSub} + (k % kSub)) << shift;
  width = std::uint64_t{1} << shift;
}

}  // namespace

void LatencyHistogram::merge(const LatencyHistogram& other) {
  for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  max_ = std::max(max_, other.max_);
}

double LatencyHistogram::percentile(double p) const {
  if (count_ == 0) return 0;
  const double n = static_cast<double>(count_);
  const double rank = std::clamp(std::ceil(p / 100.0 * n - 1e-9), 1.0, n);
  const auto want = static_cast<std::uint64_t>(rank);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen < want) continue;
    std::uint64_t low = 0, width = 0;
    bucket_range(i, low, width);
    const double mid = static_cast<double>(low) + static_cast<double>(width - 1) / 2.0;
    return std::min(mid, static_cast<double>(max_));
  }
  return static_cast<double>(max_);
}

LatencySummary LatencyHistogram::summary(double scale) const {
  LatencySummary s;
  s.count = static_cast<std::size_t>(count_);
  s.p50 = percentile(50) * scale;
  s.p90 = percentile(90) * scale;
  s.p99 = percentile(99) * scale;
  s.p999 = percentile(99.9) * scale;
  s.max = static_cast<double>(max_) * scale;
  return s;
}

}  // namespace tern::app
