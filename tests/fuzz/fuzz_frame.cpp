// libFuzzer target: tern::net::parse_frame on arbitrary Ethernet frames.
//
// The input is one frame, parsed promiscuously with software checksums and again with the
// checksums "verified by the NIC". Whatever the software parse accepts the offloaded parse
// accepts too, with the same fields. A UDP frame the offloaded parse accepts (so mutated frames
// with stale checksums count too) is rebuilt from the parsed fields (build_udp,
// software checksums) and parsed again: every field must match and the payload be equal. The
// rebuilt frame is also parsed as its receiver would (not promiscuous), and a zero-copy rebuild
// with write_udp_headers gives the same bytes. An exact-size heap copy of the input (libFuzzer's
// own) lets AddressSanitizer see any overread.
#include "net.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

namespace {

using namespace tern::net;

#define FUZZ_REQUIRE(cond)                                                        \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "fuzz_frame: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

bool same_payload(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

void require_same(const ParsedFrame& a, const ParsedFrame& b) {
  FUZZ_REQUIRE(a.kind == b.kind);
  FUZZ_REQUIRE(a.family == b.family);
  FUZZ_REQUIRE(a.src == b.src);
  FUZZ_REQUIRE(a.dst == b.dst);
  FUZZ_REQUIRE(a.src_mac == b.src_mac);
  FUZZ_REQUIRE(a.dst_mac == b.dst_mac);
  FUZZ_REQUIRE(a.vlan == b.vlan);
  FUZZ_REQUIRE(same_payload(a.payload, b.payload));
  if (a.kind == ParsedFrame::Kind::arp) FUZZ_REQUIRE(a.arp == b.arp);
}

void within(std::span<const std::byte> inner, std::span<const std::byte> outer) {
  if (inner.empty()) return;
  FUZZ_REQUIRE(inner.data() >= outer.data());
  FUZZ_REQUIRE(inner.data() + inner.size() <= outer.data() + outer.size());
}

void rebuild_udp(const ParsedFrame& pf) {
  LinkConfig sender;
  sender.mac = pf.src_mac;
  sender.vlan = pf.vlan;
  if (pf.family == Family::ipv4) {
    sender.ipv4 = pf.src.v4_host_order();
  } else {
    sender.ipv6 = pf.src.addr;
  }
  const std::size_t hs = headers_size(pf.family, sender);
  // Exact size, so the re-parse is bounds-checked by ASan as well.
  std::vector<std::byte> frame(hs + pf.payload.size());
  const std::size_t n =
      build_udp(frame, sender, pf.dst_mac, pf.src, pf.dst, pf.payload, ChecksumMode::software);
  FUZZ_REQUIRE(n == frame.size());

  ParsedFrame again;
  Drop why = Drop::count_;
  RxOptions promiscuous;
  promiscuous.promiscuous = true;
  FUZZ_REQUIRE(parse_frame(frame, sender, promiscuous, again, why));
  require_same(pf, again);
  FUZZ_REQUIRE(again.payload.data() == frame.data() + hs || pf.payload.empty());

  // As the receiver: its MAC, address and VLAN. Refused only for a destination we never accept
  // (IPv4 0.0.0.0 means "no address" in LinkConfig; IPv6 :: likewise).
  LinkConfig receiver;
  receiver.mac = pf.dst_mac;
  receiver.vlan = pf.vlan;
  bool accept = true;
  if (pf.family == Family::ipv4) {
    receiver.ipv4 = pf.dst.v4_host_order();
    accept = receiver.ipv4 != 0;
  } else {
    receiver.ipv6 = pf.dst.addr;
    accept = pf.dst.addr != std::array<std::uint8_t, 16>{};
  }
  const bool ok = parse_frame(frame, receiver, RxOptions{}, again, why);
  if (accept) {
    FUZZ_REQUIRE(ok);
    require_same(pf, again);
  } else {
    FUZZ_REQUIRE(!ok && why == Drop::not_for_us);
  }

  // Zero-copy: the payload in place behind the headroom gives the same frame.
  std::vector<std::byte> zc(frame.size());
  if (!pf.payload.empty()) std::memcpy(zc.data() + hs, pf.payload.data(), pf.payload.size());
  FUZZ_REQUIRE(write_udp_headers(zc, sender, pf.dst_mac, pf.src, pf.dst, ChecksumMode::software) ==
               zc.size());
  FUZZ_REQUIRE(zc == frame);

  // Offload mode writes the same frame but for the checksum fields, and parses when the NIC
  // vouches for them.
  FUZZ_REQUIRE(write_udp_headers(zc, sender, pf.dst_mac, pf.src, pf.dst, ChecksumMode::offload) ==
               zc.size());
  RxOptions offloaded = promiscuous;
  offloaded.ip_checksum_verified = true;
  offloaded.l4_checksum_verified = true;
  FUZZ_REQUIRE(parse_frame(zc, sender, offloaded, again, why));
  require_same(pf, again);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> frame(reinterpret_cast<const std::byte*>(data), size);
  const LinkConfig none;

  RxOptions software;
  software.promiscuous = true;
  ParsedFrame pf;
  Drop why = Drop::count_;
  const bool ok = parse_frame(frame, none, software, pf, why);
  if (!ok) {
    FUZZ_REQUIRE(static_cast<std::size_t>(why) < kDropCount);
    FUZZ_REQUIRE(drop_name(why) != nullptr);
  }

  RxOptions offloaded = software;
  offloaded.ip_checksum_verified = true;
  offloaded.l4_checksum_verified = true;
  ParsedFrame po;
  Drop why_o = Drop::count_;
  const bool ok_o = parse_frame(frame, none, offloaded, po, why_o);
  if (ok) {
    FUZZ_REQUIRE(ok_o);
    require_same(pf, po);
  } else if (!ok_o) {
    FUZZ_REQUIRE(static_cast<std::size_t>(why_o) < kDropCount);
  } else {
    FUZZ_REQUIRE(why == Drop::bad_ip_checksum || why == Drop::bad_udp_checksum);
  }

  // Not promiscuous with an empty config: only broadcast could pass, and nothing overreads.
  ParsedFrame pn;
  Drop why_n = Drop::count_;
  (void)parse_frame(frame, none, RxOptions{}, pn, why_n);

  // Rebuild from the offloaded parse: a superset of the software one (same fields when both
  // accept), so mutated frames with stale checksums exercise the round trip too.
  if (!ok_o) return 0;
  within(po.payload, frame);
  if (po.kind == ParsedFrame::Kind::udp) rebuild_udp(po);
  return 0;
}
