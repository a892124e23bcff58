// Frames: build -> parse round trips, offload fields, every Drop reason from a crafted frame,
// and every truncation of valid frames refused.
#include "net.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace tern::net;
using tern::Endpoint;
using Bytes = std::vector<std::byte>;

constexpr std::array<std::uint8_t, 16> kV6Server = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                                    0,    0,    0,    0,    0, 0, 0, 1};
constexpr std::array<std::uint8_t, 16> kV6Client = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0,
                                                    0,    0,    0,    0,    0, 0, 0, 2};

LinkConfig server(std::uint16_t vlan = 0) {
  LinkConfig l;
  l.mac = {{0x02, 0, 0, 0, 0, 0x01}};
  l.ipv4 = 0x0a000001;  // 10.0.0.1
  l.ipv6 = kV6Server;
  l.vlan = vlan;
  return l;
}
LinkConfig client(std::uint16_t vlan = 0) {
  LinkConfig l;
  l.mac = {{0x02, 0, 0, 0, 0, 0x02}};
  l.ipv4 = 0x0a000002;  // 10.0.0.2
  l.ipv6 = kV6Client;
  l.vlan = vlan;
  return l;
}
Endpoint ep(const std::array<std::uint8_t, 16>& a, std::uint16_t port) {
  Endpoint e;
  e.addr = a;
  e.port = port;
  return e;
}

Bytes payload_of(std::size_t n) {
  Bytes p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(i * 7 + 3);
  return p;
}

// A UDP frame from client to server.
Bytes udp_frame(Family f, std::uint16_t vlan = 0, std::size_t payload = 33,
                ChecksumMode mode = ChecksumMode::software) {
  const LinkConfig c = client(vlan);
  const Endpoint src = f == Family::ipv4 ? Endpoint::v4(c.ipv4, 40000) : ep(kV6Client, 40000);
  const Endpoint dst = f == Family::ipv4 ? Endpoint::v4(0x0a000001, 7777) : ep(kV6Server, 7777);
  Bytes out(2000);
  const Bytes p = payload_of(payload);
  const std::size_t n = build_udp(out, c, server().mac, src, dst, p, mode);
  EXPECT_EQ(n, headers_size(f, vlan != 0) + payload);
  out.resize(n);
  return out;
}

bool parse(const Bytes& frame, const LinkConfig& local, ParsedFrame& out, Drop& why,
           RxOptions opts = {}) {
  // Exact-size heap copy, so a sanitizer build sees any overread.
  const Bytes copy(frame);
  const bool ok = parse_frame(copy, local, opts, out, why);
  if (ok && !out.payload.empty()) {
    // Re-point the payload into `frame` (the copy dies here).
    out.payload = std::span<const std::byte>(frame).subspan(
        static_cast<std::size_t>(out.payload.data() - copy.data()), out.payload.size());
  }
  return ok;
}

std::size_t l3_offset(const Bytes& f) {
  return f[12] == std::byte{0x81} ? kEthernetHeaderSize + kVlanTagSize : kEthernetHeaderSize;
}
std::uint16_t get16(const Bytes& f, std::size_t at) {
  return static_cast<std::uint16_t>((std::to_integer<unsigned>(f[at]) << 8) |
                                    std::to_integer<unsigned>(f[at + 1]));
}
void put16(Bytes& f, std::size_t at, std::uint16_t v) {
  f[at] = static_cast<std::byte>(v >> 8);
  f[at + 1] = static_cast<std::byte>(v);
}
// Recomputes the IPv4 header checksum after a mutation.
void fix_ipv4(Bytes& f) {
  const std::size_t l3 = l3_offset(f);
  const std::size_t ihl = (std::to_integer<unsigned>(f[l3]) & 0xf) * 4;
  put16(f, l3 + 10, 0);
  put16(f, l3 + 10, internet_checksum(std::span<const std::byte>(f).subspan(l3, ihl)));
}

// ---- round trips ------------------------------------------------------------------------------

struct RoundTripCase {
  Family family;
  std::uint16_t vlan;
  std::size_t payload;
};

void PrintTo(const RoundTripCase& c, std::ostream* os) {
  *os << (c.family == Family::ipv4 ? "ipv4" : "ipv6") << " vlan " << c.vlan << " payload "
      << c.payload;
}

class NetRoundTrip : public ::testing::TestWithParam<RoundTripCase> {};

TEST_P(NetRoundTrip, BuildThenParse) {
  const auto [family, vlan, size] = GetParam();
  const Bytes f = udp_frame(family, vlan, size);
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(f, server(vlan), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.kind, ParsedFrame::Kind::udp);
  EXPECT_EQ(pf.family, family);
  EXPECT_EQ(pf.vlan, vlan);
  EXPECT_EQ(pf.src_mac, client().mac);
  EXPECT_EQ(pf.dst_mac, server().mac);
  if (family == Family::ipv4) {
    EXPECT_EQ(pf.src, Endpoint::v4(0x0a000002, 40000));
    EXPECT_EQ(pf.dst, Endpoint::v4(0x0a000001, 7777));
  } else {
    EXPECT_EQ(pf.src, ep(kV6Client, 40000));
    EXPECT_EQ(pf.dst, ep(kV6Server, 7777));
  }
  const Bytes p = payload_of(size);
  ASSERT_EQ(pf.payload.size(), size);
  EXPECT_TRUE(std::equal(p.begin(), p.end(), pf.payload.begin()));
  if (size != 0) {
    EXPECT_EQ(pf.payload.data(), f.data() + headers_size(family, vlan != 0));
  }

  // Without the VLAN configured (or with another one) the frame is not ours.
  EXPECT_FALSE(parse(f, server(vlan == 0 ? 5 : 0), pf, why));
  EXPECT_EQ(why, Drop::vlan_mismatch);
}

INSTANTIATE_TEST_SUITE_P(
    Net, NetRoundTrip,
    ::testing::Values(RoundTripCase{Family::ipv4, 0, 33}, RoundTripCase{Family::ipv4, 100, 33},
                      RoundTripCase{Family::ipv6, 0, 33}, RoundTripCase{Family::ipv6, 4094, 33},
                      RoundTripCase{Family::ipv4, 0, 0}, RoundTripCase{Family::ipv6, 0, 1},
                      RoundTripCase{Family::ipv4, 7, 1472}, RoundTripCase{Family::ipv6, 0, 1452}));

TEST(NetFrame, VlanTagCarriesPriorityAndId) {
  LinkConfig c = client(0x123);
  c.vlan_priority = 5;
  Bytes out(200);
  const std::size_t n = build_udp(out, c, server().mac, Endpoint::v4(c.ipv4, 1),
                                  Endpoint::v4(server().ipv4, 2), {}, ChecksumMode::software);
  ASSERT_EQ(n, headers_size(Family::ipv4, true));
  out.resize(n);
  EXPECT_EQ(get16(out, 12), 0x8100);
  EXPECT_EQ(get16(out, 14), (5u << 13) | 0x123u);
  EXPECT_EQ(get16(out, 16), 0x0800);
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(out, server(0x123), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.vlan, 0x123);
}

TEST(NetFrame, PriorityTaggedFrameIsUntagged) {
  Bytes f = udp_frame(Family::ipv4, 1);
  put16(f, 14, 0x6000);  // PCP 3, VID 0
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(f, server(0), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.vlan, 0);
}

TEST(NetFrame, EthernetPaddingIgnored) {
  Bytes f = udp_frame(Family::ipv4, 0, 4);  // 46 bytes: the NIC would pad to 60
  f.resize(60, std::byte{0xee});
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(f, server(), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.payload.size(), 4u);
}

TEST(NetFrame, UnspecifiedSourceTakesLocalAddress) {
  Bytes out(200);
  Endpoint any;
  any.port = 9;
  for (const bool v4 : {true, false}) {
    const Endpoint dst = v4 ? Endpoint::v4(server().ipv4, 2) : ep(kV6Server, 2);
    const std::size_t n =
        build_udp(out, client(), server().mac, any, dst, {}, ChecksumMode::software);
    ASSERT_NE(n, 0u);
    ParsedFrame pf;
    Drop why{};
    ASSERT_TRUE(
        parse(Bytes(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n)), server(), pf, why))
        << drop_name(why);
    EXPECT_EQ(pf.src, v4 ? Endpoint::v4(client().ipv4, 9) : ep(kV6Client, 9));
  }
}

TEST(NetFrame, BuildRefusesBadArguments) {
  Bytes out(100);
  const Bytes p = payload_of(10);
  // Family mismatch.
  EXPECT_EQ(build_udp(out, client(), server().mac, Endpoint::v4(1, 1), ep(kV6Server, 1), p,
                      ChecksumMode::software),
            0u);
  // Too small for headers + payload.
  EXPECT_EQ(
      build_udp(std::span<std::byte>(out).first(headers_size(Family::ipv4, false) + 9), client(),
                server().mac, Endpoint::v4(1, 1), Endpoint::v4(2, 2), p, ChecksumMode::software),
      0u);
  EXPECT_EQ(write_udp_headers(std::span<std::byte>(out).first(10), client(), server().mac,
                              Endpoint::v4(1, 1), Endpoint::v4(2, 2), ChecksumMode::software),
            0u);
  // Larger than one IP datagram.
  Bytes big(70000);
  EXPECT_EQ(write_udp_headers(big, client(), server().mac, Endpoint::v4(1, 1), Endpoint::v4(2, 2),
                              ChecksumMode::software),
            0u);
  EXPECT_EQ(build_arp_request(std::span<std::byte>(out).first(41), client(), 1), 0u);
}

TEST(NetFrame, ZeroCopyHeadersInFrontOfPayload) {
  for (const Family f : {Family::ipv4, Family::ipv6}) {
    const LinkConfig c = client(9);
    const std::size_t hs = headers_size(f, c);
    Bytes frame(hs + 100);
    const Bytes p = payload_of(100);
    std::copy(p.begin(), p.end(), frame.begin() + static_cast<std::ptrdiff_t>(hs));
    const Endpoint src = f == Family::ipv4 ? Endpoint::v4(c.ipv4, 1) : ep(kV6Client, 1);
    const Endpoint dst = f == Family::ipv4 ? Endpoint::v4(server().ipv4, 2) : ep(kV6Server, 2);
    ASSERT_EQ(write_udp_headers(frame, c, server().mac, src, dst, ChecksumMode::software),
              frame.size());
    // Identical to the copying builder.
    Bytes copy(frame.size());
    ASSERT_EQ(build_udp(copy, c, server().mac, src, dst, p, ChecksumMode::software), copy.size());
    EXPECT_EQ(frame, copy);
    ParsedFrame pf;
    Drop why{};
    ASSERT_TRUE(parse(frame, server(9), pf, why)) << drop_name(why);
    EXPECT_EQ(pf.payload.data(), frame.data() + hs);
  }
}

TEST(NetFrame, ChecksumOffloadLeavesPseudoHeaderSum) {
  for (const Family f : {Family::ipv4, Family::ipv6}) {
    for (const ChecksumMode mode : {ChecksumMode::offload, ChecksumMode::offload_udp}) {
      Bytes fr = udp_frame(f, 0, 21, mode);
      const std::size_t l3 = l3_offset(fr);
      const std::size_t l4 = l3 + (f == Family::ipv4 ? kIpv4HeaderSize : kIpv6HeaderSize);
      const std::uint16_t udp_len = get16(fr, l4 + 4);
      ASSERT_EQ(udp_len, 8 + 21);
      const std::uint32_t pseudo =
          f == Family::ipv4 ? pseudo_header_sum_v4(client().ipv4, server().ipv4, 17, udp_len)
                            : pseudo_header_sum_v6(kV6Client, kV6Server, 17, udp_len);
      EXPECT_EQ(get16(fr, l4 + 6), pseudo);
      if (f == Family::ipv4) {
        const auto ip = std::span<const std::byte>(fr).subspan(l3, kIpv4HeaderSize);
        if (mode == ChecksumMode::offload) {
          EXPECT_EQ(get16(fr, l3 + 10), 0);
        } else {
          EXPECT_EQ(checksum_add(ip), 0xffffu);
        }
      }
      // With the NIC's word that the checksums are good, the frame parses.
      ParsedFrame pf;
      Drop why{};
      ASSERT_TRUE(parse(fr, server(), pf, why,
                        {.ip_checksum_verified = true, .l4_checksum_verified = true}))
          << drop_name(why);
      // Finish what the NIC does, and it parses in software too (and equals software mode).
      if (f == Family::ipv4 && mode == ChecksumMode::offload) fix_ipv4(fr);
      const std::uint16_t c = static_cast<std::uint16_t>(
          ~checksum_add(std::span<const std::byte>(fr).subspan(l4)) & 0xffff);
      put16(fr, l4 + 6, c == 0 ? 0xffff : c);
      ASSERT_TRUE(parse(fr, server(), pf, why)) << drop_name(why);
      EXPECT_EQ(fr, udp_frame(f, 0, 21, ChecksumMode::software));
    }
  }
}

TEST(NetFrame, Ipv4UdpWithoutChecksumAccepted) {
  Bytes f = udp_frame(Family::ipv4);
  put16(f, kEthernetHeaderSize + kIpv4HeaderSize + 6, 0);
  ParsedFrame pf;
  Drop why{};
  EXPECT_TRUE(parse(f, server(), pf, why)) << drop_name(why);
}

// udp_none: IPv4 leaves the UDP checksum 0 (and the frame still parses in software); IPv6,
// where 0 is not allowed, gets the same bytes as in software mode.
TEST(NetFrame, UdpNoneSendsIpv4WithoutChecksumAndIpv6WithOne) {
  const Bytes v4 = udp_frame(Family::ipv4, 0, 21, ChecksumMode::udp_none);
  const std::size_t l3 = l3_offset(v4);
  EXPECT_EQ(get16(v4, l3 + kIpv4HeaderSize + 6), 0);
  EXPECT_EQ(checksum_add(std::span<const std::byte>(v4).subspan(l3, kIpv4HeaderSize)), 0xffffu);
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(v4, server(), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.payload.size(), 21u);
  Bytes with_sum = v4;
  const std::size_t l4 = l3 + kIpv4HeaderSize;
  const std::uint32_t pseudo = pseudo_header_sum_v4(client().ipv4, server().ipv4, 17, 8 + 21);
  const std::uint16_t c = static_cast<std::uint16_t>(
      ~checksum_add(std::span<const std::byte>(with_sum).subspan(l4), pseudo) & 0xffff);
  put16(with_sum, l4 + 6, c == 0 ? 0xffff : c);
  EXPECT_EQ(with_sum, udp_frame(Family::ipv4, 0, 21, ChecksumMode::software));

  EXPECT_EQ(udp_frame(Family::ipv6, 0, 21, ChecksumMode::udp_none),
            udp_frame(Family::ipv6, 0, 21, ChecksumMode::software));
}

TEST(NetFrame, MacAddressesDifferingInAnyByteAreNotEqual) {
  const MacAddress a{{0x02, 0x11, 0x22, 0x33, 0x44, 0x55}};
  EXPECT_EQ(a, a);
  for (std::size_t i = 0; i < 6; ++i) {
    MacAddress b = a;
    b.bytes[i] ^= 0x80;
    EXPECT_NE(a, b) << "byte " << i;
  }
  EXPECT_TRUE(MacAddress::broadcast().is_broadcast());
  EXPECT_FALSE(a.is_broadcast());
  EXPECT_TRUE(MacAddress{}.is_zero());
  static_assert(MacAddress::broadcast() == MacAddress{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}});
}

TEST(NetFrame, Ipv4OptionsSkipped) {
  Bytes f = udp_frame(Family::ipv4, 0, 5);
  // Insert 8 bytes of options (NOPs + end) after the 20-byte header: IHL 7.
  const std::size_t l3 = kEthernetHeaderSize;
  f.insert(f.begin() + static_cast<std::ptrdiff_t>(l3 + kIpv4HeaderSize), 8, std::byte{0x01});
  f[l3] = std::byte{0x47};
  put16(f, l3 + 2, static_cast<std::uint16_t>(get16(f, l3 + 2) + 8));
  fix_ipv4(f);
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(f, server(), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.payload.size(), 5u);
  EXPECT_EQ(pf.src.port, 40000);
}

TEST(NetFrame, BroadcastAccepted) {
  Bytes out(200);
  const std::size_t n =
      build_udp(out, client(), MacAddress::broadcast(), Endpoint::v4(client().ipv4, 1),
                Endpoint::v4(0xffffffffu, 2), {}, ChecksumMode::software);
  out.resize(n);
  ParsedFrame pf;
  Drop why{};
  EXPECT_TRUE(parse(out, server(), pf, why)) << drop_name(why);
}

TEST(NetFrame, IcmpIsOther) {
  Bytes f = udp_frame(Family::ipv4);
  f[kEthernetHeaderSize + 9] = std::byte{1};
  fix_ipv4(f);
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(f, server(), pf, why));
  EXPECT_EQ(pf.kind, ParsedFrame::Kind::other);
  EXPECT_EQ(pf.payload.size(), 8u + 33u);

  Bytes g = udp_frame(Family::ipv6);
  g[kEthernetHeaderSize + 6] = std::byte{58};
  ASSERT_TRUE(parse(g, server(), pf, why));
  EXPECT_EQ(pf.kind, ParsedFrame::Kind::other);
}

// An IPv6 UDP frame with one extension header (type `ext`, 8 bytes, `third` at offset 3) between
// the fixed header and UDP; the UDP checksum stays valid (same pseudo-header).
Bytes with_ipv6_extension(std::uint8_t ext, std::uint8_t third = 0, int count = 1) {
  Bytes f = udp_frame(Family::ipv6);
  const std::size_t l3 = kEthernetHeaderSize;
  for (int i = 0; i < count; ++i) {
    const std::uint8_t next = std::to_integer<std::uint8_t>(f[l3 + 6]);
    const std::array<std::byte, 8> h = {std::byte{next},  std::byte{0}, std::byte{1},
                                        std::byte{third}, std::byte{0}, std::byte{0},
                                        std::byte{0},     std::byte{0}};
    f.insert(f.begin() + static_cast<std::ptrdiff_t>(l3 + kIpv6HeaderSize), h.begin(), h.end());
    f[l3 + 6] = std::byte{ext};
    put16(f, l3 + 4, static_cast<std::uint16_t>(get16(f, l3 + 4) + 8));
  }
  return f;
}

TEST(NetFrame, Ipv6ExtensionHeadersSkipped) {
  ParsedFrame pf;
  Drop why{};
  for (const std::uint8_t ext : {0, 43, 60}) {  // hop-by-hop, routing (0 segments), dest options
    const Bytes f = with_ipv6_extension(ext);
    ASSERT_TRUE(parse(f, server(), pf, why)) << int{ext} << " " << drop_name(why);
    EXPECT_EQ(pf.kind, ParsedFrame::Kind::udp);
    EXPECT_EQ(pf.payload.size(), 33u);
  }
  EXPECT_TRUE(parse(with_ipv6_extension(60, 0, 8), server(), pf, why));
  EXPECT_FALSE(parse(with_ipv6_extension(60, 0, 9), server(), pf, why));
  EXPECT_EQ(why, Drop::ipv6_extension);
}

TEST(NetFrame, FragmentsRejected) {
  ParsedFrame pf;
  Drop why{};
  for (const std::uint16_t flags : {0x2000, 0x0001, 0x2010, 0x6000 | 0x0100}) {
    Bytes f = udp_frame(Family::ipv4);
    put16(f, kEthernetHeaderSize + 6, flags);
    fix_ipv4(f);
    EXPECT_FALSE(parse(f, server(), pf, why));
    EXPECT_EQ(why, Drop::ip_fragment) << flags;
  }
  // DF alone is not a fragment.
  Bytes f = udp_frame(Family::ipv4);
  put16(f, kEthernetHeaderSize + 6, 0x4000);
  fix_ipv4(f);
  EXPECT_TRUE(parse(f, server(), pf, why));
  // IPv6 fragment header, directly and after a destination-options header.
  EXPECT_FALSE(parse(with_ipv6_extension(44), server(), pf, why));
  EXPECT_EQ(why, Drop::ip_fragment);
  Bytes g = with_ipv6_extension(44);
  g.insert(g.begin() + kEthernetHeaderSize + kIpv6HeaderSize,
           {std::byte{44}, std::byte{0}, std::byte{1}, std::byte{4}, std::byte{0}, std::byte{0},
            std::byte{0}, std::byte{0}});
  g[kEthernetHeaderSize + 6] = std::byte{60};
  put16(g, kEthernetHeaderSize + 4,
        static_cast<std::uint16_t>(get16(g, kEthernetHeaderSize + 4) + 8));
  EXPECT_FALSE(parse(g, server(), pf, why));
  EXPECT_EQ(why, Drop::ip_fragment);
}

// ---- every drop reason ------------------------------------------------------------------------

struct Crafted {
  std::string name;
  Drop expect;
  std::function<Bytes()> make;
  LinkConfig local = server();
};

Bytes arp_request_frame() {
  Bytes out(100);
  out.resize(build_arp_request(out, client(), server().ipv4));
  return out;
}

std::vector<Crafted> crafted_frames() {
  const std::size_t l3 = kEthernetHeaderSize;
  const std::size_t u4 = l3 + kIpv4HeaderSize;
  const std::size_t u6 = l3 + kIpv6HeaderSize;
  std::vector<Crafted> v;
  auto v4 = [] { return udp_frame(Family::ipv4); };
  auto v6 = [] { return udp_frame(Family::ipv6); };
  v.push_back({"13 bytes", Drop::truncated_ethernet, [=] {
                 Bytes f = v4();
                 f.resize(13);
                 return f;
               }});
  v.push_back({"tag cut", Drop::truncated_ethernet, [=] {
                 Bytes f = udp_frame(Family::ipv4, 3);
                 f.resize(17);
                 return f;
               }});
  v.push_back({"LLDP", Drop::unknown_ethertype, [=] {
                 Bytes f = v4();
                 put16(f, 12, 0x88cc);
                 return f;
               }});
  v.push_back({"QinQ", Drop::unknown_ethertype, [=] {
                 Bytes f = udp_frame(Family::ipv4, 3);
                 put16(f, 16, 0x8100);
                 return f;
               }});
  v.push_back(
      {"tag on untagged link", Drop::vlan_mismatch, [=] { return udp_frame(Family::ipv4, 3); }});
  v.push_back({"untagged on VLAN link", Drop::vlan_mismatch, v4, server(3)});
  v.push_back({"VID 4095", Drop::vlan_mismatch, [=] {
                 Bytes f = udp_frame(Family::ipv4, 3);
                 put16(f, 14, 0x0fff);
                 return f;
               }});
  v.push_back({"multicast source MAC", Drop::bad_source, [=] {
                 Bytes f = v4();
                 f[6] = std::byte{0x01};
                 return f;
               }});
  v.push_back({"multicast source IPv4", Drop::bad_source, [=] {
                 Bytes f = v4();
                 f[l3 + 12] = std::byte{224};
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"broadcast source IPv4", Drop::bad_source, [=] {
                 Bytes f = v4();
                 for (int i = 12; i < 16; ++i) f[l3 + i] = std::byte{0xff};
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"multicast source IPv6", Drop::bad_source, [=] {
                 Bytes f = v6();
                 f[l3 + 8] = std::byte{0xff};
                 return f;
               }});
  v.push_back({"v4-mapped source IPv6", Drop::bad_source, [=] {
                 Bytes f = v6();
                 for (int i = 8; i < 18; ++i) f[l3 + i] = std::byte{0};
                 f[l3 + 18] = f[l3 + 19] = std::byte{0xff};
                 return f;
               }});
  v.push_back({"other MAC", Drop::not_for_us, [=] {
                 Bytes f = v4();
                 f[5] = std::byte{0x09};
                 return f;
               }});
  v.push_back({"other IPv4", Drop::not_for_us, [=] {
                 Bytes f = v4();
                 f[l3 + 19] = std::byte{9};
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"other IPv6", Drop::not_for_us, [=] {
                 Bytes f = v6();
                 f[l3 + 39] = std::byte{9};
                 return f;
               }});
  v.push_back({"IPv4 on a link without IPv4", Drop::not_for_us, v4, [] {
                 LinkConfig l = server();
                 l.ipv4 = 0;
                 return l;
               }()});
  v.push_back({"IPv4 cut", Drop::truncated_ip, [=] {
                 Bytes f = v4();
                 f.resize(l3 + 19);
                 return f;
               }});
  v.push_back({"IPv6 cut", Drop::truncated_ip, [=] {
                 Bytes f = v6();
                 f.resize(l3 + 39);
                 return f;
               }});
  v.push_back({"version 6 in IPv4", Drop::bad_ip_version, [=] {
                 Bytes f = v4();
                 f[l3] = std::byte{0x65};
                 return f;
               }});
  v.push_back({"version 4 in IPv6", Drop::bad_ip_version, [=] {
                 Bytes f = v6();
                 f[l3] = std::byte{0x40};
                 return f;
               }});
  v.push_back({"IHL 4", Drop::bad_ihl, [=] {
                 Bytes f = v4();
                 f[l3] = std::byte{0x44};
                 return f;
               }});
  v.push_back({"IHL past frame", Drop::bad_ihl, [=] {
                 Bytes f = v4();
                 f[l3] = std::byte{0x4f};
                 f.resize(l3 + 40);
                 return f;
               }});
  v.push_back({"total length past frame", Drop::bad_ip_length, [=] {
                 Bytes f = v4();
                 put16(f, l3 + 2, static_cast<std::uint16_t>(f.size() - l3 + 1));
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"total length below IHL", Drop::bad_ip_length, [=] {
                 Bytes f = v4();
                 put16(f, l3 + 2, 19);
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"IPv6 payload length past frame", Drop::bad_ip_length, [=] {
                 Bytes f = v6();
                 put16(f, l3 + 4, static_cast<std::uint16_t>(get16(f, l3 + 4) + 1));
                 return f;
               }});
  v.push_back({"IPv6 jumbogram", Drop::bad_ip_length, [=] {
                 Bytes f = v6();
                 put16(f, l3 + 4, 0);
                 return f;
               }});
  v.push_back({"IPv4 header checksum", Drop::bad_ip_checksum, [=] {
                 Bytes f = v4();
                 f[l3 + 8] = std::byte{63};  // TTL changed, checksum not
                 return f;
               }});
  v.push_back({"MF", Drop::ip_fragment, [=] {
                 Bytes f = v4();
                 put16(f, l3 + 6, 0x2000);
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"IPv6 fragment header", Drop::ip_fragment, [] { return with_ipv6_extension(44); }});
  v.push_back({"routing header with segments left", Drop::ipv6_extension,
               [] { return with_ipv6_extension(43, 1); }});
  v.push_back({"ESP", Drop::ipv6_extension, [=] {
                 Bytes f = v6();
                 f[l3 + 6] = std::byte{50};
                 return f;
               }});
  v.push_back({"hop-by-hop not first", Drop::ipv6_extension, [] {
                 Bytes f = with_ipv6_extension(0, 0, 2);  // two hop-by-hop headers
                 return f;
               }});
  v.push_back({"extension past payload", Drop::ipv6_extension, [=] {
                 Bytes f = with_ipv6_extension(60);
                 f[l3 + kIpv6HeaderSize + 1] = std::byte{200};
                 return f;
               }});
  v.push_back({"TCP", Drop::not_udp, [=] {
                 Bytes f = v4();
                 f[l3 + 9] = std::byte{6};
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"IPv6 TCP", Drop::not_udp, [=] {
                 Bytes f = v6();
                 f[l3 + 6] = std::byte{6};
                 return f;
               }});
  v.push_back({"UDP header cut", Drop::truncated_udp, [=] {
                 Bytes f = v4();
                 put16(f, l3 + 2, 20 + 7);
                 fix_ipv4(f);
                 return f;
               }});
  v.push_back({"UDP length too long", Drop::bad_udp_length, [=] {
                 Bytes f = v4();
                 put16(f, u4 + 4, static_cast<std::uint16_t>(get16(f, u4 + 4) + 1));
                 return f;
               }});
  v.push_back({"UDP length too short", Drop::bad_udp_length, [=] {
                 Bytes f = v6();
                 put16(f, u6 + 4, static_cast<std::uint16_t>(get16(f, u6 + 4) - 1));
                 return f;
               }});
  v.push_back({"UDP length below 8", Drop::bad_udp_length, [=] {
                 Bytes f = v4();
                 put16(f, u4 + 4, 4);
                 return f;
               }});
  v.push_back({"UDP payload changed", Drop::bad_udp_checksum, [=] {
                 Bytes f = v4();
                 f.back() ^= std::byte{0x40};
                 return f;
               }});
  v.push_back({"IPv6 UDP payload changed", Drop::bad_udp_checksum, [=] {
                 Bytes f = v6();
                 f[u6 + 8] ^= std::byte{0x01};
                 return f;
               }});
  v.push_back({"IPv6 UDP without checksum", Drop::bad_udp_checksum, [=] {
                 Bytes f = v6();
                 put16(f, u6 + 6, 0);
                 return f;
               }});
  v.push_back({"ARP cut", Drop::arp_malformed, [] {
                 Bytes f = arp_request_frame();
                 f.resize(kEthernetHeaderSize + kArpPacketSize - 1);
                 return f;
               }});
  v.push_back({"ARP hardware type", Drop::arp_malformed, [=] {
                 Bytes f = arp_request_frame();
                 put16(f, l3, 6);
                 return f;
               }});
  v.push_back({"ARP over IPv6", Drop::arp_malformed, [=] {
                 Bytes f = arp_request_frame();
                 put16(f, l3 + 2, 0x86dd);
                 return f;
               }});
  v.push_back({"ARP op 3", Drop::arp_malformed, [=] {
                 Bytes f = arp_request_frame();
                 put16(f, l3 + 6, 3);
                 return f;
               }});
  v.push_back({"ARP multicast sender", Drop::arp_malformed, [=] {
                 Bytes f = arp_request_frame();
                 f[l3 + 8] = std::byte{0x01};
                 return f;
               }});
  v.push_back({"ARP broadcast sender IP", Drop::arp_malformed, [=] {
                 Bytes f = arp_request_frame();
                 for (int i = 14; i < 18; ++i) f[l3 + i] = std::byte{0xff};
                 return f;
               }});
  return v;
}

TEST(NetDrop, EveryReasonFromACraftedFrame) {
  std::set<Drop> seen;
  for (const Crafted& c : crafted_frames()) {
    SCOPED_TRACE(c.name);
    const Bytes f = c.make();
    ParsedFrame pf;
    Drop why = Drop::count_;
    EXPECT_FALSE(parse(f, c.local, pf, why));
    EXPECT_EQ(why, c.expect) << drop_name(why) << " instead of " << drop_name(c.expect);
    seen.insert(why);
  }
  for (std::size_t i = 0; i < kDropCount; ++i) {
    EXPECT_TRUE(seen.count(static_cast<Drop>(i)))
        << "no crafted frame for " << drop_name(static_cast<Drop>(i));
  }
}

TEST(NetDrop, NamesAndCounters) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < kDropCount; ++i) {
    const Drop d = static_cast<Drop>(i);
    EXPECT_STRNE(drop_name(d), "unknown");
    EXPECT_STRNE(drop_description(d), "unknown");
    names.insert(drop_name(d));
  }
  EXPECT_EQ(names.size(), kDropCount);
  EXPECT_STREQ(drop_name(Drop::ip_fragment), "ip_fragment");
  DropCounters c;
  c.add(Drop::not_for_us);
  c.add(Drop::not_for_us);
  c.add(Drop::bad_udp_checksum);
  EXPECT_EQ(c[Drop::not_for_us], 2u);
  EXPECT_EQ(c.total(), 3u);
}

// Every proper prefix of a valid frame is refused (never accepted, never read past its end: the
// copies are exact-size heap buffers for the sanitizer builds).
TEST(NetDrop, EveryTruncationRefused) {
  std::vector<std::pair<Bytes, LinkConfig>> frames = {
      {udp_frame(Family::ipv4), server()},       {udp_frame(Family::ipv6), server()},
      {udp_frame(Family::ipv4, 7), server(7)},   {udp_frame(Family::ipv6, 7), server(7)},
      {with_ipv6_extension(60, 0, 3), server()}, {arp_request_frame(), server()},
  };
  for (auto& [frame, local] : frames) {
    ParsedFrame pf;
    Drop why{};
    ASSERT_TRUE(parse(frame, local, pf, why)) << drop_name(why);
    for (std::size_t n = 0; n < frame.size(); ++n) {
      const Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(n));
      for (const bool offloaded : {false, true}) {
        const RxOptions opts{.ip_checksum_verified = offloaded,
                             .l4_checksum_verified = offloaded,
                             .promiscuous = offloaded};
        EXPECT_FALSE(parse_frame(prefix, local, opts, pf, why)) << "prefix " << n;
        EXPECT_LT(static_cast<std::size_t>(why), kDropCount);
      }
    }
  }
}

// ---- ARP frames -------------------------------------------------------------------------------

// The driver parses every frame of a burst into one ParsedFrame: nothing from an earlier
// frame (an IPv6 address under an IPv4 one, an ARP body, a payload) may show through.
TEST(NetFrame, ReusedParsedFrameKeepsNothingStale) {
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(arp_request_frame(), server(), pf, why)) << drop_name(why);
  ASSERT_TRUE(parse(udp_frame(Family::ipv6), server(), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.arp, ArpPacket{});
  EXPECT_EQ(pf.src, ep(kV6Client, 40000));
  ASSERT_TRUE(parse(udp_frame(Family::ipv4), server(), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.family, Family::ipv4);
  EXPECT_EQ(pf.src, Endpoint::v4(client().ipv4, 40000));
  EXPECT_EQ(pf.dst, Endpoint::v4(server().ipv4, 7777));
  EXPECT_TRUE(pf.src.is_v4());
  const Bytes tagged = udp_frame(Family::ipv4, 12);
  ASSERT_TRUE(parse(tagged, server(12), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.vlan, 12);
  EXPECT_FALSE(parse(Bytes(tagged.begin(), tagged.begin() + 10), server(12), pf, why));
  EXPECT_EQ(why, Drop::truncated_ethernet);
  EXPECT_EQ(pf.kind, ParsedFrame::Kind::other);
  EXPECT_EQ(pf.src, Endpoint{});
  EXPECT_EQ(pf.dst, Endpoint{});
  EXPECT_TRUE(pf.src_mac.is_zero());
  EXPECT_TRUE(pf.dst_mac.is_zero());
  EXPECT_EQ(pf.vlan, 0);
  EXPECT_TRUE(pf.payload.empty());
}

TEST(NetArpFrame, RequestThenReply) {
  const Bytes req = arp_request_frame();
  ASSERT_EQ(req.size(), 42u);
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(req, server(), pf, why)) << drop_name(why);
  ASSERT_EQ(pf.kind, ParsedFrame::Kind::arp);
  EXPECT_TRUE(pf.dst_mac.is_broadcast());
  EXPECT_EQ(pf.arp.op, ArpPacket::Op::request);
  EXPECT_EQ(pf.arp.sender_mac, client().mac);
  EXPECT_EQ(pf.arp.sender_ip, client().ipv4);
  EXPECT_EQ(pf.arp.target_ip, server().ipv4);
  EXPECT_TRUE(pf.arp.target_mac.is_zero());

  Bytes rep(100);
  rep.resize(build_arp_reply(rep, server(), pf.arp));
  ASSERT_EQ(rep.size(), 42u);
  ParsedFrame pr;
  ASSERT_TRUE(parse(rep, client(), pr, why)) << drop_name(why);
  ASSERT_EQ(pr.kind, ParsedFrame::Kind::arp);
  EXPECT_EQ(pr.dst_mac, client().mac);
  EXPECT_EQ(pr.src_mac, server().mac);
  EXPECT_EQ(pr.arp.op, ArpPacket::Op::reply);
  EXPECT_EQ(pr.arp.sender_mac, server().mac);
  EXPECT_EQ(pr.arp.sender_ip, server().ipv4);
  EXPECT_EQ(pr.arp.target_mac, client().mac);
  EXPECT_EQ(pr.arp.target_ip, client().ipv4);
  // The reply is unicast: a third host does not take it.
  LinkConfig other = client();
  other.mac.bytes[5] = 0x33;
  EXPECT_FALSE(parse(rep, other, pr, why));
  EXPECT_EQ(why, Drop::not_for_us);
}

TEST(NetArpFrame, VlanTagged) {
  Bytes req(100);
  req.resize(build_arp_request(req, client(42), server().ipv4));
  ASSERT_EQ(req.size(), 46u);
  ParsedFrame pf;
  Drop why{};
  ASSERT_TRUE(parse(req, server(42), pf, why)) << drop_name(why);
  EXPECT_EQ(pf.vlan, 42);
  EXPECT_EQ(pf.kind, ParsedFrame::Kind::arp);
  EXPECT_FALSE(parse(req, server(), pf, why));
  EXPECT_EQ(why, Drop::vlan_mismatch);
}

TEST(NetFrame, NextHop) {
  LinkConfig l = server();
  EXPECT_EQ(next_hop_v4(l, 0x08080808), 0x08080808u);  // no gateway: on-link
  l.ipv4_gateway = 0x0a0000fe;
  EXPECT_EQ(next_hop_v4(l, 0x0a000063), 0x0a000063u);
  EXPECT_EQ(next_hop_v4(l, 0x08080808), 0x0a0000feu);
  EXPECT_EQ(next_hop_v4(l, 0xffffffffu), 0xffffffffu);
  l.ipv4_prefix_len = 0;
  EXPECT_EQ(next_hop_v4(l, 0x08080808), 0x08080808u);
  l.ipv4_prefix_len = 32;
  EXPECT_EQ(next_hop_v4(l, 0x0a000002), 0x0a0000feu);
}

}  // namespace
