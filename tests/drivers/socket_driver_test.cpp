// SocketDriver over loopback: real kernel sockets, so waits are bounded by wall-clock deadlines
// but nothing asserts on how long anything took.
#include "socket_driver.hpp"

#include "driver_test_support.hpp"

#include <gtest/gtest.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tern::drv {
namespace {

using namespace tern::drv::test;

std::unique_ptr<SocketDriver> open(std::string_view bind, bool reuse_port = false) {
  SocketOptions o;
  o.bind = endpoint(bind);
  o.reuse_port = reuse_port;
  std::string error;
  auto d = open_socket_driver(o, error);
  EXPECT_NE(d, nullptr) << "open " << bind << ": " << error;
  return d;
}

TEST(SocketDriver, Ipv4LoopbackExchange) {
  auto a = open("127.0.0.1:0");
  auto b = open("127.0.0.1:0");
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a->local_endpoint().is_v4());
  EXPECT_NE(a->local_endpoint().port, 0);
  EXPECT_FALSE(a->caps().dual_stack);
  EXPECT_TRUE(a->caps().waitable);
  EXPECT_EQ(a->name(), "socket");

  send(*a, b->local_endpoint(), "ping");
  auto at_b = receive(*b, 1);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b[0].payload, "ping");
  EXPECT_EQ(at_b[0].from, a->local_endpoint());

  send(*b, at_b[0].from, "pong");
  auto at_a = receive(*a, 1);
  ASSERT_EQ(at_a.size(), 1u);
  EXPECT_EQ(at_a[0].payload, "pong");
  EXPECT_EQ(at_a[0].from, b->local_endpoint());

  EXPECT_EQ(a->stats().tx_datagrams, 1u);
  EXPECT_EQ(a->stats().tx_bytes, 4u);
  EXPECT_EQ(b->stats().rx_datagrams, 1u);
  EXPECT_EQ(b->stats().rx_bytes, 4u);
}

TEST(SocketDriver, Ipv6LoopbackExchange) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  auto a = open("[::1]:0");
  auto b = open("[::1]:0");
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(a->local_endpoint().is_v4());
  EXPECT_EQ(a->local_endpoint().to_string().rfind("[::1]:", 0), 0u)
      << a->local_endpoint().to_string();

  send(*a, b->local_endpoint(), "hello6");
  auto at_b = receive(*b, 1);
  ASSERT_EQ(at_b.size(), 1u);
  EXPECT_EQ(at_b[0].payload, "hello6");
  EXPECT_EQ(at_b[0].from, a->local_endpoint());

  send(*b, at_b[0].from, "back6");
  auto at_a = receive(*a, 1);
  ASSERT_EQ(at_a.size(), 1u);
  EXPECT_EQ(at_a[0].payload, "back6");
  EXPECT_EQ(at_a[0].from, b->local_endpoint());
}

TEST(SocketDriver, DualStackListenerServesIpv4AndIpv6) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  auto listener = open("*:0");
  ASSERT_TRUE(listener);
  EXPECT_TRUE(listener->caps().dual_stack);
  EXPECT_FALSE(listener->local_endpoint().is_v4());
  EXPECT_TRUE(listener->local_endpoint().is_unspecified());

  auto client4 = open("127.0.0.1:0");
  auto client6 = open("[::1]:0");
  ASSERT_TRUE(client4 && client6);
  const Endpoint via4 = at("127.0.0.1:0", listener->local_endpoint());
  const Endpoint via6 = at("[::1]:0", listener->local_endpoint());
  send(*client4, via4, "from4");
  send(*client6, via6, "from6");

  auto got = receive(*listener, 2);
  ASSERT_EQ(got.size(), 2u);
  for (const Received& r : got) {
    if (r.payload == "from4") {
      // Arrived on an AF_INET6 socket as ::ffff:127.0.0.1, reported in the same form an
      // AF_INET socket would give: one key per peer whichever socket it came through.
      EXPECT_TRUE(r.from.is_v4());
      EXPECT_EQ(r.from, client4->local_endpoint());
    } else {
      EXPECT_EQ(r.payload, "from6");
      EXPECT_FALSE(r.from.is_v4());
      EXPECT_EQ(r.from, client6->local_endpoint());
    }
    send(*listener, r.from, "re:" + r.payload);
  }

  auto back4 = receive(*client4, 1);
  ASSERT_EQ(back4.size(), 1u);
  EXPECT_EQ(back4[0].payload, "re:from4");
  EXPECT_EQ(back4[0].from, via4);
  auto back6 = receive(*client6, 1);
  ASSERT_EQ(back6.size(), 1u);
  EXPECT_EQ(back6[0].payload, "re:from6");
  EXPECT_EQ(back6[0].from, via6);
}

TEST(SocketDriver, Ipv6OnlyRefusesIpv4Destinations) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  SocketOptions o;
  o.bind = endpoint("[::]:0");
  o.v6_only = true;
  std::string error;
  auto d = open_socket_driver(o, error);
  ASSERT_NE(d, nullptr) << error;
  EXPECT_FALSE(d->caps().dual_stack);
  const std::string payload = "x";
  const rt::TxFrame f{endpoint("127.0.0.1:9"), as_bytes(payload)};
  EXPECT_EQ(d->tx_burst({&f, 1}), 0u);
  EXPECT_EQ(d->stats().tx_dropped, 1u);
  EXPECT_EQ(d->stats().tx_errors, 1u);
}

TEST(SocketDriver, Ipv4SocketSkipsIpv6DestinationsAndKeepsSending) {
  auto a = open("127.0.0.1:0");
  auto b = open("127.0.0.1:0");
  ASSERT_TRUE(a && b);
  const std::string p1 = "one", p2 = "two";
  const rt::TxFrame frames[] = {
      {endpoint("[::1]:9"), as_bytes(p1)},
      {b->local_endpoint(), as_bytes(p2)},
  };
  EXPECT_EQ(a->tx_burst(frames), 1u);
  EXPECT_EQ(a->stats().tx_dropped, 1u);
  auto got = receive(*b, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "two");
}

// Payload: direction tag + sequence number, so the receiver can check each one arrived once.
std::string numbered(char tag, std::uint32_t seq) {
  std::string s(64, '.');
  s[0] = tag;
  std::memcpy(s.data() + 1, &seq, sizeof seq);
  return s;
}

TEST(SocketDriver, BurstOf500EachWayLosesNothing) {
  constexpr std::uint32_t kCount = 500;
  auto a = open("127.0.0.1:0");
  auto b = open("127.0.0.1:0");
  ASSERT_TRUE(a && b);

  std::vector<std::string> a_to_b, b_to_a;
  for (std::uint32_t i = 0; i < kCount; ++i) {
    a_to_b.push_back(numbered('a', i));
    b_to_a.push_back(numbered('b', i));
  }
  std::vector<rt::TxFrame> fa, fb;
  for (std::uint32_t i = 0; i < kCount; ++i) {
    fa.push_back({b->local_endpoint(), as_bytes(a_to_b[i])});
    fb.push_back({a->local_endpoint(), as_bytes(b_to_a[i])});
  }

  // Loopback drops only when a receive buffer overflows; when the kernel refused our 4 MiB
  // request (no CAP_NET_ADMIN, low rmem_max) the burst is cut to what surely fits.
  const bool roomy =
      a->receive_buffer_bytes() >= (1 << 20) && b->receive_buffer_bytes() >= (1 << 20);
  const std::size_t chunk = roomy ? kCount : 32;
  std::vector<Received> at_a, at_b;
  std::vector<rt::RxFrame> rx(64);
  auto drain = [&rx](SocketDriver& d, std::vector<Received>& into) {
    for (std::size_t n; (n = d.rx_burst(rx)) > 0;) {
      for (std::size_t i = 0; i < n; ++i) into.push_back({rx[i].from, as_string(rx[i].bytes)});
    }
  };
  for (std::size_t off = 0; off < kCount; off += chunk) {
    const std::size_t n = std::min<std::size_t>(chunk, kCount - off);
    EXPECT_EQ(a->tx_burst(std::span(fa).subspan(off, n)), n);
    EXPECT_EQ(b->tx_burst(std::span(fb).subspan(off, n)), n);
    drain(*a, at_a);
    drain(*b, at_b);
  }
  for (auto& r : receive(*a, kCount - at_a.size())) at_a.push_back(std::move(r));
  for (auto& r : receive(*b, kCount - at_b.size())) at_b.push_back(std::move(r));

  auto check = [&](const std::vector<Received>& got, char tag, const Endpoint& sender) {
    ASSERT_EQ(got.size(), kCount);
    std::set<std::uint32_t> seen;
    for (const Received& r : got) {
      ASSERT_EQ(r.payload.size(), 64u);
      EXPECT_EQ(r.payload[0], tag);
      EXPECT_EQ(r.from, sender);
      std::uint32_t seq = 0;
      std::memcpy(&seq, r.payload.data() + 1, sizeof seq);
      EXPECT_TRUE(seen.insert(seq).second) << "duplicate " << seq;
    }
    EXPECT_EQ(seen.size(), kCount);
    EXPECT_EQ(*seen.rbegin(), kCount - 1);
  };
  check(at_b, 'a', a->local_endpoint());
  check(at_a, 'b', b->local_endpoint());
  EXPECT_EQ(a->stats().tx_datagrams, kCount);
  EXPECT_EQ(a->stats().tx_dropped, 0u);
  EXPECT_EQ(b->stats().rx_datagrams, kCount);
  EXPECT_EQ(b->stats().rx_truncated, 0u);
}

TEST(SocketDriver, OversizeDatagramIsCountedAndNotDelivered) {
  auto a = open("127.0.0.1:0");
  auto b = open("127.0.0.1:0");
  ASSERT_TRUE(a && b);
  const std::string big(10000, 'x');
  ASSERT_GT(big.size(), SocketDriver::kRxSlotBytes);
  send(*a, b->local_endpoint(), big);
  send(*a, b->local_endpoint(), "after");

  std::vector<Received> got;
  std::vector<rt::RxFrame> rx(8);
  const auto deadline = Clock::now() + kDeadline;
  while ((got.empty() || b->stats().rx_truncated == 0) && Clock::now() < deadline) {
    const std::size_t n = b->rx_burst(rx);
    for (std::size_t i = 0; i < n; ++i) got.push_back({rx[i].from, as_string(rx[i].bytes)});
    if (n == 0) b->wait(20000);
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "after");
  EXPECT_EQ(b->stats().rx_truncated, 1u);
  EXPECT_EQ(b->stats().rx_datagrams, 1u);
}

TEST(SocketDriver, PortInUseWithoutReusePortFailsClearly) {
  auto first = open("127.0.0.1:0");
  ASSERT_TRUE(first);
  SocketOptions o;
  o.bind = first->local_endpoint();
  std::string error;
  auto second = open_socket_driver(o, error);
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(error.find("Address already in use"), std::string::npos) << error;
  EXPECT_NE(error.find(first->local_endpoint().to_string()), std::string::npos) << error;
  EXPECT_NE(error.find("reuse_port"), std::string::npos) << error;
}

TEST(SocketDriver, TwoReusePortSocketsShareOnePort) {
  auto first = open("127.0.0.1:0", /*reuse_port=*/true);
  ASSERT_TRUE(first);
  SocketOptions o;
  o.bind = first->local_endpoint();
  o.reuse_port = true;
  std::string error;
  auto second = open_socket_driver(o, error);
  ASSERT_NE(second, nullptr) << error;
  EXPECT_EQ(second->local_endpoint(), first->local_endpoint());
}

TEST(SocketDriver, WaitReturnsWithoutTraffic) {
  auto a = open("127.0.0.1:0");
  ASSERT_TRUE(a);
  a->wait(0);
  a->wait(1000);
  std::vector<rt::RxFrame> rx(4);
  EXPECT_EQ(a->rx_burst(rx), 0u);
  EXPECT_EQ(a->stats().rx_errors, 0u);
}

// An idle server's wake-up: the wait that ends on one datagram, then one recvmmsg that
// returns it short, which tells a caller (caps: short_burst_means_empty) that nothing else is
// queued; no second recvmmsg just to hear EAGAIN.
TEST(SocketDriver, OneQueuedDatagramCostsOneReceiveCall) {
  auto a = open("127.0.0.1:0");
  auto b = open("127.0.0.1:0");
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->caps().short_burst_means_empty);
  send(*b, a->local_endpoint(), "one");
  const rt::DriverStats before = a->stats();
  a->wait(10'000'000);  // ends on the datagram
  std::vector<rt::RxFrame> rx(64);
  ASSERT_EQ(a->rx_burst(rx), 1u);
  EXPECT_EQ(as_string(rx[0].bytes), "one");
  const rt::DriverStats after = a->stats();
  EXPECT_EQ(after.rx_syscalls - before.rx_syscalls, 1u);
  EXPECT_EQ(after.wait_syscalls - before.wait_syscalls, 1u);
  EXPECT_EQ(after.tx_syscalls, before.tx_syscalls);
}

// A wait that ends without the socket readable (its deadline, the wake fd) answers for the
// receive right after it; the next wait looks again, so a datagram that arrived in between
// is late by one wait that returns at once, never lost.
TEST(SocketDriver, ReceiveAfterAnEmptyWaitAsksNobody) {
  auto a = open("127.0.0.1:0");
  auto b = open("127.0.0.1:0");
  ASSERT_TRUE(a && b);
  std::vector<rt::RxFrame> rx(64);
  a->wait(1000);  // nobody sends: ends on its deadline
  std::uint64_t calls = a->stats().rx_syscalls;
  EXPECT_EQ(a->rx_burst(rx), 0u);
  EXPECT_EQ(a->stats().rx_syscalls, calls);
  EXPECT_EQ(a->rx_burst(rx), 0u);  // only the first receive after the wait is answered
  EXPECT_EQ(a->stats().rx_syscalls, calls + 1);

  a->wait(1000);
  send(*b, a->local_endpoint(), "late");
  calls = a->stats().rx_syscalls;
  EXPECT_EQ(a->rx_burst(rx), 0u);
  EXPECT_EQ(a->stats().rx_syscalls, calls);
  a->wait(10'000'000);  // readable already
  ASSERT_EQ(a->rx_burst(rx), 1u);
  EXPECT_EQ(as_string(rx[0].bytes), "late");
  EXPECT_EQ(a->stats().rx_syscalls, calls + 1);

  // The wake fd ends a wait the same way.
  const int wake = ::eventfd(1, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(wake, 0);
  a->set_wake_fd(wake);
  a->wait(10'000'000);  // ends on the eventfd, which it empties
  calls = a->stats().rx_syscalls;
  EXPECT_EQ(a->rx_burst(rx), 0u);
  EXPECT_EQ(a->stats().rx_syscalls, calls);
  std::uint64_t count = 0;
  EXPECT_LT(::read(wake, &count, sizeof count), 0);  // emptied by the wait
  a->set_wake_fd(-1);
  ::close(wake);
}

// Loaded: full bursts go on until a short one, so the socket is drained by the receive step
// and not by a round trip through wait().
TEST(SocketDriver, FullBurstsDrainTheSocket) {
  auto a = open("127.0.0.1:0");
  auto b = open("127.0.0.1:0");
  ASSERT_TRUE(a && b);
  std::vector<std::string> payloads;
  std::vector<rt::TxFrame> tx;
  for (int i = 0; i < 100; ++i) payloads.push_back("d" + std::to_string(i));
  for (const std::string& p : payloads) tx.push_back({a->local_endpoint(), as_bytes(p)});
  ASSERT_EQ(b->tx_burst(tx), 100u);  // loopback: queued at a before this returns
  const std::uint64_t calls = a->stats().rx_syscalls;
  std::vector<rt::RxFrame> rx(64);
  std::size_t total = 0;
  std::size_t bursts = 0;
  for (;;) {
    const std::size_t n = a->rx_burst(rx);
    total += n;
    ++bursts;
    if (n < rx.size()) break;
  }
  EXPECT_EQ(total, 100u);
  EXPECT_EQ(bursts, 2u);
  EXPECT_EQ(a->stats().rx_syscalls - calls, 2u);
}

TEST(SocketDriver, BurstOptionIsClampedAndReported) {
  SocketOptions o;
  o.bind = endpoint("127.0.0.1:0");
  o.burst = 0;
  std::string error;
  auto d = open_socket_driver(o, error);
  ASSERT_NE(d, nullptr) << error;
  EXPECT_EQ(d->caps().max_burst, 1u);
  o.burst = 1 << 20;
  d = open_socket_driver(o, error);
  ASSERT_NE(d, nullptr) << error;
  EXPECT_EQ(d->caps().max_burst, SocketDriver::kMaxBurst);
}

// A receiver that stops reading: the kernel drops what its buffer cannot hold, and the driver
// reports exactly those (every datagram sent is then either read or counted).
TEST(SocketDriver, KernelReceiveDropsAreCounted) {
  SocketOptions o;
  o.bind = endpoint("127.0.0.1:0");
  o.receive_buffer = 4096;  // the kernel's minimum applies
  std::string error;
  auto receiver = open_socket_driver(o, error);
  ASSERT_NE(receiver, nullptr) << error;
  auto sender = open("127.0.0.1:0");
  ASSERT_TRUE(sender);
  const std::string payload(512, 'x');
  constexpr std::size_t kSent = 2000;
  for (std::size_t i = 0; i < kSent; ++i) send(*sender, receiver->local_endpoint(), payload);
  ASSERT_EQ(sender->stats().tx_datagrams, kSent);
  EXPECT_EQ(receiver->stats().rx_kernel_dropped, 0u);  // not read yet
  receiver->set_time(1);  // the shard's clock: the first call reads the count
  const std::uint64_t dropped = receiver->stats().rx_kernel_dropped;
  EXPECT_GT(dropped, 0u);
  const auto got = receive(*receiver, kSent - dropped);
  EXPECT_EQ(got.size() + dropped, kSent);
  receiver->refresh_stats();
  EXPECT_EQ(receiver->stats().rx_kernel_dropped, dropped);
}

}  // namespace
}  // namespace tern::drv
