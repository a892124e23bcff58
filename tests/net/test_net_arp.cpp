// ArpTable and ArpResolver on simulated time.
#include "net_arp.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

namespace {

using namespace tern::net;
using Status = ArpLookup::Status;

constexpr std::uint64_t kMs = 1000;
constexpr std::uint32_t kUs = 0x0a000001;    // 10.0.0.1
constexpr std::uint32_t kPeer = 0x0a000002;  // 10.0.0.2
constexpr MacAddress kOurMac{{0x02, 0, 0, 0, 0, 0x01}};
constexpr MacAddress kPeerMac{{0x02, 0, 0, 0, 0, 0x02}};

LinkConfig link() {
  LinkConfig l;
  l.mac = kOurMac;
  l.ipv4 = kUs;
  return l;
}

ArpConfig config() {
  ArpConfig c;
  c.reachable_us = 60'000 * kMs;
  c.refresh_us = 45'000 * kMs;
  c.retry_us = 1'000 * kMs;
  c.max_requests = 3;
  c.failed_hold_us = 5'000 * kMs;
  return c;
}

ArpPacket reply_from(std::uint32_t ip, MacAddress mac, std::uint32_t to = kUs) {
  return {ArpPacket::Op::reply, mac, ip, kOurMac, to};
}
ArpPacket request_from(std::uint32_t ip, MacAddress mac, std::uint32_t target) {
  return {ArpPacket::Op::request, mac, ip, MacAddress{}, target};
}

TEST(NetArp, ResolvesAfterReply) {
  ArpResolver r(link(), config());
  ArpLookup l = r.lookup(kPeer, 0);
  EXPECT_EQ(l.status, Status::pending);
  EXPECT_TRUE(l.send_request);
  l = r.lookup(kPeer, 10 * kMs);
  EXPECT_EQ(l.status, Status::pending);
  EXPECT_FALSE(l.send_request);  // one request per retry interval, however many lookups
  const ArpVerdict v = r.on_arp(reply_from(kPeer, kPeerMac), 20 * kMs);
  EXPECT_TRUE(v.learned);
  EXPECT_FALSE(v.reply);
  l = r.lookup(kPeer, 30 * kMs);
  EXPECT_EQ(l.status, Status::resolved);
  EXPECT_EQ(l.mac, kPeerMac);
  EXPECT_FALSE(l.send_request);
  EXPECT_EQ(r.counters().requests, 1u);
}

TEST(NetArp, RetriesThenFailsThenTriesAgain) {
  ArpResolver r(link(), config());
  std::vector<std::uint64_t> sent;
  std::vector<std::uint64_t> failed;
  for (std::uint64_t t = 0; t <= 12'000 * kMs; t += 100 * kMs) {
    const ArpLookup l = r.lookup(kPeer, t);
    if (l.send_request) sent.push_back(t / kMs);
    if (l.status == Status::failed) failed.push_back(t / kMs);
    EXPECT_NE(l.status, Status::resolved);
  }
  // Requests at 0, 1 s, 2 s; failure from 3 s for the 5 s hold; a new round at 8 s.
  const std::vector<std::uint64_t> want_sent = {0, 1000, 2000, 8000, 9000, 10000};
  EXPECT_EQ(sent, want_sent);
  ASSERT_FALSE(failed.empty());
  EXPECT_EQ(failed.front(), 3000u);
  EXPECT_EQ(r.counters().failures, 2u);  // 3 s and 11 s
  EXPECT_EQ(r.counters().requests, 6u);
}

TEST(NetArp, PollRetriesWithoutLookups) {
  ArpResolver r(link(), config());
  EXPECT_EQ(r.next_deadline(), UINT64_MAX);
  ASSERT_TRUE(r.lookup(kPeer, 0).send_request);
  EXPECT_EQ(r.next_deadline(), 1000 * kMs);
  std::array<std::uint32_t, 4> due{};
  EXPECT_EQ(r.poll(999 * kMs, due), 0u);
  ASSERT_EQ(r.poll(1000 * kMs, due), 1u);
  EXPECT_EQ(due[0], kPeer);
  EXPECT_EQ(r.next_deadline(), 2000 * kMs);
  EXPECT_EQ(r.poll(2000 * kMs, std::span<std::uint32_t>{}), 0u);  // no room: stays due
  ASSERT_EQ(r.poll(2000 * kMs, due), 1u);
  EXPECT_EQ(r.poll(3000 * kMs, due), 0u);  // out of requests: fails
  EXPECT_EQ(r.lookup(kPeer, 3001 * kMs).status, Status::failed);
  EXPECT_EQ(r.next_deadline(), UINT64_MAX);
}

TEST(NetArp, RefreshThenExpiry) {
  ArpResolver r(link(), config());
  r.lookup(kPeer, 0);
  r.on_arp(reply_from(kPeer, kPeerMac), 0);
  ArpLookup l = r.lookup(kPeer, 44'999 * kMs);
  EXPECT_EQ(l.status, Status::resolved);
  EXPECT_FALSE(l.send_request);
  l = r.lookup(kPeer, 45'000 * kMs);  // refresh: still usable, and ask again
  EXPECT_EQ(l.status, Status::resolved);
  EXPECT_TRUE(l.send_request);
  EXPECT_FALSE(r.lookup(kPeer, 45'500 * kMs).send_request);
  EXPECT_TRUE(r.lookup(kPeer, 46'000 * kMs).send_request);
  // An answer to the refresh starts a new lifetime.
  r.on_arp(reply_from(kPeer, kPeerMac), 46'100 * kMs);
  l = r.lookup(kPeer, 91'000 * kMs);  // refresh due at 91.1 s
  EXPECT_EQ(l.status, Status::resolved);
  EXPECT_FALSE(l.send_request);
  // No answer at all: expires at 106.1 s and starts over as pending.
  l = r.lookup(kPeer, 106'100 * kMs);
  EXPECT_EQ(l.status, Status::pending);
  EXPECT_TRUE(l.send_request);
}

TEST(NetArp, PollForgetsExpiredEntries) {
  ArpResolver r(link(), config());
  r.lookup(kPeer, 0);
  r.on_arp(reply_from(kPeer, kPeerMac), 0);
  EXPECT_EQ(r.table().size(), 1u);
  std::array<std::uint32_t, 4> due{};
  r.poll(59'999 * kMs, due);
  EXPECT_EQ(r.table().size(), 1u);
  r.poll(60'000 * kMs, due);
  EXPECT_EQ(r.table().size(), 0u);
}

TEST(NetArp, AnswersRequestsForUsAndLearnsTheSender) {
  ArpResolver r(link(), config());
  ArpVerdict v = r.on_arp(request_from(kPeer, kPeerMac, kUs), 0);
  EXPECT_TRUE(v.reply);
  EXPECT_TRUE(v.learned);
  const ArpLookup l = r.lookup(kPeer, 1);
  EXPECT_EQ(l.status, Status::resolved);
  EXPECT_EQ(l.mac, kPeerMac);
  // A request for someone else: no reply, and an unknown sender is not learned.
  v = r.on_arp(request_from(0x0a000003, kPeerMac, 0x0a000004), 2);
  EXPECT_FALSE(v.reply);
  EXPECT_FALSE(v.learned);
  EXPECT_EQ(r.table().find(0x0a000003), nullptr);
  // ... but a known sender is updated (RFC 826 merge, gratuitous ARP).
  constexpr MacAddress moved{{0x02, 0, 0, 0, 0, 0x22}};
  v = r.on_arp(request_from(kPeer, moved, kPeer), 3);
  EXPECT_FALSE(v.reply);
  EXPECT_TRUE(v.learned);
  EXPECT_EQ(r.lookup(kPeer, 4).mac, moved);
  // Unsolicited reply from an unknown host to someone else: ignored.
  v = r.on_arp(reply_from(0x0a000005, kPeerMac, 0x0a000006), 5);
  EXPECT_FALSE(v.learned);
  // An address probe (sender 0.0.0.0) for our IP is answered, nothing learned.
  v = r.on_arp(request_from(0, kPeerMac, kUs), 6);
  EXPECT_TRUE(v.reply);
  EXPECT_FALSE(v.learned);
  EXPECT_EQ(r.counters().replies, 2u);
}

TEST(NetArp, ConflictIgnored) {
  ArpResolver r(link(), config());
  const ArpVerdict v = r.on_arp(request_from(kUs, kPeerMac, kUs), 0);
  EXPECT_TRUE(v.conflict);
  EXPECT_FALSE(v.reply);
  EXPECT_FALSE(v.learned);
  EXPECT_EQ(r.counters().conflicts, 1u);
}

TEST(NetArp, StaticGatewayOverride) {
  ArpResolver r(link(), config());
  constexpr std::uint32_t gw = 0x0a0000fe;
  constexpr MacAddress gw_mac{{0x02, 0, 0, 0, 0, 0xfe}};
  ASSERT_TRUE(r.set_static(gw, gw_mac));
  for (std::uint64_t t : {std::uint64_t{0}, 1'000'000'000 * kMs}) {
    const ArpLookup l = r.lookup(gw, t);
    EXPECT_EQ(l.status, Status::resolved);
    EXPECT_EQ(l.mac, gw_mac);
    EXPECT_FALSE(l.send_request);
  }
  // ARP cannot overwrite it.
  r.on_arp(reply_from(gw, kPeerMac), 5);
  EXPECT_EQ(r.lookup(gw, 6).mac, gw_mac);
  std::array<std::uint32_t, 4> due{};
  r.poll(2'000'000'000 * kMs, due);
  EXPECT_EQ(r.lookup(gw, 2'000'000'001 * kMs).mac, gw_mac);
  EXPECT_EQ(r.counters().requests, 0u);
}

TEST(NetArp, BroadcastResolvesToBroadcastMac) {
  ArpResolver r(link(), config());
  const ArpLookup l = r.lookup(0xffffffffu, 0);
  EXPECT_EQ(l.status, Status::resolved);
  EXPECT_TRUE(l.mac.is_broadcast());
  EXPECT_EQ(r.table().size(), 0u);
}

TEST(NetArp, TableEvictsAndNeverEvictsStatic) {
  ArpTable t;
  for (std::uint32_t i = 0; i < ArpTable::kCapacity; ++i) {
    ArpTable::Entry* e = t.find_or_insert(100 + i);
    ASSERT_NE(e, nullptr);
    e->state = ArpTable::State::resolved;
    e->deadline = 1000 + i;
  }
  EXPECT_EQ(t.size(), ArpTable::kCapacity);
  t.find(120)->state = ArpTable::State::failed;
  // Full: a failed entry goes first, then the resolved one expiring first.
  ArpTable::Entry* e1 = t.find_or_insert(1);
  ASSERT_NE(e1, nullptr);
  EXPECT_EQ(t.find(120), nullptr);
  e1->state = ArpTable::State::pending;  // a fresh entry is empty until the caller sets it
  ArpTable::Entry* e2 = t.find_or_insert(2);
  ASSERT_NE(e2, nullptr);
  e2->state = ArpTable::State::resolved;
  EXPECT_EQ(t.find(100), nullptr);
  EXPECT_NE(t.find(1), nullptr);
  EXPECT_EQ(t.size(), ArpTable::kCapacity);
  EXPECT_TRUE(t.remove(2));
  EXPECT_FALSE(t.remove(2));

  ArpTable s;
  for (std::uint32_t i = 0; i < ArpTable::kCapacity; ++i) ASSERT_TRUE(s.set_static(i + 1, {}));
  EXPECT_EQ(s.find_or_insert(9999), nullptr);
  EXPECT_FALSE(s.set_static(9999, {}));
}

TEST(NetArp, FullOfStaticEntriesFailsLookups) {
  ArpResolver r(link(), config());
  for (std::uint32_t i = 0; i < ArpTable::kCapacity; ++i) ASSERT_TRUE(r.set_static(i + 1, {}));
  EXPECT_EQ(r.lookup(kPeer, 0).status, Status::failed);
  EXPECT_EQ(r.counters().table_full, 1u);
}

TEST(NetArp, ManyPendingLookupsEvictTheOldest) {
  ArpResolver r(link(), config());
  for (std::uint32_t i = 0; i < ArpTable::kCapacity + 10; ++i) {
    EXPECT_TRUE(r.lookup(0x0b000000 + i, i).send_request);
  }
  EXPECT_EQ(r.table().size(), ArpTable::kCapacity);
  EXPECT_EQ(r.table().find(0x0b000000), nullptr);
  EXPECT_NE(r.table().find(0x0b000000 + ArpTable::kCapacity + 9), nullptr);
}

}  // namespace
