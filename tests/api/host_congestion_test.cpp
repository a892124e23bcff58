// HostOptions::congestion_control over the simulated network, on virtual time: what the hello
// agrees (both sides must want it; a plain ENet peer keeps ENet's window), exact delivery
// under loss, reordering and duplication, pacing at the estimated rate, a game channel's
// latency while a transfer fills another, and the window growing past ENet's 64 KiB on a
// long fat link.
#include "sim_pairs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

using namespace tern::apitest;
using tern::Delivery;
using tern::EventType;
using tern::Host;
using tern::HostOptions;
using tern::PeerHandle;
using tern::PeerStats;
using tern::SendResult;

constexpr std::size_t kBulkMessage = 1200;

HostOptions with_cc(bool on = true) {
  HostOptions o;
  o.congestion_control = on;
  return o;
}

PeerStats stats_of(const Host& host, PeerHandle peer) {
  PeerStats s;
  EXPECT_TRUE(host.peer_stats(peer, s));
  return s;
}

class Congestion : public SimPairs {
 protected:
  // `count` bulk messages on `channel`, numbered from 0, queued at once.
  static void queue_bulk(Pair& p, std::uint32_t count, std::uint8_t channel = 1) {
    for (std::uint32_t i = 0; i < count; ++i) {
      ASSERT_EQ(p.client->send(p.at_client, channel, Delivery::reliable, numbered(i, kBulkMessage)),
                SendResult::ok);
    }
  }
  static bool got_all(const Pair& p, std::uint8_t channel, std::uint32_t count) {
    return received(p, channel).size() >= count;
  }
};

std::uint64_t percentile(std::vector<std::uint64_t> v, double pct) {
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(pct / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// Both sides must want it (each side's window is the other's receive buffer); a Tern client
// without it, or one that behaves exactly as ENet (no hello), keeps ENet's window: a transfer
// to it never has more than 64 KiB in flight.
TEST_F(Congestion, TheHelloAgreesItOnlyWhenBothAsk) {
  Pair& both = add_pair(with_cc(), with_cc());
  Pair& server_only = add_pair(with_cc(), with_cc(false));
  Pair& client_only = add_pair(with_cc(false), with_cc());
  HostOptions plain = with_cc(false);
  plain.selective_acks = false;
  plain.delivery_modes = false;  // no hello at all
  Pair& plain_client = add_pair(with_cc(), plain);
  connect_all();
  EXPECT_TRUE(stats_of(*both.client, both.at_client).congestion_control);
  EXPECT_TRUE(stats_of(*both.server, both.at_server).congestion_control);
  for (Pair* p : {&server_only, &client_only, &plain_client}) {
    EXPECT_FALSE(stats_of(*p->client, p->at_client).congestion_control);
    EXPECT_FALSE(stats_of(*p->server, p->at_server).congestion_control);
  }
  // The server sends to the plain client: ENet's window, so never more than 64 KiB in flight.
  constexpr std::uint32_t kCount = 400;
  for (std::uint32_t i = 0; i < kCount; ++i) {
    ASSERT_EQ(plain_client.server->send(plain_client.at_server, 1, Delivery::reliable,
                                        numbered(i, kBulkMessage)),
              SendResult::ok);
  }
  std::uint32_t most_in_flight = 0;
  ASSERT_TRUE(run_until(
      [&] {
        most_in_flight =
            std::max(most_in_flight,
                     stats_of(*plain_client.server, plain_client.at_server).reliable_in_transit);
        return received_by(plain_client.client_events, 1).size() >= kCount;
      },
      60'000'000));
  EXPECT_LE(most_in_flight, 65536u);
  EXPECT_EQ(received_by(plain_client.client_events, 1), first_n(kCount));
  EXPECT_EQ(plain_client.server->stats().paced_datagrams, 0u);
}

// 20% loss each way, reordering and duplication: a transfer and a small-message stream on
// another channel arrive exactly, in order, once.
TEST_F(Congestion, DeliveryIsExactUnderLossReorderingAndDuplication) {
  Pair& p = add_pair(with_cc(), with_cc());
  connect_all();
  ASSERT_TRUE(stats_of(*p.client, p.at_client).congestion_control);
  net_.set_default_link({.loss = 0.2,
                         .duplicate = 0.05,
                         .reorder = 0.1,
                         .latency_us = kOneWayLatencyUs,
                         .reorder_delay_us = 3000});
  constexpr std::uint32_t kBulk = 600, kSmall = 200;
  queue_bulk(p, kBulk);
  for (std::uint32_t i = 0; i < kSmall; ++i) {
    ASSERT_EQ(p.client->send(p.at_client, 0, Delivery::reliable, numbered(i, 64)), SendResult::ok);
    run_for(5'000);
  }
  ASSERT_TRUE(
      run_until([&] { return got_all(p, 1, kBulk) && got_all(p, 0, kSmall); }, 300'000'000));
  run_for(200'000);  // late duplicates must not be delivered
  EXPECT_EQ(received(p, 1), first_n(kBulk));
  EXPECT_EQ(received(p, 0), first_n(kSmall));
  EXPECT_GT(p.client->stats().paced_datagrams, 0u);
  EXPECT_GT(p.client->stats().retransmits, 50u);  // the loss was there
}

// Express messages queued deep (thousands at once on two channels, as a relay's copies to a
// member) and more while the loss makes resends of the sent ones wait at the queue's front,
// beside a transfer: each channel still arrives exactly, in order, once.
TEST_F(Congestion, ADeepExpressBacklogArrivesExactlyInOrder) {
  Pair& p = add_pair(with_cc(), with_cc());
  connect_all(3);
  ASSERT_TRUE(stats_of(*p.client, p.at_client).congestion_control);
  net_.set_default_link(hostile_link(0, 3000));
  constexpr std::uint32_t kBulk = 200, kBurst = 2000, kBursts = 3;
  queue_bulk(p, kBulk);
  std::uint32_t sent = 0;
  for (std::uint32_t burst = 0; burst < kBursts; ++burst) {
    for (std::uint32_t i = 0; i < kBurst; ++i, ++sent) {
      for (std::uint8_t channel : {0, 2}) {
        ASSERT_EQ(p.client->send(p.at_client, channel, Delivery::reliable, numbered(sent, 64)),
                  SendResult::ok);
      }
    }
    run_for(30'000);  // some sent, some lost and waiting to be resent when the next burst queues
  }
  ASSERT_TRUE(
      run_until([&] { return got_all(p, 0, sent) && got_all(p, 2, sent) && got_all(p, 1, kBulk); },
                300'000'000));
  run_for(200'000);  // late duplicates must not be delivered
  EXPECT_EQ(received(p, 0), first_n(sent));
  EXPECT_EQ(received(p, 2), first_n(sent));
  EXPECT_EQ(received(p, 1), first_n(kBulk));
  EXPECT_GT(p.client->stats().retransmits, 100u);  // the loss was there
}

// A bottleneck of 250 KB/s, 20 ms each way: the estimate finds the rate and the min RTT, the
// pacer spreads the transfer at about that rate (no 2 ms of the sim clock carries more than
// a few datagrams beyond it) and waits on the timer wheel, so the bottleneck's queue stays
// short: the RTT stays near the path's. ENet's 64 KiB window on the same link keeps a
// quarter second queued.
TEST_F(Congestion, ThePacerSpreadsBulkAtTheEstimatedRate) {
  constexpr std::uint64_t kRate = 250'000, kOneWay = 20'000;
  net_.set_default_link({.latency_us = kOneWay, .bandwidth_bytes_per_s = kRate});
  Pair& cc = add_pair(with_cc(), with_cc());
  Pair& enet = add_pair(with_cc(false), with_cc(false));
  connect_all();
  constexpr std::uint32_t kCount = 1000;  // 1.2 MB: about 5 s at the bottleneck's rate
  queue_bulk(cc, kCount);
  queue_bulk(enet, kCount);
  // Sender's bytes on the sim clock, and the RTTs each sender sees, sampled each step.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> sent;  // (time us, bytes out)
  std::uint32_t cc_rtt_max = 0, enet_rtt_max = 0;
  const std::uint64_t start = net_.now_us();
  ASSERT_TRUE(run_until(
      [&] {
        const std::uint64_t t = net_.now_us() - start;
        sent.emplace_back(net_.now_us(), cc.client->stats().bytes_out);
        if (t > 2'000'000 && !got_all(cc, 1, kCount)) {  // past startup
          cc_rtt_max = std::max(cc_rtt_max, stats_of(*cc.client, cc.at_client).rtt_ms);
        }
        if (t > 2'000'000 && !got_all(enet, 1, kCount)) {
          enet_rtt_max = std::max(enet_rtt_max, stats_of(*enet.client, enet.at_client).rtt_ms);
        }
        return got_all(cc, 1, kCount) && got_all(enet, 1, kCount);
      },
      120'000'000));
  EXPECT_EQ(received(cc, 1), first_n(kCount));
  EXPECT_EQ(received(enet, 1), first_n(kCount));
  // The two share the link's rate in the sim only per direction and pair (links are per
  // address pair), so each had the 250 KB/s to itself.
  const PeerStats s = stats_of(*cc.client, cc.at_client);
  std::printf(
      "cc: bandwidth %u B/s, min rtt %u ms, cwnd %u, pacing %u B/s, rtt max %u ms; "
      "enet rtt max %u ms; paced datagrams %llu, pacer waits %llu\n",
      s.cc_bandwidth, s.cc_min_rtt_ms, s.cc_cwnd, s.cc_pacing_rate, cc_rtt_max, enet_rtt_max,
      static_cast<unsigned long long>(cc.client->stats().paced_datagrams),
      static_cast<unsigned long long>(cc.client->stats().pacer_waits));
  EXPECT_GT(s.cc_bandwidth, kRate * 7 / 10);
  EXPECT_LT(s.cc_bandwidth, kRate * 13 / 10);
  EXPECT_GE(s.cc_min_rtt_ms, 2 * kOneWay / 1000);
  EXPECT_LT(s.cc_min_rtt_ms, 2 * kOneWay / 1000 + 15);
  EXPECT_GT(cc.client->stats().pacer_waits, 100u);
  EXPECT_GT(cc.client->stats().paced_datagrams, kCount / 2);
  // Spacing: from 2 s on (startup done), no 2 ms window carries more than 2 ms at 1.25x the
  // estimated rate plus two datagrams (the pacer's 1 ms of slack and a rounding).
  const double rate = s.cc_bandwidth;
  std::uint64_t worst = 0;
  for (std::size_t i = 0, j = 0; i < sent.size(); ++i) {
    if (sent[i].first < start + 2'000'000) continue;
    while (j < i && sent[j].first + 2'000 < sent[i].first) ++j;
    worst = std::max(worst, sent[i].second - sent[j].second);
  }
  EXPECT_LT(static_cast<double>(worst), 2e-3 * 1.25 * rate + 2 * (kBulkMessage + 60));
  // A short queue: the RTT stays within about one BDP of the path's (40 ms), where ENet's
  // window queues 64 KiB (260 ms at this rate).
  EXPECT_LT(cc_rtt_max, 2 * kOneWay / 1000 + 60);
  EXPECT_GT(enet_rtt_max, 150u);
}

// A game stream (64-byte messages at 60 Hz on channel 0) while a 2 MB transfer runs on channel
// 1 over a 500 KB/s bottleneck: with congestion control its messages go ahead of the queued
// bulk and past the pacer, and wait only for the short queue the pacer leaves; with ENet's
// behaviour they queue behind the whole transfer.
TEST_F(Congestion, GameMessagesKeepTheirLatencyBesideBulk) {
  constexpr std::uint64_t kOneWay = 15'000;
  net_.set_default_link({.latency_us = kOneWay, .bandwidth_bytes_per_s = 500'000});
  Pair& cc = add_pair(with_cc(), with_cc());
  Pair& enet = add_pair(with_cc(false), with_cc(false));
  connect_all();
  constexpr std::uint32_t kBulk = 1700, kGame = 180;  // 2 MB; 3 s of game
  queue_bulk(cc, kBulk);
  queue_bulk(enet, kBulk);
  std::vector<std::uint64_t> sent_at;
  for (std::uint32_t i = 0; i < kGame; ++i) {
    sent_at.push_back(net_.now_us());
    ASSERT_EQ(cc.client->send(cc.at_client, 0, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    ASSERT_EQ(enet.client->send(enet.at_client, 0, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    run_for(16'667);
  }
  ASSERT_TRUE(
      run_until([&] { return got_all(cc, 0, kGame) && got_all(enet, 0, kGame); }, 120'000'000));
  auto latencies = [&](const Pair& p) {
    std::vector<std::uint64_t> out;
    for (std::size_t e = 0; e < p.server_events.size(); ++e) {
      const auto& ev = p.server_events[e];
      if (ev.type != EventType::receive || ev.channel != 0) continue;
      out.push_back((p.server_times[e] - sent_at[index_of(ev.packet.bytes())]) / 1000);
    }
    return out;
  };
  const auto cc_lat = latencies(cc), enet_lat = latencies(enet);
  ASSERT_EQ(cc_lat.size(), kGame);
  ASSERT_EQ(enet_lat.size(), kGame);
  EXPECT_EQ(received(cc, 0), first_n(kGame));
  const std::uint64_t cc_p99 = percentile(cc_lat, 99), enet_p50 = percentile(enet_lat, 50);
  std::printf("game latency beside bulk: cc p50 %llu p99 %llu ms; enet p50 %llu ms\n",
              static_cast<unsigned long long>(percentile(cc_lat, 50)),
              static_cast<unsigned long long>(cc_p99), static_cast<unsigned long long>(enet_p50));
  // One way plus at most about one BDP (30 ms) of queue at the bottleneck.
  EXPECT_LT(cc_p99, kOneWay / 1000 + 60);
  EXPECT_GT(enet_p50, 500u);
  EXPECT_TRUE(run_until([&] { return got_all(cc, 1, kBulk); }, 60'000'000));
  EXPECT_EQ(received(cc, 1), first_n(kBulk));
}

// A long fat link (50 ms each way, 10 MB/s, 1% loss each way): the window grows far past
// ENet's 64 KiB and the transfer goes more than twice as fast as with ENet's behaviour, whose
// window caps it near 64 KiB per round trip.
TEST_F(Congestion, TheWindowGrowsPastEnetsOnALongFatLink) {
  net_.set_default_link({.latency_us = 50'000, .bandwidth_bytes_per_s = 10'000'000});
  Pair& cc = add_pair(with_cc(), with_cc());
  Pair& enet = add_pair(with_cc(false), with_cc(false));
  connect_all();
  net_.set_default_link({.loss = 0.01, .latency_us = 50'000, .bandwidth_bytes_per_s = 10'000'000});
  constexpr std::uint32_t kCount = 4000;  // 4.8 MB
  std::uint32_t most_in_flight = 0;
  const std::uint64_t start = net_.now_us();
  queue_bulk(cc, kCount);
  queue_bulk(enet, kCount);
  std::uint64_t cc_done = 0, enet_done = 0;
  ASSERT_TRUE(run_until(
      [&] {
        most_in_flight =
            std::max(most_in_flight, stats_of(*cc.client, cc.at_client).reliable_in_transit);
        if (cc_done == 0 && got_all(cc, 1, kCount)) cc_done = net_.now_us() - start;
        if (enet_done == 0 && got_all(enet, 1, kCount)) enet_done = net_.now_us() - start;
        return cc_done != 0 && enet_done != 0;
      },
      300'000'000));
  EXPECT_EQ(received(cc, 1), first_n(kCount));
  EXPECT_EQ(received(enet, 1), first_n(kCount));
  const PeerStats s = stats_of(*cc.client, cc.at_client);
  std::printf(
      "long fat link: cc %.2f s (cwnd %u, most in flight %u, bandwidth %u B/s), "
      "enet %.2f s\n",
      static_cast<double>(cc_done) / 1e6, s.cc_cwnd, most_in_flight, s.cc_bandwidth,
      static_cast<double>(enet_done) / 1e6);
  EXPECT_GT(most_in_flight, 4u * 65536);
  EXPECT_GT(s.cc_cwnd, 4u * 65536);
  EXPECT_LT(2 * cc_done, enet_done);
}

}  // namespace
