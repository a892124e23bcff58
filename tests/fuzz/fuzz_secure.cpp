// libFuzzer target: secure sessions' parsers on hostile bytes (engine/protocol/secure).
//
// The first byte picks what the rest is:
//   0  a connect token as received, opened against a fixed key ring
//   1  a mask XORed over a valid token: it must open only when the mask changes nothing the
//      AEAD covers, and then give back exactly what was sealed
//   2  a sealed datagram as received, opened with a fixed key and a replay window
//   3  a mask over a valid sealed datagram: opens only unchanged, then to the plaintext
// Nothing may be read outside the input (an exact-size heap copy, so ASan sees overreads).
#include "secure/secure.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

namespace {

namespace sec = tern::proto::sec;

#define FUZZ_REQUIRE(cond)                                                         \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      std::fprintf(stderr, "fuzz_secure: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                \
    }                                                                              \
  } while (0)

constexpr std::uint64_t kNow = 1'800'000'000;

sec::KeyRing ring() {
  sec::KeyRing r;
  r.keys[0].id = 1;
  r.keys[0].key.fill(0x31);
  r.keys[1].id = 2;
  r.keys[1].key.fill(0x32);
  r.count = 2;
  return r;
}

sec::TokenContents contents() {
  sec::TokenContents c;
  c.client_id = 99;
  c.timeout_s = 10;
  c.server_count = 1;
  c.servers[0] = tern::Endpoint::v4(0x7f000001u, 7777);
  c.client_to_server.fill(0xaa);
  c.server_to_client.fill(0xbb);
  c.user_data_len = 4;
  std::memcpy(c.user_data.data(), "room", 4);
  return c;
}

void fuzz_token(const std::uint8_t* data, std::size_t size, bool masked) {
  const auto r = ring();
  sec::TokenHeader h;
  sec::TokenContents c;
  if (!masked) {
    const auto e = sec::open_token(std::span(data, size), r, kNow, h, c);
    if (e == sec::TokenError::none) FUZZ_REQUIRE(c.server_count >= 1 && c.server_count <= 8);
    return;
  }
  sec::TokenHeader sealed_header;
  sealed_header.create_s = kNow;
  sealed_header.expire_s = kNow + 30;
  sealed_header.key_id = 2;
  sealed_header.nonce.fill(7);
  auto token = std::make_unique<std::array<std::uint8_t, sec::kTokenBytes>>();
  sec::seal_token(r.keys[1], sealed_header, contents(), *token);
  bool changed = false;
  for (std::size_t i = 0; i < size && i < sec::kTokenBytes; ++i) {
    (*token)[i] ^= data[i];
    changed |= data[i] != 0;
  }
  const auto e = sec::open_token(*token, r, kNow, h, c);
  FUZZ_REQUIRE((e == sec::TokenError::none) == !changed);
  if (e == sec::TokenError::none) {
    FUZZ_REQUIRE(c.client_id == 99 && c.lists(tern::Endpoint::v4(0x7f000001u, 7777)));
    FUZZ_REQUIRE(c.client_to_server == contents().client_to_server);
  }
}

void fuzz_datagram(const std::uint8_t* data, std::size_t size, bool masked) {
  sec::Key key;
  key.fill(0x44);
  sec::ReplayWindow window;
  if (!masked) {
    // Twice through the same window: a datagram that opened once is a replay the second time.
    for (std::size_t header : {std::size_t{2}, std::size_t{4}}) {
      std::vector<std::uint8_t> copy(data, data + size);
      std::size_t n = 0;
      const auto e = sec::open_datagram(key, window, copy.data(), copy.size(), header, n);
      if (e == sec::OpenError::none) {
        FUZZ_REQUIRE(n + sec::kDatagramOverhead == size);
        std::vector<std::uint8_t> again(data, data + size);
        FUZZ_REQUIRE(sec::open_datagram(key, window, again.data(), again.size(), header, n) ==
                     sec::OpenError::replayed);
      }
    }
    return;
  }
  // A plaintext of up to 256 bytes sealed with sequence 5, then the mask.
  const std::size_t payload = size > 0 ? data[0] : 0;
  std::vector<std::uint8_t> buf(4 + payload + sec::kDatagramOverhead);
  for (std::size_t i = 0; i < 4 + payload; ++i) buf[i] = static_cast<std::uint8_t>(i * 13);
  const std::vector<std::uint8_t> plain(buf.begin(), buf.begin() + 4 + payload);
  sec::SealState tx;
  tx.key = key;
  tx.next_seq = 5;
  const std::size_t sealed = sec::seal_datagram(tx, buf.data(), 4, payload);
  FUZZ_REQUIRE(sealed == buf.size());
  bool changed = false;
  for (std::size_t i = 1; i < size && i - 1 < sealed; ++i) {
    buf[i - 1] ^= data[i];
    changed |= data[i] != 0;
  }
  std::size_t n = 0;
  const auto e = sec::open_datagram(key, window, buf.data(), sealed, 4, n);
  FUZZ_REQUIRE((e == sec::OpenError::none) == !changed);
  if (e == sec::OpenError::none) {
    FUZZ_REQUIRE(n == plain.size());
    FUZZ_REQUIRE(std::memcmp(buf.data() + sec::kSeqBytes, plain.data(), n) == 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0] % 4;
  switch (mode) {
    case 0: fuzz_token(data + 1, size - 1, false); break;
    case 1: fuzz_token(data + 1, size - 1, true); break;
    case 2: fuzz_datagram(data + 1, size - 1, false); break;
    case 3: fuzz_datagram(data + 1, size - 1, true); break;
  }
  return 0;
}
