// HostConfig::min_rto_ms: on a path of well under a millisecond ENet's retransmission timeout
// is a few ms, so a receiver that stalls a little longer has what is in flight resent; with a
// floor above the stall nothing is resent, fast retransmit still repairs a loss that later
// messages overtook, and only a loss at the tail of a burst waits for the floor.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

HostConfig with_floor(std::uint32_t min_rto_ms) {
  HostConfig c;
  c.min_rto_ms = min_rto_ms;
  return c;
}

// The server sends one reliable message per millisecond over an instant path; for `stall_ms`
// from message 100 on, the client takes nothing and sends nothing (a descheduled process),
// then takes what waited for it. When `lose` names a message, the datagram carrying it is
// dropped. Reports what the server resent and how long the named message took.
struct Outcome {
  std::uint64_t retransmits = 0;
  std::uint64_t fast_retransmits = 0;
  std::uint64_t lost_message_ms = 0;  // from its send to its delivery
  std::uint32_t delivered = 0;
  bool in_order = true;
  std::uint32_t enet_rto_ms = 0;  // RTT + 4 variances when the stall or loss began
};

constexpr std::uint32_t kMessages = 200;
constexpr std::uint32_t kNoLoss = ~std::uint32_t{0};

Outcome run(std::uint32_t min_rto_ms, std::uint32_t stall_ms, std::uint32_t lose) {
  CorePair pair(HostConfig{}, with_floor(min_rto_ms));
  pair.handshake(1);
  // Pings settle the RTT estimate at this path's 1 ms.
  for (int i = 0; i < 2000; ++i) pair.step(1000);
  const HostCounters before = pair.server.counters();
  Outcome o;
  std::uint64_t lost_sent_ms = 0;
  pair.on_client_event = [&](Event& ev) {
    if (ev.type != EventType::receive) return;
    const std::uint32_t index = tern::test::payload_index(ev.packet.bytes());
    o.in_order = o.in_order && index == o.delivered;
    ++o.delivered;
    if (index == lose) o.lost_message_ms = pair.now_us / 1000 - lost_sent_ms;
  };
  std::vector<std::vector<std::byte>> held;
  std::uint32_t stall_left = 0;
  for (std::uint32_t ms = 0; ms < kMessages + 3000; ++ms) {
    if (ms < kMessages) {
      EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                                 tern::test::numbered_payload(ms, 64)),
                SendResult::ok);
      if (ms == 100 || ms == lose) {
        PeerStats s;
        EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, s));
        o.enet_rto_ms = s.rtt_ms + 4 * s.rtt_variance_ms;
        if (ms == 100) stall_left = stall_ms;
      }
    }
    pair.now_us += 1000;
    if (ms == lose) {
      lost_sent_ms = pair.now_us / 1000;
      pair.take_server_output();  // the datagram carrying it (sent alone: one per ms)
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
  }
  o.retransmits = pair.server.counters().retransmits - before.retransmits;
  o.fast_retransmits = pair.server.counters().fast_retransmits - before.fast_retransmits;
  return o;
}

TEST(HostMinRto, AStallLongerThanEnetsTimeoutIsResentToWithoutAFloor) {
  const Outcome enet = run(0, 20, kNoLoss);
  const Outcome floored = run(30, 20, kNoLoss);
  for (const Outcome* o : {&enet, &floored}) {
    EXPECT_EQ(o->delivered, kMessages);
    EXPECT_TRUE(o->in_order);
  }
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
  EXPECT_EQ(o.delivered, kMessages);
  EXPECT_TRUE(o.in_order);
  EXPECT_GE(o.fast_retransmits, 1u);
  EXPECT_LT(o.lost_message_ms, 30u);
}

// The price of the floor: a loss nothing overtook waits for it.
TEST(HostMinRto, ALossAtTheTailWaitsForTheFloor) {
  const Outcome enet = run(0, 0, kMessages - 1);
  const Outcome floored = run(30, 0, kMessages - 1);
  for (const Outcome* o : {&enet, &floored}) {
    EXPECT_EQ(o->delivered, kMessages);
    EXPECT_TRUE(o->in_order);
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
