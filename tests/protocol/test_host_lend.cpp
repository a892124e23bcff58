// HostConfig::lend_payloads: a message taken whole from the datagram being handled comes as a
// view of that datagram's bytes, not a copy; messages held back for ordering or rebuilt from
// fragments still come as Packets; and the lent bytes are never charged as buffered data.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <tern/packet.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;
using tern::test::numbered_payload;
using tern::test::payload_index;

using Datagrams = std::vector<std::vector<std::byte>>;

HostConfig lending() {
  HostConfig c;
  c.lend_payloads = true;
  return c;
}

// What the client flushes, kept in buffers the test owns: the server may lend views of them
// to its events, so they must outlive the events (CorePair reuses its batch).
Datagrams take_client_output(CorePair& pair) {
  std::vector<OutDatagram> out(32);
  Datagrams taken;
  for (;;) {
    const std::size_t n = pair.client.flush(pair.now_us, out);
    for (std::size_t i = 0; i < n; ++i)
      taken.emplace_back(out[i].view().begin(), out[i].view().end());
    if (n < out.size()) return taken;
  }
}

std::vector<Event> server_events(CorePair& pair) {
  std::vector<Event> events;
  Event ev;
  while (pair.server.poll_event(ev)) {
    if (ev.type == EventType::receive) events.push_back(std::move(ev));
  }
  return events;
}

bool inside(std::span<const std::byte> part, const std::vector<std::byte>& whole) {
  return !part.empty() && part.data() >= whole.data() &&
         part.data() + part.size() <= whole.data() + whole.size();
}

TEST(HostLend, WholeMessagesPointIntoTheirDatagram) {
  CorePair pair({}, lending());
  pair.handshake(2);
  const auto reliable = numbered_payload(1, 40);
  const auto unreliable = numbered_payload(2, 40);
  const auto unsequenced = numbered_payload(3, 40);
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable, reliable), SendResult::ok);
  ASSERT_EQ(pair.client.send(pair.client_peer, 1, Delivery::unreliable, unreliable),
            SendResult::ok);
  ASSERT_EQ(pair.client.send(pair.client_peer, 1, Delivery::unsequenced, unsequenced),
            SendResult::ok);
  const Datagrams sent = take_client_output(pair);
  ASSERT_EQ(sent.size(), 1u);
  pair.server.on_datagram(pair.now_us, pair.client_ep, sent[0]);
  EXPECT_EQ(pair.server.counters().buffered_bytes, 0u);

  std::vector<Event> got = server_events(pair);
  ASSERT_EQ(got.size(), 3u);
  const std::vector<std::byte>* want[] = {&reliable, &unreliable, &unsequenced};
  const Delivery deliveries[] = {Delivery::reliable, Delivery::unreliable, Delivery::unsequenced};
  for (std::size_t i = 0; i < got.size(); ++i) {
    Event& ev = got[i];
    SCOPED_TRACE(i);
    EXPECT_FALSE(ev.packet);
    EXPECT_TRUE(inside(ev.lent, sent[0]));
    EXPECT_EQ(ev.delivery, deliveries[i]);
    EXPECT_EQ(ev.channel, i == 0 ? 0 : 1);
    const auto bytes = ev.payload();
    EXPECT_EQ(std::vector<std::byte>(bytes.begin(), bytes.end()), *want[i]);
    // Kept past the handler: a copy of its own, outside the datagram.
    const Packet kept = ev.take_payload();
    ASSERT_EQ(kept.size(), want[i]->size());
    EXPECT_FALSE(inside(kept.bytes(), sent[0]));
    EXPECT_EQ(std::vector<std::byte>(kept.bytes().begin(), kept.bytes().end()), *want[i]);
  }
  EXPECT_EQ(pair.server.counters().buffered_bytes, 0u);
  EXPECT_EQ(pair.server.counters().messages_in, 3u);
}

TEST(HostLend, WithoutLendingEveryMessageIsAPacket) {
  CorePair pair;
  pair.handshake(2);
  const auto message = numbered_payload(9, 40);
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable, message), SendResult::ok);
  ASSERT_EQ(pair.client.send(pair.client_peer, 1, Delivery::unsequenced, message), SendResult::ok);
  const Datagrams sent = take_client_output(pair);
  for (const auto& d : sent) pair.server.on_datagram(pair.now_us, pair.client_ep, d);
  std::vector<Event> got = server_events(pair);
  ASSERT_EQ(got.size(), 2u);
  for (Event& ev : got) {
    EXPECT_TRUE(ev.packet);
    EXPECT_TRUE(ev.lent.empty());
    EXPECT_EQ(ev.payload().data(), ev.packet.bytes().data());
    const std::byte* before = ev.packet.bytes().data();
    const Packet kept = ev.take_payload();
    EXPECT_EQ(kept.bytes().data(), before);  // the event's own Packet, not another copy
    EXPECT_EQ(payload_index(kept.bytes()), 9u);
  }
}

TEST(HostLend, MessagesHeldForOrderComeAsPackets) {
  CorePair pair({}, lending());
  pair.handshake(1);
  const auto first = numbered_payload(1, 40);
  const auto second = numbered_payload(2, 40);
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable, first), SendResult::ok);
  const Datagrams d1 = take_client_output(pair);
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable, second), SendResult::ok);
  const Datagrams d2 = take_client_output(pair);
  ASSERT_EQ(d1.size(), 1u);
  ASSERT_EQ(d2.size(), 1u);
  // The second arrives first: it waits for the first, which then finds it waiting.
  pair.server.on_datagram(pair.now_us, pair.client_ep, d2[0]);
  EXPECT_TRUE(server_events(pair).empty());
  EXPECT_EQ(pair.server.counters().buffered_bytes, second.size());
  pair.server.on_datagram(pair.now_us, pair.client_ep, d1[0]);
  std::vector<Event> got = server_events(pair);
  ASSERT_EQ(got.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(got[i].packet);
    EXPECT_TRUE(got[i].lent.empty());
    EXPECT_EQ(payload_index(got[i].payload()), i + 1);
  }
  EXPECT_EQ(pair.server.counters().buffered_bytes, 0u);

  // In order again with nothing held: lent.
  const auto third = numbered_payload(3, 40);
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable, third), SendResult::ok);
  const Datagrams d3 = take_client_output(pair);
  ASSERT_EQ(d3.size(), 1u);
  pair.server.on_datagram(pair.now_us, pair.client_ep, d3[0]);
  got = server_events(pair);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].packet);
  EXPECT_TRUE(inside(got[0].lent, d3[0]));
  EXPECT_EQ(payload_index(got[0].payload()), 3u);
}

TEST(HostLend, ReassembledMessagesComeAsPackets) {
  CorePair pair({}, lending());
  pair.handshake(1);
  const auto big = numbered_payload(5, 5000);  // several fragments at the default MTU
  ASSERT_EQ(pair.client.send(pair.client_peer, 0, Delivery::reliable, big), SendResult::ok);
  const Datagrams sent = take_client_output(pair);
  ASSERT_GT(sent.size(), 1u);
  for (const auto& d : sent) pair.server.on_datagram(pair.now_us, pair.client_ep, d);
  std::vector<Event> got = server_events(pair);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].packet);
  EXPECT_TRUE(got[0].lent.empty());
  const auto bytes = got[0].payload();
  EXPECT_EQ(std::vector<std::byte>(bytes.begin(), bytes.end()), big);
  EXPECT_EQ(pair.server.counters().buffered_bytes, 0u);
}

}  // namespace
