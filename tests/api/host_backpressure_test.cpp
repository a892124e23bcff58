// tern::Host runs the shards' transmit step (rt::CoreIo), so it builds no more datagrams than
// its driver's tx_room() takes: a full transmit queue delays datagrams instead of losing them.
#include <tern/host.hpp>

#include "driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

namespace {

using namespace std::chrono_literals;

// A transmit queue of `capacity` frames that only the test drains, like a DPDK port whose
// peer has stopped reading. Frames handed over beyond its room would be lost: counted.
class QueueDriver final : public tern::rt::Driver {
 public:
  explicit QueueDriver(std::size_t capacity) : capacity_(capacity) {}

  std::size_t rx_burst(std::span<tern::rt::RxFrame>) override { return 0; }
  std::size_t tx_burst(std::span<const tern::rt::TxFrame> frames) override {
    const std::size_t taken = std::min(frames.size(), tx_room());
    queued_ += taken;
    sent_ += taken;
    lost_ += frames.size() - taken;
    return taken;
  }
  std::size_t tx_room() const override { return capacity_ - queued_; }
  void wait(std::uint64_t) override {}
  void set_wake_fd(int) override {}
  tern::Endpoint local_endpoint() const override { return tern::Endpoint::v4(0x0a000001, 9000); }
  tern::rt::DriverCaps caps() const override {
    tern::rt::DriverCaps c;
    c.waitable = false;  // one pass per service(), like the sim network
    c.max_burst = 4;
    return c;
  }
  tern::rt::DriverStats stats() const override { return {}; }
  std::string name() const override { return "queue"; }

  void drain() { queued_ = 0; }
  std::size_t sent() const { return sent_; }
  std::size_t lost() const { return lost_; }

 private:
  std::size_t capacity_;
  std::size_t queued_ = 0;
  std::size_t sent_ = 0;
  std::size_t lost_ = 0;
};

class FixedClock final : public tern::rt::Clock {
 public:
  std::uint64_t now_us() override { return now; }
  std::uint64_t now = 1'000'000;
};

TEST(HostBackpressure, AFlushWaitsForTransmitRoomInsteadOfLosingDatagrams) {
  constexpr std::size_t kPeers = 100;
  constexpr std::size_t kRoom = 10;
  FixedClock clock;
  auto owned = std::make_unique<QueueDriver>(kRoom);
  QueueDriver& driver = *owned;
  auto host = tern::Host::over(tern::HostOptions{}, std::move(owned), clock);
  ASSERT_NE(host, nullptr);
  // One CONNECT datagram per peer at the next flush: ten times what the queue holds.
  for (std::uint32_t i = 0; i < kPeers; ++i) {
    ASSERT_TRUE(host->connect(tern::Endpoint::v4(0x0a000100 + i, 7777), 1).valid());
  }
  tern::Event ev;
  std::size_t passes = 0;
  while (driver.sent() < kPeers && passes < 2 * kPeers) {
    EXPECT_FALSE(host->service(ev, 0us));
    EXPECT_LE(driver.sent(), (passes + 1) * kRoom) << "more than the queue had room for";
    driver.drain();
    ++passes;
  }
  EXPECT_EQ(driver.sent(), kPeers);
  EXPECT_EQ(driver.lost(), 0u);
  EXPECT_EQ(passes, kPeers / kRoom);
}

}  // namespace
