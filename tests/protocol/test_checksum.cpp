// CRC32 and the datagram checksum, without libenet (test_checksum_enet.cpp compares with it).
#include "support.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <random>
#include <string_view>
#include <vector>

namespace {

using namespace tern::proto;
using tern::test::HeapBytes;

std::span<const std::byte> text(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

TEST(Crc32, KnownVectors) {
  // The standard CRC-32 check value; ENet's table is the same reflected 0xEDB88320 CRC.
  EXPECT_EQ(crc32(text("123456789")), 0xCBF43926u);
  EXPECT_EQ(crc32(text("")), 0u);
  EXPECT_EQ(crc32(text("a")), 0xE8B7BE43u);
  EXPECT_EQ(crc32(text("The quick brown fox jumps over the lazy dog")), 0x414FA339u);
}

TEST(Crc32, UpdateChainsLikeOneShot) {
  std::mt19937_64 rng(tern::test::test_seed(0xC4C32));
  for (int round = 0; round < 200; ++round) {
    const auto data = tern::test::random_bytes(rng, rng() % 3000);
    const std::span<const std::byte> all(data);
    const std::size_t cut1 = data.empty() ? 0 : rng() % data.size();
    const std::size_t cut2 = cut1 + (data.size() == cut1 ? 0 : rng() % (data.size() - cut1));
    std::uint32_t state = 0xFFFFFFFFu;
    state = crc32_update(state, all.subspan(0, cut1));
    state = crc32_update(state, all.subspan(cut1, cut2 - cut1));
    state = crc32_update(state, all.subspan(cut2));
    EXPECT_EQ(~state, crc32(all)) << "size " << data.size();
  }
}

// A datagram with a checksum field, built the way a sender does: header, zeroed field, body.
std::vector<std::byte> checksummed_datagram(std::mt19937_64& rng, bool sent_time, std::size_t body,
                                            std::size_t& field) {
  Header h;
  h.peer_id = static_cast<std::uint16_t>(rng() % kMaxPeerId);
  h.session = static_cast<std::uint8_t>(rng() & 3);
  h.has_sent_time = sent_time;
  h.sent_time = static_cast<std::uint16_t>(rng());
  std::vector<std::byte> dg(header_size(sent_time, true));
  EXPECT_EQ(encode_header(dg, h, true), dg.size());
  field = sent_time ? 4 : 2;
  const auto rest = tern::test::random_bytes(rng, body);
  dg.insert(dg.end(), rest.begin(), rest.end());
  return dg;
}

TEST(Checksum, WriteThenVerify) {
  std::mt19937_64 rng(tern::test::test_seed(0x5EED));
  for (int round = 0; round < 100; ++round) {
    const bool sent = (round & 1) != 0;
    std::size_t field = 0;
    auto bytes = checksummed_datagram(rng, sent, rng() % 1400, field);
    const std::uint32_t seed = (round % 3 == 0) ? 0 : static_cast<std::uint32_t>(rng());
    write_checksum(bytes, field, seed);

    HeapBytes dg(bytes);
    DecodedHeader dh;
    Drop why = Drop::count_;
    ASSERT_TRUE(decode_header(dg.view(), true, dh, why)) << drop_name(why);
    ASSERT_EQ(dh.checksum_offset, field);
    EXPECT_TRUE(verify_checksum(dg.view(), dh, seed));
    EXPECT_FALSE(verify_checksum(dg.view(), dh, seed ^ 1u));
    // Verification is read-only: the field still holds the transmitted checksum.
    EXPECT_EQ(std::memcmp(dg.view().data(), bytes.data(), bytes.size()), 0);
  }
}

TEST(Checksum, EveryFlippedBitFails) {
  std::mt19937_64 rng(tern::test::test_seed(0xF11B));
  std::size_t field = 0;
  auto bytes = checksummed_datagram(rng, true, 40, field);
  const std::uint32_t seed = 0x12345678u;
  write_checksum(bytes, field, seed);
  for (std::size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    auto flipped = bytes;
    flipped[bit / 8] ^= static_cast<std::byte>(1u << (bit % 8));
    HeapBytes dg(flipped);
    DecodedHeader dh;
    Drop why = Drop::count_;
    // Flipping a header flag bit can change the header's shape (sent time, compressed); such a
    // datagram is refused before the checksum is even looked at, which is also a failure.
    if (!decode_header(dg.view(), true, dh, why)) continue;
    if (dh.checksum_offset != field) continue;
    EXPECT_FALSE(verify_checksum(dg.view(), dh, seed)) << "bit " << bit;
  }
}

TEST(Checksum, SeedOccupiesTheFieldDuringComputation) {
  // write_checksum = CRC over the datagram with the seed written big-endian in the field.
  std::mt19937_64 rng(tern::test::test_seed(0xF1E1D));
  std::size_t field = 0;
  auto bytes = checksummed_datagram(rng, false, 100, field);
  const std::uint32_t seed = 0xA0B0C0D0u;
  auto manual = bytes;
  manual[field] = std::byte{0xA0};
  manual[field + 1] = std::byte{0xB0};
  manual[field + 2] = std::byte{0xC0};
  manual[field + 3] = std::byte{0xD0};
  const std::uint32_t want = crc32(manual);
  write_checksum(bytes, field, seed);
  const std::uint32_t got =
      (std::uint32_t(bytes[field]) << 24) | (std::uint32_t(bytes[field + 1]) << 16) |
      (std::uint32_t(bytes[field + 2]) << 8) | std::uint32_t(bytes[field + 3]);
  EXPECT_EQ(got, want);
}

}  // namespace
