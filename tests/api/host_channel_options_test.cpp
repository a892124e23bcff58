// HostOptions::channel_options over the simulated network: each per-channel switch honoured on
// the channels it names and only there, and exact delivery under loss with the switches mixed.
// A host's counters are host-wide, so each switch is shown by two pairs with the same options,
// one sending on the channel the switch covers and one on a channel it does not.
#include "sim_pairs.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

using namespace tern::apitest;
using tern::channel_mask;
using tern::ChannelOptions;
using tern::ChannelRule;
using tern::Delivery;
using tern::Event;
using tern::EventType;
using tern::HostOptions;
using tern::HostStats;
using tern::Priority;
using tern::SendResult;

class ChannelSwitches : public SimPairs {
 protected:
  void lossy(double loss) { net_.set_default_link({.loss = loss, .latency_us = kOneWayLatencyUs}); }

  // `count` reliable messages of `size` bytes on `channel`, one every `gap_us`.
  void stream(Pair& p, std::uint8_t channel, std::uint32_t count, std::size_t size,
              std::uint64_t gap_us, Delivery delivery = Delivery::reliable) {
    for (std::uint32_t i = 0; i < count; ++i) {
      ASSERT_EQ(p.client->send(p.at_client, channel, delivery, numbered(i, size)), SendResult::ok);
      if (gap_us != 0) run_for(gap_us);
    }
  }

  bool all_in(const std::vector<Pair*>& pairs, std::uint8_t channel, std::uint32_t count) {
    return run_until(
        [&] {
          for (const Pair* p : pairs) {
            if (received(*p, channel).size() < count) return false;
          }
          return true;
        },
        120'000'000);
  }
};

HostOptions with_rule(HostOptions o, tern::ChannelMask channels, ChannelOptions options) {
  o.channel_options.push_back(ChannelRule{channels, options});
  return o;
}

// Fast retransmit off on channel 1 only, 10% loss each way: a stream on channel 1 has its
// losses resent by their timeouts alone, the same stream on channel 0 (same options) has them
// fast-resent. Both arrive exactly, in order.
TEST_F(ChannelSwitches, FastRetransmitOffOnOneChannel) {
  ChannelOptions off;
  off.fast_retransmit = false;
  const HostOptions client = with_rule(HostOptions{}, channel_mask({1}), off);
  Pair& on_1 = add_pair(HostOptions{}, client);
  Pair& on_0 = add_pair(HostOptions{}, client);
  connect_all();
  lossy(0.1);
  constexpr std::uint32_t kMessages = 300;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(on_1.client->send(on_1.at_client, 1, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    ASSERT_EQ(on_0.client->send(on_0.at_client, 0, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    run_for(2'000);
  }
  ASSERT_TRUE(run_until(
      [&] {
        return received(on_1, 1).size() == kMessages && received(on_0, 0).size() == kMessages;
      },
      60'000'000));
  EXPECT_EQ(received(on_1, 1), first_n(kMessages));
  EXPECT_EQ(received(on_0, 0), first_n(kMessages));
  const HostStats s1 = on_1.client->stats();
  const HostStats s0 = on_0.client->stats();
  EXPECT_GT(s1.retransmits, 0u);
  EXPECT_EQ(s1.fast_retransmits, 0u);
  EXPECT_GT(s0.fast_retransmits, 0u);
  std::printf(
      "[channels] fast retransmit off on 1: %llu resends, %llu fast; on 0: %llu, %llu fast\n",
      static_cast<unsigned long long>(s1.retransmits),
      static_cast<unsigned long long>(s1.fast_retransmits),
      static_cast<unsigned long long>(s0.retransmits),
      static_cast<unsigned long long>(s0.fast_retransmits));
}

// Nodelay on the host, off on channel 0 by a rule: channel 1 resends by nodelay's count of
// later acks, channel 0 by fast retransmit's time rule, as a host without nodelay.
TEST_F(ChannelSwitches, NodelayOffOnOneChannel) {
  HostOptions base;
  base.nodelay = true;
  ChannelOptions off;
  off.nodelay = false;
  const HostOptions client = with_rule(base, channel_mask({0}), off);
  Pair& on_0 = add_pair(HostOptions{}, client);
  Pair& on_1 = add_pair(HostOptions{}, client);
  connect_all();
  lossy(0.1);
  constexpr std::uint32_t kMessages = 300;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(on_0.client->send(on_0.at_client, 0, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    ASSERT_EQ(on_1.client->send(on_1.at_client, 1, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    run_for(2'000);
  }
  ASSERT_TRUE(all_in({&on_0}, 0, kMessages));
  ASSERT_TRUE(all_in({&on_1}, 1, kMessages));
  EXPECT_EQ(received(on_0, 0), first_n(kMessages));
  EXPECT_EQ(received(on_1, 1), first_n(kMessages));
  EXPECT_EQ(on_0.client->stats().nodelay_resends, 0u);
  EXPECT_GT(on_0.client->stats().fast_retransmits, 0u);
  EXPECT_GT(on_1.client->stats().nodelay_resends, 0u);
}

// Redundancy on both sides, off on the client's channel 1, 10% loss: reliable messages on
// channel 1 are never copied, on channel 0 they are; unreliable messages on channel 1 are never
// kept for copies while channel 0's reliable ones still are, where a client without the rule
// copies both.
TEST_F(ChannelSwitches, RedundancyOnlyOnTheChannelsItCovers) {
  HostOptions base;
  base.redundancy = true;
  ChannelOptions off;
  off.redundancy = false;
  const HostOptions client = with_rule(base, channel_mask({1}), off);
  Pair& reliable_1 = add_pair(base, client);
  Pair& reliable_0 = add_pair(base, client);
  Pair& mixed = add_pair(base, client);
  Pair& mixed_no_rule = add_pair(base, base);
  connect_all();
  lossy(0.1);
  constexpr std::uint32_t kMessages = 300;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(
        reliable_1.client->send(reliable_1.at_client, 1, Delivery::reliable, numbered(i, 100)),
        SendResult::ok);
    ASSERT_EQ(
        reliable_0.client->send(reliable_0.at_client, 0, Delivery::reliable, numbered(i, 100)),
        SendResult::ok);
    for (Pair* p : {&mixed, &mixed_no_rule}) {
      ASSERT_EQ(p->client->send(p->at_client, 0, Delivery::reliable, numbered(i, 100)),
                SendResult::ok);
      ASSERT_EQ(p->client->send(p->at_client, 1, Delivery::unreliable, numbered(i, 100)),
                SendResult::ok);
    }
    run_for(3'000);
  }
  ASSERT_TRUE(all_in({&reliable_1}, 1, kMessages));
  ASSERT_TRUE(all_in({&reliable_0, &mixed, &mixed_no_rule}, 0, kMessages));
  EXPECT_EQ(received(reliable_1, 1), first_n(kMessages));
  for (Pair* p : {&reliable_0, &mixed, &mixed_no_rule}) {
    EXPECT_EQ(received(*p, 0), first_n(kMessages));
  }
  EXPECT_EQ(reliable_1.client->stats().redundant_sent, 0u);
  EXPECT_GT(reliable_0.client->stats().redundant_sent, 0u);
  const HostStats m = mixed.client->stats();
  EXPECT_GT(m.redundant_sent, 0u);
  EXPECT_EQ(m.redundant_unreliable_sent, 0u);
  EXPECT_GT(mixed_no_rule.client->stats().redundant_unreliable_sent, 0u);
  // The server keeps repeating its acks of channel 0; the client has none of its own to repeat.
  std::printf(
      "[channels] redundancy: copies %llu (channel 1 only: %llu), unreliable %llu vs %llu\n",
      static_cast<unsigned long long>(reliable_0.client->stats().redundant_sent),
      static_cast<unsigned long long>(reliable_1.client->stats().redundant_sent),
      static_cast<unsigned long long>(m.redundant_unreliable_sent),
      static_cast<unsigned long long>(mixed_no_rule.client->stats().redundant_unreliable_sent));
}

// Congestion control off on channel 1: a 600 KB transfer there is not paced (ENet's window),
// the same transfer on channel 0 is. Both exact.
TEST_F(ChannelSwitches, CongestionControlOffOnOneChannel) {
  ChannelOptions off;
  off.congestion_control = false;
  const HostOptions client = with_rule(HostOptions{}, channel_mask({1}), off);
  Pair& bulk_1 = add_pair(HostOptions{}, client);
  Pair& bulk_0 = add_pair(HostOptions{}, client);
  connect_all();
  constexpr std::uint32_t kBulk = 500;
  stream(bulk_1, 1, kBulk, 1200, 0);
  stream(bulk_0, 0, kBulk, 1200, 0);
  ASSERT_TRUE(all_in({&bulk_1}, 1, kBulk));
  ASSERT_TRUE(all_in({&bulk_0}, 0, kBulk));
  EXPECT_EQ(received(bulk_1, 1), first_n(kBulk));
  EXPECT_EQ(received(bulk_0, 0), first_n(kBulk));
  EXPECT_EQ(bulk_1.client->stats().paced_datagrams, 0u);
  EXPECT_EQ(bulk_1.client->stats().pacer_waits, 0u);
  EXPECT_GT(bulk_0.client->stats().paced_datagrams, 0u);
}

// The express lane off on channel 0: small reliable messages there are paced like bulk; with
// it on (channel 1, same options) they pass the pacer.
TEST_F(ChannelSwitches, ExpressLaneOffOnOneChannel) {
  ChannelOptions off;
  off.cc_express = false;
  const HostOptions client = with_rule(HostOptions{}, channel_mask({0}), off);
  Pair& small_0 = add_pair(HostOptions{}, client);
  Pair& small_1 = add_pair(HostOptions{}, client);
  connect_all();
  constexpr std::uint32_t kMessages = 200;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(small_0.client->send(small_0.at_client, 0, Delivery::reliable, numbered(i, 100)),
              SendResult::ok);
    ASSERT_EQ(small_1.client->send(small_1.at_client, 1, Delivery::reliable, numbered(i, 100)),
              SendResult::ok);
    run_for(1'000);
  }
  ASSERT_TRUE(all_in({&small_0}, 0, kMessages));
  ASSERT_TRUE(all_in({&small_1}, 1, kMessages));
  EXPECT_EQ(received(small_0, 0), first_n(kMessages));
  EXPECT_EQ(received(small_1, 1), first_n(kMessages));
  EXPECT_GT(small_0.client->stats().paced_datagrams, 0u);
  EXPECT_EQ(small_1.client->stats().paced_datagrams, 0u);
}

// Delivery modes off on channel 1: reliable_unordered goes there as reliable (and arrives as
// such, in order), on channel 0 as unordered; under 20% loss and reordering, exactly once.
TEST_F(ChannelSwitches, DeliveryModesOffOnOneChannel) {
  ChannelOptions off;
  off.delivery_modes = false;
  Pair& p = add_pair(HostOptions{}, with_rule(HostOptions{}, channel_mask({1}), off));
  connect_all();
  net_.set_default_link(hostile_link(3000, 20'000));
  constexpr std::uint32_t kEach = 300;
  for (std::uint32_t i = 0; i < kEach; ++i) {
    for (std::uint8_t ch : {0, 1}) {
      ASSERT_EQ(p.client->send(p.at_client, ch, Delivery::reliable_unordered, numbered(i, 120)),
                SendResult::ok);
    }
    if (i % 4 == 3) run_for(8'000);
  }
  ASSERT_TRUE(all_in({&p}, 0, kEach));
  ASSERT_TRUE(all_in({&p}, 1, kEach));
  run_for(1'000'000);
  std::size_t unordered_0 = 0, reliable_1 = 0;
  for (const Event& e : p.server_events) {
    if (e.type != EventType::receive) continue;
    if (e.channel == 0 && e.delivery == Delivery::reliable_unordered) ++unordered_0;
    if (e.channel == 1 && e.delivery == Delivery::reliable) ++reliable_1;
  }
  EXPECT_EQ(unordered_0, kEach);
  EXPECT_EQ(reliable_1, kEach);
  EXPECT_EQ(received(p, 1), first_n(kEach));  // sent as reliable: in order
  std::vector<std::uint32_t> got_0 = received(p, 0);
  EXPECT_EQ(got_0.size(), kEach) << "a duplicate delivered";
  std::sort(got_0.begin(), got_0.end());
  EXPECT_EQ(got_0, first_n(kEach));
  EXPECT_NE(received(p, 0), first_n(kEach)) << "unordered messages arrived in order under loss";
}

// A backlog queued at once, channel 1 (bulk) before channel 0, without a priority argument.
// ENet's order is the order of the calls: channel 0 finishes last. With channel 0's default
// level high and channel 1's low, channel 0 finishes first. Congestion control off, so that
// the express lane (which also passes bulk) is not what is measured.
TEST_F(ChannelSwitches, DefaultPriorityPerChannel) {
  HostOptions base;
  base.congestion_control = false;
  ChannelOptions high, low;
  high.priority = Priority::high;
  low.priority = Priority::low;
  HostOptions ranked = with_rule(base, channel_mask({0}), high);
  ranked = with_rule(ranked, channel_mask({1}), low);
  Pair& plain = add_pair(base, base);
  Pair& ranked_pair = add_pair(base, ranked);
  connect_all();
  constexpr std::uint32_t kBulk = 200, kGame = 20;
  for (Pair* p : {&plain, &ranked_pair}) {
    stream(*p, 1, kBulk, 1000, 0);
    stream(*p, 0, kGame, 600, 0);
  }
  ASSERT_TRUE(all_in({&plain, &ranked_pair}, 1, kBulk));
  ASSERT_TRUE(all_in({&plain, &ranked_pair}, 0, kGame));
  // Where the last message of each channel came, in the server's receive order.
  const auto last_of = [](const Pair& p, std::uint8_t channel) {
    std::size_t at = 0, n = 0;
    for (const Event& e : p.server_events) {
      if (e.type != EventType::receive) continue;
      ++n;
      if (e.channel == channel) at = n;
    }
    return at;
  };
  for (Pair* p : {&plain, &ranked_pair}) {
    EXPECT_EQ(received(*p, 0), first_n(kGame));
    EXPECT_EQ(received(*p, 1), first_n(kBulk));
  }
  EXPECT_GT(last_of(plain, 0), last_of(plain, 1));
  EXPECT_LT(last_of(ranked_pair, 0), last_of(ranked_pair, 1));
}

// Rules apply in order: a later rule naming a channel replaces every switch an earlier one
// set for it. Channels 0-3 lose fast retransmit, then channel 2 takes ChannelOptions{}.
TEST_F(ChannelSwitches, LaterRulesWin) {
  ChannelOptions off;
  off.fast_retransmit = false;
  HostOptions client = with_rule(HostOptions{}, channel_mask({0, 1, 2, 3}), off);
  client = with_rule(client, channel_mask({2}), ChannelOptions{});
  Pair& on_2 = add_pair(HostOptions{}, client);
  Pair& on_3 = add_pair(HostOptions{}, client);
  connect_all(4);
  lossy(0.1);
  constexpr std::uint32_t kMessages = 300;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(on_2.client->send(on_2.at_client, 2, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    ASSERT_EQ(on_3.client->send(on_3.at_client, 3, Delivery::reliable, numbered(i, 64)),
              SendResult::ok);
    run_for(2'000);
  }
  ASSERT_TRUE(all_in({&on_2}, 2, kMessages));
  ASSERT_TRUE(all_in({&on_3}, 3, kMessages));
  EXPECT_EQ(received(on_2, 2), first_n(kMessages));
  EXPECT_EQ(received(on_3, 3), first_n(kMessages));
  EXPECT_GT(on_2.client->stats().fast_retransmits, 0u);
  EXPECT_EQ(on_3.client->stats().fast_retransmits, 0u);
}

}  // namespace
