// libFuzzer target: a KCP server (KcpCore) fed hostile datagrams from a few source addresses.
//
// Chunk framing (all optional; a short input is a short last chunk):
//   byte 0     control: bit 0 = flush after this datagram, bits 1..2 = source address (of 4),
//              bit 3 = echo every message received so far (exercises the send path),
//              bits 4..7 = 8 ms steps to advance the clock first; bits 0 and 3 together toggle
//              the hold of every session, bits 1..3 without 0 disconnect the oldest session
//              (which the core then refuses); sessions from the fourth source start held
//   bytes 1-2  body length, little-endian, modulo 1600
//   body       the datagram (KCP segments, or kcp-go's FEC framing around them)
//
// Invariants: sessions never exceed the limit, held segments never exceed what the windows and
// queue caps allow, every delivered message fits the fragment limit, and nothing leaks or
// overreads (AddressSanitizer; each datagram is an exact-size heap copy).
#include "kcp/kcp_core.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto::kcp;

#define check(ok)                                                             \
  do {                                                                        \
    if (!(ok)) {                                                              \
      std::fprintf(stderr, "fuzz_kcp: %s failed (line %d)\n", #ok, __LINE__); \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  KcpConfig cfg;
  cfg.session_limit = 3;
  cfg.rcv_wnd = 16;
  cfg.snd_wnd = 8;
  cfg.max_queued_segments = 64;
  cfg.idle_timeout_ms = 500;
  cfg.dead_link = 6;
  cfg.intake_rate = 20;  // messages wait in the window, as under hold()
  cfg.refused_limit = 2;
  KcpCore core(cfg);
  bool holding = false;
  std::vector<KcpDatagram> out(4);
  std::uint64_t now_us = 1'000'000;
  const std::size_t per_session = 2 * cfg.rcv_wnd + cfg.max_queued_segments;
  const std::size_t mss = cfg.mtu - kHeaderSize;
  std::vector<PeerHandle> talkers;

  std::size_t off = 0;
  while (off < size) {
    const std::uint8_t control = data[off++];
    std::size_t len = size - off;
    if (off + 2 <= size) {
      len = (std::size_t{data[off]} | std::size_t{data[off + 1]} << 8) % 1600;
      off += 2;
    }
    len = std::min(len, size - off);
    auto body = std::make_unique<std::byte[]>(len);
    if (len != 0) std::memcpy(body.get(), data + off, len);
    off += len;

    now_us += static_cast<std::uint64_t>((control >> 4) & 0xf) * 8000;
    const Endpoint from =
        Endpoint::v4(0x7f000001, static_cast<std::uint16_t>(4000 + ((control >> 1) & 3)));
    core.on_datagram(now_us, from, std::span<const std::byte>(body.get(), len));

    Event ev;
    while (core.poll_event(ev)) {
      if (ev.type == EventType::receive) {
        check(ev.payload().size() <= std::size_t{cfg.rcv_wnd - 1} * mss);
        if ((control & 8) != 0) (void)core.send(ev.peer, ev.payload());
      }
      if (ev.type == EventType::connect) {
        talkers.push_back(ev.peer);
        if (ev.address.port == 4003 || holding) core.hold(ev.peer, true);
      }
    }
    if ((control & 9) == 9) {
      holding = !holding;
      for (const PeerHandle& p : talkers) core.hold(p, holding);
    }
    if ((control & 0xf) == 0xe && !talkers.empty()) {
      core.disconnect(talkers.front());
      talkers.erase(talkers.begin());
    }
    if ((control & 1) != 0) {
      while (core.flush(now_us, out) == out.size()) {
      }
    }
    check(core.session_count() <= cfg.session_limit);
    check(core.segments_held() <= core.session_count() * per_session);
  }
  // Let every timer run out: dead links and idle timeouts must free everything.
  for (int i = 0; i < 200 && core.session_count() != 0; ++i) {
    now_us += 1'000'000;
    while (core.flush(now_us, out) == out.size()) {
    }
  }
  check(core.session_count() == 0);
  check(core.segments_held() == 0);
  return 0;
}
