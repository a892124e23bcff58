// The DPDK driver's transmit backlog, on a net_ring port whose tx ring is its own rx ring (so
// nothing drains the tx queue unless the test receives). No NIC, no root: --no-huge.
//
//   - A burst larger than the ring: the excess is held (tx_backlog), not dropped, and reaches
//     the wire in order once the test receives and the ring has room again.
//   - tx_room says how many more frames the backlog can hold, so a shard can stop short of a
//     drop.
//   - When the queue makes no progress for the give-up time, the held frames are dropped and
//     counted.
#include "dpdk_driver.hpp"
#include "ring_loopback.hpp"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tern {
namespace {

constexpr std::uint32_t kIp = (10u << 24) | (216u << 16) | 1u;  // 10.216.0.1
constexpr std::uint16_t kPort = 7001;

class DpdkBacklog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const drv::DpdkConfig c = test::ring_loopback_config(kIp, 0x02, 8191);
    std::string error;
    ASSERT_TRUE(drv::dpdk_init(c, 1, error)) << error;
  }
  static void TearDownTestSuite() { drv::dpdk_shutdown(); }

  void SetUp() override {
    std::string error;
    driver_ = drv::open_dpdk_driver(0, kPort, error);
    ASSERT_NE(driver_, nullptr) << error;
  }
  void TearDown() override {
    // Empty the ring for the next test.
    std::vector<rt::RxFrame> rx(32);
    for (int i = 0; i < 1000 && driver_->rx_burst(rx) != 0; ++i) {
    }
    driver_.reset();
  }

  // Sends `n` datagrams numbered from `first` (4-byte little-endian payload), one at a time in
  // bursts of 32 frames; returns how many tx_burst took.
  std::size_t send(std::uint32_t first, std::size_t n) {
    std::vector<std::array<std::byte, 4>> bodies(n);
    std::vector<rt::TxFrame> frames(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t v = first + static_cast<std::uint32_t>(i);
      std::memcpy(bodies[i].data(), &v, 4);
      frames[i] = rt::TxFrame{Endpoint::v4(kIp, kPort), bodies[i]};
    }
    return driver_->tx_burst(frames);
  }

  // Receives until nothing comes for a while; appends the datagram numbers to `got`.
  void receive_all(std::vector<std::uint32_t>& got) {
    std::vector<rt::RxFrame> rx(32);
    int empty = 0;
    while (empty < 50) {
      const std::size_t n = driver_->rx_burst(rx);
      if (n == 0) {
        ++empty;
        continue;
      }
      empty = 0;
      for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t v = 0;
        ASSERT_EQ(rx[i].bytes.size(), 4u);
        std::memcpy(&v, rx[i].bytes.data(), 4);
        got.push_back(v);
      }
    }
  }

  std::unique_ptr<rt::Driver> driver_;
};

TEST_F(DpdkBacklog, WhatTheFullQueueRefusesIsHeldAndSentInOrder) {
  // Fill the ring exactly: send until something is held, then learn the ring's size.
  std::size_t capacity = 0;
  while (driver_->stats().tx_backlog == 0 && capacity < 100'000) {
    ASSERT_EQ(send(static_cast<std::uint32_t>(capacity), 1), 1u);
    ++capacity;
  }
  ASSERT_EQ(driver_->stats().tx_backlog, 1u) << "the ring never filled";
  --capacity;  // the last one is the one held
  // Twenty more: all taken, all held.
  ASSERT_EQ(send(static_cast<std::uint32_t>(capacity + 1), 20), 20u);
  EXPECT_EQ(driver_->stats().tx_backlog, 21u);
  EXPECT_EQ(driver_->stats().tx_dropped, 0u);

  std::vector<std::uint32_t> got;
  receive_all(got);
  ASSERT_EQ(got.size(), capacity + 21);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i) << "out of order at " << i;
  EXPECT_EQ(driver_->stats().tx_backlog, 0u);
  EXPECT_EQ(driver_->stats().tx_dropped, 0u);
  auto& dpdk = static_cast<drv::DpdkDriver&>(*driver_);
  EXPECT_EQ(dpdk.dpdk_stats().tx_backlogged, 21u);
  EXPECT_EQ(dpdk.dpdk_stats().tx_full, 0u);
}

// tx_room is the shard's promise that a flush of that many frames loses none: it counts down
// as the backlog fills, reaches 0 exactly when the next frame would be dropped, and comes back
// once the queue drains.
TEST_F(DpdkBacklog, TxRoomIsWhatTheBacklogCanStillTake) {
  const std::size_t empty_room = driver_->tx_room();
  ASSERT_GT(empty_room, 0u);
  ASSERT_LT(empty_room, std::size_t{1} << 20) << "a DPDK port's room is finite";
  std::size_t capacity = 0;
  while (driver_->stats().tx_backlog == 0 && capacity < 100'000) {
    // A ring with free slots takes frames without touching the backlog, or the room.
    ASSERT_EQ(driver_->tx_room(), empty_room);
    ASSERT_EQ(send(static_cast<std::uint32_t>(capacity), 1), 1u);
    ++capacity;
  }
  --capacity;
  EXPECT_EQ(driver_->tx_room(), empty_room - 1);
  // Exactly the room: all taken, none dropped, and no room left.
  const std::size_t fill = empty_room - 1;
  ASSERT_EQ(send(static_cast<std::uint32_t>(capacity + 1), fill), fill);
  EXPECT_EQ(driver_->tx_room(), 0u);
  EXPECT_EQ(driver_->stats().tx_dropped, 0u);
  // One frame beyond the room is what a shard that ignored it would lose.
  ASSERT_EQ(send(0xFFFF'FFFFu, 1), 0u);
  EXPECT_EQ(driver_->stats().tx_dropped, 1u);

  std::vector<std::uint32_t> got;
  receive_all(got);
  ASSERT_EQ(got.size(), capacity + empty_room);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], i) << "out of order at " << i;
  EXPECT_EQ(driver_->tx_room(), empty_room);
}

TEST_F(DpdkBacklog, ABacklogThatMakesNoProgressIsDroppedAndCounted) {
  std::size_t capacity = 0;
  while (driver_->stats().tx_backlog == 0 && capacity < 100'000) {
    ASSERT_EQ(send(static_cast<std::uint32_t>(capacity), 1), 1u);
    ++capacity;
  }
  --capacity;
  ASSERT_EQ(send(static_cast<std::uint32_t>(capacity + 1), 99), 99u);
  ASSERT_EQ(driver_->stats().tx_backlog, 100u);
  auto& dpdk = static_cast<drv::DpdkDriver&>(*driver_);

  // Nobody reads the ring for longer than the give-up time: the next send drops what is held
  // (counted), and the new frame, refused by the still full ring, is held in its place.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const auto late = static_cast<std::uint32_t>(capacity + 100);
  ASSERT_EQ(send(late, 1), 1u);
  EXPECT_EQ(driver_->stats().tx_backlog, 1u);
  EXPECT_EQ(driver_->stats().tx_dropped, 100u);
  EXPECT_EQ(dpdk.dpdk_stats().tx_backlog_dropped, 100u);

  std::vector<std::uint32_t> got;
  receive_all(got);
  ASSERT_EQ(got.size(), capacity + 1);
  for (std::size_t i = 0; i < capacity; ++i) ASSERT_EQ(got[i], i);
  EXPECT_EQ(got.back(), late);
  EXPECT_EQ(driver_->stats().tx_backlog, 0u);
}

}  // namespace
}  // namespace tern
