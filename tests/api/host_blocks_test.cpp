// Host::send_block over the simulated network: a 4 MiB block under 20% loss, reordering and
// duplication arrives exact and once; game messages keep their latency while a block is in
// flight (p99 on the sim clock, printed); one block per channel at a time; the size cap; and a
// plain ENet peer gets the block as one reliable message in ENet fragments.
#include "sim_pairs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

using namespace tern::apitest;
using tern::Delivery;
using tern::Event;
using tern::EventType;
using tern::HostOptions;
using tern::HostStats;
using tern::Packet;
using tern::Priority;
using tern::SendResult;

std::vector<std::byte> block_bytes(std::size_t size, std::uint32_t seed) {
  std::vector<std::byte> out(size);
  std::uint32_t x = seed * 2654435761u + 1;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = static_cast<std::byte>(x);
  }
  return out;
}

class Blocks : public SimPairs {
 protected:
  static std::vector<const Event*> receives(const std::vector<Event>& events, std::uint8_t ch) {
    std::vector<const Event*> out;
    for (const Event& e : events) {
      if (e.type == EventType::receive && e.channel == ch) out.push_back(&e);
    }
    return out;
  }

  static std::uint64_t dropped(const HostStats& s, const char* reason) {
    for (const auto& [name, n] : s.drops_by_reason) {
      if (std::string_view(name) == reason) return n;
    }
    return 0;
  }

  // Game messages every 10 ms on channel 0 (reliable, high priority) for `duration_us`:
  // each one's latency from send() to the server's event, sim clock, in microseconds.
  std::vector<std::uint64_t> game_latencies(Pair& p, std::uint64_t duration_us,
                                            std::uint32_t first_index) {
    std::vector<std::uint64_t> sent_at;
    const std::uint64_t end = net_.now_us() + duration_us;
    while (net_.now_us() < end) {
      EXPECT_EQ(p.client->send(p.at_client, 0, Delivery::reliable,
                               Packet::copy_of(numbered(first_index + sent_at.size(), 40)),
                               Priority::high),
                SendResult::ok);
      sent_at.push_back(net_.now_us());
      run_for(10'000);
    }
    const std::uint32_t last = first_index + static_cast<std::uint32_t>(sent_at.size()) - 1;
    EXPECT_TRUE(run_until(
        [&] {
          const auto got = received(p, 0);
          return std::find(got.begin(), got.end(), last) != got.end();
        },
        30'000'000));
    std::vector<std::uint64_t> out;
    for (std::size_t k = 0; k < p.server_events.size(); ++k) {
      const Event& e = p.server_events[k];
      if (e.type != EventType::receive || e.channel != 0) continue;
      const std::uint32_t i = index_of(e.payload());
      if (i < first_index || i > last) continue;
      out.push_back(p.server_times[k] - sent_at[i - first_index]);
    }
    EXPECT_EQ(out.size(), sent_at.size());
    return out;
  }

  static std::uint64_t p99(std::vector<std::uint64_t> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, v.size() * 99 / 100)];
  }
};

TEST_F(Blocks, FourMiBUnderLossReorderingAndDuplicationArrivesExactOnce) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  tern::PeerStats stats;
  ASSERT_TRUE(p.client->peer_stats(p.at_client, stats));
  ASSERT_TRUE(stats.blocks) << "Tern peers did not agree on blocks";
  net_.set_default_link({.loss = 0.2,
                         .duplicate = 0.05,
                         .reorder = 0.1,
                         .latency_us = kOneWayLatencyUs,
                         .reorder_delay_us = 8'000});

  const auto data = block_bytes(4 << 20, 7);
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(data)), SendResult::ok);
  EXPECT_TRUE(p.client->block_in_flight(p.at_client, 1));
  const std::uint64_t start = net_.now_us();
  ASSERT_TRUE(run_until([&] { return !receives(p.server_events, 1).empty(); }, 120'000'000));
  std::printf("4 MiB block, 20%% loss + dup + reorder, 10 ms RTT: %.1f ms sim\n",
              static_cast<double>(net_.now_us() - start) / 1000.0);
  ASSERT_TRUE(run_until([&] { return !p.client->block_in_flight(p.at_client, 1); }, 30'000'000));
  run_for(200'000);  // late copies of slices: acknowledged, never delivered again
  const auto got = receives(p.server_events, 1);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0]->payload().size(), data.size());
  EXPECT_TRUE(std::equal(data.begin(), data.end(), got[0]->payload().begin()));
  EXPECT_EQ(got[0]->delivery, Delivery::reliable);
  const HostStats sent = p.client->stats();
  EXPECT_EQ(sent.blocks_sent, 1u);
  EXPECT_GT(sent.block_slices_resent, 0u);
  EXPECT_EQ(p.server->stats().blocks_received, 1u);
  EXPECT_EQ(p.server->stats().buffered_bytes, 0u);
  std::printf("slices sent %llu (resent %llu)\n",
              static_cast<unsigned long long>(sent.block_slices_sent),
              static_cast<unsigned long long>(sent.block_slices_resent));
}

// The other way too, on several channels at once, with messages on the same channel.
TEST_F(Blocks, BlocksBothWaysOnSeveralChannelsBesideMessages) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all(3);
  net_.set_default_link({.loss = 0.05, .latency_us = kOneWayLatencyUs});
  const auto a = block_bytes(300'000, 1), b = block_bytes(123'457, 2), c = block_bytes(5, 3);
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(a)), SendResult::ok);
  ASSERT_EQ(p.client->send_block(p.at_client, 2, Packet::copy_of(b)), SendResult::ok);
  ASSERT_EQ(p.server->send_block(p.at_server, 1, Packet::copy_of(c)), SendResult::ok);
  for (std::uint32_t i = 0; i < 20; ++i) {
    ASSERT_EQ(p.client->send(p.at_client, 1, Delivery::reliable, Packet::copy_of(numbered(i, 50))),
              SendResult::ok);
  }
  ASSERT_TRUE(run_until(
      [&] {
        return receives(p.server_events, 1).size() == 21 &&
               receives(p.server_events, 2).size() == 1 && receives(p.client_events, 1).size() == 1;
      },
      60'000'000));
  auto is = [](const Event* e, const std::vector<std::byte>& want) {
    return e->payload().size() == want.size() &&
           std::equal(want.begin(), want.end(), e->payload().begin());
  };
  const auto on1 = receives(p.server_events, 1);
  EXPECT_EQ(std::count_if(on1.begin(), on1.end(), [&](const Event* e) { return is(e, a); }), 1);
  EXPECT_TRUE(is(receives(p.server_events, 2)[0], b));
  EXPECT_TRUE(is(receives(p.client_events, 1)[0], c));
}

TEST_F(Blocks, OneBlockPerChannelAtATimeAndTheSizeCap) {
  HostOptions small;
  small.max_block_size = 1 << 20;
  Pair& p = add_pair(HostOptions{}, small);
  connect_all();
  EXPECT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes((1 << 20) + 1, 1))),
            SendResult::too_large);
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes(200'000, 1))),
            SendResult::ok);
  EXPECT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes(10, 2))),
            SendResult::block_busy);
  EXPECT_EQ(p.client->send_block(p.at_client, 0, Packet::copy_of(block_bytes(10, 3))),
            SendResult::ok);
  EXPECT_EQ(p.client->send_block(p.at_client, 2, Packet::copy_of(block_bytes(10, 3))),
            SendResult::bad_channel);
  ASSERT_TRUE(run_until([&] { return !p.client->block_in_flight(p.at_client, 1); }, 10'000'000));
  EXPECT_EQ(receives(p.server_events, 1).size(), 1u);
  EXPECT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes(10, 2))),
            SendResult::ok);
}

// A receiver with a smaller cap than the sender's refuses the block's slices
// (block_too_large) and answers with its cap: the sender's block ends with a block_refused
// event naming it, nothing is delivered, and larger blocks are too_large from then on, while
// the connection and blocks within the cap go on.
TEST_F(Blocks, ABlockAboveTheReceiversCapIsRefusedWithAnEvent) {
  HostOptions small;
  small.max_block_size = 1 << 20;
  Pair& p = add_pair(small, HostOptions{});
  connect_all();
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes(2 << 20, 1))),
            SendResult::ok);
  ASSERT_TRUE(
      run_until([&] { return find(p.client_events, EventType::block_refused); }, 10'000'000));
  const Event& refused = *find(p.client_events, EventType::block_refused);
  EXPECT_EQ(refused.channel, 1);
  EXPECT_EQ(refused.data, 1u << 20);
  EXPECT_EQ(refused.peer, p.at_client);
  EXPECT_FALSE(p.client->block_in_flight(p.at_client, 1));
  EXPECT_EQ(p.client->stats().blocks_refused, 1u);
  EXPECT_EQ(p.client->stats().blocks_sent, 0u);
  run_for(500'000);  // slices still in flight when the refusal came: refused too, no event
  EXPECT_EQ(count(p.client_events, EventType::block_refused), 1u);
  EXPECT_TRUE(receives(p.server_events, 1).empty());
  EXPECT_GT(dropped(p.server->stats(), "block_too_large"), 0u);
  EXPECT_EQ(p.server->stats().buffered_bytes, 0u);
  // The cap is known now: a larger block is refused at once, one within it goes.
  EXPECT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes((1 << 20) + 1, 2))),
            SendResult::too_large);
  const auto fits = block_bytes(1 << 20, 3);
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(fits)), SendResult::ok);
  ASSERT_TRUE(run_until([&] { return !receives(p.server_events, 1).empty(); }, 30'000'000));
  const auto got = receives(p.server_events, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0]->payload().size() == fits.size() &&
              std::equal(fits.begin(), fits.end(), got[0]->payload().begin()));
  EXPECT_EQ(find(p.client_events, EventType::disconnect), nullptr);
  EXPECT_EQ(find(p.server_events, EventType::disconnect), nullptr);
}

// A path that drops every datagram a slice fills (smaller MTU than the connection's) while
// pings and acks pass: no slice is ever acknowledged, and the sender times the peer out at
// its timeout maximum instead of keeping the block in flight forever.
TEST_F(Blocks, APeerThatAcknowledgesNoSliceTimesOut) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  p.client->set_peer_timeout(p.at_client, 32, 1000, 5000);
  net_.set_default_link({.latency_us = kOneWayLatencyUs, .mtu = 600});
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes(100'000, 4))),
            SendResult::ok);
  // The peer is alive: a message gets through and is acknowledged meanwhile.
  ASSERT_EQ(p.client->send(p.at_client, 0, Delivery::reliable, Packet::copy_of(numbered(1, 10))),
            SendResult::ok);
  ASSERT_TRUE(run_until([&] { return received(p, 0).size() == 1; }, 2'000'000));
  ASSERT_TRUE(run_until([&] { return find(p.client_events, EventType::disconnect); }, 60'000'000));
  EXPECT_EQ(find(p.client_events, EventType::disconnect)->reason, tern::DisconnectReason::timeout);
  EXPECT_EQ(p.client->stats().block_timeouts, 1u);
  EXPECT_GT(net_.stats().mtu_dropped, 0u);
  EXPECT_TRUE(receives(p.server_events, 1).empty());
}

// To a peer that behaves as plain ENet: one reliable message in ENet fragments.
TEST_F(Blocks, APlainEnetPeerGetsAReliableFragmentedMessage) {
  HostOptions plain;
  plain.selective_acks = false;
  plain.delivery_modes = false;
  plain.blocks = false;
  Pair& p = add_pair(plain, HostOptions{});
  connect_all();
  tern::PeerStats stats;
  ASSERT_TRUE(p.client->peer_stats(p.at_client, stats));
  EXPECT_FALSE(stats.blocks);
  net_.set_default_link({.loss = 0.1, .latency_us = kOneWayLatencyUs});
  const auto data = block_bytes(500'000, 9);
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(data)), SendResult::ok);
  EXPECT_FALSE(p.client->block_in_flight(p.at_client, 1));
  ASSERT_TRUE(run_until([&] { return !receives(p.server_events, 1).empty(); }, 60'000'000));
  const auto got = receives(p.server_events, 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0]->payload().size() == data.size() &&
              std::equal(data.begin(), data.end(), got[0]->payload().begin()));
  EXPECT_EQ(p.client->stats().block_slices_sent, 0u);
}

// Game messages (every 10 ms, high priority) at 1% loss and 50 ms RTT: p99 latency without a
// block, then with a 4 MiB block in flight on another channel (paced to 2 MB/s). The sim link has
// no bandwidth limit, so what is measured is the sender's scheduling: the game message is not held
// behind the block's slices.
TEST_F(Blocks, GameMessageLatencyWhileABlockIsInFlight) {
  HostOptions paced;
  paced.block_rate = 2'000'000;  // the block takes about 2 s: in flight all through
  Pair& p = add_pair(HostOptions{}, paced);
  net_.set_default_link({.latency_us = 25'000});
  connect_all();
  net_.set_default_link({.loss = 0.01, .latency_us = 25'000});
  const auto quiet = game_latencies(p, 2'000'000, 0);
  ASSERT_EQ(p.client->send_block(p.at_client, 1, Packet::copy_of(block_bytes(4 << 20, 5))),
            SendResult::ok);
  const auto busy = game_latencies(p, 1'500'000, 100'000);
  const bool block_was_in_flight = p.client->block_in_flight(p.at_client, 1);
  std::printf("game p99: %.1f ms without a block, %.1f ms with a 4 MiB block in flight%s\n",
              static_cast<double>(p99(quiet)) / 1000.0, static_cast<double>(p99(busy)) / 1000.0,
              block_was_in_flight ? " (still in flight at the end)" : "");
  ASSERT_FALSE(quiet.empty());
  ASSERT_FALSE(busy.empty());
  // One retransmission's worth of slack (the loss draws differ between the two runs: a game
  // message lost once arrives about 62 ms late here, RTT plus the timeout's margin).
  EXPECT_LE(p99(busy), p99(quiet) + 75'000);
  ASSERT_TRUE(run_until([&] { return !receives(p.server_events, 1).empty(); }, 60'000'000));
}

}  // namespace

namespace {

// Through a 250 KB/s bottleneck with an unbounded queue (50 ms RTT, 1% loss), a 1 MiB block
// from a pair with congestion control and from a pair without it (the fixed pace, 256 slices
// per round trip, is far above the bottleneck), side by side. Small reliable messages every
// 20 ms on each pair measure the queue the block builds: with congestion control its slices
// go at the bottleneck's rate and the queue stays near the path's bandwidth-delay product;
// without, it grows to what the slice window holds. Both blocks arrive exact.
TEST_F(Blocks, CongestionControlPacesSlicesAtTheBottleneck) {
  HostOptions no_cc;
  no_cc.congestion_control = false;
  Pair& cc = add_pair(HostOptions{}, HostOptions{});
  Pair& fixed = add_pair(no_cc, no_cc);
  net_.set_default_link({.latency_us = 25'000});
  connect_all();
  tern::PeerStats stats;
  ASSERT_TRUE(cc.client->peer_stats(cc.at_client, stats));
  ASSERT_TRUE(stats.congestion_control);
  ASSERT_TRUE(fixed.client->peer_stats(fixed.at_client, stats));
  ASSERT_FALSE(stats.congestion_control);
  net_.set_default_link({.loss = 0.01, .latency_us = 25'000, .bandwidth_bytes_per_s = 250'000});

  const auto data = block_bytes(1 << 20, 11);
  Pair* pairs[] = {&cc, &fixed};
  std::vector<std::uint64_t> sent_at[2];
  std::uint64_t done_at[2] = {0, 0};
  const std::uint64_t start = net_.now_us();
  for (Pair* p : pairs) {
    ASSERT_EQ(p->client->send_block(p->at_client, 1, Packet::copy_of(data)), SendResult::ok);
  }
  std::uint64_t next_message = start;
  ASSERT_TRUE(run_until(
      [&] {
        for (int k = 0; k < 2; ++k) {
          if (done_at[k] == 0 && !receives(pairs[k]->server_events, 1).empty()) {
            done_at[k] = net_.now_us();
          }
        }
        if (net_.now_us() >= next_message) {
          next_message += 20'000;
          for (int k = 0; k < 2; ++k) {
            if (done_at[k] != 0) continue;
            const auto i = static_cast<std::uint32_t>(sent_at[k].size());
            EXPECT_EQ(pairs[k]->client->send(pairs[k]->at_client, 0, Delivery::reliable,
                                             Packet::copy_of(numbered(i, 40)), Priority::high),
                      SendResult::ok);
            sent_at[k].push_back(net_.now_us());
          }
        }
        return done_at[0] != 0 && done_at[1] != 0;
      },
      120'000'000));
  run_for(2'000'000);  // the last messages arrive
  std::uint64_t p90[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    const Pair& p = *pairs[k];
    std::vector<std::uint64_t> latency;
    for (std::size_t e = 0; e < p.server_events.size(); ++e) {
      const Event& ev = p.server_events[e];
      if (ev.type != EventType::receive || ev.channel != 0) continue;
      const std::uint32_t i = index_of(ev.payload());
      if (i < sent_at[k].size()) latency.push_back(p.server_times[e] - sent_at[k][i]);
    }
    ASSERT_EQ(latency.size(), sent_at[k].size());
    std::sort(latency.begin(), latency.end());
    p90[k] = latency[latency.size() * 9 / 10];
    const auto got = receives(p.server_events, 1);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_TRUE(got[0]->payload().size() == data.size() &&
                std::equal(data.begin(), data.end(), got[0]->payload().begin()));
  }
  const double cc_s = static_cast<double>(done_at[0] - start) / 1e6;
  const double fixed_s = static_cast<double>(done_at[1] - start) / 1e6;
  std::printf(
      "1 MiB through 250 KB/s, 50 ms RTT, 1%% loss: congestion control %.2f s (%.0f KB/s), "
      "p90 message latency %.1f ms; fixed pace %.2f s (%.0f KB/s), p90 %.1f ms; slices resent "
      "%llu / %llu\n",
      cc_s, static_cast<double>(data.size()) / cc_s / 1000, static_cast<double>(p90[0]) / 1000.0,
      fixed_s, static_cast<double>(data.size()) / fixed_s / 1000,
      static_cast<double>(p90[1]) / 1000.0,
      static_cast<unsigned long long>(cc.client->stats().block_slices_resent),
      static_cast<unsigned long long>(fixed.client->stats().block_slices_resent));
  // The queue: one-way delay is 25 ms plus what waits at the bottleneck. Paced by the model
  // it stays within a few round trips; at the fixed pace it holds most of the slice window.
  EXPECT_LT(p90[0], 200'000u);
  EXPECT_LT(p90[0] * 3, p90[1]);
  // And the pace is the bottleneck's: at least 70% of it over the whole block.
  EXPECT_GT(static_cast<double>(data.size()) / cc_s, 0.7 * 250'000);
}

}  // namespace
