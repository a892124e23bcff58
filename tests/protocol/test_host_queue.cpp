// HostConfig::max_queued: what a peer that does not keep up can make a host hold. send()
// refuses with queue_full once the peer's queued, in-flight and unacknowledged payload would
// pass the limit, takes messages again as acknowledgements free it, and never refuses into an
// empty queue (a message larger than the limit still goes).
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

constexpr std::size_t kLimit = 1000;
constexpr std::size_t kSize = 100;

HostConfig limited() {
  HostConfig c;
  c.max_queued = kLimit;
  return c;
}

TEST(HostQueue, SendsBeyondTheLimitAreRefusedUntilAcknowledgementsFreeIt) {
  CorePair pair({}, limited());
  std::uint32_t received = 0;
  pair.on_client_event = [&](Event& ev) { received += ev.type == EventType::receive ? 1 : 0; };
  pair.handshake(1);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());

  // Nothing is exchanged meanwhile, so everything sent stays queued at the server.
  const auto payload = tern::test::numbered_payload(0, kSize);
  std::size_t accepted = 0;
  SendResult r = SendResult::ok;
  for (int i = 0; i < 100 && r == SendResult::ok; ++i) {
    r = pair.server.send(pair.server_peer, 0, Delivery::reliable, payload);
    accepted += r == SendResult::ok ? 1 : 0;
  }
  EXPECT_EQ(r, SendResult::queue_full);
  EXPECT_EQ(accepted, kLimit / kSize);
  EXPECT_EQ(pair.server.counters().queue_full, 1u);
  // Unreliable and unsequenced sends count against the same limit.
  EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::unreliable, payload),
            SendResult::queue_full);
  EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::unsequenced, payload),
            SendResult::queue_full);

  // Delivered and acknowledged: the queue is empty again and sends are taken.
  for (int i = 0; i < 20; ++i) pair.step(1000);
  EXPECT_EQ(received, accepted);
  PeerStats stats;
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
  EXPECT_EQ(stats.queued_outgoing, 0u);
  EXPECT_EQ(stats.reliable_in_transit, 0u);
  EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable, payload), SendResult::ok);
}

TEST(HostQueue, AMessageLargerThanTheLimitGoesIntoAnEmptyQueue) {
  CorePair pair({}, limited());
  std::vector<std::size_t> sizes;
  pair.on_client_event = [&](Event& ev) {
    if (ev.type == EventType::receive) sizes.push_back(ev.packet.size());
  };
  pair.handshake(1);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const auto big = tern::test::numbered_payload(1, 5 * kLimit);  // fragmented
  EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable, big), SendResult::ok);
  EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable, big), SendResult::queue_full);
  for (int i = 0; i < 20; ++i) pair.step(1000);
  ASSERT_EQ(sizes.size(), 1u);
  EXPECT_EQ(sizes[0], big.size());
  EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable, big), SendResult::ok);
}

TEST(HostQueue, NoLimitByDefault) {
  CorePair pair;
  pair.handshake(1);
  ASSERT_FALSE(::testing::Test::HasFatalFailure());
  const auto payload = tern::test::numbered_payload(0, kSize);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable, payload), SendResult::ok);
  }
  EXPECT_EQ(pair.server.counters().queue_full, 0u);
}

}  // namespace
