// Offline discovery (WIRE.md, "Discovery"): a discovery ping from anyone is answered with the
// server's info, never larger than the ping, at most at the per-address and per-prefix rates,
// and never to a banned address; pongs nobody asked for are dropped. Client and server are
// real HostCores; the test carries (and forges) their datagrams by hand.
#include "drop.hpp"
#include "host_core.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace tern::proto {
namespace {

struct Wire {
  Endpoint to;
  std::vector<std::byte> bytes;
};

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

class Discovery : public ::testing::Test {
 protected:
  const Endpoint server_ep = Endpoint::v4(0x0a000001, 7777);
  const Endpoint client_ep = Endpoint::v4(0x0a000002, 40001);

  static HostConfig server_config() {
    HostConfig c;
    c.discovery = true;
    return c;
  }

  HostCore server{server_config()};
  HostCore client{HostConfig{}};
  std::uint64_t now_us = 1'000'000;
  std::vector<OutDatagram> batch = std::vector<OutDatagram>(64);

  std::vector<Wire> drain(HostCore& h) {
    std::vector<Wire> out;
    for (;;) {
      const std::size_t n = h.flush(now_us, batch);
      for (std::size_t i = 0; i < n; ++i) {
        const auto v = batch[i].view();
        out.push_back({batch[i].to, {v.begin(), v.end()}});
      }
      if (n < batch.size()) return out;
    }
  }

  // A ping as a Tern client sends it, asking for `room` bytes of info.
  std::vector<std::byte> ping(std::size_t room, bool checksum = false) {
    HostConfig c;
    c.checksum = checksum;
    c.random_seed = 99 + room;
    HostCore pinger(c);
    EXPECT_NE(pinger.discover(now_us, server_ep, room), 0u);
    std::vector<Wire> out = drain(pinger);
    EXPECT_EQ(out.size(), 1u);
    return out.empty() ? std::vector<std::byte>{} : out[0].bytes;
  }

  static std::vector<std::byte> raw_ext(TernExtKind kind, std::span<const std::byte> data) {
    std::vector<std::byte> out(header_size(false, false) + kTernExtSize + data.size());
    Header h;
    h.peer_id = kMaxPeerId;
    std::size_t n = encode_header(out, h, false);
    Command c;
    c.command = static_cast<std::uint8_t>(Cmd::tern_ext);
    c.channel_id = kSystemChannel;
    c.ext.kind = static_cast<std::uint8_t>(kind);
    c.ext.data_length = static_cast<std::uint16_t>(data.size());
    n += encode_command(std::span<std::byte>(out).subspan(n), c);
    std::memcpy(out.data() + n, data.data(), data.size());
    return out;
  }
};

TEST_F(Discovery, AnAnswerCarriesTheInfoTheNonceAndTheRtt) {
  const std::vector<std::byte> info = bytes_of("name=arena\nplayers=3\n");
  server.set_discovery_info(info);
  const std::uint32_t nonce = client.discover(now_us, server_ep, 256);
  ASSERT_NE(nonce, 0u);
  std::vector<Wire> pings = drain(client);
  ASSERT_EQ(pings.size(), 1u);
  EXPECT_EQ(pings[0].to, server_ep);
  // Header (2), TERN_EXT (8), nonce (4), padding for the answer it asks for.
  EXPECT_EQ(pings[0].bytes.size(), 2u + 8 + 4 + 256);
  now_us += 3'000;
  server.on_datagram(now_us, client_ep, pings[0].bytes);
  EXPECT_EQ(server.peer_count(), 0u);
  EXPECT_EQ(server.counters().half_open, 0u);
  std::vector<Wire> pongs = drain(server);
  ASSERT_EQ(pongs.size(), 1u);
  EXPECT_EQ(pongs[0].to, client_ep);
  EXPECT_EQ(pongs[0].bytes.size(), 2u + 8 + 4 + info.size());
  now_us += 4'000;
  client.on_datagram(now_us, server_ep, pongs[0].bytes);
  DiscoveryAnswer a;
  ASSERT_TRUE(client.poll_discovery(a));
  EXPECT_EQ(a.from, server_ep);
  EXPECT_EQ(a.nonce, nonce);
  EXPECT_EQ(a.rtt_us, 7'000u);
  EXPECT_FALSE(a.truncated);
  ASSERT_EQ(a.info.size(), info.size());
  EXPECT_EQ(std::memcmp(a.info.bytes().data(), info.data(), info.size()), 0);
  EXPECT_FALSE(client.poll_discovery(a));
  EXPECT_EQ(server.counters().discovery_pongs_out, 1u);
  EXPECT_EQ(client.counters().discovery_answers, 1u);
  // The same pong again (a duplicate on the path) is a second answer, from the same server;
  // one for a nonce never sent is refused.
  std::vector<std::byte> forged = pongs[0].bytes;
  forged[2 + 8] ^= std::byte{0x55};
  client.on_datagram(now_us, server_ep, forged);
  EXPECT_FALSE(client.poll_discovery(a));
  EXPECT_EQ(client.counters().drops[Drop::bad_discovery], 1u);
}

TEST_F(Discovery, NoAnswerIsLargerThanItsPing) {
  std::vector<std::byte> info(1000);
  for (std::size_t i = 0; i < info.size(); ++i) info[i] = static_cast<std::byte>(i);
  server.set_discovery_info(info);
  std::uint64_t truncated = 0;
  for (std::size_t room : {0u, 1u, 10u, 999u, 1000u, 1001u, 1300u}) {
    now_us += 1'000'000;  // a full bucket each time
    const std::vector<std::byte> p = ping(room);
    server.on_datagram(now_us, client_ep, p);
    std::vector<Wire> pongs = drain(server);
    ASSERT_EQ(pongs.size(), 1u) << room;
    EXPECT_LE(pongs[0].bytes.size(), p.size()) << room;
    EXPECT_EQ(pongs[0].bytes.size(), 2u + 8 + 4 + std::min<std::size_t>(room, info.size()));
    const bool cut = room < info.size();
    EXPECT_EQ(std::to_integer<int>(pongs[0].bytes[2 + 5]), cut ? 1 : 0) << room;
    truncated += cut ? 1 : 0;
  }
  EXPECT_EQ(server.counters().discovery_truncated, truncated);
  EXPECT_LE(server.counters().discovery_bytes_out, server.counters().discovery_bytes_in);
}

TEST_F(Discovery, ChecksumModeOnBothSides) {
  HostConfig sc = server_config();
  sc.checksum = true;
  HostCore s(sc);
  s.set_discovery_info(bytes_of("crc"));
  HostConfig cc;
  cc.checksum = true;
  HostCore c(cc);
  ASSERT_NE(c.discover(now_us, server_ep, 16), 0u);
  std::vector<Wire> pings = drain(c);
  ASSERT_EQ(pings.size(), 1u);
  s.on_datagram(now_us, client_ep, pings[0].bytes);
  std::vector<Wire> pongs = drain(s);
  ASSERT_EQ(pongs.size(), 1u);
  c.on_datagram(now_us, server_ep, pongs[0].bytes);
  DiscoveryAnswer a;
  ASSERT_TRUE(c.poll_discovery(a));
  EXPECT_EQ(a.info.size(), 3u);
  // A corrupted ping fails its CRC and is not answered.
  pings[0].bytes.back() ^= std::byte{1};
  s.on_datagram(now_us, client_ep, pings[0].bytes);
  EXPECT_TRUE(drain(s).empty());
  EXPECT_EQ(s.counters().drops[Drop::bad_checksum], 1u);
}

TEST_F(Discovery, OffByDefaultAndMalformedPingsAreCountedAndUnanswered) {
  HostCore quiet{HostConfig{}};
  quiet.on_datagram(now_us, client_ep, ping(64));
  EXPECT_TRUE(drain(quiet).empty());
  EXPECT_EQ(quiet.counters().drops[Drop::discovery_off], 1u);
  EXPECT_EQ(quiet.counters().discovery_refused, 1u);

  const std::byte three[3] = {};
  server.on_datagram(now_us, client_ep, raw_ext(TernExtKind::discover_ping, three));
  EXPECT_EQ(server.counters().drops[Drop::bad_discovery], 1u);
  const std::byte four[4] = {};
  std::vector<std::byte> cut = raw_ext(TernExtKind::discover_ping, four);
  cut.pop_back();  // data length past the datagram
  server.on_datagram(now_us, client_ep, cut);
  EXPECT_EQ(server.counters().drops[Drop::payload_past_datagram], 1u);
  server.on_datagram(now_us, client_ep, raw_ext(TernExtKind::mtu_probe, four));
  EXPECT_EQ(server.counters().drops[Drop::unknown_ext_kind], 1u);
  EXPECT_TRUE(drain(server).empty());
  EXPECT_EQ(server.peer_count(), 0u);
}

TEST_F(Discovery, AnswersPerAddressAndPerPrefixAreRateLimited) {
  server.set_discovery_info(bytes_of("x"));
  const std::vector<std::byte> p = ping(8);
  // One address, any port: the burst (8), then 4 a second.
  for (int i = 0; i < 50; ++i) {
    server.on_datagram(now_us, Endpoint::v4(0x0a000002, static_cast<std::uint16_t>(1000 + i)), p);
  }
  EXPECT_EQ(drain(server).size(), 8u);
  EXPECT_EQ(server.counters().discovery_rate_limited, 42u);
  now_us += 1'000'000;
  for (int i = 0; i < 50; ++i) server.on_datagram(now_us, client_ep, p);
  EXPECT_EQ(drain(server).size(), 4u);
  // One /24, many addresses: the prefix's burst (128) bounds them together.
  now_us += 60'000'000;
  for (std::uint32_t host = 0; host < 256; ++host) {
    server.on_datagram(now_us, Endpoint::v4(0x0b000000 | host, 5000), p);
  }
  EXPECT_EQ(drain(server).size(), 128u);
  EXPECT_EQ(server.counters().drops[Drop::rate_limited], server.counters().discovery_rate_limited);
}

TEST_F(Discovery, BannedAddressesGetNothing) {
  server.set_discovery_info(bytes_of("x"));
  server.ban(client_ep, now_us + 10'000'000);
  server.on_datagram(now_us, client_ep, ping(8));
  EXPECT_TRUE(drain(server).empty());
  EXPECT_EQ(server.counters().drops[Drop::banned], 1u);
  now_us += 11'000'000;
  server.on_datagram(now_us, client_ep, ping(8));
  EXPECT_EQ(drain(server).size(), 1u);
}

// Minimal pings with forged sources from everywhere, against a server with a large info:
// every answer is within its ping's size, the total out stays within the total in, and what
// waits for a flush is bounded by the queue.
TEST_F(Discovery, SpoofedFloodGetsBoundedOutput) {
  std::vector<std::byte> info(3000, std::byte{0x42});
  server.set_discovery_info(info);
  const std::vector<std::byte> p = ping(0);
  std::uint64_t out_bytes = 0, in_bytes = 0, answers = 0;
  std::uint32_t x = 12345;
  for (int round = 0; round < 40; ++round) {
    for (int i = 0; i < 2000; ++i) {
      x = x * 1664525u + 1013904223u;
      server.on_datagram(now_us, Endpoint::v4(x, static_cast<std::uint16_t>(x >> 7)), p);
      in_bytes += p.size();
    }
    std::vector<Wire> pongs = drain(server);
    EXPECT_LE(pongs.size(), 256u);  // HostConfig::discovery_queue
    for (const Wire& w : pongs) {
      EXPECT_LE(w.bytes.size(), p.size());
      out_bytes += w.bytes.size();
    }
    answers += pongs.size();
    now_us += 1'000;
  }
  EXPECT_LE(out_bytes, in_bytes);
  EXPECT_EQ(answers, server.counters().discovery_pongs_out);
  EXPECT_EQ(server.counters().discovery_pings_in, 80'000u);
  EXPECT_EQ(answers + server.counters().discovery_refused, 80'000u);
  EXPECT_GT(server.counters().drops[Drop::discovery_queue_full], 0u);
  EXPECT_EQ(server.peer_count(), 0u);
  EXPECT_EQ(server.counters().half_open, 0u);
}

// Pongs nobody asked for (forged, or for a ping long expired) never reach the application.
TEST_F(Discovery, UnsolicitedPongsAreDropped) {
  const std::byte data[8] = {std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}};
  for (int i = 0; i < 100; ++i) {
    client.on_datagram(now_us, server_ep, raw_ext(TernExtKind::discover_pong, data));
  }
  DiscoveryAnswer a;
  EXPECT_FALSE(client.poll_discovery(a));
  EXPECT_EQ(client.counters().drops[Drop::bad_discovery], 100u);
  // An answer after the ping's timeout (5 s) is not taken either.
  server.set_discovery_info(bytes_of("late"));
  ASSERT_NE(client.discover(now_us, server_ep, 8), 0u);
  for (const Wire& w : drain(client)) server.on_datagram(now_us, client_ep, w.bytes);
  std::vector<Wire> pongs = drain(server);
  ASSERT_EQ(pongs.size(), 1u);
  now_us += 6'000'000;
  client.on_datagram(now_us, server_ep, pongs[0].bytes);
  EXPECT_FALSE(client.poll_discovery(a));
}

}  // namespace
}  // namespace tern::proto
