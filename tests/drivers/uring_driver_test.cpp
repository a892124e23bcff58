// UringDriver over loopback against a socket-driver peer: real kernel sockets and a real ring,
// so loops are bounded by wall-clock deadlines but nothing asserts on how long anything took.
#include "uring_driver.hpp"
#include "socket_driver.hpp"

#include "driver_test_support.hpp"

#include <liburing.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tern::drv {
namespace {

using namespace tern::drv::test;

UringOptions uring_options(std::string_view bind) {
  UringOptions o;
  o.socket.bind = endpoint(bind);
  return o;
}

std::unique_ptr<rt::Driver> open_uring(const UringOptions& o) {
  std::string error;
  auto d = open_uring_driver(o, error);
  EXPECT_NE(d, nullptr) << "open uring " << o.socket.bind.to_string() << ": " << error;
  return d;
}

UringDriver& as_uring(rt::Driver& d) { return dynamic_cast<UringDriver&>(d); }

std::unique_ptr<SocketDriver> open_socket(std::string_view bind) {
  SocketOptions o;
  o.bind = endpoint(bind);
  o.receive_buffer = 16 << 20;
  std::string error;
  auto d = open_socket_driver(o, error);
  EXPECT_NE(d, nullptr) << "open socket " << bind << ": " << error;
  return d;
}
// Receives until nothing has arrived for `quiet`.
std::vector<Received> drain(rt::Driver& d, Clock::duration quiet) {
  std::vector<Received> got;
  std::vector<rt::RxFrame> frames(64);
  auto last = Clock::now();
  while (Clock::now() - last < quiet) {
    const std::size_t n = d.rx_burst(frames);
    for (std::size_t i = 0; i < n; ++i) got.push_back({frames[i].from, as_string(frames[i].bytes)});
    if (n > 0) {
      last = Clock::now();
    } else {
      d.wait(5000);
    }
  }
  return got;
}

// "seq:<n>:" followed by filler derived from n, so a receiver can check every byte.
std::string numbered(std::uint32_t seq, std::size_t size) {
  std::string s = "seq:" + std::to_string(seq) + ":";
  while (s.size() < size) s.push_back(static_cast<char>('a' + (seq + s.size()) % 26));
  return s;
}

bool parse_numbered(const std::string& s, std::uint32_t& seq) {
  if (s.rfind("seq:", 0) != 0) return false;
  const auto colon = s.find(':', 4);
  if (colon == std::string::npos) return false;
  seq = static_cast<std::uint32_t>(std::stoul(s.substr(4, colon - 4)));
  return s == numbered(seq, s.size());
}

void exchange(std::string_view uring_bind, std::string_view socket_bind,
              std::string_view uring_seen_at) {
  auto u = open_uring(uring_options(uring_bind));
  auto p = open_socket(socket_bind);
  ASSERT_TRUE(u && p);
  EXPECT_EQ(u->name(), "uring");

  const Endpoint u_addr = at(uring_seen_at, u->local_endpoint());
  send(*p, u_addr, "hello uring");
  auto got = receive(*u, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "hello uring");
  EXPECT_EQ(got[0].from, p->local_endpoint());

  send(*u, got[0].from, "hello socket");
  auto back = receive(*p, 1);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].payload, "hello socket");
  EXPECT_EQ(back[0].from.port, u->local_endpoint().port);

  const rt::DriverStats st = u->stats();
  EXPECT_EQ(st.rx_datagrams, 1u);
  EXPECT_EQ(st.tx_datagrams, 1u);
  EXPECT_EQ(st.rx_bytes, 11u);
  EXPECT_EQ(st.tx_bytes, 12u);
  EXPECT_EQ(st.rx_errors + st.tx_errors + st.rx_truncated, 0u);
}

TEST(UringDriver, Ipv4LoopbackBothDirections) {
  exchange("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0");
}

TEST(UringDriver, Ipv6LoopbackBothDirections) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback in this environment";
  exchange("[::1]:0", "[::1]:0", "[::1]:0");
}

TEST(UringDriver, DualStackListenerServesIpv4Peer) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback in this environment";
  auto u = open_uring(uring_options("*:0"));
  ASSERT_TRUE(u);
  EXPECT_TRUE(u->caps().dual_stack);
  exchange("*:0", "127.0.0.1:0", "127.0.0.1:0");
}

TEST(UringDriver, ReusePortSharesOnePort) {
  UringOptions o = uring_options("127.0.0.1:0");
  o.socket.reuse_port = true;
  auto a = open_uring(o);
  ASSERT_TRUE(a);
  o.socket.bind = a->local_endpoint();
  auto b = open_uring(o);
  ASSERT_TRUE(b);
  EXPECT_EQ(a->local_endpoint(), b->local_endpoint());
}

TEST(UringDriver, BurstOf5000ArrivesComplete) {
  constexpr std::uint32_t kCount = 5000;
  constexpr std::size_t kChunk = 250;
  auto u = open_uring(uring_options("127.0.0.1:0"));
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);
  const Endpoint to = u->local_endpoint();

  std::vector<std::string> payloads;
  payloads.reserve(kCount);
  for (std::uint32_t i = 0; i < kCount; ++i) payloads.push_back(numbered(i, 32 + i % 900));

  std::vector<bool> seen(kCount, false);
  std::size_t unique = 0;
  std::size_t bad = 0;
  std::vector<rt::RxFrame> frames(128);
  auto take = [&] {
    const std::size_t n = u->rx_burst(frames);
    for (std::size_t i = 0; i < n; ++i) {
      std::uint32_t seq = 0;
      const std::string s = as_string(frames[i].bytes);
      if (!parse_numbered(s, seq) || seq >= kCount || seen[seq] ||
          frames[i].from != p->local_endpoint()) {
        ++bad;
        continue;
      }
      seen[seq] = true;
      ++unique;
    }
    return n;
  };

  // Chunks keep the test about the driver, not about how much the kernel queues unread.
  for (std::size_t off = 0; off < kCount; off += kChunk) {
    std::vector<rt::TxFrame> tx;
    for (std::size_t i = off; i < off + kChunk; ++i) tx.push_back({to, as_bytes(payloads[i])});
    EXPECT_EQ(p->tx_burst(tx), kChunk);
    while (take() > 0) {
    }
  }
  const auto deadline = Clock::now() + kDeadline;
  while (unique < kCount && Clock::now() < deadline) {
    if (take() == 0) u->wait(20000);
  }
  EXPECT_EQ(unique, kCount);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(u->stats().rx_datagrams, kCount);
}

TEST(UringDriver, BatchedTransmitOf5000) {
  constexpr std::uint32_t kCount = 5000;
  constexpr std::size_t kChunk = 500;  // several submits per tx_burst (burst is 64)
  auto u = open_uring(uring_options("127.0.0.1:0"));
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);

  std::vector<std::string> payloads;
  for (std::uint32_t i = 0; i < kCount; ++i) payloads.push_back(numbered(i, 64 + i % 500));
  std::vector<bool> seen(kCount, false);
  std::size_t unique = 0;
  for (std::size_t off = 0; off < kCount; off += kChunk) {
    std::vector<rt::TxFrame> tx;
    for (std::size_t i = off; i < off + kChunk; ++i) {
      tx.push_back({p->local_endpoint(), as_bytes(payloads[i])});
    }
    EXPECT_EQ(u->tx_burst(tx), kChunk);
    for (const Received& r : receive(*p, kChunk)) {
      std::uint32_t seq = 0;
      ASSERT_TRUE(parse_numbered(r.payload, seq)) << r.payload.substr(0, 20);
      ASSERT_LT(seq, kCount);
      EXPECT_FALSE(seen[seq]) << seq;
      if (!seen[seq]) ++unique;
      seen[seq] = true;
    }
  }
  EXPECT_EQ(unique, kCount);
  const rt::DriverStats st = u->stats();
  EXPECT_EQ(st.tx_datagrams, kCount);
  EXPECT_EQ(st.tx_errors, 0u);
  EXPECT_EQ(st.tx_dropped, 0u);
}

TEST(UringDriver, FramesStayValidUntilNextBurst) {
  auto u = open_uring(uring_options("127.0.0.1:0"));
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);
  for (std::uint32_t i = 0; i < 16; ++i) send(*p, u->local_endpoint(), numbered(i, 100));
  std::vector<rt::RxFrame> frames(4);
  std::size_t n = 0;
  const auto deadline = Clock::now() + kDeadline;
  while (n == 0 && Clock::now() < deadline) {
    n = u->rx_burst(frames);
    if (n == 0) u->wait(20000);
  }
  ASSERT_GT(n, 0u);
  // Sends, waits and more arrivals must not disturb frames already handed out.
  std::vector<std::string> before;
  for (std::size_t i = 0; i < n; ++i) before.push_back(as_string(frames[i].bytes));
  send(*u, p->local_endpoint(), "ping");
  for (std::uint32_t i = 16; i < 32; ++i) send(*p, u->local_endpoint(), numbered(i, 100));
  u->wait(1000);
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(as_string(frames[i].bytes), before[i]);
}

TEST(UringDriver, RecoversFromBufferRingExhaustion) {
  constexpr std::uint32_t kFlood = 200;
  UringOptions o = uring_options("127.0.0.1:0");
  o.buffer_count = 8;
  o.buffer_size = 2048;
  o.socket.receive_buffer = 16 << 20;
  auto u = open_uring(o);
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);

  for (std::uint32_t i = 0; i < kFlood; ++i) send(*p, u->local_endpoint(), numbered(i, 200));
  const auto first = drain(*u, std::chrono::milliseconds(300));
  // Datagrams lost to exhaustion would be acceptable; the 8 buffers must have cycled.
  EXPECT_GT(first.size(), 8u);
  const UringStats us = as_uring(*u).uring_stats();
  EXPECT_GT(us.rx_no_buffers, 0u);
  EXPECT_GT(us.rx_rearms, 0u);
  for (const Received& r : first) {
    std::uint32_t seq = 0;
    EXPECT_TRUE(parse_numbered(r.payload, seq));
  }

  // Reception resumes after the storm.
  for (std::uint32_t i = 1000; i < 1020; ++i) send(*p, u->local_endpoint(), numbered(i, 300));
  const auto later = receive(*u, 20);
  ASSERT_EQ(later.size(), 20u);
  for (std::size_t i = 0; i < later.size(); ++i) {
    std::uint32_t seq = 0;
    ASSERT_TRUE(parse_numbered(later[i].payload, seq));
    EXPECT_EQ(seq, 1000 + i);
  }
  EXPECT_EQ(u->stats().rx_errors, 0u);
}

// A CQ far smaller than the buffer ring: completions overflow into the kernel's backlog, the
// multishot receive ends, and draining plus re-arming must still deliver everything, in order.
TEST(UringDriver, ShortCompletionQueueIsDrained) {
  constexpr std::uint32_t kCount = 300;
  UringOptions o = uring_options("127.0.0.1:0");
  o.ring_entries = 4;
  o.cq_entries = 4;
  o.buffer_count = 256;
  o.buffer_size = 512;
  o.socket.receive_buffer = 16 << 20;
  auto u = open_uring(o);
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);

  std::vector<std::string> payloads;
  std::vector<rt::TxFrame> tx;
  for (std::uint32_t i = 0; i < kCount; ++i) payloads.push_back(numbered(i, 100));
  for (const std::string& s : payloads) tx.push_back({u->local_endpoint(), as_bytes(s)});
  EXPECT_EQ(p->tx_burst(tx), kCount);

  const auto got = receive(*u, kCount);
  ASSERT_EQ(got.size(), kCount);
  for (std::uint32_t i = 0; i < kCount; ++i) {
    std::uint32_t seq = 0;
    ASSERT_TRUE(parse_numbered(got[i].payload, seq));
    EXPECT_EQ(seq, i);
  }
  const UringStats us = as_uring(*u).uring_stats();
  EXPECT_GT(us.cq_overflows + us.rx_rearms, 0u);
  EXPECT_EQ(u->stats().rx_errors, 0u);

  // Sends through the same tiny rings: more SQEs than the SQ holds, more CQEs than the CQ.
  std::vector<rt::TxFrame> back;
  for (const std::string& s : payloads) back.push_back({p->local_endpoint(), as_bytes(s)});
  EXPECT_EQ(u->tx_burst(back), kCount);
  EXPECT_EQ(receive(*p, kCount).size(), kCount);
  EXPECT_EQ(u->stats().tx_datagrams, kCount);
  EXPECT_EQ(u->stats().tx_errors, 0u);
}

TEST(UringDriver, OversizeDatagramCountedAsTruncated) {
  UringOptions o = uring_options("127.0.0.1:0");
  o.buffer_size = 1024;
  auto u = open_uring(o);
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);
  const std::size_t cap = u->caps().max_datagram;
  EXPECT_GE(cap, 1024u);

  send(*p, u->local_endpoint(), std::string(cap + 1, 'x'));
  send(*p, u->local_endpoint(), std::string(cap, 'y'));
  send(*p, u->local_endpoint(), "after");
  const auto got = receive(*u, 2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].payload, std::string(cap, 'y'));
  EXPECT_EQ(got[1].payload, "after");
  EXPECT_EQ(u->stats().rx_truncated, 1u);
  EXPECT_EQ(u->stats().rx_datagrams, 2u);
}

TEST(UringDriver, UnreachableFamilyIsCountedNotSent) {
  auto u = open_uring(uring_options("127.0.0.1:0"));
  ASSERT_TRUE(u);
  const rt::TxFrame f{endpoint("[::1]:9"), as_bytes("x")};
  EXPECT_EQ(u->tx_burst({&f, 1}), 0u);
  EXPECT_EQ(u->stats().tx_dropped, 1u);
  u->set_tx_deferred(true);  // the same when the burst would be held
  EXPECT_EQ(u->tx_burst({&f, 1}), 0u);
  EXPECT_EQ(u->stats().tx_dropped, 2u);
  EXPECT_EQ(u->stats().tx_datagrams, 0u);
}

TEST(UringDriver, WaitTimesOutWhenIdle) {
  auto u = open_uring(uring_options("127.0.0.1:0"));
  ASSERT_TRUE(u);
  u->wait(0);
  u->wait(10000);  // must return; how long it took is not asserted
  std::vector<rt::RxFrame> frames(8);
  EXPECT_EQ(u->rx_burst(frames), 0u);
}

// An idle server's wake-up on io_uring is one io_uring_enter: the wait submits the reply held
// from the previous wake-up and sleeps; the completion it woke on is already reaped, so the
// receive asks nothing, and the reply is held (copied) for the next wait.
TEST(UringDriver, IdleWakeUpIsOneEnter) {
  auto u = open_uring(uring_options("127.0.0.1:0"));
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);
  EXPECT_NE(as_uring(*u).uring_stats().setup_flags & IORING_SETUP_TASKRUN_FLAG, 0u);
  EXPECT_TRUE(u->caps().short_burst_means_empty);
  u->set_tx_deferred(true);
  std::vector<rt::RxFrame> rx(64);
  for (int round = 0; round < 3; ++round) {
    const std::string ping = "ping " + std::to_string(round);
    send(*p, u->local_endpoint(), ping);
    const rt::DriverStats before = u->stats();
    u->wait(10'000'000);  // ends on the ping (and sends the previous round's pong)
    ASSERT_EQ(u->rx_burst(rx), 1u);
    EXPECT_EQ(as_string(rx[0].bytes), ping);
    std::string pong = "pong " + std::to_string(round);
    const rt::TxFrame reply{rx[0].from, as_bytes(pong)};
    ASSERT_EQ(u->tx_burst({&reply, 1}), 1u);
    pong.assign(pong.size(), 'x');  // held sends own a copy of their bytes
    const rt::DriverStats after = u->stats();
    EXPECT_EQ(after.wait_syscalls - before.wait_syscalls, 1u);
    EXPECT_EQ(after.rx_syscalls, before.rx_syscalls);
    EXPECT_EQ(after.tx_syscalls, before.tx_syscalls);
    u->wait(0);  // the next wake-up's enter, here without the sleep
    const auto back = receive(*p, 1);
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].payload, "pong " + std::to_string(round));
  }
  EXPECT_EQ(u->stats().tx_datagrams, 3u);
  EXPECT_EQ(u->stats().tx_errors, 0u);
}

// Held sends leave with the next enter whoever makes it: a receive, a larger burst (which
// goes behind them, in order), the last stats refresh, or the driver closing.
TEST(UringDriver, HeldSendsAreNeverLeftBehind) {
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(p);
  const Endpoint to = p->local_endpoint();
  std::vector<rt::RxFrame> rx(64);
  {
    auto u = open_uring(uring_options("127.0.0.1:0"));
    ASSERT_TRUE(u);
    u->set_tx_deferred(true);
    send(*u, to, "a");
    (void)u->rx_burst(rx);
    std::vector<std::string> big;
    std::vector<rt::TxFrame> tx;
    send(*u, to, "b");
    for (int i = 0; i < 20; ++i) big.push_back("c" + std::to_string(i));
    for (const std::string& b : big) tx.push_back({to, as_bytes(b)});
    ASSERT_EQ(u->tx_burst(tx), 20u);
    send(*u, to, "d");
    u->refresh_stats();
    send(*u, to, "e");
  }  // closes with "e" held
  const auto got = receive(*p, 24);
  ASSERT_EQ(got.size(), 24u);
  EXPECT_EQ(got[0].payload, "a");
  EXPECT_EQ(got[1].payload, "b");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(got[2 + i].payload, "c" + std::to_string(i));
  EXPECT_EQ(got[22].payload, "d");
  EXPECT_EQ(got[23].payload, "e");
}

// A short burst means an empty socket: datagrams that arrived after the receive's enter are
// fetched before it returns short, and full bursts go on until one is short.
TEST(UringDriver, ShortBurstMeansEmpty) {
  auto u = open_uring(uring_options("127.0.0.1:0"));
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);
  std::vector<rt::RxFrame> rx(64);
  for (const std::size_t count : {std::size_t{1}, std::size_t{40}, std::size_t{100}}) {
    std::vector<std::string> payloads;
    std::vector<rt::TxFrame> tx;
    for (std::size_t i = 0; i < count; ++i) payloads.push_back(numbered(i, 32));
    for (const std::string& s : payloads) tx.push_back({u->local_endpoint(), as_bytes(s)});
    ASSERT_EQ(p->tx_burst(tx), count);  // loopback: in u's socket before this returns
    std::size_t total = 0;
    for (;;) {
      const std::size_t n = u->rx_burst(rx);
      total += n;
      if (n < rx.size()) break;
    }
    EXPECT_EQ(total, count);
  }
}

TEST(UringDriver, SqpollRingExchangesWhenAvailable) {
  UringOptions o = uring_options("127.0.0.1:0");
  o.sqpoll = true;
  std::string error;
  auto u = open_uring_driver(o, error);
  if (!u) GTEST_SKIP() << "SQPOLL unavailable: " << error;
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(p);
  send(*p, u->local_endpoint(), "to sqpoll");
  const auto got = receive(*u, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "to sqpoll");
  send(*u, p->local_endpoint(), "from sqpoll");
  const auto back = receive(*p, 1);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].payload, "from sqpoll");
}

TEST(UringDriver, BadOptionsAreRefused) {
  UringOptions o = uring_options("127.0.0.1:0");
  o.ring_entries = 1u << 30;
  std::string error;
  EXPECT_EQ(open_uring_driver(o, error), nullptr);
  EXPECT_NE(error.find("ring_entries"), std::string::npos) << error;
}

void fallback_works(const UringOptions& o, std::string_view reason) {
  testing::internal::CaptureStderr();
  std::string error;
  auto d = open_best_driver(o, error);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_NE(d, nullptr) << error;
  EXPECT_EQ(d->name(), "socket");
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("socket driver"), std::string::npos) << err;
  EXPECT_NE(err.find(reason), std::string::npos) << err;

  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(p);
  send(*p, d->local_endpoint(), "via fallback");
  const auto got = receive(*d, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "via fallback");
}

TEST(UringDriver, FallsBackToSocketDriverWhenForced) {
  UringOptions o = uring_options("127.0.0.1:0");
  o.force_fail_for_test = true;
  fallback_works(o, "force_fail_for_test");
}

TEST(UringDriver, FallsBackToSocketDriverOnAbsurdRing) {
  UringOptions o = uring_options("127.0.0.1:0");
  o.ring_entries = 1u << 30;
  fallback_works(o, "ring_entries");
}

TEST(UringDriver, BestDriverIsUringWhenAvailable) {
  testing::internal::CaptureStderr();
  std::string error;
  auto d = open_best_driver(uring_options("127.0.0.1:0"), error);
  const std::string err = testing::internal::GetCapturedStderr();
  ASSERT_NE(d, nullptr) << error;
  EXPECT_EQ(d->name(), "uring");
  EXPECT_TRUE(err.empty()) << err;
}

TEST(UringDriver, BestDriverReportsBothFailures) {
  auto holder = open_socket("127.0.0.1:0");
  ASSERT_TRUE(holder);
  UringOptions o;
  o.socket.bind = holder->local_endpoint();  // taken, without SO_REUSEPORT
  std::string error;
  EXPECT_EQ(open_best_driver(o, error), nullptr);
  EXPECT_NE(error.find("socket:"), std::string::npos) << error;
}

// A uring driver that stops reading: once its buffers and its socket's receive buffer are
// full the kernel drops the rest, and the driver reports exactly those.
TEST(UringDriver, KernelReceiveDropsAreCounted) {
  UringOptions o = uring_options("127.0.0.1:0");
  o.socket.receive_buffer = 4096;  // the kernel's minimum applies
  auto u = open_uring(o);
  auto p = open_socket("127.0.0.1:0");
  ASSERT_TRUE(u && p);
  const std::string payload(512, 'x');
  constexpr std::size_t kSent = 20000;  // more than the ring's buffers hold
  for (std::size_t i = 0; i < kSent; ++i) send(*p, u->local_endpoint(), payload);
  ASSERT_EQ(p->stats().tx_datagrams, kSent);
  u->set_time(1);  // the shard's clock: the first call reads the count
  const std::uint64_t dropped = u->stats().rx_kernel_dropped;
  EXPECT_GT(dropped, 0u);
  const auto got = drain(*u, std::chrono::milliseconds(300));
  EXPECT_EQ(got.size() + dropped, kSent);
  u->refresh_stats();
  EXPECT_EQ(u->stats().rx_kernel_dropped, dropped);
}

}  // namespace
}  // namespace tern::drv
