// rt::CoreIo's receive step over real kernel drivers: how many receive calls a wake-up costs,
// counted through the driver's stats (DriverStats::rx_syscalls), never timed. Loopback
// delivers a datagram into the receiver's socket before the sender's call returns, so what
// is queued when receive() runs is known exactly.
#include "core_io.hpp"
#include "socket_driver.hpp"
#if TERN_TEST_URING
#include "uring_driver.hpp"
#endif

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace tern::rt {
namespace {

std::unique_ptr<Driver> open_kind(bool uring, int receive_buffer = 4 << 20) {
  drv::SocketOptions o;
  o.bind = *Endpoint::parse("127.0.0.1:0");
  o.receive_buffer = receive_buffer;
  std::string error;
  std::unique_ptr<Driver> d;
#if TERN_TEST_URING
  if (uring) {
    drv::UringOptions u;
    u.socket = o;
    d = drv::open_uring_driver(u, error);
  }
#endif
  if (!uring) d = drv::open_socket_driver(o, error);
  EXPECT_NE(d, nullptr) << error;
  return d;
}

// The sending side: a plain socket driver on an ephemeral loopback port.
std::unique_ptr<drv::SocketDriver> open_sender(std::string& error) {
  drv::SocketOptions o;
  o.bind = *Endpoint::parse("127.0.0.1:0");
  return drv::open_socket_driver(o, error);
}

// Sends `count` datagrams a HostCore counts and drops (too short for an ENet header).
void queue(drv::SocketDriver& from, const Endpoint& to, std::size_t count) {
  const std::byte junk[2] = {};
  std::vector<TxFrame> tx(count, TxFrame{to, std::span<const std::byte>(junk)});
  ASSERT_EQ(from.tx_burst(tx), count);
}

void one_receive_call_per_wake_up(bool uring) {
  proto::HostCore core{proto::HostConfig{}};
  auto driver = open_kind(uring);
  std::string error;
  auto sender = open_sender(error);
  ASSERT_TRUE(driver && sender) << error;
  CoreIo io(core, *driver);
  ASSERT_TRUE(io.caps().short_burst_means_empty);
  const Endpoint to = driver->local_endpoint();

  // An idle server's wake-up: the wait ends on one datagram, one receive call fetches it and
  // shows the queue empty, and the loop may sleep again (rx_more false).
  queue(*sender, to, 1);
  driver->wait(10'000'000);
  DriverStats before = driver->stats();
  EXPECT_EQ(io.receive(1), 1u);
  // io_uring: the wait's enter already reaped the completion; the receive makes none.
  EXPECT_EQ(driver->stats().rx_syscalls - before.rx_syscalls, uring ? 0u : 1u);
  EXPECT_FALSE(io.rx_more());
  EXPECT_EQ(core.counters().datagrams_in, 1u);

  // A dense short burst: the loop goes round at once rather than through a wait.
  queue(*sender, to, 20);
  driver->wait(10'000'000);
  EXPECT_EQ(io.receive(2), 20u);
  EXPECT_TRUE(io.rx_more());

  // Loaded: full bursts go on until a short one drains the socket.
  queue(*sender, to, 150);
  before = driver->stats();
  EXPECT_EQ(io.receive(3), 150u);
  if (!uring) {
    EXPECT_EQ(driver->stats().rx_syscalls - before.rx_syscalls, 3u);  // 64, 64, 22
  }
  EXPECT_TRUE(io.rx_more());
  EXPECT_EQ(core.counters().datagrams_in, 171u);

  // Nothing queued: one call to learn that, and no reason to go round.
  before = driver->stats();
  EXPECT_EQ(io.receive(4), 0u);
  EXPECT_LE(driver->stats().rx_syscalls - before.rx_syscalls, 1u);
  EXPECT_FALSE(io.rx_more());
}

TEST(CoreIo, SocketWakeUpWithOneDatagramIsOneReceiveCall) { one_receive_call_per_wake_up(false); }

// A backlog is read in slices that grow while each receive stops at its limit (32 bursts, then
// 64, then 128), and the limit falls back to 32 once a receive drains the input; rx_behind()
// counts what was read meanwhile, and the shard sheds CONNECTs on it.
TEST(CoreIo, AReceiveLimitGrowsWhileTheInputNeverRunsDryAndFallsBackOnceItDoes) {
  constexpr std::size_t kSlice = CoreIo::kMinRxBursts * CoreIo::kBatch;
  static_assert(CoreIo::kMaxRxBursts == 4 * CoreIo::kMinRxBursts);
  proto::HostCore core{proto::HostConfig{}};
  auto driver = open_kind(false, 64 << 20);  // the backlog must queue, not be dropped
  std::string error;
  auto sender = open_sender(error);
  ASSERT_TRUE(driver && sender) << error;
  CoreIo io(core, *driver);
  const Endpoint to = driver->local_endpoint();

  queue(*sender, to, 9 * kSlice + 5);
  EXPECT_EQ(io.receive(1), kSlice);
  EXPECT_EQ(io.rx_behind(), kSlice);
  EXPECT_TRUE(io.rx_more());
  EXPECT_EQ(io.receive(2), 2 * kSlice);
  EXPECT_EQ(io.rx_behind(), 3 * kSlice);
  EXPECT_EQ(io.receive(3), 4 * kSlice);
  EXPECT_EQ(io.rx_behind(), 7 * kSlice);
  EXPECT_EQ(io.receive(4), 2 * kSlice + 5);  // at the ceiling, which drains it
  EXPECT_EQ(io.rx_behind(), 0u);

  queue(*sender, to, kSlice + 1);
  EXPECT_EQ(io.receive(5), kSlice);  // back to the first slice
  EXPECT_EQ(io.rx_behind(), kSlice);
  EXPECT_EQ(io.receive(6), 1u);
  EXPECT_EQ(io.rx_behind(), 0u);
  EXPECT_EQ(core.counters().datagrams_in, 10 * kSlice + 6);
}

#if TERN_TEST_URING
TEST(CoreIo, UringWakeUpWithOneDatagramMakesNoReceiveCall) { one_receive_call_per_wake_up(true); }
#endif

}  // namespace
}  // namespace tern::rt
