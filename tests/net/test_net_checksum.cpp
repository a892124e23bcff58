// RFC 1071 checksums: known vectors and a naive byte-wise reference over random buffers.
#include "net.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

namespace {

using namespace tern::net;

std::vector<std::byte> hex(const char* s) {
  std::vector<std::byte> out;
  auto nib = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (; s[0] != '\0' && s[1] != '\0'; s += 2) {
    out.push_back(static_cast<std::byte>((nib(s[0]) << 4) | nib(s[1])));
  }
  return out;
}

// The obvious implementation: big-endian 16-bit words, one at a time, fold at the end.
std::uint32_t naive_sum(std::span<const std::byte> data, std::uint32_t sum = 0) {
  std::uint64_t s = sum;
  for (std::size_t i = 0; i < data.size(); i += 2) {
    std::uint32_t w = std::to_integer<std::uint32_t>(data[i]) << 8;
    if (i + 1 < data.size()) w |= std::to_integer<std::uint32_t>(data[i + 1]);
    s += w;
  }
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  return static_cast<std::uint32_t>(s);
}

// Vectors computed with a few lines of Python (sum big-endian 16-bit words, fold carries,
// complement), the same definition as naive_sum, and cross-checked against published examples.
TEST(NetChecksum, Rfc1071Example) {
  // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
  const auto b = hex("0001f203f4f5f6f7");
  EXPECT_EQ(checksum_add(b), 0xddf2u);
  EXPECT_EQ(internet_checksum(b), 0x220d);
}

TEST(NetChecksum, Ipv4HeaderExample) {
  // The IPv4 header example of Wikipedia's "Internet checksum" article: checksum b861.
  auto h = hex("450000730000400040110000c0a80001c0a800c7");
  EXPECT_EQ(internet_checksum(h), 0xb861);
  h[10] = std::byte{0xb8};
  h[11] = std::byte{0x61};
  EXPECT_EQ(checksum_add(h), 0xffffu);  // a correct header sums to all ones
}

TEST(NetChecksum, OddLength) {
  // 0102 + 0304 + 0500 = 0906 -> ~ = f6f9 (Python).
  EXPECT_EQ(internet_checksum(hex("0102030405")), 0xf6f9);
  EXPECT_EQ(internet_checksum({}), 0xffff);
}

TEST(NetChecksum, PseudoHeaders) {
  // UDP 10.0.0.1:1234 -> 10.0.0.2:5678, payload "hello" (UDP length 13): pseudo-header sum
  // 1421, UDP checksum 8cff; the same over IPv6 2001:db8::1 -> 2001:db8::2: 5b93 and 458d
  // (Python, RFC 768 / RFC 8200 §8.1 pseudo-headers).
  EXPECT_EQ(pseudo_header_sum_v4(0x0a000001, 0x0a000002, 17, 13), 0x1421u);
  const std::array<std::uint8_t, 16> a = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                          0,    0,    0,    0,    0, 0, 0, 1};
  auto b = a;
  b[15] = 2;
  EXPECT_EQ(pseudo_header_sum_v6(a, b, 17, 13), 0x5b93u);
  const auto udp = hex("04d2162e000d000068656c6c6f");  // ports, length, zero checksum, "hello"
  EXPECT_EQ(~checksum_add(udp, pseudo_header_sum_v4(0x0a000001, 0x0a000002, 17, 13)) & 0xffff,
            0x8cffu);
  EXPECT_EQ(~checksum_add(udp, pseudo_header_sum_v6(a, b, 17, 13)) & 0xffff, 0x458du);
}

TEST(NetChecksum, MatchesNaiveOnRandomBuffers) {
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  std::vector<std::byte> buf(4096 + 16);
  for (int round = 0; round < 2000; ++round) {
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    // Mostly 0xff-heavy buffers in some rounds, to exercise the carries.
    if (round % 4 == 0) {
      for (auto& b : buf) b |= std::byte{0xf0};
    }
    const std::size_t offset = rng() % 16;  // any alignment
    const std::size_t length = round < 300 ? static_cast<std::size_t>(round) : rng() % 4096;
    const std::span<const std::byte> data(buf.data() + offset, length);
    const std::uint32_t initial = rng() % 0x10000;
    ASSERT_EQ(checksum_add(data, initial), naive_sum(data, initial))
        << "length " << length << " offset " << offset;
    // Chaining an even-length piece with the rest gives the sum of the whole.
    const std::size_t split = (rng() % (length + 1)) & ~std::size_t{1};
    ASSERT_EQ(checksum_add(data.subspan(split), checksum_add(data.first(split))), naive_sum(data));
  }
}

TEST(NetChecksum, Ipv4HeaderSumMatchesTheGeneralSum) {
  auto h = hex("450000730000400040110000c0a80001c0a800c7");
  EXPECT_EQ(ipv4_header_sum(h.data()), checksum_add(h));
  h[10] = std::byte{0xb8};
  h[11] = std::byte{0x61};
  EXPECT_EQ(ipv4_header_sum(h.data()), 0xffffu);
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(seed);
  std::mt19937 rng(seed);
  std::vector<std::byte> buf(20 + 8);
  for (int round = 0; round < 20000; ++round) {
    for (auto& b : buf) b = static_cast<std::byte>(rng());
    if (round % 3 == 0) {
      for (auto& b : buf) b |= std::byte{0xf0};  // carries
    }
    if (round % 7 == 0) std::fill(buf.begin(), buf.end(), std::byte{0});
    const std::byte* header = buf.data() + rng() % 8;  // any alignment
    ASSERT_EQ(ipv4_header_sum(header), naive_sum({header, 20})) << "round " << round;
  }
}

TEST(NetChecksum, Fold) {
  EXPECT_EQ(checksum_fold(0), 0u);
  EXPECT_EQ(checksum_fold(0xffff), 0xffffu);
  EXPECT_EQ(checksum_fold(0x1fffe), 0xffffu);
  EXPECT_EQ(checksum_fold(0xffffffffffffffffull), 0xffffu);
  EXPECT_EQ(checksum_fold(0x0001000000000000ull), 1u);
}

}  // namespace
