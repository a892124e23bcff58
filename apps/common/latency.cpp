#include "common/latency.hpp"

#include <algorithm>
#include <cmath>

namespace tern::app {

double percentile_sorted(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  const double n = static_cast<double>(sorted.size());
  // Rank in 1..n; the small epsilon keeps p*n that is an exact integer in theory (99.9% of
  // 1000) from rounding up to the next rank through floating-point error.
  double rank = std::ceil(p / 100.0 * n - 1e-9);
  rank = std::clamp(rank, 1.0, n);
  return sorted[static_cast<std::size_t>(rank) - 1];
}

LatencySummary summarize(std::span<double> samples) {
  std::sort(samples.begin(), samples.end());
  LatencySummary s;
  s.count = samples.size();
  s.p50 = percentile_sorted(samples, 50);
  s.p90 = percentile_sorted(samples, 90);
  s.p99 = percentile_sorted(samples, 99);
  s.p999 = percentile_sorted(samples, 99.9);
  s.max = samples.empty() ? 0 : samples.back();
  return s;
}

}  // namespace tern::app
