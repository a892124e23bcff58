// The DPDK driver's frame path, one thread, no NIC: tx_burst (mbuf alloc, ARP lookup, headers,
// payload copy, checksums in software) into a net_ring port whose rx ring is its tx ring, then
// rx_burst (parse_frame, zero-copy hand-up, mbuf free at the next burst). Items are datagrams
// through both halves. DPDK's EAL runs with --no-huge; no root needed.
//
//   build-release/tests/drivers/dpdk/dpdk_frame_bench [--benchmark_min_time=1]
#include "dpdk_driver.hpp"
#include "ring_loopback.hpp"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace tern;

constexpr std::uint32_t kIp = (10u << 24) | (215u << 16) | 1u;  // 10.215.0.1
constexpr std::uint16_t kPort = 7000;
constexpr std::size_t kBurst = 32;
bool g_failed = false;  // a benchmark lost frames or could not run: exit status 1

bool init_once() {
  static const bool ok = [] {
    // Datagrams go to our own address and come back through the ring.
    const drv::DpdkConfig c = test::ring_loopback_config(kIp, 0x01, 4096);
    std::string error;
    if (!drv::dpdk_init(c, 1, error)) {
      std::fprintf(stderr, "dpdk_frame_bench: %s\n", error.c_str());
      return false;
    }
    return true;
  }();
  return ok;
}

void BM_DpdkFrameLoop(benchmark::State& state) {
  if (!init_once()) {
    g_failed = true;
    state.SkipWithError("dpdk_init failed");
    return;
  }
  std::string error;
  std::unique_ptr<rt::Driver> d = drv::open_dpdk_driver(0, kPort, error);
  if (d == nullptr) {
    g_failed = true;
    state.SkipWithError(error.c_str());
    return;
  }
  auto& driver = static_cast<drv::DpdkDriver&>(*d);
  const std::vector<std::byte> payload(static_cast<std::size_t>(state.range(0)), std::byte{0x5a});
  std::vector<rt::TxFrame> tx(kBurst, rt::TxFrame{Endpoint::v4(kIp, kPort), payload});
  std::vector<rt::RxFrame> rx(kBurst);
  std::uint64_t received = 0;
  for (auto _ : state) {
    driver.tx_burst(tx);
    std::size_t got = 0;
    for (int spin = 0; got < kBurst && spin < 4; ++spin) {
      const std::size_t n = driver.rx_burst(std::span<rt::RxFrame>(rx).subspan(got));
      got += n;
    }
    received += got;
    benchmark::DoNotOptimize(rx.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(received));
  state.SetBytesProcessed(static_cast<std::int64_t>(received) * state.range(0));
  const drv::DpdkStats s = driver.dpdk_stats();
  state.counters["tx_dropped"] = static_cast<double>(driver.stats().tx_dropped);
  state.counters["rx_drops"] = static_cast<double>(s.drops.total());
  if (received != state.iterations() * kBurst) {
    g_failed = true;
    state.SkipWithError("frames went missing");
  }
}
BENCHMARK(BM_DpdkFrameLoop)->Arg(16)->Arg(64)->Arg(512)->Arg(1200);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  drv::dpdk_shutdown();
  return g_failed ? 1 : 0;
}
