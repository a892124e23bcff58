// Connect tokens and datagram AEAD: published vectors for both AEADs, every way a token is
// refused, and the replay window at its edges.
#include "secure/secure.hpp"

#include <tern/secure.hpp>

#include <gtest/gtest.h>
#include <sodium.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace sec = tern::proto::sec;

namespace {

std::vector<std::uint8_t> unhex(std::string_view h) {
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoul(std::string(h.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// The plaintext, key and associated data of RFC 8439 §2.8.2, shared by the XChaCha draft's
// vector (draft-irtf-cfrg-xchacha §A.3.1).
const std::string kSunscreen =
    "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
    "future, sunscreen would be it.";
const auto kVectorKey = unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
const auto kVectorAad = unhex("50515253c0c1c2c3c4c5c6c7");

TEST(SecureVectors, ChaCha20Poly1305Rfc8439) {
  const auto nonce = unhex("070000004041424344454647");
  const auto expected = unhex(
      "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da"
      "92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585"
      "808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"
      "1ae10b594f09e26a7e902ecbd0600691");
  std::vector<std::uint8_t> out(kSunscreen.size() + 16);
  unsigned long long n = 0;
  ASSERT_EQ(crypto_aead_chacha20poly1305_ietf_encrypt(
                out.data(), &n, reinterpret_cast<const std::uint8_t*>(kSunscreen.data()),
                kSunscreen.size(), kVectorAad.data(), kVectorAad.size(), nullptr, nonce.data(),
                kVectorKey.data()),
            0);
  EXPECT_EQ(out, expected);
}

TEST(SecureVectors, XChaCha20Poly1305Draft) {
  const auto nonce = unhex("404142434445464748494a4b4c4d4e4f5051525354555657");
  const auto expected = unhex(
      "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4e"
      "da7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2"
      "383565d3fff921f9664c97637da9768812f615c68b13b52e"
      "c0875924c1c7987947deafd8780acf49");
  std::vector<std::uint8_t> out(kSunscreen.size() + 16);
  unsigned long long n = 0;
  ASSERT_EQ(crypto_aead_xchacha20poly1305_ietf_encrypt(
                out.data(), &n, reinterpret_cast<const std::uint8_t*>(kSunscreen.data()),
                kSunscreen.size(), kVectorAad.data(), kVectorAad.size(), nullptr, nonce.data(),
                kVectorKey.data()),
            0);
  EXPECT_EQ(out, expected);
}

// ---- Tokens ------------------------------------------------------------------------------

const tern::Endpoint kServer = tern::Endpoint::v4(0x7f000001u, 7777);
const tern::Endpoint kClient = tern::Endpoint::v4(0x7f000002u, 50000);
constexpr std::uint64_t kNow = 1'800'000'000;

sec::TokenKey key_with(std::uint32_t id, std::uint8_t fill) {
  sec::TokenKey k;
  k.id = id;
  k.key.fill(fill);
  return k;
}

sec::TokenContents contents() {
  sec::TokenContents c;
  c.client_id = 0x0102030405060708ull;
  c.timeout_s = 10;
  c.server_count = 2;
  c.servers[0] = tern::Endpoint::v4(0x0a000001u, 1);
  c.servers[1] = kServer;
  c.client_to_server.fill(0x11);
  c.server_to_client.fill(0x22);
  const char room[] = "room=lobby";
  c.user_data_len = sizeof room - 1;
  std::memcpy(c.user_data.data(), room, sizeof room - 1);
  return c;
}

struct Minted {
  std::array<std::uint8_t, sec::kTokenBytes> bytes{};
};

Minted mint(const sec::TokenKey& key, std::uint64_t expire = kNow + 30,
            const sec::TokenContents& c = contents()) {
  Minted m;
  sec::mint_token(key, kNow, expire, c, m.bytes);
  return m;
}

sec::KeyRing ring_of(std::initializer_list<sec::TokenKey> keys) {
  sec::KeyRing r;
  for (const auto& k : keys) r.keys[r.count++] = k;
  return r;
}

TEST(SecureToken, RoundTrip) {
  const auto key = key_with(7, 0x5a);
  const auto m = mint(key);
  sec::TokenHeader h;
  sec::TokenContents c;
  ASSERT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow, h, c), sec::TokenError::none);
  EXPECT_EQ(h.key_id, 7u);
  EXPECT_EQ(h.create_s, kNow);
  EXPECT_EQ(h.expire_s, kNow + 30);
  EXPECT_EQ(c.client_id, 0x0102030405060708ull);
  EXPECT_EQ(c.timeout_s, 10u);
  EXPECT_TRUE(c.lists(kServer));
  EXPECT_FALSE(c.lists(tern::Endpoint::v4(0x7f000001u, 7778)));
  EXPECT_EQ(c.client_to_server, contents().client_to_server);
  EXPECT_EQ(c.server_to_client, contents().server_to_client);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(c.user_data.data()), c.user_data_len),
            "room=lobby");
}

TEST(SecureToken, IPv6ServerAddress) {
  auto c = contents();
  const std::uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
  c.servers[0] = tern::Endpoint::v6(v6, 443);
  const auto key = key_with(1, 1);
  const auto m = mint(key, kNow + 5, c);
  sec::TokenHeader h;
  sec::TokenContents out;
  ASSERT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow, h, out), sec::TokenError::none);
  EXPECT_TRUE(out.lists(tern::Endpoint::v6(v6, 443)));
}

TEST(SecureToken, Expired) {
  const auto key = key_with(1, 1);
  const auto m = mint(key, kNow + 30);
  sec::TokenHeader h;
  sec::TokenContents c;
  EXPECT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow + 29, h, c), sec::TokenError::none);
  EXPECT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow + 30, h, c), sec::TokenError::expired);
  EXPECT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow + 100000, h, c),
            sec::TokenError::expired);
}

TEST(SecureToken, ExtendingTheExpiryIsForgery) {
  // The public part is associated data: moving the expiry in clear breaks the tag.
  const auto key = key_with(1, 1);
  auto m = mint(key, kNow + 30);
  m.bytes[16 + 7] ^= 0x80;  // expire_s, low byte
  sec::TokenHeader h;
  sec::TokenContents c;
  EXPECT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow, h, c), sec::TokenError::forged);
}

TEST(SecureToken, EveryFlippedByteIsRefused) {
  const auto key = key_with(3, 9);
  const auto ring = ring_of({key});
  const auto m = mint(key);
  for (std::size_t i = 0; i < sec::kTokenBytes; ++i) {
    auto bad = m;
    bad.bytes[i] ^= 0x01;
    sec::TokenHeader h;
    sec::TokenContents c;
    const auto e = sec::open_token(bad.bytes, ring, kNow, h, c);
    ASSERT_NE(e, sec::TokenError::none) << "byte " << i;
    // Protocol id, expiry and key id have their own refusals; everything else is the tag's.
    if (i >= 28 || (i >= 8 && i < 16)) {
      EXPECT_EQ(e, sec::TokenError::forged) << "byte " << i;
    }
  }
}

TEST(SecureToken, WrongKeyIsForged) {
  const auto m = mint(key_with(1, 1));
  sec::TokenHeader h;
  sec::TokenContents c;
  EXPECT_EQ(sec::open_token(m.bytes, ring_of({key_with(1, 2)}), kNow, h, c),
            sec::TokenError::forged);
}

TEST(SecureToken, Truncated) {
  const auto key = key_with(1, 1);
  const auto m = mint(key);
  sec::TokenHeader h;
  sec::TokenContents c;
  const auto ring = ring_of({key});
  for (std::size_t n :
       {std::size_t{0}, std::size_t{1}, sec::kTokenPublicBytes, sec::kTokenBytes - 1}) {
    EXPECT_EQ(sec::open_token(std::span(m.bytes.data(), n), ring, kNow, h, c),
              sec::TokenError::truncated)
        << n;
  }
  std::vector<std::uint8_t> longer(m.bytes.begin(), m.bytes.end());
  longer.push_back(0);
  EXPECT_EQ(sec::open_token(longer, ring, kNow, h, c), sec::TokenError::truncated);
}

TEST(SecureToken, OtherProtocol) {
  const auto key = key_with(1, 1);
  auto m = mint(key);
  m.bytes[7] ^= 1;
  sec::TokenHeader h;
  sec::TokenContents c;
  EXPECT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow, h, c), sec::TokenError::bad_protocol);
}

TEST(SecureToken, RotationAcceptsTwoKeys) {
  const auto old_key = key_with(1, 0x01);
  const auto new_key = key_with(2, 0x02);
  const auto from_old = mint(old_key);
  const auto from_new = mint(new_key);
  sec::TokenHeader h;
  sec::TokenContents c;
  const auto both = ring_of({new_key, old_key});
  EXPECT_EQ(sec::open_token(from_old.bytes, both, kNow, h, c), sec::TokenError::none);
  EXPECT_EQ(sec::open_token(from_new.bytes, both, kNow, h, c), sec::TokenError::none);
  // Once the old key is retired its tokens are refused before any decryption.
  const auto only_new = ring_of({new_key});
  EXPECT_EQ(sec::open_token(from_old.bytes, only_new, kNow, h, c), sec::TokenError::unknown_key);
  EXPECT_EQ(sec::open_token(from_new.bytes, only_new, kNow, h, c), sec::TokenError::none);
}

TEST(SecureToken, BadContentsAfterAuthentication) {
  // An issuer bug (no servers, user data too long) is caught even though the tag is good.
  const auto key = key_with(1, 1);
  auto c = contents();
  c.server_count = 0;
  sec::TokenHeader h;
  sec::TokenContents out;
  EXPECT_EQ(sec::open_token(mint(key, kNow + 5, c).bytes, ring_of({key}), kNow, h, out),
            sec::TokenError::bad_contents);
  c = contents();
  c.user_data_len = sec::kUserDataBytes + 1;
  EXPECT_EQ(sec::open_token(mint(key, kNow + 5, c).bytes, ring_of({key}), kNow, h, out),
            sec::TokenError::bad_contents);
}

TEST(SecureToken, ReusedFromAnotherAddress) {
  const auto key = key_with(1, 1);
  const auto m = mint(key);
  sec::TokenHeader h;
  sec::TokenContents c;
  ASSERT_EQ(sec::open_token(m.bytes, ring_of({key}), kNow, h, c), sec::TokenError::none);
  auto table = std::make_unique<sec::TokenNonceTable>();
  EXPECT_EQ(table->remember(h, kClient, kNow), sec::TokenError::none);
  // The same client resending its CONNECT is fine; anyone else is not, while it is valid.
  EXPECT_EQ(table->remember(h, kClient, kNow + 1), sec::TokenError::none);
  auto other = kClient;
  other.port = 50001;
  EXPECT_EQ(table->remember(h, other, kNow + 1), sec::TokenError::reused);
  EXPECT_EQ(table->remember(h, kClient, kNow + 2), sec::TokenError::none);
  // Past its expiry the token itself is refused, so the entry may go.
  EXPECT_EQ(table->remember(h, other, kNow + 30), sec::TokenError::none);
}

TEST(SecureToken, NonceTableStaysBoundedAndKeepsLiveEntries) {
  // Far more live tokens than the table holds: it never grows, the newest stay (a full set
  // loses its oldest entry of those expiring first), and one expiring later outlives them.
  auto table = std::make_unique<sec::TokenNonceTable>();
  std::mt19937_64 rng(33);
  auto fresh = [&](std::uint64_t expire) {
    sec::TokenHeader h;
    for (auto& b : h.nonce) b = static_cast<std::uint8_t>(rng());
    h.expire_s = expire;
    return h;
  };
  const auto long_lived = fresh(kNow + 600);
  ASSERT_EQ(table->remember(long_lived, kClient, kNow), sec::TokenError::none);
  std::vector<sec::TokenHeader> headers;
  for (int i = 0; i < 20000; ++i) {
    headers.push_back(fresh(kNow + 30));
    ASSERT_EQ(table->remember(headers.back(), kClient, kNow), sec::TokenError::none);
  }
  auto other = kClient;
  other.port = 1;
  EXPECT_EQ(table->remember(long_lived, other, kNow), sec::TokenError::reused);
  // Nearly all of the last 512 are there: a set holds 4, and 512 random nonces put 5 in one
  // of 1,024 sets only now and then (a check that misses inserts, which may push out another).
  int refused = 0;
  for (std::size_t i = headers.size() - 512; i < headers.size(); ++i) {
    if (table->remember(headers[i], other, kNow) == sec::TokenError::reused) ++refused;
  }
  EXPECT_GE(refused, 500);
  // Sizes: bounded by construction.
  EXPECT_LT(sizeof(sec::TokenNonceTable), std::size_t{300} << 10);
}

// ---- Datagrams ---------------------------------------------------------------------------

struct Pair {
  sec::SealState tx;
  sec::Key rx_key{};
  sec::ReplayWindow window;
  Pair() {
    tx.key.fill(0x42);
    rx_key = tx.key;
  }
};

std::vector<std::uint8_t> plain_datagram(std::size_t payload, std::uint8_t seed) {
  std::vector<std::uint8_t> d(4 + payload);
  d[0] = 0xc0;  // peer word with "sent time" and the secure mark
  d[1] = 0x01;
  d[2] = 0x12;
  d[3] = 0x34;
  for (std::size_t i = 0; i < payload; ++i) d[4 + i] = static_cast<std::uint8_t>(seed + i * 7);
  return d;
}

std::vector<std::uint8_t> seal(sec::SealState& tx, const std::vector<std::uint8_t>& plain) {
  std::vector<std::uint8_t> buf(plain.size() + sec::kDatagramOverhead);
  std::memcpy(buf.data(), plain.data(), plain.size());
  const auto n = sec::seal_datagram(tx, buf.data(), 4, plain.size() - 4);
  buf.resize(n);
  return buf;
}

sec::OpenError open(Pair& p, std::vector<std::uint8_t> sealed, std::vector<std::uint8_t>* out) {
  std::size_t n = 0;
  const auto e = sec::open_datagram(p.rx_key, p.window, sealed.data(), sealed.size(), 4, n);
  if (e == sec::OpenError::none && out) {
    out->assign(sealed.begin() + sec::kSeqBytes, sealed.begin() + sec::kSeqBytes + n);
  }
  return e;
}

TEST(SecureDatagram, RoundTripBothSizes) {
  for (std::size_t size : {std::size_t{0}, std::size_t{64}, std::size_t{1200}}) {
    Pair p;
    for (int i = 0; i < 3; ++i) {
      const auto plain = plain_datagram(size, static_cast<std::uint8_t>(i));
      const auto sealed = seal(p.tx, plain);
      ASSERT_EQ(sealed.size(), plain.size() + sec::kDatagramOverhead);
      // The header travels in clear; the payload does not.
      EXPECT_EQ(std::memcmp(sealed.data(), plain.data(), 4), 0);
      if (size > 0) {
        EXPECT_NE(std::memcmp(sealed.data() + 12, plain.data() + 4, size), 0);
      }
      std::vector<std::uint8_t> out;
      ASSERT_EQ(open(p, sealed, &out), sec::OpenError::none);
      EXPECT_EQ(out, plain);
    }
  }
}

// AES-256-GCM (where the CPU has AES-NI): the same framing, another cipher under the same
// key; a datagram sealed with one does not open with the other.
TEST(SecureDatagram, AesRoundTripAndCiphersDoNotMix) {
  if (!sec::aes_available()) GTEST_SKIP() << "no AES-NI on this CPU";
  sec::AesKeys aes;
  for (std::size_t size : {std::size_t{0}, std::size_t{64}, std::size_t{1200}}) {
    Pair p;
    ASSERT_TRUE(sec::expand_aes(p.tx.key, aes.tx));
    ASSERT_TRUE(sec::expand_aes(p.rx_key, aes.rx));
    p.tx.aes = &aes.tx;
    const auto plain = plain_datagram(size, 9);
    const auto sealed = seal(p.tx, plain);
    ASSERT_EQ(sealed.size(), plain.size() + sec::kDatagramOverhead);
    // Under ChaCha20-Poly1305 (no expanded key) the AES datagram is a forgery.
    auto copy = sealed;
    std::size_t n = 0;
    EXPECT_EQ(sec::open_datagram(p.rx_key, p.window, copy.data(), copy.size(), 4, n),
              sec::OpenError::forged);
    copy = sealed;
    ASSERT_EQ(sec::open_datagram(p.rx_key, p.window, copy.data(), copy.size(), 4, n, &aes.rx),
              sec::OpenError::none);
    EXPECT_EQ(
        std::vector<std::uint8_t>(copy.begin() + sec::kSeqBytes, copy.begin() + sec::kSeqBytes + n),
        plain);
    // And a flipped bit anywhere past the sequence number is refused.
    for (std::size_t i = 12; i < sealed.size(); ++i) {
      auto bad = sealed;
      bad[i] ^= 0x10;
      sec::ReplayWindow w;
      EXPECT_EQ(sec::open_datagram(p.rx_key, w, bad.data(), bad.size(), 4, n, &aes.rx),
                sec::OpenError::forged)
          << i;
    }
    // ChaCha20-Poly1305's datagram does not open as AES-256-GCM either.
    p.tx.aes = nullptr;
    auto chacha = seal(p.tx, plain);
    sec::ReplayWindow w;
    EXPECT_EQ(sec::open_datagram(p.rx_key, w, chacha.data(), chacha.size(), 4, n, &aes.rx),
              sec::OpenError::forged);
  }
}

TEST(SecureDatagram, ReplayRefused) {
  Pair p;
  const auto sealed = seal(p.tx, plain_datagram(64, 1));
  ASSERT_EQ(open(p, sealed, nullptr), sec::OpenError::none);
  EXPECT_EQ(open(p, sealed, nullptr), sec::OpenError::replayed);
}

TEST(SecureDatagram, EveryFlippedBitIsForgedAndMovesNothing) {
  Pair p;
  const auto sealed = seal(p.tx, plain_datagram(64, 3));
  for (std::size_t i = 0; i < sealed.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto bad = sealed;
      bad[i] ^= static_cast<std::uint8_t>(1u << bit);
      const auto e = open(p, bad, nullptr);
      // A flipped sequence bit may land past the limit; otherwise the tag refuses it.
      if (e == sec::OpenError::past_limit) {
        EXPECT_TRUE(i >= 4 && i < 12) << i;
        continue;
      }
      ASSERT_EQ(e, sec::OpenError::forged) << "byte " << i << " bit " << bit;
    }
  }
  // None of the forgeries moved the window: the genuine datagram still opens.
  EXPECT_EQ(p.window.highest_plus_one(), 0u);
  EXPECT_EQ(open(p, sealed, nullptr), sec::OpenError::none);
}

TEST(SecureDatagram, WrongDirectionKeyIsForged) {
  Pair p;
  p.rx_key.fill(0x43);
  EXPECT_EQ(open(p, seal(p.tx, plain_datagram(10, 0)), nullptr), sec::OpenError::forged);
}

TEST(SecureDatagram, Truncated) {
  Pair p;
  const auto sealed = seal(p.tx, plain_datagram(0, 0));
  for (std::size_t n = 0; n < sealed.size(); ++n) {
    std::vector<std::uint8_t> cut(sealed.begin(), sealed.begin() + n);
    const auto e = open(p, cut, nullptr);
    EXPECT_TRUE(e == sec::OpenError::truncated || e == sec::OpenError::forged) << n;
  }
}

TEST(SecureDatagram, SenderStopsAtTheLimit) {
  Pair p;
  p.tx.next_seq = 10;
  p.tx.limit = 11;
  std::vector<std::uint8_t> buf(4 + 8 + sec::kDatagramOverhead);
  EXPECT_GT(sec::seal_datagram(p.tx, buf.data(), 4, 8), 0u);
  EXPECT_EQ(sec::seal_datagram(p.tx, buf.data(), 4, 8), 0u);
  EXPECT_EQ(p.tx.next_seq, 11u);  // no sequence number is ever used twice
}

TEST(SecureDatagram, ReceiverRefusesPastTheLimit) {
  // A sender that ignored the limit (or a forger) cannot push the window to the wrap.
  for (std::uint64_t seq : {sec::kSeqLimit, sec::kSeqLimit + 1, ~std::uint64_t{0}}) {
    Pair p;
    p.tx.next_seq = seq;
    p.tx.limit = ~std::uint64_t{0};
    const auto sealed = seal(p.tx, plain_datagram(8, 0));
    if (sealed.empty()) continue;
    EXPECT_EQ(open(p, sealed, nullptr), sec::OpenError::past_limit) << seq;
  }
}

using V = sec::ReplayWindow::Verdict;

TEST(SecureReplayWindow, Edges) {
  sec::ReplayWindow w;
  EXPECT_EQ(w.check(0), V::fresh);
  w.accept(2000);
  EXPECT_EQ(w.check(2000), V::replayed);
  EXPECT_EQ(w.check(2001), V::fresh);
  // The window covers the 1,024 numbers up to the highest: 977..2000.
  EXPECT_EQ(w.check(977), V::fresh);
  EXPECT_EQ(w.check(976), V::too_old);
  EXPECT_EQ(w.check(0), V::too_old);
  w.accept(977);
  EXPECT_EQ(w.check(977), V::replayed);
  // One step forward pushes 977 out of the window.
  w.accept(2001);
  EXPECT_EQ(w.check(977), V::too_old);
  EXPECT_EQ(w.check(978), V::fresh);
}

TEST(SecureReplayWindow, JumpsClearOnlyWhatLeft) {
  sec::ReplayWindow w;
  w.accept(5);
  w.accept(6);
  // A jump of 1,023: slot of 6 is reused by 1,030 later, but 6 itself is still inside now.
  w.accept(1029);
  EXPECT_EQ(w.check(6), V::replayed);
  EXPECT_EQ(w.check(5), V::too_old);
  EXPECT_EQ(w.check(7), V::fresh);  // never taken, and its slot was cleared by the jump
  // A jump past the whole window forgets everything below it.
  w.accept(1029 + 5000);
  EXPECT_EQ(w.check(1029), V::too_old);
  EXPECT_EQ(w.check(1029 + 5000 - 1023), V::fresh);
}

TEST(SecureReplayWindow, AtTheLimit) {
  sec::ReplayWindow w;
  w.accept(sec::kSeqLimit - 2);
  EXPECT_EQ(w.check(sec::kSeqLimit - 1), V::fresh);
  w.accept(sec::kSeqLimit - 1);
  EXPECT_EQ(w.check(sec::kSeqLimit - 1), V::replayed);
  EXPECT_EQ(w.check(sec::kSeqLimit - 1 - 1023), V::fresh);
  EXPECT_EQ(w.check(sec::kSeqLimit - 1 - 1024), V::too_old);
  EXPECT_EQ(w.check(sec::kSeqLimit), V::past_limit);
  EXPECT_EQ(w.check(~std::uint64_t{0}), V::past_limit);
}

TEST(SecureReplayWindow, MatchesAModelAcrossManyRingWraps) {
  // Reordered, duplicated and far-late arrivals against a set of everything accepted; the
  // ring wraps about 200 times.
  const std::uint64_t seed = 20261127;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  sec::ReplayWindow w;
  std::set<std::uint64_t> taken;
  std::uint64_t highest = 0;
  bool any = false;
  for (int i = 0; i < 200000; ++i) {
    std::uint64_t seq;
    const auto r = rng() % 100;
    if (r < 60) {
      seq = highest + 1 + rng() % 3;
    } else if (r < 95) {
      seq = highest > 1100 ? highest - rng() % 1100 : rng() % (highest + 1);
    } else {
      seq = highest + rng() % 3000;
    }
    V expect;
    if (any && seq + sec::ReplayWindow::kWindow < highest + 1) {
      expect = V::too_old;
    } else {
      expect = taken.count(seq) ? V::replayed : V::fresh;
    }
    ASSERT_EQ(w.check(seq), expect) << "step " << i << " seq " << seq;
    if (expect == V::fresh) {
      w.accept(seq);
      taken.insert(seq);
      if (!any || seq > highest) highest = seq;
      any = true;
    }
  }
}

// ---- tern/secure.hpp ---------------------------------------------------------------------

TEST(SecureApi, MintOpensWithTheServersRing) {
  const auto key = tern::generate_token_key(9);
  tern::TokenRequest req;
  req.client_id = 77;
  req.servers = {kServer};
  req.user_data = "room=alpha";
  req.now_s = kNow;
  req.expire_s = kNow + 60;
  tern::ConnectToken token;
  std::string error;
  ASSERT_TRUE(tern::mint_token(key, req, token, error)) << error;
  tern::ConnectToken parsed;
  ASSERT_TRUE(tern::parse_connect_token(tern::format_connect_token(token), parsed, error)) << error;
  EXPECT_EQ(parsed.sealed, token.sealed);
  EXPECT_EQ(parsed.client_to_server, token.client_to_server);
  EXPECT_EQ(parsed.server_to_client, token.server_to_client);
  EXPECT_NE(token.client_to_server, token.server_to_client);

  sec::TokenHeader h;
  sec::TokenContents c;
  ASSERT_EQ(sec::open_token(parsed.sealed, ring_of({sec::TokenKey{key.id, key.key}}), kNow, h, c),
            sec::TokenError::none);
  EXPECT_EQ(c.client_id, 77u);
  EXPECT_TRUE(c.lists(kServer));
  EXPECT_EQ(c.client_to_server, token.client_to_server);
  EXPECT_EQ(c.server_to_client, token.server_to_client);
}

TEST(SecureApi, MintRefusesBadRequests) {
  const auto key = tern::generate_token_key(1);
  tern::ConnectToken token;
  std::string error;
  tern::TokenRequest req;
  req.now_s = kNow;
  req.expire_s = kNow + 1;
  EXPECT_FALSE(tern::mint_token(key, req, token, error));  // no server
  req.servers.assign(9, kServer);
  EXPECT_FALSE(tern::mint_token(key, req, token, error));  // too many
  req.servers = {kServer};
  req.user_data.assign(257, 'x');
  EXPECT_FALSE(tern::mint_token(key, req, token, error));
  req.user_data.clear();
  req.expire_s = kNow;
  EXPECT_FALSE(tern::mint_token(key, req, token, error));
  req.expire_s = kNow + 1;
  EXPECT_TRUE(tern::mint_token(key, req, token, error)) << error;
}

TEST(SecureApi, KeyFiles) {
  char dir[] = "/tmp/tern-secure-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/k";
  const auto key = tern::generate_token_key(42);
  std::string error;
  ASSERT_TRUE(tern::save_token_key(path, key, error)) << error;
  EXPECT_FALSE(tern::save_token_key(path, key, error));  // never overwrites
  tern::TokenKey loaded;
  ASSERT_TRUE(tern::load_token_key(path, loaded, error)) << error;
  EXPECT_EQ(loaded.id, 42u);
  EXPECT_EQ(loaded.key, key.key);

  auto write = [&](const char* text) {
    FILE* f = std::fopen(path.c_str(), "w");
    std::fputs(text, f);
    std::fclose(f);
  };
  write("id 1\nkey 00\n");
  EXPECT_FALSE(tern::load_token_key(path, loaded, error));
  EXPECT_EQ(error, path + ":2: key: not 64 hex digits");
  write("# c\nid x\n");
  EXPECT_FALSE(tern::load_token_key(path, loaded, error));
  EXPECT_EQ(error, path + ":2: id: not a number from 0 to 4294967295");
  write("id 1\n");
  EXPECT_FALSE(tern::load_token_key(path, loaded, error));
  EXPECT_EQ(error, path + ": key: missing");
  write("id 1\nsecret 2\n");
  EXPECT_FALSE(tern::load_token_key(path, loaded, error));
  EXPECT_NE(error.find(":2: unknown entry 'secret'"), std::string::npos) << error;
  std::remove(path.c_str());
  EXPECT_FALSE(tern::load_token_key(path, loaded, error));
  EXPECT_EQ(error, path + ": cannot open");
  ::rmdir(dir);
}

}  // namespace
