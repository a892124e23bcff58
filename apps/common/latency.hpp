// Latency summaries for the measuring apps (tern-ping, tern-loadgen).
#pragma once

#include <cstddef>
#include <span>

namespace tern::app {

// Nearest-rank percentile of an ascending-sorted sample set: the smallest sample with at least
// p% of the samples at or below it. Unlike interpolation, the answer is always a value that
// was actually measured, which is what a tail-latency report should show. 0 for no samples.
double percentile_sorted(std::span<const double> sorted, double p);

struct LatencySummary {
  std::size_t count = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double p999 = 0;
  double max = 0;
};

// Sorts `samples` in place and reads the usual percentiles off it.
LatencySummary summarize(std::span<double> samples);

}  // namespace tern::app
