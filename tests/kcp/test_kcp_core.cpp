// KcpCore on simulated time: two cores joined by a lossy, reordering, duplicating link, and
// hand-built datagrams for what the core must refuse.
#include "kcp/fec.hpp"
#include "kcp/kcp_core.hpp"

#include "../protocol/support.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto::kcp;

struct InFlight {
  std::uint64_t at_us;
  int to;  // 0 client, 1 server
  Endpoint from;
  std::vector<std::byte> bytes;
};

// Link impairments are per datagram, from one seeded generator: the run is deterministic.
struct Link {
  double loss = 0;
  double dup = 0;
  std::uint32_t base_delay_us = 5000;
  std::uint32_t jitter_us = 0;  // reorders when larger than the gap between datagrams
};

struct Pair {
  explicit Pair(KcpConfig c = {}, KcpConfig s = {}, Link l = {}, std::uint64_t seed = 1)
      : client(c), server(s), link(l), rng(seed) {}

  KcpCore client;
  KcpCore server;
  Link link;
  std::mt19937_64 rng;
  std::uint64_t now_us = 1'000'000;
  std::vector<InFlight> wire;
  std::vector<KcpDatagram> batch = std::vector<KcpDatagram>(16);
  const Endpoint client_addr = Endpoint::v4(0x0a000001, 4000);
  const Endpoint server_addr = Endpoint::v4(0x0a000002, 5000);
  std::vector<Event> client_events, server_events;

  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng); }

  void transmit(KcpCore& core, int to, const Endpoint& from) {
    for (;;) {
      const std::size_t n = core.flush(now_us, batch);
      for (std::size_t i = 0; i < n; ++i) {
        const auto v = batch[i].view();
        const int copies = uniform() < link.loss ? 0 : (uniform() < link.dup ? 2 : 1);
        for (int k = 0; k < copies; ++k) {
          const std::uint64_t jitter = link.jitter_us != 0 ? rng() % link.jitter_us : 0;
          wire.push_back({now_us + link.base_delay_us + jitter, to, from,
                          std::vector<std::byte>(v.begin(), v.end())});
        }
      }
      if (n < batch.size()) break;
    }
  }

  // One millisecond of simulated time.
  void step() {
    now_us += 1000;
    std::stable_sort(wire.begin(), wire.end(),
                     [](const InFlight& a, const InFlight& b) { return a.at_us < b.at_us; });
    std::size_t i = 0;
    for (; i < wire.size() && wire[i].at_us <= now_us; ++i) {
      KcpCore& core = wire[i].to == 0 ? client : server;
      core.on_datagram(now_us, wire[i].from, wire[i].bytes);
    }
    wire.erase(wire.begin(), wire.begin() + static_cast<std::ptrdiff_t>(i));
    Event ev;
    while (client.poll_event(ev)) client_events.push_back(std::move(ev));
    while (server.poll_event(ev)) server_events.push_back(std::move(ev));
    transmit(client, 1, client_addr);
    transmit(server, 0, server_addr);
  }

  template <class F>
  bool run_until(F&& done, int max_ms) {
    for (int i = 0; i < max_ms; ++i) {
      if (done()) return true;
      step();
    }
    return done();
  }
};

std::vector<std::byte> message(std::uint32_t index, std::size_t size) {
  std::vector<std::byte> m(size);
  for (std::size_t i = 0; i < size; ++i) m[i] = std::byte((index * 131 + i * 7) & 0xff);
  if (size >= 4) std::memcpy(m.data(), &index, 4);
  return m;
}

std::vector<std::vector<std::byte>> received(const std::vector<Event>& events) {
  std::vector<std::vector<std::byte>> out;
  for (const Event& e : events) {
    if (e.type != EventType::receive) continue;
    auto p = e.payload();
    out.emplace_back(p.begin(), p.end());
  }
  return out;
}

// Messages of 0 B .. 3 MSS, fragments included, arrive exactly once and in order through 15%
// loss, 5% duplication and reordering, both ways.
void exact_delivery(int nodelay, bool nc) {
  KcpConfig cfg;
  cfg.nodelay = nodelay;
  cfg.no_cwnd = nc;
  Link link{0.15, 0.05, 5000, 8000};
  Pair p(cfg, cfg, link, tern::test::test_seed(0x6b6370 + nodelay * 2 + nc));
  const PeerHandle c = p.client.connect(p.now_us, p.server_addr, 0x12345678);
  ASSERT_TRUE(c.valid());
  constexpr std::uint32_t kMessages = 600;
  std::vector<std::vector<std::byte>> sent;
  std::uint32_t next = 0;
  const bool ok = p.run_until(
      [&] {
        // Keep a bounded backlog so the queue cap never refuses.
        while (next < kMessages && next < received(p.server_events).size() + 64) {
          auto m = message(next, (next * 977) % (3 * 1376 + 5));
          if (p.client.send(c, m) != SendResult::ok) break;
          sent.push_back(std::move(m));
          ++next;
        }
        return received(p.server_events).size() == kMessages;
      },
      600'000);
  ASSERT_TRUE(ok) << "delivered " << received(p.server_events).size();
  EXPECT_EQ(received(p.server_events), sent);
  ASSERT_FALSE(p.server_events.empty());
  EXPECT_EQ(p.server_events.front().type, EventType::connect);
  EXPECT_EQ(p.server_events.front().data, 0x12345678u);
  EXPECT_GT(p.client.counters().retransmits + p.client.counters().fast_retransmits, 0u);
  EXPECT_GT(p.server.counters().drops[KcpDrop::duplicate], 0u);

  // And back: the server answers each of a few messages on the session it accepted.
  const PeerHandle s = p.server_events.front().peer;
  std::vector<std::vector<std::byte>> replies;
  for (std::uint32_t i = 0; i < 50; ++i) {
    replies.push_back(message(1000 + i, 3000));
    ASSERT_EQ(p.server.send(s, replies.back()), SendResult::ok);
  }
  ASSERT_TRUE(p.run_until([&] { return received(p.client_events).size() == 50; }, 600'000));
  EXPECT_EQ(received(p.client_events), replies);
}

TEST(KcpCore, ExactDeliveryNoDelay) { exact_delivery(1, true); }
TEST(KcpCore, ExactDeliveryNormalRtoWithCwnd) { exact_delivery(0, false); }
TEST(KcpCore, ExactDeliveryNoDelay2) { exact_delivery(2, true); }

TEST(KcpCore, StreamModeKeepsTheByteStream) {
  KcpConfig cfg;
  cfg.stream = true;
  Pair p(cfg, cfg, Link{0.1, 0.05, 3000, 4000}, tern::test::test_seed(7));
  const PeerHandle c = p.client.connect(p.now_us, p.server_addr, 99);
  std::vector<std::byte> all;
  for (std::uint32_t i = 0; i < 400; ++i) {
    auto m = message(i, 1 + (i * 37) % 500);
    ASSERT_EQ(p.client.send(c, m), SendResult::ok);
    all.insert(all.end(), m.begin(), m.end());
  }
  std::vector<std::byte> got;
  ASSERT_TRUE(p.run_until(
      [&] {
        got.clear();
        for (auto& m : received(p.server_events)) got.insert(got.end(), m.begin(), m.end());
        return got.size() >= all.size();
      },
      300'000));
  EXPECT_EQ(got, all);
  // Coalesced: far fewer segments than sends.
  EXPECT_LT(received(p.server_events).size(), 400u);
}

TEST(KcpCore, RefusesMessagesTooLargeForTheWindow) {
  KcpConfig cfg;
  cfg.rcv_wnd = 8;
  KcpCore core(cfg);
  const PeerHandle c = core.connect(0, Endpoint::v4(1, 1), 1);
  std::vector<std::byte> big(1376 * 8);
  EXPECT_EQ(core.send(c, big), SendResult::too_large);
  big.resize(1376 * 7);
  EXPECT_EQ(core.send(c, big), SendResult::ok);
}

TEST(KcpCore, DeadLinkEndsTheSession) {
  KcpConfig cfg;
  cfg.dead_link = 5;
  Pair p(cfg, cfg, Link{1.0, 0, 1000, 0}, 3);  // nothing gets through
  const PeerHandle c = p.client.connect(p.now_us, p.server_addr, 5);
  std::vector<std::byte> m(10);
  ASSERT_EQ(p.client.send(c, m), SendResult::ok);
  // The client never heard from the server, so there is no event; the session is gone.
  ASSERT_TRUE(p.run_until([&] { return p.client.session_count() == 0; }, 120'000));
  EXPECT_EQ(p.client.counters().dead_links, 1u);
  EXPECT_EQ(p.client.send(c, m), SendResult::not_connected);
}

TEST(KcpCore, IdleSessionTimesOutWithAnEvent) {
  KcpConfig cfg;
  cfg.idle_timeout_ms = 2000;
  Pair p(cfg, cfg, Link{}, 4);
  const PeerHandle c = p.client.connect(p.now_us, p.server_addr, 6);
  std::vector<std::byte> m(10);
  ASSERT_EQ(p.client.send(c, m), SendResult::ok);
  ASSERT_TRUE(p.run_until([&] { return received(p.server_events).size() == 1; }, 1000));
  p.client.disconnect(c);  // silent: the server only notices by the idle timeout
  ASSERT_TRUE(p.run_until([&] { return p.server.session_count() == 0; }, 5000));
  p.step();  // collects the event
  ASSERT_EQ(p.server_events.back().type, EventType::disconnect);
  EXPECT_EQ(p.server_events.back().reason, DisconnectReason::timeout);
  EXPECT_EQ(p.server.counters().idle_timeouts, 1u);
}

// ---- hand-built input --------------------------------------------------------------------

std::vector<std::byte> segment(std::uint32_t conv, std::uint8_t cmd, std::uint8_t frg,
                               std::uint16_t wnd, std::uint32_t ts, std::uint32_t sn,
                               std::uint32_t una, std::span<const std::byte> data,
                               std::uint32_t len_field = 0xffffffff) {
  std::vector<std::byte> b(24 + data.size());
  auto w32 = [&](std::size_t o, std::uint32_t v) { std::memcpy(&b[o], &v, 4); };
  w32(0, conv);
  b[4] = std::byte(cmd);
  b[5] = std::byte(frg);
  std::memcpy(&b[6], &wnd, 2);
  w32(8, ts);
  w32(12, sn);
  w32(16, una);
  w32(20, len_field == 0xffffffff ? static_cast<std::uint32_t>(data.size()) : len_field);
  if (!data.empty()) std::memcpy(&b[24], data.data(), data.size());
  return b;
}

std::vector<std::byte> concat(std::vector<std::byte> a, const std::vector<std::byte>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(KcpCore, MalformedInputIsCountedAndDropped) {
  KcpCore core(KcpConfig{});
  const Endpoint from = Endpoint::v4(0x7f000001, 1234);
  const std::vector<std::byte> hello(5, std::byte{1});
  auto feed = [&](const std::vector<std::byte>& d) { core.on_datagram(1000, from, d); };
  const auto& drops = core.counters().drops;

  feed(std::vector<std::byte>(10));
  EXPECT_EQ(drops[KcpDrop::truncated_segment], 1u);
  feed(segment(1, 99, 0, 32, 0, 0, 0, hello));
  EXPECT_EQ(drops[KcpDrop::bad_command], 1u);
  feed(segment(1, kCmdPush, 0, 32, 0, 0, 0, hello, 0x7fffffff));
  EXPECT_EQ(drops[KcpDrop::giant_length], 1u);
  feed(segment(1, kCmdPush, 0, 32, 0, 0, 0, hello, 100));
  EXPECT_EQ(drops[KcpDrop::length_past_datagram], 1u);
  feed(concat(segment(1, kCmdPush, 0, 32, 0, 0, 0, hello),
              segment(2, kCmdPush, 0, 32, 0, 1, 0, hello)));
  EXPECT_EQ(drops[KcpDrop::wrong_conv], 1u);
  feed(segment(1, kCmdAck, 0, 32, 0, 0, 0, {}));
  EXPECT_EQ(drops[KcpDrop::unknown_session], 1u);
  feed(segment(1, kCmdPush, 0, 32, 0, 5000, 0, hello));  // cannot start a session
  EXPECT_EQ(drops[KcpDrop::unknown_session], 2u);
  feed(concat(segment(1, kCmdPush, 0, 32, 0, 0, 0, hello), std::vector<std::byte>(7)));
  EXPECT_EQ(drops[KcpDrop::truncated_segment], 2u);
  std::vector<std::byte> parity(40);
  parity[4] = std::byte{0xf2};
  feed(parity);  // seqid 0 is a data shard's index with 10 + 3 shards
  EXPECT_EQ(drops[KcpDrop::fec_mismatch], 1u);
  parity[0] = std::byte{10};
  feed(parity);  // a parity shard: kept for recovery, not a drop
  EXPECT_EQ(drops[KcpDrop::fec_mismatch], 1u);
  EXPECT_EQ(core.counters().fec_parity_in, 2u);
  std::vector<std::byte> short_fec(30);
  short_fec[4] = std::byte{0xf1};
  short_fec[6] = std::byte{200};
  feed(short_fec);
  EXPECT_EQ(drops[KcpDrop::fec_truncated], 1u);
  EXPECT_EQ(core.session_count(), 0u);

  // A valid first PUSH opens a session; then window abuse on it.
  feed(segment(1, kCmdPush, 0, 32, 0, 0, 0, hello));
  EXPECT_EQ(core.session_count(), 1u);
  feed(segment(1, kCmdPush, 0, 32, 0, 1'000'000, 0, hello));
  EXPECT_EQ(drops[KcpDrop::out_of_window], 1u);
  feed(segment(1, kCmdPush, 0, 32, 0, 0, 0, hello));
  EXPECT_EQ(drops[KcpDrop::duplicate], 1u);
  feed(segment(1, kCmdAck, 0, 32, 0, 77, 0, {}));  // nothing was sent
  EXPECT_EQ(drops[KcpDrop::unexpected_ack], 1u);
  feed(segment(1, kCmdPush, 0, 32, 0, 1, 500, hello));  // una past anything sent
  EXPECT_EQ(drops[KcpDrop::unexpected_ack], 2u);
  feed(segment(1, kCmdPush, 200, 32, 0, 2, 0, hello));  // frg past the receive window
  EXPECT_EQ(drops[KcpDrop::bad_fragment], 1u);

  Event ev;
  std::vector<Event> events;
  while (core.poll_event(ev)) events.push_back(std::move(ev));
  ASSERT_EQ(events.size(), 2u);  // connect, then the one message
  EXPECT_EQ(events[0].type, EventType::connect);
  EXPECT_EQ(events[1].type, EventType::receive);
  EXPECT_EQ(events[1].payload().size(), hello.size());
}

// Fragments of a message are acknowledged as they arrive; a sender that then breaks the
// countdown leaves them unable to complete. The session ends with a reason instead of going
// on with a hole in its stream, and its next segments do not reopen it.
TEST(KcpCore, ABrokenFragmentCountdownEndsTheSessionWithAReason) {
  KcpCore core(KcpConfig{});
  const Endpoint from = Endpoint::v4(0x7f000001, 1234);
  const std::vector<std::byte> whole(5, std::byte{1});
  const std::vector<std::byte> part(3, std::byte{2});
  auto feed = [&](const std::vector<std::byte>& d) { core.on_datagram(1000, from, d); };
  const auto& drops = core.counters().drops;

  feed(segment(7, kCmdPush, 0, 32, 0, 0, 0, whole));  // a whole message
  feed(segment(7, kCmdPush, 2, 32, 0, 1, 0, part));   // first of three
  feed(segment(7, kCmdPush, 1, 32, 0, 2, 0, part));   // second of three
  EXPECT_EQ(core.session_count(), 1u);
  EXPECT_EQ(drops[KcpDrop::bad_fragment], 0u);
  feed(segment(7, kCmdPush, 1, 32, 0, 3, 0, part));  // "second" again: the count is broken
  EXPECT_EQ(drops[KcpDrop::bad_fragment], 1u);
  EXPECT_EQ(core.counters().protocol_errors, 1u);
  EXPECT_EQ(core.session_count(), 0u);

  Event ev;
  std::vector<Event> events;
  while (core.poll_event(ev)) events.push_back(std::move(ev));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].type, EventType::connect);
  EXPECT_EQ(events[1].type, EventType::receive);
  EXPECT_EQ(events[1].payload().size(), whole.size());
  EXPECT_EQ(events[2].type, EventType::disconnect);
  EXPECT_EQ(events[2].reason, DisconnectReason::protocol_error);

  // The sender carries on (it never hears of the end); it opens no new session.
  feed(segment(7, kCmdPush, 0, 32, 0, 4, 0, whole));
  feed(segment(7, kCmdPush, 0, 32, 0, 0, 0, whole));
  EXPECT_EQ(core.session_count(), 0u);
  EXPECT_EQ(drops[KcpDrop::refused], 2u);
  EXPECT_FALSE(core.poll_event(ev));
}

TEST(KcpCore, AcceptsFecDataShards) {
  KcpCore core(KcpConfig{});
  const Endpoint from = Endpoint::v4(0x7f000001, 1234);
  const std::vector<std::byte> hello(5, std::byte{9});
  auto seg = segment(42, kCmdPush, 0, 32, 0, 0, 0, hello);
  std::vector<std::byte> d(8);
  d[4] = std::byte{0xf1};
  const std::uint16_t size = static_cast<std::uint16_t>(seg.size() + 2);
  std::memcpy(&d[6], &size, 2);
  d = concat(d, seg);
  d.resize(d.size() + 13);  // padding after the shard's size is not KCP data
  core.on_datagram(1000, from, d);
  Event ev;
  ASSERT_TRUE(core.poll_event(ev));
  EXPECT_EQ(ev.type, EventType::connect);
  ASSERT_TRUE(core.poll_event(ev));
  EXPECT_EQ(ev.type, EventType::receive);
  EXPECT_EQ(ev.payload().size(), 5u);
  EXPECT_EQ(core.counters().drops.total(), 0u);
  KcpSessionStats st;
  ASSERT_TRUE(core.session_stats(ev.peer, st));
  EXPECT_TRUE(st.fec_seen);
}

TEST(KcpCore, SessionLimitAndSessionsPerConv) {
  KcpConfig cfg;
  cfg.session_limit = 3;
  KcpCore core(cfg);
  const Endpoint from = Endpoint::v4(0x7f000001, 1234);
  const std::vector<std::byte> hello(1, std::byte{1});
  for (std::uint32_t conv = 1; conv <= 4; ++conv)
    core.on_datagram(1000, from, segment(conv, kCmdPush, 0, 32, 0, 0, 0, hello));
  EXPECT_EQ(core.session_count(), 3u);
  EXPECT_EQ(core.counters().drops[KcpDrop::session_limit], 1u);
}

// A receiver whose window is closed is probed, and sending resumes when it opens.
TEST(KcpCore, ZeroWindowIsProbed) {
  KcpCore core(KcpConfig{});
  const Endpoint server = Endpoint::v4(0x7f000001, 9);
  const PeerHandle c = core.connect(0, server, 7);
  std::vector<KcpDatagram> out(4);
  // The peer says its window is shut.
  core.on_datagram(1000, server, segment(7, kCmdWins, 0, 0, 0, 0, 0, {}));
  std::vector<std::byte> m(10);
  ASSERT_EQ(core.send(c, m), SendResult::ok);
  std::uint64_t wasks = 0, pushes = 0;
  for (std::uint64_t t = 2000; t < 20'000'000; t += 10'000) {
    const std::size_t n = core.flush(t, out);
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = out[i].view();
      for (std::size_t o = 0; o + 24 <= v.size(); o += 24 + 0) {
        const auto cmd = static_cast<std::uint8_t>(v[o + 4]);
        std::uint32_t len;
        std::memcpy(&len, &v[o + 20], 4);
        wasks += cmd == kCmdWask;
        pushes += cmd == kCmdPush;
        o += len;
      }
    }
    if (wasks != 0) break;
  }
  EXPECT_EQ(pushes, 0u);
  EXPECT_EQ(wasks, 1u);
  EXPECT_EQ(core.counters().window_probes, 1u);
  // The window opens: the message goes out.
  core.on_datagram(20'000'000, server, segment(7, kCmdWins, 0, 32, 0, 0, 0, {}));
  const std::size_t n = core.flush(20'000'000, out);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(static_cast<std::uint8_t>(out[0].view()[4]), kCmdPush);
}

}  // namespace

namespace {

// A peer that shuts its window and goes quiet is probed until the idle timeout, not for ever
// (found by fuzz_kcp).
TEST(KcpCore, ShutWindowAndSilenceTimesOut) {
  KcpConfig cfg;
  cfg.idle_timeout_ms = 3000;
  KcpCore core(cfg);
  const Endpoint peer = Endpoint::v4(0x7f000001, 9);
  const std::vector<std::byte> hello(3, std::byte{1});
  core.on_datagram(1000, peer, segment(7, kCmdPush, 0, 0, 0, 0, 0, hello));  // wnd 0
  Event ev;
  ASSERT_TRUE(core.poll_event(ev));
  const PeerHandle s = ev.peer;
  ASSERT_EQ(core.send(s, hello), SendResult::ok);
  std::vector<KcpDatagram> out(4);
  for (std::uint64_t t = 2000; t < 60'000'000 && core.session_count() != 0; t += 10'000)
    core.flush(t, out);
  EXPECT_EQ(core.session_count(), 0u);
  EXPECT_EQ(core.counters().idle_timeouts, 1u);
  EXPECT_EQ(core.segments_held(), 0u);
}

}  // namespace

namespace {

// Two convs from one address whose keys fold together: a PUSH of sn 0 takes over (the old
// session ends with reason replaced), anything else is refused as wrong_conv.
TEST(KcpCore, CollidingConvReplacesOnlyWithAFreshStart) {
  KcpCore core(KcpConfig{});
  const Endpoint from = Endpoint::v4(0x7f000001, 1234);
  const std::vector<std::byte> hello(2, std::byte{5});
  core.on_datagram(1000, from, segment(0x00010000, kCmdPush, 0, 32, 0, 0, 0, hello));
  core.on_datagram(1000, from, segment(0x00000001, kCmdPush, 0, 32, 0, 5, 0, hello));
  EXPECT_EQ(core.counters().drops[KcpDrop::wrong_conv], 1u);
  core.on_datagram(1000, from, segment(0x00000001, kCmdPush, 0, 32, 0, 0, 0, hello));
  EXPECT_EQ(core.session_count(), 1u);
  std::vector<Event> events;
  Event ev;
  while (core.poll_event(ev)) events.push_back(std::move(ev));
  ASSERT_EQ(events.size(), 5u);  // connect, receive; disconnect (replaced); connect, receive
  EXPECT_EQ(events[2].type, EventType::disconnect);
  EXPECT_EQ(events[2].reason, DisconnectReason::replaced);
  EXPECT_EQ(events[2].data, 0x00010000u);
  EXPECT_EQ(events[3].type, EventType::connect);
  EXPECT_EQ(events[3].data, 0x00000001u);
}

// A window probe is answered with the receive window (WINS), at the next flush.
TEST(KcpCore, WindowProbeIsAnswered) {
  KcpCore core(KcpConfig{});
  const Endpoint from = Endpoint::v4(0x7f000001, 1234);
  const std::vector<std::byte> hello(2, std::byte{5});
  core.on_datagram(1000, from, segment(3, kCmdPush, 0, 32, 0, 0, 0, hello));
  std::vector<KcpDatagram> out(4);
  core.flush(2000, out);
  core.on_datagram(3000, from, segment(3, kCmdWask, 0, 32, 0, 0, 0, {}));
  ASSERT_EQ(core.flush(3000, out), 1u);
  const auto v = out[0].view();
  ASSERT_EQ(v.size(), 24u);
  EXPECT_EQ(static_cast<std::uint8_t>(v[4]), kCmdWins);
  std::uint16_t wnd;
  std::memcpy(&wnd, &v[6], 2);
  EXPECT_EQ(wnd, 128u);  // nothing held: the whole window
  std::uint32_t una;
  std::memcpy(&una, &v[16], 4);
  EXPECT_EQ(una, 1u);
}

}  // namespace

namespace {

// Lost data shards come back from parity: a group of 10 data shards coded with the encoding
// matrix (kcp-go's, as tests/interop checks against the real thing), 3 data shards withheld.
TEST(KcpCore, FecRebuildsLostDataShards) {
  KcpCore core(KcpConfig{});
  const Endpoint from = Endpoint::v4(0x7f000001, 1234);
  GaloisField gf;
  const auto m = rs_encoding_matrix(gf, 10, 3);
  std::vector<std::vector<std::byte>> coded(10);  // from the size field on
  std::size_t width = 0;
  for (std::uint32_t i = 0; i < 10; ++i) {
    const std::vector<std::byte> body(10 + i * 13, std::byte(i));
    auto seg = segment(77, kCmdPush, 0, 32, 0, i, 0, body);
    const auto size = static_cast<std::uint16_t>(seg.size() + 2);
    coded[i].resize(2);
    std::memcpy(coded[i].data(), &size, 2);
    coded[i].insert(coded[i].end(), seg.begin(), seg.end());
    width = std::max(width, coded[i].size());
  }
  auto shard = [&](std::uint32_t seqid, std::uint16_t type, const std::vector<std::byte>& c) {
    std::vector<std::byte> d(6);
    std::memcpy(d.data(), &seqid, 4);
    std::memcpy(d.data() + 4, &type, 2);
    d.insert(d.end(), c.begin(), c.end());
    return d;
  };
  for (std::uint32_t i = 0; i < 10; ++i)
    if (i != 2 && i != 5 && i != 9) core.on_datagram(1000, from, shard(i, kFecData, coded[i]));
  for (std::uint32_t p = 0; p < 3; ++p) {
    std::vector<std::byte> par(width, std::byte{0});
    for (std::uint32_t k = 0; k < 10; ++k)
      for (std::size_t b = 0; b < coded[k].size(); ++b)
        par[b] ^= std::byte(gf.mul(m[10 + p][k], static_cast<std::uint8_t>(coded[k][b])));
    core.on_datagram(1000, from, shard(10 + p, kFecParity, par));
  }
  EXPECT_EQ(core.counters().fec_recovered, 3u);
  std::vector<Event> events;
  Event ev;
  while (core.poll_event(ev)) events.push_back(std::move(ev));
  std::vector<std::size_t> sizes;
  for (const Event& e : events)
    if (e.type == EventType::receive) sizes.push_back(e.payload().size());
  ASSERT_EQ(sizes.size(), 10u);  // all ten, in order
  for (std::size_t i = 0; i < 10; ++i) EXPECT_EQ(sizes[i], 10 + i * 13);
  EXPECT_EQ(core.counters().drops.total(), 0u);
}

}  // namespace

namespace {

// A session the server ended stays ended: what its client keeps sending opens no new session
// and is not acknowledged, until refused_ms has passed.
TEST(KcpCore, DisconnectedSessionStaysRefused) {
  KcpConfig client_cfg;
  client_cfg.dead_link = 8;
  KcpConfig server_cfg;
  server_cfg.refused_ms = 60'000;
  Pair p(client_cfg, server_cfg, Link{}, 11);
  const PeerHandle c = p.client.connect(p.now_us, p.server_addr, 0x51);
  ASSERT_EQ(p.client.send(c, message(0, 40)), SendResult::ok);
  ASSERT_TRUE(p.run_until([&] { return received(p.server_events).size() == 1; }, 1000));
  const PeerHandle s = p.server_events.front().peer;
  p.server.disconnect(s);
  const std::uint64_t acks = p.server.counters().acks_out;
  const std::uint64_t opened = p.server.counters().sessions_opened;
  for (std::uint32_t i = 1; i <= 5; ++i)
    ASSERT_EQ(p.client.send(c, message(i, 40)), SendResult::ok);
  // Unanswered, the client gives up by its dead link.
  ASSERT_TRUE(p.run_until([&] { return p.client.session_count() == 0; }, 120'000));
  EXPECT_EQ(p.server.counters().acks_out, acks);
  EXPECT_EQ(p.server.counters().sessions_opened, opened);
  EXPECT_EQ(p.server.session_count(), 0u);
  EXPECT_EQ(received(p.server_events).size(), 1u);
  EXPECT_GE(p.server.counters().drops[KcpDrop::refused], client_cfg.dead_link - 1);
  EXPECT_EQ(p.server.counters().drops[KcpDrop::unknown_session], 0u);
}

TEST(KcpCore, RefusedSessionsExpireAndAreBounded) {
  KcpConfig cfg;
  cfg.refused_ms = 5000;
  cfg.refused_limit = 2;
  KcpCore core(cfg);
  const std::vector<std::byte> hello(3, std::byte{1});
  auto from = [](std::uint16_t port) { return Endpoint::v4(0x7f000001, port); };
  auto open = [&](std::uint64_t t, std::uint16_t port) {
    core.on_datagram(t, from(port), segment(9, kCmdPush, 0, 32, 0, 0, 0, hello));
    Event ev;
    PeerHandle h;
    while (core.poll_event(ev))
      if (ev.type == EventType::connect) h = ev.peer;
    return h;
  };
  for (std::uint16_t port = 1; port <= 3; ++port) {
    const PeerHandle h = open(1000, port);
    ASSERT_TRUE(h.valid());
    core.disconnect(h);
  }
  // Port 1's was forgotten to make room (refused_limit 2); 2 and 3 are refused.
  EXPECT_TRUE(open(2000, 1).valid());
  EXPECT_FALSE(open(2000, 2).valid());
  EXPECT_FALSE(open(2000, 3).valid());
  EXPECT_EQ(core.counters().drops[KcpDrop::refused], 2u);
  // Past refused_ms they may start again.
  EXPECT_TRUE(open(7'000'000, 2).valid());
}

// hold(): the window the session advertises shuts, its sender stops, and on release every
// message arrives, in order, none lost.
TEST(KcpCore, HeldSessionShutsItsWindowAndDeliversOnRelease) {
  KcpConfig cfg;
  cfg.rcv_wnd = 64;
  cfg.snd_wnd = 64;
  Pair p(cfg, cfg, Link{0.05, 0, 5000, 2000}, tern::test::test_seed(12));
  const PeerHandle c = p.client.connect(p.now_us, p.server_addr, 0x77);
  std::vector<std::vector<std::byte>> sent;
  sent.push_back(message(0, 100));
  ASSERT_EQ(p.client.send(c, sent.back()), SendResult::ok);
  ASSERT_TRUE(p.run_until([&] { return received(p.server_events).size() == 1; }, 2000));
  const PeerHandle s = p.server_events.front().peer;
  p.server.hold(s, true);
  EXPECT_TRUE(p.server.held(s));
  for (std::uint32_t i = 1; i < 400; ++i) {
    sent.push_back(message(i, 1 + (i * 389) % 3000));  // up to 3 fragments
    ASSERT_EQ(p.client.send(c, sent.back()), SendResult::ok);
  }
  KcpSessionStats ss, cs;
  ASSERT_TRUE(p.run_until(
      [&] { return p.client.session_stats(c, cs) && cs.remote_wnd == 0 && cs.in_flight == 0; },
      20'000));
  ASSERT_TRUE(p.server.session_stats(s, ss));
  EXPECT_EQ(ss.recv_window, 0u);
  EXPECT_TRUE(ss.held);
  EXPECT_GT(ss.waiting, 0u);
  EXPECT_GT(cs.queued, 0u);  // the rest waits at the sender
  EXPECT_EQ(received(p.server_events).size(), 1u);
  // Held a while longer: the sender only probes.
  for (int i = 0; i < 3000; ++i) p.step();
  EXPECT_EQ(received(p.server_events).size(), 1u);
  p.server.hold(s, false);
  ASSERT_TRUE(p.run_until([&] { return received(p.server_events).size() == sent.size(); }, 120'000))
      << received(p.server_events).size();
  EXPECT_EQ(received(p.server_events), sent);
  EXPECT_EQ(p.server.counters().drops[KcpDrop::bad_fragment], 0u);
  EXPECT_EQ(p.server.counters().holds, 1u);
}

// intake_rate / intake_bandwidth: a sender over them gets everything through, in order, later.
void rate_limited(std::uint32_t rate, std::uint32_t bandwidth) {
  KcpConfig client_cfg;
  client_cfg.snd_wnd = 32;  // before it hears from the server it assumes a window this large
  KcpConfig server_cfg;
  server_cfg.rcv_wnd = 32;
  server_cfg.intake_rate = rate;
  server_cfg.intake_bandwidth = bandwidth;
  Pair p(client_cfg, server_cfg, Link{0.02, 0, 3000, 1000}, tern::test::test_seed(13));
  const PeerHandle c = p.client.connect(p.now_us, p.server_addr, 0x78);
  std::vector<std::vector<std::byte>> sent;
  for (std::uint32_t i = 0; i < 300; ++i) {
    sent.push_back(message(i, 100));
    ASSERT_EQ(p.client.send(c, sent.back()), SendResult::ok);
  }
  // One simulated second: a second's worth of the bucket and a refill at most.
  for (int i = 0; i < 1000; ++i) p.step();
  EXPECT_LE(received(p.server_events).size(),
            2 * std::size_t{rate != 0 ? rate : bandwidth / 100} + 1);
  EXPECT_GT(p.server.counters().intake_waits, 0u);
  ASSERT_TRUE(p.run_until([&] { return received(p.server_events).size() == sent.size(); }, 300'000))
      << received(p.server_events).size();
  EXPECT_EQ(received(p.server_events), sent);
  // The window did the holding back: the sender never overran it.
  EXPECT_EQ(p.server.counters().drops[KcpDrop::out_of_window], 0u);
}

TEST(KcpCore, IntakeRateDelaysButDeliversInOrder) { rate_limited(50, 0); }
TEST(KcpCore, IntakeBandwidthDelaysButDeliversInOrder) { rate_limited(0, 5000); }

// max_queued_bytes: send() refuses past it.
TEST(KcpCore, MaxQueuedBytesRefusesSends) {
  KcpConfig cfg;
  cfg.max_queued_bytes = 1000;
  KcpCore core(cfg);
  const PeerHandle c = core.connect(0, Endpoint::v4(1, 1), 1);
  std::vector<std::byte> m(400);
  EXPECT_EQ(core.send(c, m), SendResult::ok);
  EXPECT_EQ(core.send(c, m), SendResult::ok);
  EXPECT_EQ(core.send(c, m), SendResult::queue_full);
}

}  // namespace
