// Secure sessions (issue 33): ns per datagram to seal and to open (replay window included) at
// 64 and 1,200 bytes of payload behind a 4-byte header, and ns to open and check a connect
// token (what a server pays per token-carrying CONNECT before any state).
#include "secure/secure.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

namespace sec = tern::proto::sec;

void BM_SealDatagram(benchmark::State& state) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  sec::SealState tx;
  tx.key.fill(1);
  std::vector<std::uint8_t> buf(4 + payload + sec::kDatagramOverhead, 0x5a);
  for (auto _ : state) {
    benchmark::DoNotOptimize(sec::seal_datagram(tx, buf.data(), 4, payload));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * payload));
}

void BM_OpenDatagram(benchmark::State& state) {
  // Sealed in advance with increasing sequence numbers; each iteration opens a fresh copy
  // (the copy of at most 1,224 bytes is part of the figure, as a receive copy would be).
  const auto payload = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t kBatch = 4096;
  sec::SealState tx;
  tx.key.fill(1);
  const std::size_t size = 4 + payload + sec::kDatagramOverhead;
  std::vector<std::vector<std::uint8_t>> sealed(kBatch, std::vector<std::uint8_t>(size, 0x5a));
  std::vector<std::uint8_t> work(size);
  sec::ReplayWindow window;
  std::size_t i = 0;
  auto refill = [&] {
    for (auto& d : sealed) sec::seal_datagram(tx, d.data(), 4, payload);
  };
  refill();
  for (auto _ : state) {
    std::memcpy(work.data(), sealed[i].data(), size);
    std::size_t n = 0;
    if (sec::open_datagram(tx.key, window, work.data(), size, 4, n) != sec::OpenError::none) {
      state.SkipWithError("open failed");
      break;
    }
    if (++i == kBatch) {
      state.PauseTiming();
      i = 0;
      for (auto& d : sealed) std::fill(d.begin(), d.end(), 0x5a);
      refill();
      state.ResumeTiming();
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * payload));
}

void BM_OpenToken(benchmark::State& state) {
  sec::KeyRing ring;
  ring.keys[0].id = 1;
  ring.keys[0].key.fill(3);
  ring.count = 1;
  sec::TokenContents c;
  c.server_count = 1;
  c.servers[0] = tern::Endpoint::v4(0x7f000001u, 7777);
  std::array<std::uint8_t, sec::kTokenBytes> token{};
  sec::mint_token(ring.keys[0], 1000, 2000, c, token);
  sec::TokenHeader h;
  sec::TokenContents out;
  for (auto _ : state) {
    benchmark::DoNotOptimize(sec::open_token(token, ring, 1500, h, out));
  }
}

}  // namespace

BENCHMARK(BM_SealDatagram)->Arg(64)->Arg(1200);
BENCHMARK(BM_OpenDatagram)->Arg(64)->Arg(1200);
BENCHMARK(BM_OpenToken);
