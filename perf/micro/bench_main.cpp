// tern-micro: Google Benchmark's standard command line (--benchmark_filter, --benchmark_format,
// --benchmark_repetitions, ...). See README.md for how to take numbers worth comparing.
#include <benchmark/benchmark.h>

BENCHMARK_MAIN();
