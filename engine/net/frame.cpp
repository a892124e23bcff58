// Ethernet II / 802.1Q / ARP / IPv4 / IPv6 / UDP: parse_frame and the frame builders.
//
// Every read goes through rd8/rd16/rd32 on a pointer whose range was checked against the span
// size just before; nothing is written through the input.
#include "net.hpp"

#include <bit>
#include <cstring>

namespace tern::net {

namespace {

// Network byte order, one move per field. The compiler did not merge the byte-at-a-time forms
// these replaced: dpdk_frame_bench's tx_burst took 434 instructions a frame with them, 401
// without (callgrind).
inline std::uint16_t from_big_endian(std::uint16_t v) {
  return std::endian::native == std::endian::little ? __builtin_bswap16(v) : v;
}
inline std::uint32_t from_big_endian(std::uint32_t v) {
  return std::endian::native == std::endian::little ? __builtin_bswap32(v) : v;
}
inline std::uint8_t rd8(const std::byte* p) { return std::to_integer<std::uint8_t>(*p); }
inline std::uint16_t rd16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return from_big_endian(v);
}
inline std::uint32_t rd32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return from_big_endian(v);
}
inline void wr8(std::byte* p, std::uint8_t v) { *p = std::byte{v}; }
inline void wr16(std::byte* p, std::uint16_t v) {
  v = from_big_endian(v);  // its own inverse
  std::memcpy(p, &v, sizeof v);
}
inline void wr32(std::byte* p, std::uint32_t v) {
  v = from_big_endian(v);
  std::memcpy(p, &v, sizeof v);
}
inline MacAddress rd_mac(const std::byte* p) {
  MacAddress m;
  std::memcpy(m.bytes.data(), p, 6);
  return m;
}
inline void wr_mac(std::byte* p, const MacAddress& m) { std::memcpy(p, m.bytes.data(), 6); }

inline bool fail(Drop& why, Drop d) {
  why = d;
  return false;
}

// IPv4 multicast (224/4) and reserved/broadcast (240/4) never name a sender.
inline bool bad_v4_source(std::uint32_t ip) { return (ip >> 28) >= 0xe; }

constexpr std::uint8_t kIpv6HopByHop = 0;
constexpr std::uint8_t kIpv6Routing = 43;
constexpr std::uint8_t kIpv6Fragment = 44;
constexpr std::uint8_t kIpv6DestOptions = 60;
constexpr std::size_t kMaxIpv6Extensions = 8;

// Extension headers we recognise but do not skip: ESP, AH, no next header, mobility, HIP,
// shim6, experimental.
inline bool unsupported_ipv6_extension(std::uint8_t next) {
  switch (next) {
    case 50:
    case 51:
    case 59:
    case 135:
    case 139:
    case 140:
    case 253:
    case 254: return true;
    default: return false;
  }
}

// The UDP header and checksum over `l4` (exactly the IP payload); `pseudo` is the pseudo-header
// sum without the length, which is added here once the UDP length is known to match.
bool parse_udp(std::span<const std::byte> l4, std::uint32_t pseudo, bool checksum_required,
               const RxOptions& opts, ParsedFrame& out, Drop& why) {
  if (l4.size() < kUdpHeaderSize) return fail(why, Drop::truncated_udp);
  const std::byte* u = l4.data();
  const std::uint16_t length = rd16(u + 4);
  if (length != l4.size()) return fail(why, Drop::bad_udp_length);
  const std::uint16_t checksum = rd16(u + 6);
  if (!opts.l4_checksum_verified) {
    if (checksum == 0) {
      if (checksum_required) return fail(why, Drop::bad_udp_checksum);
    } else if (checksum_add(l4, checksum_fold(std::uint64_t{pseudo} + length)) != 0xffff) {
      return fail(why, Drop::bad_udp_checksum);
    }
  }
  out.kind = ParsedFrame::Kind::udp;
  out.src.port = rd16(u);
  out.dst.port = rd16(u + 2);
  out.payload = l4.subspan(kUdpHeaderSize);
  return true;
}

bool parse_arp(std::span<const std::byte> l3, ParsedFrame& out, Drop& why) {
  if (l3.size() < kArpPacketSize) return fail(why, Drop::arp_malformed);
  const std::byte* a = l3.data();
  if (rd16(a) != 1 || rd16(a + 2) != kEtherTypeIpv4 || rd8(a + 4) != 6 || rd8(a + 5) != 4) {
    return fail(why, Drop::arp_malformed);
  }
  const std::uint16_t op = rd16(a + 6);
  if (op != 1 && op != 2) return fail(why, Drop::arp_malformed);
  ArpPacket& arp = out.arp;
  arp.op = static_cast<ArpPacket::Op>(op);
  arp.sender_mac = rd_mac(a + 8);
  arp.sender_ip = rd32(a + 14);
  arp.target_mac = rd_mac(a + 18);
  arp.target_ip = rd32(a + 24);
  if (arp.sender_mac.is_multicast() || bad_v4_source(arp.sender_ip)) {
    return fail(why, Drop::arp_malformed);
  }
  out.kind = ParsedFrame::Kind::arp;
  return true;
}

bool parse_ipv4(std::span<const std::byte> l3, const LinkConfig& local, const RxOptions& opts,
                ParsedFrame& out, Drop& why) {
  if (l3.size() < kIpv4HeaderSize) return fail(why, Drop::truncated_ip);
  const std::byte* h = l3.data();
  if ((rd8(h) >> 4) != 4) return fail(why, Drop::bad_ip_version);
  const std::size_t ihl = std::size_t{rd8(h) & 0x0fu} * 4;
  if (ihl < kIpv4HeaderSize || ihl > l3.size()) return fail(why, Drop::bad_ihl);
  const std::size_t total = rd16(h + 2);
  if (total < ihl || total > l3.size()) return fail(why, Drop::bad_ip_length);
  if (!opts.ip_checksum_verified &&
      (ihl == kIpv4HeaderSize ? ipv4_header_sum(h) : checksum_add(l3.first(ihl))) != 0xffff) {
    return fail(why, Drop::bad_ip_checksum);
  }
  if ((rd16(h + 6) & 0x3fff) != 0) return fail(why, Drop::ip_fragment);  // MF or offset
  const std::uint32_t src = rd32(h + 12);
  const std::uint32_t dst = rd32(h + 16);
  if (bad_v4_source(src)) return fail(why, Drop::bad_source);
  if (!opts.promiscuous && (local.ipv4 == 0 || dst != local.ipv4) && dst != 0xffffffffu) {
    return fail(why, Drop::not_for_us);
  }
  out.family = Family::ipv4;
  out.src.set_v4(src, 0);
  out.dst.set_v4(dst, 0);
  const std::uint8_t protocol = rd8(h + 9);
  const std::span<const std::byte> l4 = l3.subspan(ihl, total - ihl);
  if (protocol == kIpProtoIcmp) {
    out.kind = ParsedFrame::Kind::other;
    out.payload = l4;
    return true;
  }
  if (protocol != kIpProtoUdp) return fail(why, Drop::not_udp);
  return parse_udp(l4, pseudo_header_sum_v4(src, dst, kIpProtoUdp, 0), false, opts, out, why);
}

bool parse_ipv6(std::span<const std::byte> l3, const LinkConfig& local, const RxOptions& opts,
                ParsedFrame& out, Drop& why) {
  if (l3.size() < kIpv6HeaderSize) return fail(why, Drop::truncated_ip);
  const std::byte* h = l3.data();
  if ((rd8(h) >> 4) != 6) return fail(why, Drop::bad_ip_version);
  const std::size_t payload_length = rd16(h + 4);
  // Zero would announce a jumbogram (hop-by-hop option), which we do not support.
  if (payload_length == 0 || kIpv6HeaderSize + payload_length > l3.size()) {
    return fail(why, Drop::bad_ip_length);
  }
  out.family = Family::ipv6;
  std::memcpy(out.src.addr.data(), h + 8, 16);
  std::memcpy(out.dst.addr.data(), h + 24, 16);
  // An IPv4-mapped address never appears on the wire (RFC 4291 §2.5.5.2), and as an Endpoint it
  // would read as IPv4.
  if (out.src.addr[0] == 0xff || out.src.is_v4()) return fail(why, Drop::bad_source);
  if (out.dst.is_v4()) return fail(why, Drop::not_for_us);
  if (!opts.promiscuous) {
    static constexpr std::array<std::uint8_t, 16> kNone{};
    if (local.ipv6 == kNone || out.dst.addr != local.ipv6) return fail(why, Drop::not_for_us);
  }
  const std::size_t end = kIpv6HeaderSize + payload_length;
  std::size_t off = kIpv6HeaderSize;
  std::uint8_t next = rd8(h + 6);
  for (std::size_t extensions = 0;; ++extensions) {
    if (next == kIpProtoUdp || next == kIpProtoIcmpv6) break;
    if (next == kIpv6Fragment) return fail(why, Drop::ip_fragment);
    if (next != kIpv6HopByHop && next != kIpv6Routing && next != kIpv6DestOptions) {
      return fail(why, unsupported_ipv6_extension(next) ? Drop::ipv6_extension : Drop::not_udp);
    }
    // Hop-by-hop only directly after the fixed header (RFC 8200 §4.1); a bounded chain.
    if (extensions >= kMaxIpv6Extensions || (next == kIpv6HopByHop && extensions != 0)) {
      return fail(why, Drop::ipv6_extension);
    }
    if (end - off < 8) return fail(why, Drop::ipv6_extension);
    const std::size_t length = (std::size_t{rd8(h + off + 1)} + 1) * 8;
    if (length > end - off) return fail(why, Drop::ipv6_extension);
    // A routing header with segments left would make us a router (RFC 8200 §4.4): refuse.
    if (next == kIpv6Routing && rd8(h + off + 3) != 0) return fail(why, Drop::ipv6_extension);
    next = rd8(h + off);
    off += length;
  }
  const std::span<const std::byte> l4 = l3.subspan(off, end - off);
  if (next == kIpProtoIcmpv6) {
    out.kind = ParsedFrame::Kind::other;
    out.payload = l4;
    return true;
  }
  return parse_udp(l4, pseudo_header_sum_v6(out.src.addr, out.dst.addr, kIpProtoUdp, 0), true, opts,
                   out, why);
}

}  // namespace

std::uint32_t next_hop_v4(const LinkConfig& local, std::uint32_t dst) {
  if (local.ipv4_gateway == 0 || dst == 0xffffffffu) return dst;
  const unsigned prefix = local.ipv4_prefix_len > 32 ? 32u : local.ipv4_prefix_len;
  const std::uint32_t mask = prefix == 0 ? 0 : ~std::uint32_t{0} << (32 - prefix);
  return ((dst ^ local.ipv4) & mask) == 0 ? dst : local.ipv4_gateway;
}

bool parse_frame(std::span<const std::byte> frame, const LinkConfig& local, const RxOptions& opts,
                 ParsedFrame& out, Drop& why) {
  // Field by field: assigning ParsedFrame{} compiles to `rep stos` over ~100 bytes, slow to
  // start, once per frame. Every field is reset; the parsers below fill what they find.
  out.kind = ParsedFrame::Kind::other;
  out.src = Endpoint{};
  out.dst = Endpoint{};
  out.src_mac = MacAddress{};
  out.dst_mac = MacAddress{};
  out.vlan = 0;
  out.family = Family::ipv4;
  out.payload = {};
  out.arp = ArpPacket{};
  if (frame.size() < kEthernetHeaderSize) return fail(why, Drop::truncated_ethernet);
  const std::byte* e = frame.data();
  out.dst_mac = rd_mac(e);
  out.src_mac = rd_mac(e + 6);
  std::uint16_t type = rd16(e + 12);
  std::size_t off = kEthernetHeaderSize;
  if (type == kEtherTypeVlan) {
    if (frame.size() < kEthernetHeaderSize + kVlanTagSize) {
      return fail(why, Drop::truncated_ethernet);
    }
    const std::uint16_t vid = rd16(e + 14) & 0x0fff;
    if (vid > kMaxVlanId) return fail(why, Drop::vlan_mismatch);
    out.vlan = vid;
    type = rd16(e + 16);
    off += kVlanTagSize;
  }
  // A second tag (QinQ) falls here too: only one tag is supported.
  if (type != kEtherTypeIpv4 && type != kEtherTypeIpv6 && type != kEtherTypeArp) {
    return fail(why, Drop::unknown_ethertype);
  }
  if (out.src_mac.is_multicast()) return fail(why, Drop::bad_source);
  if (!opts.promiscuous) {
    if (out.vlan != local.vlan) return fail(why, Drop::vlan_mismatch);
    if (out.dst_mac != local.mac && !out.dst_mac.is_broadcast()) {
      return fail(why, Drop::not_for_us);
    }
  }
  const std::span<const std::byte> l3 = frame.subspan(off);
  switch (type) {
    case kEtherTypeArp: return parse_arp(l3, out, why);
    case kEtherTypeIpv4: return parse_ipv4(l3, local, opts, out, why);
    default: return parse_ipv6(l3, local, opts, out, why);
  }
}

// ---- building ---------------------------------------------------------------------------------

namespace {

// Ethernet header (+ tag); returns the offset of the L3 header.
std::size_t write_ethernet(std::byte* p, const LinkConfig& local, const MacAddress& dst,
                           std::uint16_t type) {
  wr_mac(p, dst);
  wr_mac(p + 6, local.mac);
  std::size_t off = 12;
  if (local.vlan != 0) {
    wr16(p + off, kEtherTypeVlan);
    wr16(p + off + 2,
         static_cast<std::uint16_t>(((local.vlan_priority & 0x7u) << 13) | (local.vlan & 0x0fffu)));
    off += kVlanTagSize;
  }
  wr16(p + off, type);
  return off + 2;
}

std::size_t write_arp(std::span<std::byte> out, const LinkConfig& local, const MacAddress& eth_dst,
                      ArpPacket::Op op, const MacAddress& target_mac, std::uint32_t target_ip) {
  const std::size_t size = arp_frame_size(local);
  if (out.size() < size) return 0;
  std::byte* p = out.data();
  std::byte* a = p + write_ethernet(p, local, eth_dst, kEtherTypeArp);
  wr16(a, 1);
  wr16(a + 2, kEtherTypeIpv4);
  wr8(a + 4, 6);
  wr8(a + 5, 4);
  wr16(a + 6, static_cast<std::uint16_t>(op));
  wr_mac(a + 8, local.mac);
  wr32(a + 14, local.ipv4);
  wr_mac(a + 18, target_mac);
  wr32(a + 24, target_ip);
  return size;
}

}  // namespace

std::size_t write_udp_headers(std::span<std::byte> frame, const LinkConfig& local,
                              MacAddress dst_mac, const Endpoint& src_in, const Endpoint& dst,
                              ChecksumMode mode) {
  const Family family = dst.is_v4() ? Family::ipv4 : Family::ipv6;
  // The source address as each family needs it, without copying the Endpoint (a 16-byte load
  // of an address the caller may have just stored in pieces stalls on store forwarding).
  static constexpr std::array<std::uint8_t, 16> kAny{};
  const bool src_v4 = src_in.is_v4();
  const bool src_unset = src_v4 ? src_in.v4_host_order() == 0 : src_in.addr == kAny;
  if (!src_unset && src_v4 != (family == Family::ipv4)) return 0;
  const std::uint32_t src_ip4 = src_unset ? local.ipv4 : src_in.v4_host_order();
  const std::array<std::uint8_t, 16>& src_ip6 = src_unset ? local.ipv6 : src_in.addr;
  const std::size_t hs = headers_size(family, local);
  if (frame.size() < hs || frame.size() - hs > max_udp_payload(family)) return 0;
  const std::size_t udp_length = frame.size() - hs + kUdpHeaderSize;

  std::byte* p = frame.data();
  std::byte* ip = p + write_ethernet(p, local, dst_mac,
                                     family == Family::ipv4 ? kEtherTypeIpv4 : kEtherTypeIpv6);
  std::byte* udp;
  std::uint32_t pseudo;
  if (family == Family::ipv4) {
    wr8(ip, 0x45);
    wr8(ip + 1, 0);
    wr16(ip + 2, static_cast<std::uint16_t>(kIpv4HeaderSize + udp_length));
    wr16(ip + 4, 0);       // identification: atomic datagram (DF, RFC 6864)
    wr16(ip + 6, 0x4000);  // DF
    wr8(ip + 8, local.ttl);
    wr8(ip + 9, kIpProtoUdp);
    const std::uint32_t dst_ip4 = dst.v4_host_order();
    wr32(ip + 12, src_ip4);
    wr32(ip + 16, dst_ip4);
    std::uint16_t ip_checksum = 0;
    if (mode != ChecksumMode::offload) {
      // Summed from the fields, not read back: a wide load of the header just stored in
      // pieces stalls on store forwarding (a third of this function's time in the echo).
      const std::uint64_t sum = 0x4500u + kIpv4HeaderSize + udp_length + 0x4000u +
                                (std::uint32_t{local.ttl} << 8) + kIpProtoUdp + (src_ip4 >> 16) +
                                (src_ip4 & 0xffff) + (dst_ip4 >> 16) + (dst_ip4 & 0xffff);
      ip_checksum = static_cast<std::uint16_t>(~checksum_fold(sum) & 0xffff);
    }
    wr16(ip + 10, ip_checksum);
    udp = ip + kIpv4HeaderSize;
    pseudo =
        pseudo_header_sum_v4(src_ip4, dst_ip4, kIpProtoUdp, static_cast<std::uint16_t>(udp_length));
  } else {
    wr32(ip, 0x60000000u);
    wr16(ip + 4, static_cast<std::uint16_t>(udp_length));
    wr8(ip + 6, kIpProtoUdp);
    wr8(ip + 7, local.ttl);
    std::memcpy(ip + 8, src_ip6.data(), 16);
    std::memcpy(ip + 24, dst.addr.data(), 16);
    udp = ip + kIpv6HeaderSize;
    pseudo = pseudo_header_sum_v6(src_ip6, dst.addr, kIpProtoUdp,
                                  static_cast<std::uint32_t>(udp_length));
  }
  wr16(udp, src_in.port);
  wr16(udp + 2, dst.port);
  wr16(udp + 4, static_cast<std::uint16_t>(udp_length));
  if (mode == ChecksumMode::software ||
      (mode == ChecksumMode::udp_none && family != Family::ipv4)) {
    // The UDP header's words from the values (see the IPv4 checksum above), the payload from
    // the frame; the checksum field counts as zero.
    const std::uint64_t header = std::uint64_t{src_in.port} + dst.port + udp_length;
    std::uint16_t c = static_cast<std::uint16_t>(
        ~checksum_add(std::span<const std::byte>(udp + kUdpHeaderSize, udp_length - kUdpHeaderSize),
                      checksum_fold(header + pseudo)) &
        0xffff);
    wr16(udp + 6, c == 0 ? 0xffff : c);  // zero would mean "no checksum" (RFC 768)
  } else if (mode == ChecksumMode::udp_none) {
    wr16(udp + 6, 0);
  } else {
    wr16(udp + 6, static_cast<std::uint16_t>(pseudo));
  }
  return frame.size();
}

std::size_t build_udp(std::span<std::byte> out, const LinkConfig& local, MacAddress dst_mac,
                      const Endpoint& src, const Endpoint& dst, std::span<const std::byte> payload,
                      ChecksumMode mode) {
  const std::size_t hs = headers_size(dst.is_v4() ? Family::ipv4 : Family::ipv6, local);
  if (out.size() < hs || out.size() - hs < payload.size()) return 0;
  if (!payload.empty()) std::memcpy(out.data() + hs, payload.data(), payload.size());
  return write_udp_headers(out.first(hs + payload.size()), local, dst_mac, src, dst, mode);
}

std::size_t build_arp_request(std::span<std::byte> out, const LinkConfig& local,
                              std::uint32_t target_ip) {
  return write_arp(out, local, MacAddress::broadcast(), ArpPacket::Op::request, MacAddress{},
                   target_ip);
}

std::size_t build_arp_reply(std::span<std::byte> out, const LinkConfig& local,
                            const ArpPacket& request) {
  return write_arp(out, local, request.sender_mac, ArpPacket::Op::reply, request.sender_mac,
                   request.sender_ip);
}

}  // namespace tern::net
