// Secure sessions (issue 33): ns per datagram to seal and to open (replay window included) at
// 64 and 1,200 bytes of payload behind a 4-byte header, and ns to open and check a connect
// token (what a server pays per token-carrying CONNECT before any state).
#include "host_core.hpp"
#include "secure/secure.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace {

namespace sec = tern::proto::sec;

// ChaCha20-Poly1305, or AES-256-GCM (aes: the session agreed it; WIRE.md) when `aes` is set.
void seal_bench(benchmark::State& state, bool aes) {
  const auto payload = static_cast<std::size_t>(state.range(0));
  sec::SealState tx;
  tx.key.fill(1);
  sec::AesState expanded;
  if (aes && !sec::expand_aes(tx.key, expanded)) {
    state.SkipWithError("no AES-NI");
    return;
  }
  if (aes) tx.aes = &expanded;
  std::vector<std::uint8_t> buf(4 + payload + sec::kDatagramOverhead, 0x5a);
  for (auto _ : state) {
    benchmark::DoNotOptimize(sec::seal_datagram(tx, buf.data(), 4, payload));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * payload));
}

void BM_SealDatagram(benchmark::State& state) { seal_bench(state, false); }
void BM_SealDatagramAes(benchmark::State& state) { seal_bench(state, true); }

void open_bench(benchmark::State& state, bool aes) {
  // Sealed in advance with increasing sequence numbers; each iteration opens a fresh copy
  // (the copy of at most 1,224 bytes is part of the figure, as a receive copy would be).
  const auto payload = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t kBatch = 4096;
  sec::SealState tx;
  tx.key.fill(1);
  sec::AesState expanded;
  if (aes && !sec::expand_aes(tx.key, expanded)) {
    state.SkipWithError("no AES-NI");
    return;
  }
  if (aes) tx.aes = &expanded;
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
    if (sec::open_datagram(tx.key, window, work.data(), size, 4, n, tx.aes) !=
        sec::OpenError::none) {
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

void BM_OpenDatagram(benchmark::State& state) { open_bench(state, false); }
void BM_OpenDatagramAes(benchmark::State& state) { open_bench(state, true); }

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

// A flood of CONNECTs carrying valid tokens at a server whose security is required: ns per
// CONNECT for the token's decryption and checks, the nonce table, the half-open entry, the key
// derivations and the sealed VERIFY_CONNECT (flushed every 64, as after a receive burst).
// Compare BM_ConnectFlood/0, the same without tokens. 1,024 tokens, each always from its own
// source (a token is bound to the first address it came from).
void BM_SecureConnectFlood(benchmark::State& state) {
  using namespace tern::proto;
  const tern::Endpoint server_ep = tern::Endpoint::v4(0x0a000001u, 7777);
  sec::TokenKey key;
  key.id = 1;
  key.key.fill(9);
  HostConfig sc;
  sc.security = Security::required;
  sc.token_keys.keys[0] = key;
  sc.token_keys.count = 1;
  sc.secure_addresses[0] = server_ep;
  sc.secure_address_count = 1;
  HostCore server(sc);
  server.set_unix_time(1'000'000, 1'800'000'000);
  // The CONNECT datagrams, as a client core writes them.
  HostConfig cc;
  cc.peer_limit = 2048;
  HostCore client(cc);
  constexpr std::size_t kTokens = 1024;
  for (std::size_t i = 0; i < kTokens; ++i) {
    sec::TokenContents c;
    c.client_id = i;
    c.server_count = 1;
    c.servers[0] = server_ep;
    c.client_to_server.fill(static_cast<std::uint8_t>(i));
    c.server_to_client.fill(static_cast<std::uint8_t>(i + 1));
    std::array<std::uint8_t, sec::kTokenBytes> token{};
    sec::mint_token(key, 1'800'000'000, 1'800'000'000 + 3600, c, token);
    std::array<std::uint8_t, 16> salt{};
    salt[0] = static_cast<std::uint8_t>(i);
    salt[1] = static_cast<std::uint8_t>(i >> 8);
    client.connect_secure(1'000'000, server_ep, 2, 0, token, c.client_to_server, c.server_to_client,
                          salt);
  }
  std::vector<std::vector<std::byte>> datagrams;
  std::vector<OutDatagram> out(64);
  for (;;) {
    const std::size_t n = client.flush(1'000'000, out);
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = out[i].view();
      datagrams.emplace_back(v.begin(), v.end());
    }
    if (n < out.size()) break;
  }
  if (datagrams.size() != kTokens) {
    state.SkipWithError("client did not write one CONNECT per token");
    return;
  }
  std::uint64_t now_us = 1'000'000;
  std::size_t i = 0;
  for (auto _ : state) {
    const std::size_t k = i % kTokens;
    server.on_datagram(now_us,
                       tern::Endpoint::v4(0x0b000000u + static_cast<std::uint32_t>(k), 4000),
                       datagrams[k]);
    if ((++i & 63) == 0) {
      server.flush(now_us, out);
      now_us += 500;
    }
  }
  state.counters["tokens_accepted"] = static_cast<double>(server.counters().tokens_accepted);
  state.counters["refused"] = static_cast<double>(server.counters().tokens_refused);
}

}  // namespace

BENCHMARK(BM_SecureConnectFlood);
BENCHMARK(BM_SealDatagram)->Arg(64)->Arg(1200);
BENCHMARK(BM_OpenDatagram)->Arg(64)->Arg(1200);
BENCHMARK(BM_SealDatagramAes)->Arg(64)->Arg(1200);
BENCHMARK(BM_OpenDatagramAes)->Arg(64)->Arg(1200);
BENCHMARK(BM_OpenToken);
