// libFuzzer target: a server HostCore fed datagrams from sources it has no connection with
// (WIRE.md, "Handshake under attack").
//
// The input is cut into chunks; each becomes a datagram from one of 16 sources (8 addresses,
// 2 ports each). A chunk may instead answer the server: its last reply to that source is read
// back (peer ID, session, cookie) and acknowledged, correctly or with the fuzzer's bits mixed
// in, so promotions, forged and replayed acks are all reached.
//
// Chunk framing:
//   byte 0     bits 0..3 source, bit 4 = answer the last reply, bit 5 = flush after,
//              bits 6..7 = advance the clock (0, 1 ms, 1 s, 20 s)
//   byte 1     body length (a datagram of its own), or for an answer: bits mixed into the ack
//   body       the datagram, as sent (header included)
//
// Invariants: the half-open table stays within its capacity, no unverified source is sent
// more bytes than it sent, peers exist only by promotion, and nothing leaks or overreads. The
// server answers discovery pings with 3,000 bytes of info, so their answers (cut to each
// ping's size) are held to the same bound.
#include "host_core.hpp"
#include "wire.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;

#define FUZZ_REQUIRE(cond)                                                            \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "fuzz_handshake: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

constexpr std::size_t kSources = 16;
constexpr std::size_t kCapacity = 64;

std::vector<OutDatagram>& out_batch() {
  static std::vector<OutDatagram> batch(16);
  return batch;
}

Endpoint source(std::size_t i) {
  return Endpoint::v4(0x0A000010u + static_cast<std::uint32_t>(i / 2),
                      static_cast<std::uint16_t>(40000 + i % 2));
}

struct Reply {
  std::vector<std::byte> bytes;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  HostConfig sc;
  sc.half_open_capacity = kCapacity;
  sc.half_open_timeout_ms = 10'000;
  sc.connect_rate_per_prefix = (size & 1) != 0 ? 50 : 0;
  sc.discovery = true;
  HostCore server(sc);
  static const std::vector<std::byte> kInfo(3000, std::byte{0x49});
  server.set_discovery_info(kInfo);
  std::uint64_t now_us = 1'000'000;
  std::array<Reply, kSources> last{};
  std::array<std::uint64_t, kSources> sent_in{}, sent_out{};
  std::array<bool, kSources> verified{};
  std::size_t pos = 0;
  auto flush = [&] {
    for (;;) {
      const std::size_t n = server.flush(now_us, out_batch());
      for (std::size_t k = 0; k < n; ++k) {
        const OutDatagram& d = out_batch()[k];
        for (std::size_t i = 0; i < kSources; ++i) {
          if (source(i) == d.to) {
            const auto v = d.view();
            last[i].bytes.assign(v.begin(), v.end());
            sent_out[i] += v.size();
          }
        }
      }
      if (n < out_batch().size()) return;
    }
  };
  while (pos + 2 <= size) {
    const std::uint8_t control = data[pos];
    const std::uint8_t arg = data[pos + 1];
    pos += 2;
    static constexpr std::uint64_t kAdvance[] = {0, 1'000, 1'000'000, 20'000'000};
    now_us += kAdvance[control >> 6];
    const std::size_t who = control & 0x0F;
    std::vector<std::byte> dg;
    if ((control & 0x10) != 0) {
      // An ack of the last reply: its header's peer ID field names us (the client index), the
      // VERIFY's body the peer ID to use; both are read as the wire has them.
      const std::vector<std::byte>& r = last[who].bytes;
      if (r.size() < 8) continue;
      const auto u8 = [&](std::size_t i) { return std::to_integer<std::uint8_t>(r[i]); };
      const std::uint16_t word = static_cast<std::uint16_t>(u8(0) << 8 | u8(1));
      const std::uint16_t cookie = static_cast<std::uint16_t>(u8(2) << 8 | u8(3));
      std::uint16_t peer_id = word & kMaxPeerId;
      if ((u8(4) & 0x0F) == static_cast<std::uint8_t>(Cmd::verify_connect) && r.size() >= 10) {
        peer_id = static_cast<std::uint16_t>(u8(8) << 8 | u8(9));
      }
      Header h;
      h.peer_id = static_cast<std::uint16_t>((peer_id ^ (arg & 0x03)) & kMaxPeerId);
      h.session = static_cast<std::uint8_t>((word >> kHeaderSessionShift) ^ (arg >> 2)) & 3;
      h.has_sent_time = true;
      dg.resize(16);
      std::size_t n = encode_header(dg, h, false);
      Command ack;
      ack.command = static_cast<std::uint8_t>(Cmd::acknowledge);
      ack.channel_id = kSystemChannel;
      ack.ack.received_reliable_seq = static_cast<std::uint16_t>(1 + ((arg >> 4) & 1));
      ack.ack.received_sent_time = static_cast<std::uint16_t>(cookie ^ ((arg >> 5) * 0x0101));
      n += encode_command(std::span<std::byte>(dg).subspan(n), ack);
      dg.resize(n);
    } else {
      const std::size_t len = std::min<std::size_t>(arg, size - pos);
      dg.assign(reinterpret_cast<const std::byte*>(data + pos),
                reinterpret_cast<const std::byte*>(data + pos + len));
      pos += len;
    }
    const std::uint64_t promoted = server.counters().peers_promoted;
    sent_in[who] += dg.size();
    server.on_datagram(now_us, source(who), dg);
    FUZZ_REQUIRE(server.counters().half_open <= kCapacity);
    FUZZ_REQUIRE(server.peer_count() <= server.counters().peers_promoted);
    if (server.counters().peers_promoted == promoted) {
      // Not (yet) verified: what it was sent stays within what it sent.
      if ((control & 0x20) != 0) flush();
    } else {
      verified[who] = true;  // replies to a connection are not bound by the rule
      flush();
    }
    for (std::size_t i = 0; i < kSources; ++i) {
      FUZZ_REQUIRE(verified[i] || sent_out[i] <= sent_in[i]);
    }
  }
  flush();
  FUZZ_REQUIRE(server.counters().unverified_bytes_out <= server.counters().unverified_bytes_in);
  FUZZ_REQUIRE(server.counters().discovery_bytes_out <= server.counters().discovery_bytes_in);
  return 0;
}
