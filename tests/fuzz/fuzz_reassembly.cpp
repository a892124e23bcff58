// libFuzzer target: a connected server HostCore fed hostile datagrams from its peer's address.
//
// Each input starts from the same state: a server and a client HostCore complete a real
// in-memory handshake at fixed simulated times. The input is then cut into chunks, and each
// chunk becomes a datagram from the client's address, prefixed with the header the real client
// uses (peer ID, session, sent time), so the fuzzer spends its effort past the header checks:
// fragment sets, reliable ordering, unreliable sequencing, acknowledgements, state changes, and
// the large blocks' slices and slice acks (the real client agrees to blocks).
//
// Chunk framing (all of it optional; a short input is just a short last chunk):
//   byte 0     control: bit 0 = flush the server after this datagram,
//              bits 1..7 = milliseconds to advance the clock first
//   bytes 1-2  body length, little-endian, taken modulo (max MTU - header) + 1
//   body       the commands
//
// Invariants: the host-wide buffered byte count never exceeds memory_cap, no delivered message
// exceeds max_packet_size, and nothing leaks or overreads (AddressSanitizer).
#include "host_core.hpp"
#include "wire.hpp"

#include <array>
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
using namespace tern::proto;

#define FUZZ_REQUIRE(cond)                                                             \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "fuzz_reassembly: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)

constexpr std::size_t kMemoryCap = std::size_t{4} << 20;
constexpr std::uint32_t kMaxPacketSize = 1u << 20;
constexpr std::size_t kHeaderBytes = 4;  // peer ID word + sent time; no checksum
constexpr std::size_t kChannels = 4;

const Endpoint kClientEp = Endpoint::v4(0x0A000001, 40001);
const Endpoint kServerEp = Endpoint::v4(0x0A000002, 7777);

// Big enough that one flush never fills it; a static to keep 130 KiB off the stack.
std::vector<OutDatagram>& out_batch() {
  static std::vector<OutDatagram> batch(32);
  return batch;
}

struct Harness {
  HostCore server;
  HostCore client;
  std::uint64_t now_us = 5'000'000;
  Header header;  // the real client's header, as the server expects it

  static HostConfig server_config() {
    HostConfig cfg;
    cfg.memory_cap = kMemoryCap;
    cfg.max_packet_size = kMaxPacketSize;
    cfg.max_waiting_data = kMaxPacketSize * 2;
    cfg.max_block_size = kMaxPacketSize;  // large blocks: the same bound on what is delivered
    return cfg;
  }

  Harness() : server(server_config()), client(HostConfig{}) {}

  void check_server() {
    FUZZ_REQUIRE(server.counters().buffered_bytes <= kMemoryCap);
    Event ev;
    while (server.poll_event(ev)) {
      if (ev.type == EventType::receive) {
        FUZZ_REQUIRE(ev.packet.size() <= kMaxPacketSize);
        FUZZ_REQUIRE(ev.channel < kChannels);
      }
    }
    FUZZ_REQUIRE(server.counters().buffered_bytes <= kMemoryCap);
  }

  void flush_server() {
    auto& out = out_batch();
    while (server.flush(now_us, out) == out.size()) {
    }
    check_server();
  }

  // The deterministic handshake: returns false if it did not complete (a core regression;
  // reported as a crash so it cannot go unnoticed).
  bool connect() {
    auto& out = out_batch();
    const PeerHandle to_server = client.connect(now_us, kServerEp, kChannels, 0);
    if (!to_server.valid()) return false;
    bool server_up = false;
    std::vector<std::byte> last_from_client;
    for (int round = 0;
         round < 20 && !(server_up && client.peer_state(to_server) == PeerState::connected);
         ++round) {
      now_us += 1000;
      std::size_t n = client.flush(now_us, out);
      for (std::size_t i = 0; i < n; ++i) {
        const auto v = out[i].view();
        last_from_client.assign(v.begin(), v.end());
        server.on_datagram(now_us, kClientEp, v);
      }
      n = server.flush(now_us, out);
      for (std::size_t i = 0; i < n; ++i) client.on_datagram(now_us, kServerEp, out[i].view());
      Event ev;
      while (server.poll_event(ev)) server_up = server_up || ev.type == EventType::connect;
      while (client.poll_event(ev)) {
      }
    }
    if (!server_up || last_from_client.empty()) return false;
    DecodedHeader dh;
    Drop why = Drop::count_;
    if (!decode_header(last_from_client, false, dh, why)) return false;
    header = dh.header;
    header.has_sent_time = true;
    return header.peer_id != kMaxPeerId;
  }

  void send(std::span<const std::byte> body) {
    const std::size_t size = kHeaderBytes + body.size();
    // Exact-size heap copy: an overread of the datagram is a heap overflow.
    std::unique_ptr<std::byte[]> dg(new std::byte[size]);
    header.sent_time = static_cast<std::uint16_t>(now_us / 1000);
    FUZZ_REQUIRE(encode_header(std::span<std::byte>(dg.get(), kHeaderBytes), header, false) ==
                 kHeaderBytes);
    if (!body.empty()) std::memcpy(dg.get() + kHeaderBytes, body.data(), body.size());
    server.on_datagram(now_us, kClientEp, std::span<const std::byte>(dg.get(), size));
    check_server();
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Harness h;
  FUZZ_REQUIRE(h.connect());
  h.flush_server();

  const std::span<const std::byte> input(reinterpret_cast<const std::byte*>(data), size);
  std::size_t at = 0;
  while (at < input.size()) {
    const auto control = static_cast<std::uint8_t>(input[at++]);
    std::size_t len = 0;
    if (at < input.size()) len = static_cast<std::size_t>(input[at++]);
    if (at < input.size()) len |= static_cast<std::size_t>(input[at++]) << 8;
    len %= kMaxMtu - kHeaderBytes + 1;
    if (len > input.size() - at) len = input.size() - at;
    h.now_us += static_cast<std::uint64_t>(control >> 1) * 1000;
    h.send(input.subspan(at, len));
    at += len;
    if ((control & 1) != 0) h.flush_server();
  }
  h.flush_server();
  return 0;
}
