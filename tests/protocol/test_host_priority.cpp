// Message priorities (HostCore::send with a Priority) on simulated time: what the sender's
// next datagram carries, read off the wire. A high-priority message queued behind a bulk
// transfer at low priority rides in the very next datagram built; at equal priority it waits
// behind the bulk (so the test can fail); a lower level still gets its share under a backlog
// of a higher one; nothing passes an earlier message of its own channel; one level alone
// keeps the order of the calls.
#include "core_pair.hpp"

#include "host_core.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <vector>

namespace tern::test {
namespace {

using proto::Cmd;
using proto::Command;
using proto::CommandDecoder;
using proto::Drop;

constexpr std::uint64_t kOneWayUs = 20'000;
constexpr std::uint32_t kGameMarker = 0x47000000;  // payload indexes of game messages

// What one datagram carried: (channel, payload index) of each message command's first bytes.
struct Carried {
  std::vector<std::pair<std::uint8_t, std::uint32_t>> messages;
};

Carried read_datagram(std::span<const std::byte> bytes) {
  Carried out;
  proto::DecodedHeader dh;
  Drop why{};
  if (!proto::decode_header(bytes, false, dh, why)) return out;
  CommandDecoder dec(bytes, dh.size);
  Command c;
  while (dec.next(c, why)) {
    const Cmd t = c.type();
    if (t == Cmd::send_reliable || t == Cmd::send_unreliable || t == Cmd::send_unsequenced ||
        (t == Cmd::send_fragment && c.fragment.fragment_number == 0)) {
      out.messages.emplace_back(c.channel_id, payload_index(c.payload));
    }
  }
  return out;
}

// ENet's window, so a bulk transfer builds the backlog the scheduler orders. Congestion
// control lifts that window and gives small default-level messages their own lane (tested in
// tests/api/host_congestion_test.cpp); here the scheduler is on its own.
proto::HostConfig enet_window() {
  proto::HostConfig c;
  c.congestion_control = false;
  return c;
}

// Two cores with kOneWayUs between them each way; the client's datagrams are also read.
class DelayedPair {
 public:
  DelayedPair() : out_(64) {}
  proto::HostCore client{enet_window()};
  proto::HostCore server{enet_window()};
  const Endpoint client_ep = Endpoint::v4(0x0A000001, 40001);
  const Endpoint server_ep = Endpoint::v4(0x0A000002, 7777);
  std::uint64_t now_us = 1'000'000;
  PeerHandle at_client, at_server;
  std::vector<std::uint32_t> server_received;  // payload indexes, in delivery order
  std::vector<std::uint8_t> server_channels;

  // Flushes the client and returns what each of its datagrams carried (in flight after).
  std::vector<Carried> flush_client() {
    std::vector<Carried> out;
    for (;;) {
      const std::size_t n = client.flush(now_us, out_);
      for (std::size_t i = 0; i < n; ++i) {
        out.push_back(read_datagram(out_[i].view()));
        to_server_.push_back({now_us + kOneWayUs, {out_[i].view().begin(), out_[i].view().end()}});
      }
      if (n < out_.size()) return out;
    }
  }

  // Advances 1 ms: delivers what is due both ways, flushes the server (and the client unless
  // the test flushes it itself).
  std::vector<Carried> step(bool flush_the_client = true) {
    now_us += 1000;
    while (!to_server_.empty() && to_server_.front().first <= now_us) {
      server.on_datagram(now_us, client_ep, to_server_.front().second);
      to_server_.pop_front();
    }
    while (!to_client_.empty() && to_client_.front().first <= now_us) {
      client.on_datagram(now_us, server_ep, to_client_.front().second);
      to_client_.pop_front();
    }
    drain();
    for (;;) {
      const std::size_t n = server.flush(now_us, out_);
      for (std::size_t i = 0; i < n; ++i) {
        to_client_.push_back({now_us + kOneWayUs, {out_[i].view().begin(), out_[i].view().end()}});
      }
      if (n < out_.size()) break;
    }
    return flush_the_client ? flush_client() : std::vector<Carried>{};
  }

  void drain() {
    Event ev;
    while (client.poll_event(ev)) {
      if (ev.type == EventType::connect) connected_client_ = true;
    }
    while (server.poll_event(ev)) {
      if (ev.type == EventType::connect) at_server = ev.peer;
      if (ev.type == EventType::receive) {
        server_received.push_back(payload_index(ev.payload()));
        server_channels.push_back(ev.channel);
      }
    }
  }

  void connect() {
    at_client = client.connect(now_us, server_ep, 4, 0);
    ASSERT_TRUE(at_client.valid());
    for (int i = 0; i < 3000 && !(connected_client_ && at_server.valid()); ++i) step();
    ASSERT_TRUE(connected_client_ && at_server.valid());
    for (int i = 0; i < 1000; ++i) step();  // RTT samples
  }

 private:
  std::vector<proto::OutDatagram> out_;
  std::deque<std::pair<std::uint64_t, std::vector<std::byte>>> to_server_, to_client_;
  bool connected_client_ = false;
};

// The bulk: kBulk reliable messages of 1,000 bytes on channel 1, far more than one window.
constexpr std::uint32_t kBulk = 2000;
void queue_bulk(DelayedPair& d, Priority priority) {
  for (std::uint32_t i = 0; i < kBulk; ++i) {
    ASSERT_EQ(d.client.send(d.at_client, 1, Delivery::reliable,
                            Packet::copy_of(numbered_payload(i, 1000)), priority),
              SendResult::ok);
  }
}

// For each of `games` game messages sent every 20 ms while the bulk is moving, how many
// client datagrams went out after it was queued before the one that carried it.
std::vector<std::size_t> datagrams_before_game_messages(DelayedPair& d, Priority game,
                                                        std::uint32_t games) {
  std::vector<std::size_t> waits;
  for (std::uint32_t g = 0; g < games; ++g) {
    for (int i = 0; i < 19; ++i) d.step();
    d.step(false);
    EXPECT_EQ(d.client.send(d.at_client, 0, Delivery::reliable,
                            Packet::copy_of(numbered_payload(kGameMarker + g, 40)), game),
              SendResult::ok);
    std::size_t before = 0;
    bool found = false;
    for (int ms = 0; ms < 2000 && !found; ++ms) {
      for (const Carried& c : ms == 0 ? d.flush_client() : d.step()) {
        for (const auto& [ch, index] : c.messages) {
          if (ch == 0 && index == kGameMarker + g) found = true;
        }
        if (found) break;
        ++before;
      }
    }
    EXPECT_TRUE(found) << "game message " << g << " never sent";
    waits.push_back(before);
  }
  return waits;
}

TEST(HostPriority, HighMessageRidesTheNextDatagramPastALowBulk) {
  DelayedPair d;
  d.connect();
  queue_bulk(d, Priority::low);
  const auto waits = datagrams_before_game_messages(d, Priority::high, 20);
  for (std::size_t g = 0; g < waits.size(); ++g) {
    EXPECT_EQ(waits[g], 0u) << "game message " << g << " waited behind " << waits[g]
                            << " datagrams of bulk";
  }
  // The bulk was still moving all along (the property is not met by an idle link).
  EXPECT_LT(std::count_if(d.server_received.begin(), d.server_received.end(),
                          [](std::uint32_t i) { return i < kBulk; }),
            static_cast<std::ptrdiff_t>(kBulk));
}

// The same at equal priority: the game message waits behind the bulk queued before it.
TEST(HostPriority, AtEqualPriorityTheGameMessageWaitsBehindTheBulk) {
  DelayedPair d;
  d.connect();
  queue_bulk(d, Priority::medium);
  const auto waits = datagrams_before_game_messages(d, Priority::medium, 1);
  EXPECT_GT(waits.front(), 100u);
}

// Immediate sorts ahead of queued high messages of other channels too.
TEST(HostPriority, ImmediateGoesAheadOfEverythingQueued) {
  DelayedPair d;
  d.connect();
  for (std::uint32_t i = 0; i < 50; ++i) {
    ASSERT_EQ(d.client.send(d.at_client, 1 + i % 2, Delivery::reliable,
                            Packet::copy_of(numbered_payload(i, 1000)), Priority::high),
              SendResult::ok);
  }
  ASSERT_EQ(d.client.send(d.at_client, 0, Delivery::unreliable,
                          Packet::copy_of(numbered_payload(kGameMarker, 40)), Priority::immediate),
            SendResult::ok);
  const auto carried = d.flush_client();
  ASSERT_FALSE(carried.empty());
  ASSERT_FALSE(carried.front().messages.empty());
  EXPECT_EQ(carried.front().messages.front(), std::make_pair(std::uint8_t{0}, kGameMarker));
}

// Under a backlog of high on one channel and low on another, low still gets through, at
// about its weight (1 command for high's 9), and high gets most of the link.
TEST(HostPriority, LowIsNeverStarvedByABacklogOfHigh) {
  DelayedPair d;
  d.connect();
  std::size_t low_sent = 0, high_sent = 0;
  std::uint32_t next_high = 0;
  queue_bulk(d, Priority::low);
  for (int ms = 0; ms < 3000; ++ms) {
    // Keep high backlogged: 300 messages of it waiting all along.
    while (next_high < high_sent + 300) {
      ASSERT_EQ(d.client.send(d.at_client, 2, Delivery::reliable,
                              Packet::copy_of(numbered_payload(kGameMarker + next_high++, 1000)),
                              Priority::high),
                SendResult::ok);
    }
    for (const Carried& c : d.step()) {
      for (const auto& [ch, index] : c.messages) (ch == 1 ? low_sent : high_sent) += 1;
    }
  }
  ASSERT_GT(high_sent, 500u);
  ASSERT_LT(low_sent, kBulk) << "the bulk ran out: low was not competing all along";
  EXPECT_GT(low_sent, high_sent / 30) << "low " << low_sent << ", high " << high_sent;
  EXPECT_LT(low_sent, high_sent / 3) << "low " << low_sent << ", high " << high_sent;
}

// A high message never passes an earlier one of its own channel: unreliable sequenced
// messages on one channel, low then high, all arrive (none discarded as late) in call order.
TEST(HostPriority, NothingPassesAnEarlierMessageOfItsChannel) {
  DelayedPair d;
  d.connect();
  for (std::uint32_t i = 0; i < 40; ++i) {
    ASSERT_EQ(d.client.send(d.at_client, 3, Delivery::unreliable,
                            Packet::copy_of(numbered_payload(i, 500)),
                            i % 2 == 0 ? Priority::low : Priority::high),
              SendResult::ok);
  }
  for (int ms = 0; ms < 200; ++ms) d.step();
  std::vector<std::uint32_t> got;
  for (std::size_t k = 0; k < d.server_received.size(); ++k) {
    if (d.server_channels[k] == 3) got.push_back(d.server_received[k]);
  }
  ASSERT_EQ(got.size(), 40u);
  for (std::uint32_t i = 0; i < 40; ++i) EXPECT_EQ(got[i], i);
}

// One level alone: the wire order is the order of the calls, across channels and kinds.
TEST(HostPriority, OneLevelKeepsTheOrderOfTheCalls) {
  for (Priority level : {Priority::medium, Priority::low, Priority::high}) {
    DelayedPair d;
    d.connect();
    for (std::uint32_t i = 0; i < 30; ++i) {
      const Delivery how = i % 3 == 0 ? Delivery::unreliable : Delivery::reliable;
      ASSERT_EQ(d.client.send(d.at_client, static_cast<std::uint8_t>(i % 4), how,
                              Packet::copy_of(numbered_payload(i, 100)), level),
                SendResult::ok);
    }
    std::vector<std::uint32_t> wire;
    for (const Carried& c : d.flush_client()) {
      for (const auto& [ch, index] : c.messages) wire.push_back(index);
    }
    ASSERT_EQ(wire.size(), 30u);
    for (std::uint32_t i = 0; i < 30; ++i) EXPECT_EQ(wire[i], i);
  }
}

}  // namespace
}  // namespace tern::test
