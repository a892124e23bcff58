// HostConfig::min_rto_ms: on a path of well under a millisecond ENet's retransmission timeout
// is a few ms, so a receiver that stalls a little longer has what is in flight resent; with a
// floor above the stall nothing is resent, fast retransmit still repairs a loss that later
// messages overtook, and only a loss at the tail of a burst waits for the floor.
#include "host_core.hpp"
#include "server_stream.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;
using tern::test::expect_complete;
using tern::test::kNoLoss;
using tern::test::kStreamMessages;
using tern::test::ServerStream;

constexpr std::uint32_t kMessages = kStreamMessages;

struct Outcome : tern::test::StreamOutcome {
  std::uint32_t enet_rto_ms = 0;  // RTT + 4 variances when the stall or loss began
};

// The server streams a message a millisecond (server_stream.hpp); for `stall_ms` from message
// 100 on, the client takes nothing and sends nothing (a descheduled process), then takes what
// waited for it. When `lose` names a message, the datagram carrying it is dropped.
Outcome run(std::uint32_t min_rto_ms, std::uint32_t stall_ms, std::uint32_t lose) {
  HostConfig floored;
  floored.min_rto_ms = min_rto_ms;
  ServerStream stream(floored);
  CorePair& pair = stream.pair;
  stream.settle();
  Outcome o;
  std::vector<std::vector<std::byte>> held;
  std::uint32_t stall_left = 0;
  const auto before_tick = [&](std::uint32_t ms) {
    if (ms == 100 || ms == lose) {
      PeerStats s;
      EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, s));
      o.enet_rto_ms = s.rtt_ms + 4 * s.rtt_variance_ms;
      if (ms == 100) stall_left = stall_ms;
    }
  };
  const auto move = [&](std::uint32_t, bool lost) {
    if (lost) {
      pair.take_server_output();
      pair.exchange();
    } else if (stall_left > 0) {
      for (auto& d : pair.take_server_output()) held.push_back(std::move(d));
      if (--stall_left == 0) {
        for (const auto& d : held) pair.client.on_datagram(pair.now_us, pair.server_ep, d);
        held.clear();
        pair.drain();
      }
    } else {
      pair.exchange();
    }
  };
  static_cast<tern::test::StreamOutcome&>(o) = stream.run(lose, 3000, before_tick, move);
  return o;
}

TEST(HostMinRto, AStallLongerThanEnetsTimeoutIsResentToWithoutAFloor) {
  const Outcome enet = run(0, 20, kNoLoss);
  const Outcome floored = run(30, 20, kNoLoss);
  expect_complete(enet);
  expect_complete(floored);
  // The premise: on this path ENet's timeout is well below the 20 ms stall.
  EXPECT_LT(enet.enet_rto_ms, 20u);
  EXPECT_GE(enet.retransmits, 1u);
  EXPECT_EQ(floored.retransmits, 0u);
  std::printf(
      "[min rto] a 20 ms stall (ENet's timeout %u ms): %llu resends without a floor, "
      "%llu with 30 ms\n",
      enet.enet_rto_ms, static_cast<unsigned long long>(enet.retransmits),
      static_cast<unsigned long long>(floored.retransmits));
}

TEST(HostMinRto, ALossThatLaterMessagesOvertookIsStillRepairedBeforeTheFloor) {
  const Outcome o = run(30, 0, 150);
  expect_complete(o);
  EXPECT_GE(o.fast_retransmits, 1u);
  EXPECT_LT(o.lost_message_ms, 30u);
}

// The price of the floor: a loss nothing overtook waits for it.
TEST(HostMinRto, ALossAtTheTailWaitsForTheFloor) {
  const Outcome enet = run(0, 0, kMessages - 1);
  const Outcome floored = run(30, 0, kMessages - 1);
  for (const Outcome* o : {&enet, &floored}) {
    expect_complete(*o);
    EXPECT_EQ(o->retransmits, 1u);
  }
  EXPECT_LT(enet.lost_message_ms, 30u);
  EXPECT_GE(floored.lost_message_ms, 30u);
  EXPECT_LE(floored.lost_message_ms, 33u);
  std::printf(
      "[min rto] a tail loss was repaired after %llu ms without a floor, %llu ms with "
      "30 ms\n",
      static_cast<unsigned long long>(enet.lost_message_ms),
      static_cast<unsigned long long>(floored.lost_message_ms));
}

}  // namespace
