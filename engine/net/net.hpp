// tern::net: Ethernet II / 802.1Q / ARP / IPv4 / IPv6 / UDP frames and internet checksums, for
// drivers that see whole Ethernet frames (DPDK). Pure functions over spans: no heap, no system
// calls, no clocks; every read is bounds-checked and every refusal is a named Drop (README.md).
#pragma once

#include <tern/endpoint.hpp>

#include "drop_reasons.hpp"

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

namespace tern::net {

// ---- vocabulary -------------------------------------------------------------------------------

struct MacAddress {
  std::array<std::uint8_t, 6> bytes{};

  static constexpr MacAddress broadcast() { return {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}; }
  constexpr bool is_broadcast() const { return *this == broadcast(); }
  // The group bit: multicast and broadcast addresses never name a sender.
  constexpr bool is_multicast() const { return (bytes[0] & 0x01) != 0; }
  constexpr bool is_zero() const { return *this == MacAddress{}; }

  // Two loads and compares: GCC compiles the defaulted (byte array) form to a call to memcmp,
  // and every received frame's destination is compared with ours.
  friend constexpr bool operator==(const MacAddress& a, const MacAddress& b) {
    if (std::is_constant_evaluated()) return a.bytes == b.bytes;
    std::uint32_t a4, b4;
    std::uint16_t a2, b2;
    std::memcpy(&a4, a.bytes.data(), 4);
    std::memcpy(&b4, b.bytes.data(), 4);
    std::memcpy(&a2, a.bytes.data() + 4, 2);
    std::memcpy(&b2, b.bytes.data() + 4, 2);
    return ((a4 ^ b4) | static_cast<std::uint32_t>(a2 ^ b2)) == 0;
  }
};

enum class Family : std::uint8_t { ipv4, ipv6 };

inline constexpr std::uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr std::uint16_t kEtherTypeArp = 0x0806;
inline constexpr std::uint16_t kEtherTypeVlan = 0x8100;
inline constexpr std::uint16_t kEtherTypeIpv6 = 0x86DD;
inline constexpr std::uint8_t kIpProtoIcmp = 1;
inline constexpr std::uint8_t kIpProtoUdp = 17;
inline constexpr std::uint8_t kIpProtoIcmpv6 = 58;

inline constexpr std::size_t kEthernetHeaderSize = 14;
inline constexpr std::size_t kVlanTagSize = 4;
inline constexpr std::size_t kIpv4HeaderSize = 20;  // without options (we never send any)
inline constexpr std::size_t kIpv6HeaderSize = 40;
inline constexpr std::size_t kUdpHeaderSize = 8;
inline constexpr std::size_t kArpPacketSize = 28;  // Ethernet/IPv4 ARP body
inline constexpr std::uint16_t kMaxVlanId = 4094;  // 4095 is reserved; 0 means "untagged"

// This interface's link and addresses. ipv4 == 0 means "no IPv4 address"; an all-zero ipv6 means
// "no IPv6 address". vlan == 0: frames are sent untagged and only untagged (or priority-tagged,
// VID 0) frames are accepted; 1..4094: frames carry that tag and only frames with it are accepted.
struct LinkConfig {
  MacAddress mac;
  std::uint32_t ipv4 = 0;               // host order
  std::uint8_t ipv4_prefix_len = 24;    // on-link subnet, for next_hop_v4
  std::uint32_t ipv4_gateway = 0;       // host order; 0: everything is on-link
  std::array<std::uint8_t, 16> ipv6{};  // network order
  std::uint16_t vlan = 0;               // VLAN ID, 0 = untagged
  std::uint8_t vlan_priority = 0;       // PCP bits of transmitted tags (0..7)
  std::uint8_t ttl = 64;                // IPv4 TTL and IPv6 hop limit of sent datagrams
};

// The IPv4 address whose MAC a datagram to `dst` (host order) must be sent to: `dst` itself when
// it is inside local.ipv4/prefix_len (or no gateway is configured), otherwise the gateway.
std::uint32_t next_hop_v4(const LinkConfig& local, std::uint32_t dst);

// ---- drops (the mechanism: engine/base/drop_reasons.hpp) ---------------------------------------

// clang-format off
#define TERN_NET_DROP_REASONS(X)                                                          \
  X(truncated_ethernet, "frame shorter than its Ethernet header (and VLAN tag)")        \
  X(unknown_ethertype, "EtherType neither IPv4, IPv6, ARP nor one 802.1Q tag over them") \
  X(vlan_mismatch, "VLAN tag absent, reserved (4095) or not the configured VLAN")       \
  X(bad_source, "source MAC or IP is multicast/broadcast")                              \
  X(not_for_us, "destination MAC or IP is not ours (nor broadcast)")                    \
  X(truncated_ip, "frame ends inside the IP header")                                   \
  X(bad_ip_version, "IP version does not match the EtherType")                          \
  X(bad_ihl, "IPv4 header length below 20 bytes or past the frame")                    \
  X(bad_ip_length, "IP total/payload length inconsistent with the header or the frame") \
  X(bad_ip_checksum, "IPv4 header checksum mismatch")                                  \
  X(ip_fragment, "IPv4 fragment (MF or offset) or IPv6 fragment header")               \
  X(ipv6_extension, "IPv6 extension header we do not skip (see README)")                \
  X(not_udp, "IP protocol neither UDP nor ICMP/ICMPv6")                                \
  X(truncated_udp, "IP payload shorter than the UDP header")                            \
  X(bad_udp_length, "UDP length differs from the IP payload length")                    \
  X(bad_udp_checksum, "UDP checksum mismatch, or zero over IPv6")                       \
  X(arp_malformed, "ARP not Ethernet/IPv4 request or reply, truncated or bad sender")
// clang-format on

enum class Drop : std::uint8_t { TERN_NET_DROP_REASONS(TERN_DROP_ENUMERATOR) count_ };

inline constexpr std::array kDropReasonTable{TERN_NET_DROP_REASONS(TERN_DROP_REASON)};
constexpr const auto& drop_reasons(Drop) { return kDropReasonTable; }

inline constexpr std::size_t kDropCount = base::kDropReasons<Drop>;
using base::drop_description;
using base::drop_name;
using DropCounters = base::DropCounters<Drop>;

// ---- checksums (RFC 1071) ---------------------------------------------------------------------

// One's-complement sum of `data` read as big-endian 16-bit words (an odd last byte is padded with
// zero), added to `sum`, folded to 16 bits. Chain calls to cover several pieces; only the last
// piece may have an odd length. Reads 8 bytes at a time with end-around carry.
std::uint32_t checksum_add(std::span<const std::byte> data, std::uint32_t sum = 0);
// Folds a wide one's-complement accumulator to 16 bits.
constexpr std::uint32_t checksum_fold(std::uint64_t sum) {
  sum = (sum & 0xffffffffu) + (sum >> 32);
  sum = (sum & 0xffffffffu) + (sum >> 32);
  sum = (sum & 0xffffu) + (sum >> 16);
  sum = (sum & 0xffffu) + (sum >> 16);
  return static_cast<std::uint32_t>(sum);
}
// A folded sum of native-order 16-bit words as the sum of big-endian ones (RFC 1071 §2(B):
// the sum is byte-order independent up to one swap).
constexpr std::uint32_t checksum_to_host_order(std::uint32_t folded) {
  if constexpr (std::endian::native == std::endian::little)
    return ((folded & 0xffu) << 8) | (folded >> 8);
  return folded;
}
// checksum_add over an IPv4 header without options (20 bytes at `header`), inline: five native
// 32-bit words summed and folded (2^16 is 1 modulo 0xffff). Every frame's header is summed
// once on send and once on receipt, and the general loop's call and tail cost as much as the
// sum itself.
inline std::uint32_t ipv4_header_sum(const std::byte* header) {
  std::uint32_t w[5];
  std::memcpy(w, header, sizeof w);
  return checksum_to_host_order(checksum_fold(std::uint64_t{w[0]} + w[1] + w[2] + w[3] + w[4]));
}
// The internet checksum of `data` as stored in a header field (host order value; write it
// big-endian): ~sum.
std::uint16_t internet_checksum(std::span<const std::byte> data);
// Pseudo-header sums (not complemented, folded): the value checksum offload expects in the UDP
// checksum field, and the start of a software UDP checksum. Addresses in host order (v4) or
// network order (v6); `length` is the UDP length (header + payload).
std::uint32_t pseudo_header_sum_v4(std::uint32_t src, std::uint32_t dst, std::uint8_t protocol,
                                   std::uint16_t length);
std::uint32_t pseudo_header_sum_v6(const std::array<std::uint8_t, 16>& src,
                                   const std::array<std::uint8_t, 16>& dst, std::uint8_t protocol,
                                   std::uint32_t length);

// ---- parsing ----------------------------------------------------------------------------------

struct ArpPacket {
  enum class Op : std::uint16_t { request = 1, reply = 2 };
  Op op = Op::request;
  MacAddress sender_mac;
  std::uint32_t sender_ip = 0;  // host order
  MacAddress target_mac;
  std::uint32_t target_ip = 0;  // host order
  friend bool operator==(const ArpPacket&, const ArpPacket&) = default;
};

struct ParsedFrame {
  // other: a valid ICMP (IPv4) or ICMPv6 datagram for us; payload is the ICMP message, src/dst
  // carry the addresses with port 0. Every other IP protocol is Drop::not_udp.
  enum class Kind : std::uint8_t { udp, arp, other };
  Kind kind = Kind::other;
  Endpoint src, dst;  // udp/other; IPv4 mapped into ::ffff:0:0/96, ports in host order
  MacAddress src_mac, dst_mac;
  std::uint16_t vlan = 0;  // VLAN ID of the tag, 0 when untagged (or priority-tagged)
  Family family = Family::ipv4;
  std::span<const std::byte> payload;  // udp: the UDP payload; other: the ICMP message
  ArpPacket arp;                       // kind == arp
};

struct RxOptions {
  // The NIC verified these (DPDK's RTE_MBUF_F_RX_IP_CKSUM_GOOD / RTE_MBUF_F_RX_L4_CKSUM_GOOD):
  // skip our verification. A NIC that reports BAD should have had the frame dropped already.
  bool ip_checksum_verified = false;
  bool l4_checksum_verified = false;
  // Skip the destination checks (MAC, IP, VLAN): for taps, tests and the fuzzer.
  bool promiscuous = false;
};

// Parses one received frame (without FCS). On success fills `out` (its spans point into `frame`)
// and returns true; otherwise sets `why` and returns false. Destination checks against `local`:
// the MAC must be ours or broadcast; IPv4 dst ours or 255.255.255.255; IPv6 dst ours; VLAN as
// LinkConfig describes. ARP is returned for any target IP: the resolver decides (net_arp.hpp).
bool parse_frame(std::span<const std::byte> frame, const LinkConfig& local, const RxOptions& opts,
                 ParsedFrame& out, Drop& why);

// ---- building ---------------------------------------------------------------------------------

enum class ChecksumMode : std::uint8_t {
  software,     // IPv4 header and UDP checksums computed here
  offload,      // NIC computes both: IPv4 checksum field 0, UDP field = pseudo-header sum
                // (DPDK RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM)
  offload_udp,  // IPv4 header checksum here, UDP by the NIC (pseudo-header sum in the field)
  // IPv4 header checksum here, UDP checksum field 0 ("none", RFC 768) on IPv4; IPv6 requires
  // one (RFC 8200), so IPv6 frames get it in software. For links that cannot corrupt a frame
  // (net_memif: shared memory), where the sum is pure cost on both ends.
  udp_none,
};

// Bytes of Ethernet (+ tag) + IP + UDP headers in front of a UDP payload.
constexpr std::size_t headers_size(Family family, bool vlan) {
  return kEthernetHeaderSize + (vlan ? kVlanTagSize : 0) +
         (family == Family::ipv4 ? kIpv4HeaderSize : kIpv6HeaderSize) + kUdpHeaderSize;
}
constexpr std::size_t headers_size(Family family, const LinkConfig& local) {
  return headers_size(family, local.vlan != 0);
}
// The largest UDP payload one IP datagram of `family` can carry (no jumbograms).
constexpr std::size_t max_udp_payload(Family family) {
  return family == Family::ipv4 ? 65535 - kIpv4HeaderSize - kUdpHeaderSize : 65535 - kUdpHeaderSize;
}

// Zero-copy transmit: `frame` is headroom of exactly headers_size(family of dst, local) bytes
// followed by the UDP payload already in place; writes the headers (and the checksums over that
// payload). The family is dst's; src must be the same family, and an unspecified src address
// (:: or 0.0.0.0) takes local's address of that family (src.port is used as is). Returns
// frame.size(), or 0 when the families differ, the frame is shorter than the headers or the payload
// too large.
std::size_t write_udp_headers(std::span<std::byte> frame, const LinkConfig& local,
                              MacAddress dst_mac, const Endpoint& src, const Endpoint& dst,
                              ChecksumMode mode);
// Copies `payload` behind the headers in `out` and writes them; returns the frame size, or 0 as
// write_udp_headers (or when `out` is too small). `payload` must not overlap `out`.
std::size_t build_udp(std::span<std::byte> out, const LinkConfig& local, MacAddress dst_mac,
                      const Endpoint& src, const Endpoint& dst, std::span<const std::byte> payload,
                      ChecksumMode mode);

// ARP frames (not padded to 60 bytes: the NIC pads). Both return the frame size or 0 when `out`
// is shorter than arp_frame_size(local).
constexpr std::size_t arp_frame_size(const LinkConfig& local) {
  return kEthernetHeaderSize + (local.vlan != 0 ? kVlanTagSize : 0) + kArpPacketSize;
}
// Broadcast "who has target_ip (host order)? tell local.ipv4".
std::size_t build_arp_request(std::span<std::byte> out, const LinkConfig& local,
                              std::uint32_t target_ip);
// "local.ipv4 is at local.mac", unicast to the request's sender.
std::size_t build_arp_reply(std::span<std::byte> out, const LinkConfig& local,
                            const ArpPacket& request);

}  // namespace tern::net
