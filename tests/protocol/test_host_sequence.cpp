// Sequence-number wraparound: more than 65536 messages on one channel between two HostCores,
// with no loss, crossing the 16-bit reliable sequence, unreliable sequence and unsequenced
// group spaces.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

constexpr std::uint32_t kMessages = 70'000;  // > 65536: every 16-bit counter wraps once
constexpr std::uint32_t kBatch = 1000;

// What the receiving side saw on the test channel.
struct Tally {
  std::uint32_t received = 0;
  std::uint32_t backwards = 0;     // index not above the previous one (ordered modes)
  std::uint32_t out_of_order = 0;  // index not exactly previous + 1 (reliable)
  std::uint32_t duplicates = 0;
  std::uint32_t wrong_channel = 0;
  std::int64_t last = -1;
  std::vector<std::uint8_t> seen = std::vector<std::uint8_t>(kMessages, 0);

  void note(const Event& ev, std::uint8_t channel) {
    if (ev.type != EventType::receive) return;
    if (ev.channel != channel) {
      ++wrong_channel;
      return;
    }
    const std::uint32_t index = tern::test::payload_index(ev.packet.bytes());
    ASSERT_LT(index, kMessages);
    if (seen[index] != 0) ++duplicates;
    seen[index] = 1;
    if (static_cast<std::int64_t>(index) <= last) ++backwards;
    if (static_cast<std::int64_t>(index) != last + 1) ++out_of_order;
    last = index;
    ++received;
  }

  // "a-b c" style list of the indices that never arrived, for failure messages.
  std::string missing() const {
    std::string out;
    std::size_t ranges = 0;
    for (std::uint32_t i = 0; i < kMessages; ++i) {
      if (seen[i] != 0) continue;
      std::uint32_t j = i;
      while (j + 1 < kMessages && seen[j + 1] == 0) ++j;
      if (++ranges <= 20) {
        out += std::to_string(i);
        if (j > i) out.append("-").append(std::to_string(j));
        out += ' ';
      }
      i = j;
    }
    if (ranges > 20) out += "... (" + std::to_string(ranges) + " ranges)";
    return out;
  }
  std::string drops;  // the receiver's non-zero drop counters
};

std::string describe_drops(const DropCounters& d) {
  std::string out;
  for (std::size_t i = 0; i < kDropCount; ++i) {
    if (d.by_reason[i] != 0) {
      out +=
          std::string(drop_name(static_cast<Drop>(i))) + "=" + std::to_string(d.by_reason[i]) + " ";
    }
  }
  return out.empty() ? "none" : out;
}

// Sends kMessages in batches (the next batch once the previous one has left the queue) and
// steps simulated time until everything has arrived or progress stops.
Tally run(Delivery delivery, std::uint8_t channel) {
  CorePair pair;
  Tally tally;
  pair.on_server_event = [&](Event& ev) { tally.note(ev, channel); };
  pair.handshake(2);
  if (::testing::Test::HasFatalFailure()) return tally;

  std::uint32_t sent = 0;
  std::uint32_t idle_steps = 0;
  while (tally.received < kMessages && idle_steps < 2000) {
    PeerStats stats;
    EXPECT_TRUE(pair.client.peer_stats(pair.client_peer, stats));
    if (sent < kMessages && stats.queued_outgoing < kBatch) {
      for (std::uint32_t i = 0; i < kBatch && sent < kMessages; ++i, ++sent) {
        const auto payload = tern::test::numbered_payload(sent);
        const SendResult r = pair.client.send(pair.client_peer, channel, delivery, payload);
        EXPECT_EQ(r, SendResult::ok) << "message " << sent;
      }
    }
    const std::uint32_t before = tally.received;
    pair.step(1000);
    idle_steps = tally.received == before && sent == kMessages ? idle_steps + 1 : 0;
  }
  EXPECT_EQ(sent, kMessages);
  EXPECT_EQ(pair.server.peer_state(pair.server_peer), PeerState::connected);
  EXPECT_EQ(pair.client.peer_state(pair.client_peer), PeerState::connected);
  tally.drops = describe_drops(pair.server.counters().drops);
  return tally;
}

TEST(SequenceWrap, ReliableArrivesExactlyOnceInOrder) {
  const Tally t = run(Delivery::reliable, 1);
  EXPECT_EQ(t.received, kMessages) << "missing: " << t.missing() << "; receiver drops: " << t.drops;
  EXPECT_EQ(t.duplicates, 0u);
  EXPECT_EQ(t.out_of_order, 0u);
  EXPECT_EQ(t.wrong_channel, 0u);
}

TEST(SequenceWrap, UnreliableNeverGoesBackwards) {
  // ENet sends the message that would wrap the unreliable counter as reliable instead
  // (enet_peer_send), so on a lossless link every message arrives and order holds.
  const Tally t = run(Delivery::unreliable, 1);
  EXPECT_EQ(t.backwards, 0u);
  EXPECT_EQ(t.duplicates, 0u);
  EXPECT_EQ(t.wrong_channel, 0u);
  EXPECT_EQ(t.received, kMessages)
      << "lossless link, throttle never engaged; missing: " << t.missing()
      << "; receiver drops: " << t.drops;
  // Both sides of the 65536 boundary arrived.
  EXPECT_EQ(t.seen[65534], 1);
  EXPECT_EQ(t.seen[65536], 1);
  EXPECT_EQ(t.seen[kMessages - 1], 1);
}

TEST(SequenceWrap, UnreliableQueuedBeforeReliableIsNotOvertaken) {
  // The smallest form of what the wrap above depends on. libenet 1.3.17 keeps one outgoing
  // queue per peer (ENetPeer::outgoingCommands) and sends in queue order, so an unreliable
  // message queued before a reliable one on the same channel leaves first and is delivered.
  // Were the reliable one sent first, the receiver would advance its reliable sequence and
  // discard the unreliable one as late.
  CorePair pair;
  std::vector<std::uint32_t> got;
  pair.on_server_event = [&](Event& ev) {
    if (ev.type == EventType::receive) got.push_back(tern::test::payload_index(ev.packet.bytes()));
  };
  pair.handshake(2);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(
      pair.client.send(pair.client_peer, 1, Delivery::unreliable, tern::test::numbered_payload(1)),
      SendResult::ok);
  ASSERT_EQ(
      pair.client.send(pair.client_peer, 1, Delivery::reliable, tern::test::numbered_payload(2)),
      SendResult::ok);
  ASSERT_EQ(
      pair.client.send(pair.client_peer, 1, Delivery::unreliable, tern::test::numbered_payload(3)),
      SendResult::ok);
  for (int i = 0; i < 5; ++i) pair.step(1000);
  EXPECT_EQ(got, (std::vector<std::uint32_t>{1, 2, 3}))
      << "receiver drops: " << describe_drops(pair.server.counters().drops);
}

TEST(SequenceWrap, UnsequencedHasNoDuplicates) {
  const Tally t = run(Delivery::unsequenced, 1);
  EXPECT_EQ(t.duplicates, 0u);
  EXPECT_EQ(t.wrong_channel, 0u);
  EXPECT_EQ(t.received, kMessages)
      << "lossless link, throttle never engaged; missing: " << t.missing()
      << "; receiver drops: " << t.drops;
  EXPECT_EQ(t.seen[65535], 1);
  EXPECT_EQ(t.seen[65536], 1);
  EXPECT_EQ(t.seen[kMessages - 1], 1);
}

TEST(SequenceWrap, ReliableWrapsOnChannelZeroWithBothDirections) {
  // The same crossing with traffic both ways, so acknowledgements ride on data datagrams.
  CorePair pair;
  Tally at_server;
  Tally at_client;
  pair.on_server_event = [&](Event& ev) { at_server.note(ev, 0); };
  pair.on_client_event = [&](Event& ev) { at_client.note(ev, 0); };
  pair.handshake(1);
  ASSERT_FALSE(HasFatalFailure());
  std::uint32_t sent = 0;
  for (int steps = 0;
       steps < 20'000 && (at_server.received < kMessages || at_client.received < kMessages);
       ++steps) {
    PeerStats a;
    PeerStats b;
    ASSERT_TRUE(pair.client.peer_stats(pair.client_peer, a));
    ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, b));
    if (sent < kMessages && a.queued_outgoing < kBatch && b.queued_outgoing < kBatch) {
      for (std::uint32_t i = 0; i < kBatch && sent < kMessages; ++i, ++sent) {
        const auto payload = tern::test::numbered_payload(sent, 4);
        ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable, payload),
                  SendResult::ok);
        ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable, payload),
                  SendResult::ok);
      }
    }
    pair.step(1000);
  }
  EXPECT_EQ(at_server.received, kMessages);
  EXPECT_EQ(at_client.received, kMessages);
  EXPECT_EQ(at_server.out_of_order + at_client.out_of_order, 0u);
  EXPECT_EQ(at_server.duplicates + at_client.duplicates, 0u);
}

}  // namespace
