// libFuzzer target: the wire decoder on arbitrary datagrams.
//
// The input is one datagram, decoded in both checksum modes: the header, then every command
// the CommandDecoder yields. Whatever decodes must encode back to the very bytes it came from
// and decode again to the same command (the codec is a bijection on what it accepts), and
// nothing may be read outside the input (libFuzzer hands us an exact-size heap copy, so
// AddressSanitizer sees any overread).
#include "wire.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>

namespace {

using namespace tern::proto;

#define FUZZ_REQUIRE(cond)                                                          \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "fuzz_decoder: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

void check_header_round_trip(const DecodedHeader& dh, bool checksum) {
  std::array<std::byte, 8> buf{};
  const std::size_t n = encode_header(buf, dh.header, checksum);
  FUZZ_REQUIRE(n == dh.size);
  FUZZ_REQUIRE(n == header_size(dh.header.has_sent_time, checksum));
  // Decoding refuses compressed headers, so whatever got here re-decodes.
  DecodedHeader again;
  Drop why = Drop::count_;
  FUZZ_REQUIRE(decode_header(std::span<const std::byte>(buf.data(), n), checksum, again, why));
  FUZZ_REQUIRE(again.size == dh.size);
  FUZZ_REQUIRE(again.header.peer_id == dh.header.peer_id);
  FUZZ_REQUIRE(again.header.has_sent_time == dh.header.has_sent_time);
  FUZZ_REQUIRE(again.header.sent_time == dh.header.sent_time);
  // ENet only carries session bits with a real peer ID; with 0xFFF they are not re-encoded.
  FUZZ_REQUIRE(again.header.session == (dh.header.peer_id < kMaxPeerId ? dh.header.session : 0));
  FUZZ_REQUIRE(again.checksum_offset == dh.checksum_offset);
}

// Re-encodes one decoded command and decodes it again from an exact-size copy.
void check_command_round_trip(const Command& c, std::span<const std::byte> original) {
  const std::size_t fixed = command_size(c.type());
  std::array<std::byte, 64> buf{};
  const std::size_t n = encode_command(buf, c);
  FUZZ_REQUIRE(n == fixed);
  FUZZ_REQUIRE(std::memcmp(buf.data(), original.data(), n) == 0);

  const std::size_t total = n + c.payload.size();
  std::unique_ptr<std::byte[]> copy(new std::byte[total]);
  std::memcpy(copy.get(), buf.data(), n);
  if (!c.payload.empty()) std::memcpy(copy.get() + n, c.payload.data(), c.payload.size());
  CommandDecoder again(std::span<const std::byte>(copy.get(), total), 0);
  Command d;
  Drop why = Drop::count_;
  FUZZ_REQUIRE(again.next(d, why));
  FUZZ_REQUIRE(again.at_end());
  std::array<std::byte, 64> buf2{};
  FUZZ_REQUIRE(encode_command(buf2, d) == n);
  FUZZ_REQUIRE(std::memcmp(buf.data(), buf2.data(), n) == 0);
  FUZZ_REQUIRE(d.payload.size() == c.payload.size());
  FUZZ_REQUIRE(c.payload.empty() ||
               std::memcmp(d.payload.data(), c.payload.data(), c.payload.size()) == 0);
}

void check_datagram(std::span<const std::byte> dg, bool checksum) {
  DecodedHeader dh;
  Drop why = Drop::count_;
  if (!decode_header(dg, checksum, dh, why)) {
    FUZZ_REQUIRE(why != Drop::count_);
    return;
  }
  FUZZ_REQUIRE(dg.size() <= kMaxMtu);
  FUZZ_REQUIRE(dh.size <= dg.size());
  FUZZ_REQUIRE(!dh.header.compressed);
  FUZZ_REQUIRE(dh.header.peer_id <= kMaxPeerId && dh.header.session < 4);
  check_header_round_trip(dh, checksum);
  if (checksum) {
    // Read-only and total: any result is fine, a crash or a write is not.
    (void)verify_checksum(dg, dh, 0);
    (void)verify_checksum(dg, dh, 0xA5A5A5A5u);
  }

  CommandDecoder dec(dg, dh.size);
  Command c;
  std::size_t at = dh.size;
  std::size_t count = 0;
  why = Drop::count_;
  while (dec.next(c, why)) {
    const std::size_t fixed = command_size(c.type());
    FUZZ_REQUIRE(fixed != 0);
    FUZZ_REQUIRE(c.payload.size() == c.data_length());
    FUZZ_REQUIRE(at + fixed + c.payload.size() <= dg.size());
    FUZZ_REQUIRE(c.payload.empty() || c.payload.data() == dg.data() + at + fixed);
    check_command_round_trip(c, dg.subspan(at, fixed));
    at += fixed + c.payload.size();
    ++count;
    FUZZ_REQUIRE(count <= kMaxMtu / kCommandHeaderSize);
  }
  // at_end() is how callers tell a clean end from a drop they must count.
  if (why == Drop::count_) {
    FUZZ_REQUIRE(dec.at_end());
    FUZZ_REQUIRE(at == dg.size());
  } else {
    FUZZ_REQUIRE(!dec.at_end());
    FUZZ_REQUIRE(why == Drop::truncated_command || why == Drop::unknown_command ||
                 why == Drop::payload_past_datagram);
    // A decoder that refused stays refused.
    Drop again = Drop::count_;
    FUZZ_REQUIRE(!dec.next(c, again));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> dg(reinterpret_cast<const std::byte*>(data), size);
  check_datagram(dg, false);
  check_datagram(dg, true);
  return 0;
}
