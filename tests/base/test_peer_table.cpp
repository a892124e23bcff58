// PeerTable: map semantics, key distinctions, a randomized model check against
// std::unordered_map, scale, and probe lengths for the key patterns an attacker can cheaply send.
#include "peer_table.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <unordered_map>
#include <vector>

namespace {

using tern::Endpoint;
using tern::base::PeerTable;

constexpr std::uint64_t kSeed = 0x7e29'5c1d'a3b0'4f86ull;

Endpoint v6(std::uint64_t hi, std::uint64_t lo, std::uint16_t port) {
  std::uint8_t bytes[16];
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<std::uint8_t>(hi >> (56 - 8 * i));
    bytes[8 + i] = static_cast<std::uint8_t>(lo >> (56 - 8 * i));
  }
  return Endpoint::v6(bytes, port);
}

Endpoint random_endpoint(std::mt19937_64& rng) {
  // Half IPv4, half IPv6, as a dual-stack server sees them.
  const std::uint64_t r = rng();
  if (r & 1)
    return Endpoint::v4(static_cast<std::uint32_t>(r >> 32), static_cast<std::uint16_t>(r >> 8));
  return v6(rng(), rng(), static_cast<std::uint16_t>(r >> 8));
}

TEST(PeerTable, InsertFindErase) {
  PeerTable<std::uint32_t> table(kSeed);
  const Endpoint a = Endpoint::v4(0x0A000001, 4000);
  const Endpoint b = Endpoint::v4(0x0A000002, 4000);

  EXPECT_EQ(table.find(a), nullptr);
  EXPECT_FALSE(table.erase(a));
  EXPECT_EQ(table.size(), 0u);

  auto [pa, created_a] = table.insert(a, 7);
  ASSERT_TRUE(created_a);
  EXPECT_EQ(*pa, 7u);
  auto [pb, created_b] = table.insert(b, 8);
  ASSERT_TRUE(created_b);
  EXPECT_EQ(*pb, 8u);
  EXPECT_EQ(table.size(), 2u);

  // A second insert finds the existing entry and leaves its value alone.
  auto [again, created_again] = table.insert(a, 99);
  EXPECT_FALSE(created_again);
  EXPECT_EQ(*again, 7u);
  EXPECT_EQ(table.size(), 2u);

  // Values are writable through the returned pointer.
  *table.find(b) = 80;
  EXPECT_EQ(*table.find(b), 80u);

  EXPECT_TRUE(table.erase(a));
  EXPECT_FALSE(table.erase(a));
  EXPECT_EQ(table.find(a), nullptr);
  ASSERT_NE(table.find(b), nullptr);
  EXPECT_EQ(*table.find(b), 80u);
  EXPECT_EQ(table.size(), 1u);

  const PeerTable<std::uint32_t>& view = table;
  ASSERT_NE(view.find(b), nullptr);
  EXPECT_EQ(*view.find(b), 80u);
}

TEST(PeerTable, AddressFamiliesAndPortsAreDistinct) {
  PeerTable<std::uint32_t> table(kSeed);
  const Endpoint v4 = Endpoint::v4(0x01020304, 5000);
  // ::1.2.3.4 (IPv4-compatible, not mapped) is a different IPv6 address.
  const std::uint8_t compat[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
  // ::ffff:1.2.3.4 as it arrives on a dual-stack socket is the same peer as the IPv4 form.
  const std::uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 1, 2, 3, 4};
  // 1.2.3.4 in the first bytes of a native IPv6 address.
  const std::uint8_t leading[16] = {1, 2, 3, 4};

  ASSERT_TRUE(table.insert(v4, 1).second);
  ASSERT_TRUE(table.insert(Endpoint::v6(compat, 5000), 2).second);
  ASSERT_TRUE(table.insert(Endpoint::v6(leading, 5000), 3).second);
  EXPECT_FALSE(table.insert(Endpoint::v6(mapped, 5000), 4).second);
  EXPECT_EQ(*table.find(Endpoint::v6(mapped, 5000)), 1u);
  EXPECT_EQ(*table.find(Endpoint::v6(compat, 5000)), 2u);
  EXPECT_EQ(*table.find(Endpoint::v6(leading, 5000)), 3u);

  // Same address, neighbouring ports, and the port's bytes swapped: all different peers.
  ASSERT_TRUE(table.insert(Endpoint::v4(0x01020304, 5001), 5).second);
  ASSERT_TRUE(table.insert(Endpoint::v4(0x01020304, 0x8813), 6).second);  // 5000 byte-swapped
  ASSERT_TRUE(table.insert(Endpoint::v4(0x01020304, 0), 7).second);
  EXPECT_EQ(*table.find(v4), 1u);
  EXPECT_EQ(*table.find(Endpoint::v4(0x01020304, 5001)), 5u);
  EXPECT_EQ(*table.find(Endpoint::v4(0x01020304, 0x8813)), 6u);
  EXPECT_EQ(*table.find(Endpoint::v4(0x01020304, 0)), 7u);
  EXPECT_EQ(table.find(Endpoint::v4(0x01020304, 4999)), nullptr);
  EXPECT_EQ(table.size(), 6u);
}

TEST(PeerTable, ReserveMeansNoGrowth) {
  PeerTable<std::uint32_t> table(kSeed);
  table.reserve(10'000);
  const std::size_t capacity = table.capacity();
  const std::size_t bytes = table.memory_bytes();
  EXPECT_GE(capacity - capacity / 8, 10'000u);
  std::mt19937_64 rng(1);
  for (std::uint32_t i = 0; i < 10'000; ++i) table.insert(random_endpoint(rng), i);
  EXPECT_EQ(table.capacity(), capacity);
  EXPECT_EQ(table.memory_bytes(), bytes);
  std::printf("capacity %zu, %zu bytes, %.1f bytes per entry at %zu entries\n", capacity, bytes,
              static_cast<double>(bytes) / static_cast<double>(table.size()), table.size());
}

TEST(PeerTable, MoveLeavesAnEmptyUsableTable) {
  PeerTable<std::uint32_t> a(kSeed);
  a.insert(Endpoint::v4(1, 1), 1);
  PeerTable<std::uint32_t> b(std::move(a));
  EXPECT_EQ(*b.find(Endpoint::v4(1, 1)), 1u);
  EXPECT_EQ(a.size(), 0u);  // NOLINT(bugprone-use-after-move): documented state
  EXPECT_EQ(a.find(Endpoint::v4(1, 1)), nullptr);
  a.insert(Endpoint::v4(2, 2), 2);
  EXPECT_EQ(*a.find(Endpoint::v4(2, 2)), 2u);
  a = std::move(b);
  EXPECT_EQ(*a.find(Endpoint::v4(1, 1)), 1u);
  EXPECT_EQ(a.find(Endpoint::v4(2, 2)), nullptr);
}

// Random inserts, finds and erases checked against std::unordered_map. The key pool grows over
// the run so the table grows through several capacities while erases keep exercising backward
// shift at every size.
TEST(PeerTable, MatchesUnorderedMapModel) {
  const std::uint64_t seed = std::random_device{}();
  std::printf("model seed %llu\n", static_cast<unsigned long long>(seed));
  SCOPED_TRACE(seed);
  std::mt19937_64 rng(seed);
  PeerTable<std::uint32_t> table(rng());
  std::unordered_map<Endpoint, std::uint32_t> model;
  std::vector<Endpoint> pool;

  constexpr int kOps = 500'000;
  for (int op = 0; op < kOps; ++op) {
    // Pool of ~op/3 keys: hits, misses and re-inserts of erased keys all stay common.
    if (pool.size() < static_cast<std::size_t>(op / 3 + 16)) pool.push_back(random_endpoint(rng));
    const Endpoint& key = pool[rng() % pool.size()];
    const std::uint32_t value = static_cast<std::uint32_t>(rng());
    switch (rng() % 8) {
      case 0:
      case 1:
      case 2: {
        auto [ptr, created] = table.insert(key, value);
        auto [it, model_created] = model.emplace(key, value);
        ASSERT_EQ(created, model_created);
        ASSERT_EQ(*ptr, it->second);
        break;
      }
      case 3:
      case 4: {
        ASSERT_EQ(table.erase(key), model.erase(key) == 1);
        break;
      }
      default: {
        const std::uint32_t* found = table.find(key);
        auto it = model.find(key);
        ASSERT_EQ(found != nullptr, it != model.end());
        if (found != nullptr) {
          ASSERT_EQ(*found, it->second);
        }
      }
    }
    ASSERT_EQ(table.size(), model.size());
  }
  for (const auto& [key, value] : model) {
    const std::uint32_t* found = table.find(key);
    ASSERT_NE(found, nullptr);
    ASSERT_EQ(*found, value);
  }
  for (const Endpoint& key : pool) ASSERT_EQ(table.find(key) != nullptr, model.count(key) == 1);
  std::printf("final size %zu, capacity %zu, max probe %zu\n", table.size(), table.capacity(),
              table.max_probe_length());
  EXPECT_LT(table.max_probe_length(), 64u);
}

TEST(PeerTable, MillionEntries) {
  PeerTable<std::uint32_t> table(kSeed);
  constexpr std::uint32_t kN = 1'000'000;
  std::vector<Endpoint> keys;
  keys.reserve(kN);
  std::mt19937_64 rng(kSeed);
  // Sequential IPv4 addresses (a NATed /12 or a load generator) and random IPv6 ones.
  for (std::uint32_t i = 0; i < kN / 2; ++i) keys.push_back(Endpoint::v4(0x0A000000 + i, 40000));
  for (std::uint32_t i = 0; i < kN / 2; ++i) keys.push_back(v6(rng(), rng(), 443));

  for (std::uint32_t i = 0; i < kN; ++i) ASSERT_TRUE(table.insert(keys[i], i).second) << i;
  ASSERT_EQ(table.size(), kN);
  for (std::uint32_t i = 0; i < kN; ++i) {
    const std::uint32_t* found = table.find(keys[i]);
    ASSERT_NE(found, nullptr) << i;
    ASSERT_EQ(*found, i);
  }
  std::printf("1M entries: capacity %zu, %.1f bytes per entry, max probe %zu\n", table.capacity(),
              static_cast<double>(table.memory_bytes()) / kN, table.max_probe_length());
  EXPECT_LT(table.max_probe_length(), 64u);
  for (std::uint32_t i = 0; i < kN; ++i) ASSERT_TRUE(table.erase(keys[i])) << i;
  EXPECT_EQ(table.size(), 0u);
  for (std::uint32_t i = 0; i < kN; i += 997) EXPECT_EQ(table.find(keys[i]), nullptr);
}

// Keys an attacker gets for free (every port of one address, every host of one subnet) must
// spread like random keys do; a structured hash would put them in long runs.
TEST(PeerTable, StructuredKeysSpread) {
  std::vector<std::uint64_t> seeds = {kSeed, 0, 1, ~std::uint64_t{0}};
  for (std::uint64_t s = 2; s < 14; ++s) seeds.push_back(s * 0x1000'0000'0000'0001ull);
  for (std::uint64_t seed : seeds) {
    SCOPED_TRACE(seed);
    PeerTable<std::uint32_t> ports(seed);
    for (std::uint32_t p = 0; p < 65536; ++p)
      ports.insert(Endpoint::v4(0xC0A80001, static_cast<std::uint16_t>(p)), p);
    PeerTable<std::uint32_t> ports6(seed);
    for (std::uint32_t p = 0; p < 65536; ++p)
      ports6.insert(v6(0x20010db800000000ull, 1, static_cast<std::uint16_t>(p)), p);
    // Last address byte x port: 256 hosts of a /24, 256 ports each.
    PeerTable<std::uint32_t> hosts(seed);
    for (std::uint32_t h = 0; h < 256; ++h)
      for (std::uint32_t p = 0; p < 256; ++p)
        hosts.insert(Endpoint::v4(0xC0A80000 | h, static_cast<std::uint16_t>(p)), h << 8 | p);
    // The low 64 bits of an IPv6 /64, which the attacker owns outright, counting up.
    PeerTable<std::uint32_t> subnet(seed);
    for (std::uint32_t i = 0; i < 65536; ++i) subnet.insert(v6(0x20010db800000001ull, i, 9), i);

    // 65,536 random keys at this load give a longest run of about 7 to 12.
    for (const auto* t : {&ports, &ports6, &hosts, &subnet}) {
      EXPECT_EQ(t->size(), 65536u);
      EXPECT_LE(t->max_probe_length(), 24u);
    }
    std::printf("seed %llx max probe: ports %zu, ports6 %zu, hosts %zu, /64 %zu\n",
                static_cast<unsigned long long>(seed), ports.max_probe_length(),
                ports6.max_probe_length(), hosts.max_probe_length(), subnet.max_probe_length());
  }
}

// The same keys land in different places under different seeds, so a layout learned from one
// table (or one shard) does not carry over.
TEST(PeerTable, SeedChangesTheHash) {
  PeerTable<std::uint32_t> a(1);
  PeerTable<std::uint32_t> b(2);
  int same = 0;
  for (std::uint32_t p = 0; p < 1000; ++p) {
    const Endpoint e = Endpoint::v4(0x0A000001, static_cast<std::uint16_t>(p));
    if ((a.hash(e) & 0xffff) == (b.hash(e) & 0xffff)) ++same;
  }
  EXPECT_LT(same, 5);
}

}  // namespace
