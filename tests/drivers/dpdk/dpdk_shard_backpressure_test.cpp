// A shard on DPDK holds back what its transmit queue cannot take instead of having the driver
// drop it (Driver::tx_room). No NIC, no root: a net_ring port with --no-huge whose tx ring is
// its own rx ring, so the only reader of the shard's transmit queue is the shard itself. One
// flush larger than the ring and the driver's backlog together then overflows them unless the
// shard stops at tx_room and lets its next rx_burst empty the ring before it goes on.
//
// The burst: a posted task opens thousands of connections at once, one CONNECT datagram each,
// all built by the next flush. The datagrams loop back addressed to ports nobody listens on,
// and the driver drops them on receipt as not ours; what is checked is the transmit side.
#include "dpdk_driver.hpp"
#include "ring_loopback.hpp"
#include "shard.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace tern {
namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kIp = (10u << 24) | (217u << 16) | 1u;  // 10.217.0.1
constexpr std::uint16_t kPort = 7002;
// Several times what the ring (1,024 slots here) and the backlog (1,024) hold together.
constexpr std::uint32_t kConnects = 10'000;

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(DpdkShard, AFlushLargerThanTheTransmitQueueIsHeldBackNotDropped) {
  std::string error;
  ASSERT_TRUE(drv::dpdk_init(test::ring_loopback_config(kIp, 0x03, 8191), 1, error)) << error;
  {
    rt::ShardGroupOptions o;
    o.open_driver = rt::open_driver;
    o.bind = Endpoint::v4(kIp, kPort);
    o.shards = 1;
    o.driver = rt::DriverKind::dpdk;
    o.idle = rt::IdlePolicy::busy_poll;
    o.pin = false;
    o.host.peer_limit = kConnects + 16;
    rt::ShardGroup group(o);
    ASSERT_TRUE(group.start(error)) << error;
    ASSERT_TRUE(group.post(0, [](rt::Shard& s) {
      for (std::uint32_t i = 0; i < kConnects; ++i) {
        const auto to = Endpoint::v4(kIp, static_cast<std::uint16_t>(20'000 + i));
        ASSERT_TRUE(s.core().connect(s.now_us(), to, 1, 0).valid());
      }
    }));
    // Every CONNECT reaches the wire; the first resends come only after the initial RTO
    // (ENet's 500 ms), so this is the one burst.
    EXPECT_TRUE(wait_until([&] { return group.counters(0).datagrams_out >= kConnects; }, 5000ms))
        << "datagrams_out=" << group.counters(0).datagrams_out;
    const rt::ShardCounters c = group.counters(0);
    EXPECT_EQ(c.tx_dropped, 0u) << "the driver dropped datagrams the shard should have held";
    EXPECT_GT(c.tx_waits, 0u) << "the burst never found the transmit queue full";
    EXPECT_EQ(c.retransmits, 0u);
    group.stop(0ms);
  }
  drv::dpdk_shutdown();
}

}  // namespace
}  // namespace tern
