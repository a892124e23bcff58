// PeerTable microbenchmarks: the per-datagram lookup (hit for a known peer, miss for an unknown
// or spoofed source) and a connect+disconnect (insert then erase) at 1k, 100k and 1M peers,
// each next to std::unordered_map with tern::EndpointHash as the reference; plus the cost of
// the keyed hash itself against SipHash-1-3, the usual choice when flooding is the worry.
//
// Lookups walk the keys in a shuffled order, as datagrams from many peers arrive, so tables
// larger than the cache pay their cache misses.
#include "peer_table.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

namespace {

using tern::Endpoint;
using tern::base::PeerTable;

constexpr std::uint64_t kTableSeed = 0x5eed'1234'abcd'0001ull;

Endpoint random_endpoint(std::mt19937_64& rng) {
  const std::uint64_t r = rng();
  if (r & 1)
    return Endpoint::v4(static_cast<std::uint32_t>(r >> 32), static_cast<std::uint16_t>(r >> 8));
  std::uint8_t bytes[16];
  const std::uint64_t hi = rng();
  const std::uint64_t lo = rng();
  std::memcpy(bytes, &hi, 8);
  std::memcpy(bytes + 8, &lo, 8);
  return Endpoint::v6(bytes, static_cast<std::uint16_t>(r >> 8));
}

// n present keys, n absent keys (a few are absent by chance only with negligible probability),
// each in shuffled order, and both containers filled with the present ones.
struct Fixture {
  std::vector<Endpoint> present;
  std::vector<Endpoint> absent;
  PeerTable<std::uint32_t> table{kTableSeed};
  std::unordered_map<Endpoint, std::uint32_t, tern::EndpointHash> reference;
};

Fixture& fixture(std::size_t n) {
  static std::map<std::size_t, std::unique_ptr<Fixture>> cache;
  auto& slot = cache[n];
  if (!slot) {
    slot = std::make_unique<Fixture>();
    std::mt19937_64 rng(n);
    for (std::size_t i = 0; i < n; ++i) slot->present.push_back(random_endpoint(rng));
    for (std::size_t i = 0; i < n; ++i) slot->absent.push_back(random_endpoint(rng));
    slot->reference.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      slot->table.insert(slot->present[i], static_cast<std::uint32_t>(i));
      slot->reference.emplace(slot->present[i], static_cast<std::uint32_t>(i));
    }
    std::shuffle(slot->present.begin(), slot->present.end(), rng);
  }
  return *slot;
}

void report(benchmark::State& state, const Fixture& f) {
  state.counters["bytes_per_entry"] =
      static_cast<double>(f.table.memory_bytes()) / static_cast<double>(f.table.size());
}

template <class Lookup>
void run_lookups(benchmark::State& state, const std::vector<Endpoint>& keys, Lookup lookup) {
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(lookup(keys[i]));
    if (++i == keys.size()) i = 0;
  }
}

void BM_PeerTableFindHit(benchmark::State& state) {
  Fixture& f = fixture(static_cast<std::size_t>(state.range(0)));
  run_lookups(state, f.present, [&](const Endpoint& e) { return f.table.find(e); });
  report(state, f);
}

void BM_PeerTableFindMiss(benchmark::State& state) {
  Fixture& f = fixture(static_cast<std::size_t>(state.range(0)));
  run_lookups(state, f.absent, [&](const Endpoint& e) { return f.table.find(e); });
}

void BM_PeerTableInsertErase(benchmark::State& state) {
  Fixture& f = fixture(static_cast<std::size_t>(state.range(0)));
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.table.insert(f.absent[i], 1).first);
    f.table.erase(f.absent[i]);
    if (++i == f.absent.size()) i = 0;
  }
}

void BM_UnorderedMapFindHit(benchmark::State& state) {
  Fixture& f = fixture(static_cast<std::size_t>(state.range(0)));
  run_lookups(state, f.present, [&](const Endpoint& e) { return f.reference.find(e); });
}

void BM_UnorderedMapFindMiss(benchmark::State& state) {
  Fixture& f = fixture(static_cast<std::size_t>(state.range(0)));
  run_lookups(state, f.absent, [&](const Endpoint& e) { return f.reference.find(e); });
}

void BM_UnorderedMapInsertErase(benchmark::State& state) {
  Fixture& f = fixture(static_cast<std::size_t>(state.range(0)));
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.reference.emplace(f.absent[i], 1).first);
    f.reference.erase(f.absent[i]);
    if (++i == f.absent.size()) i = 0;
  }
}

#define TERN_PEER_TABLE_SIZES Arg(1'000)->Arg(100'000)->Arg(1'000'000)
BENCHMARK(BM_PeerTableFindHit)->TERN_PEER_TABLE_SIZES;
BENCHMARK(BM_UnorderedMapFindHit)->TERN_PEER_TABLE_SIZES;
BENCHMARK(BM_PeerTableFindMiss)->TERN_PEER_TABLE_SIZES;
BENCHMARK(BM_UnorderedMapFindMiss)->TERN_PEER_TABLE_SIZES;
BENCHMARK(BM_PeerTableInsertErase)->TERN_PEER_TABLE_SIZES;
BENCHMARK(BM_UnorderedMapInsertErase)->TERN_PEER_TABLE_SIZES;
#undef TERN_PEER_TABLE_SIZES

// SipHash-1-3 over the same 18 key bytes, only to price the alternative to the keyed
// multiply hash; it is not used by the table.
class SipHash13 {
 public:
  SipHash13(std::uint64_t k0, std::uint64_t k1) : k0_(k0), k1_(k1) {}

  std::uint64_t operator()(const Endpoint& e) const {
    std::uint64_t v0 = k0_ ^ 0x736f6d6570736575ull;
    std::uint64_t v1 = k1_ ^ 0x646f72616e646f6dull;
    std::uint64_t v2 = k0_ ^ 0x6c7967656e657261ull;
    std::uint64_t v3 = k1_ ^ 0x7465646279746573ull;
    auto round = [&] {
      v0 += v1;
      v1 = std::rotl(v1, 13) ^ v0;
      v0 = std::rotl(v0, 32);
      v2 += v3;
      v3 = std::rotl(v3, 16) ^ v2;
      v0 += v3;
      v3 = std::rotl(v3, 21) ^ v0;
      v2 += v1;
      v1 = std::rotl(v1, 17) ^ v2;
      v2 = std::rotl(v2, 32);
    };
    auto absorb = [&](std::uint64_t m) {
      v3 ^= m;
      round();
      v0 ^= m;
    };
    std::uint64_t w;
    std::memcpy(&w, e.addr.data(), 8);
    absorb(w);
    std::memcpy(&w, e.addr.data() + 8, 8);
    absorb(w);
    absorb(std::uint64_t{18} << 56 | e.port);
    v2 ^= 0xff;
    round();
    round();
    round();
    return v0 ^ v1 ^ v2 ^ v3;
  }

 private:
  std::uint64_t k0_;
  std::uint64_t k1_;
};

template <class Hash>
void run_hash(benchmark::State& state, const Hash& hash) {
  std::mt19937_64 rng(7);
  std::vector<Endpoint> keys;
  for (int i = 0; i < 1024; ++i) keys.push_back(random_endpoint(rng));
  std::size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(hash(keys[i]));
    i = (i + 1) & 1023;
  }
}

void BM_HashPeerTable(benchmark::State& state) {
  const PeerTable<std::uint32_t> table(kTableSeed);
  run_hash(state, [&](const Endpoint& e) { return table.hash(e); });
}

void BM_HashSipHash13(benchmark::State& state) {
  run_hash(state, SipHash13(kTableSeed, ~kTableSeed));
}

void BM_HashEndpointHashFnv(benchmark::State& state) { run_hash(state, tern::EndpointHash{}); }

BENCHMARK(BM_HashPeerTable);
BENCHMARK(BM_HashSipHash13);
BENCHMARK(BM_HashEndpointHashFnv);

}  // namespace
