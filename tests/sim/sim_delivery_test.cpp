// Delivery guarantees under a hostile network: 20% loss, 5% duplication, 10% reordering and
// 20 ms ± 10 ms of one-way latency, in both directions.
#include "delivery_checker.hpp"
#include "scenario.hpp"
#include "sim_harness.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <random>

namespace tern::simtest {
namespace {

TEST(SimDelivery, Reliable100kExactlyOnceInOrder) {
  SimHarness h(0x7E51, "reliable_100k");
  h.net().set_default_link(hostile_link());
  auto& server = h.add_host("server", patient_config());
  auto& client = h.add_host("client", patient_config());
  const auto conn = h.connect(client, server, 4, 1);
  ASSERT_TRUE(conn) << h.seed_note();

  DeliveryChecker at_server("server"), at_client("client");
  server.log_receives = client.log_receives = false;
  server.on_event = [&](SimHost&, const Event& ev) {
    if (ev.type == EventType::receive) at_server.on_receive(ev);
  };
  client.on_event = [&](SimHost&, const Event& ev) {
    if (ev.type == EventType::receive) at_client.on_receive(ev);
  };

  // Upstream carries the 100,000; a smaller downstream runs at the same time so acks ride with
  // data in both directions.
  PacedSender up{h,   client, conn->client, 1,        Delivery::reliable,
                 4,   100000, 300,          10 * kMs, static_cast<std::uint32_t>(kTagSize),
                 160, 4000,   &at_server};
  PacedSender down{h,   server, conn->server, 2,        Delivery::reliable,
                   4,   20000,  60,           10 * kMs, static_cast<std::uint32_t>(kTagSize),
                   400, 1000,   &at_client};
  h.before_step = [&] {
    up.tick();
    down.tick();
  };
  const std::uint64_t start = h.now();
  const bool done = h.run_until(
      [&] {
        return !at_server.ok() || !at_client.ok() ||
               (at_server.total() == up.total && at_client.total() == down.total);
      },
      1200 * kSec);
  h.before_step = nullptr;
  std::printf("[sim] reliable_100k: all delivered after %.3f s simulated\n",
              static_cast<double>(h.now() - start) / 1e6);
  // Late duplicates and stray retransmissions must not surface as extra messages.
  h.run_for(3 * kSec);
  h.print_summary();

  EXPECT_TRUE(done) << "server got " << at_server.total() << "/" << up.total << ", client got "
                    << at_client.total() << "/" << down.total << "; " << h.seed_note();
  EXPECT_EQ(up.refused + down.refused, 0u) << h.seed_note();
  EXPECT_TRUE(at_server.ok()) << at_server.report() << "\n" << h.seed_note();
  EXPECT_TRUE(at_client.ok()) << at_client.report() << "\n" << h.seed_note();
  EXPECT_EQ(at_server.total(), up.total) << h.seed_note();
  EXPECT_EQ(at_client.total(), down.total) << h.seed_note();
  for (std::uint8_t ch = 0; ch < 4; ++ch) {
    EXPECT_EQ(at_server.next_reliable(1, ch), up.total / 4) << "channel " << int(ch);
    EXPECT_EQ(at_client.next_reliable(2, ch), down.total / 4) << "channel " << int(ch);
  }
  EXPECT_EQ(client.core->peer_state(conn->client), PeerState::connected) << h.seed_note();
  EXPECT_EQ(server.core->peer_state(conn->server), PeerState::connected) << h.seed_note();
}

TEST(SimDelivery, UnreliableNeverGoesBackwards) {
  SimHarness h(0x7E52, "unreliable");
  h.net().set_default_link(hostile_link());
  auto& server = h.add_host("server", proto::HostConfig{});
  auto& client = h.add_host("client", proto::HostConfig{});
  const auto conn = h.connect(client, server, 4, 2);
  ASSERT_TRUE(conn) << h.seed_note();

  DeliveryChecker at_server("server");
  server.log_receives = false;
  server.on_event = [&](SimHost&, const Event& ev) {
    if (ev.type == EventType::receive) at_server.on_receive(ev);
  };
  // Sequenced delivery drops whatever arrives after a newer message, and the link's jitter
  // (0..20 ms per datagram) reorders datagrams sent closer together than that. So one
  // datagram's worth goes out every 20 ms: what is then lost to ordering is the 10% reordered
  // traffic, and "most arrive" measures the core rather than the shape of the jitter.
  PacedSender up{h,   client,     conn->client, 1,        Delivery::unreliable,
                 4,   20000,      10,           20 * kMs, static_cast<std::uint32_t>(kTagSize),
                 120, UINT64_MAX, &at_server};
  h.before_step = [&] { up.tick(); };
  h.run_until([&] { return up.sent == up.total || !at_server.ok(); }, 600 * kSec);
  h.before_step = nullptr;
  h.run_for(3 * kSec);
  h.print_summary();

  const double fraction = static_cast<double>(at_server.total()) / up.total;
  std::printf(
      "[sim] unreliable: %llu/%u delivered (%.1f%%), %llu throttled by the sender\n",
      static_cast<unsigned long long>(at_server.total()), up.total, fraction * 100,
      static_cast<unsigned long long>(client.core->counters().drops[proto::Drop::throttled]));
  EXPECT_EQ(up.sent, up.total) << h.seed_note();
  EXPECT_EQ(up.refused, 0u) << h.seed_note();
  EXPECT_TRUE(at_server.ok()) << at_server.report() << "\n" << h.seed_note();
  // 20% loss alone leaves ~80%; the throttle may shed some more under jitter.
  EXPECT_GE(fraction, 0.5) << h.seed_note();
  EXPECT_EQ(client.core->peer_state(conn->client), PeerState::connected) << h.seed_note();
}

TEST(SimDelivery, UnsequencedNeverDuplicates) {
  SimHarness h(0x7E53, "unsequenced");
  auto link = hostile_link();
  link.duplicate = 0.25;  // the property under test: make duplicates common
  h.net().set_default_link(link);
  auto& server = h.add_host("server", proto::HostConfig{});
  auto& client = h.add_host("client", proto::HostConfig{});
  const auto conn = h.connect(client, server, 4, 3);
  ASSERT_TRUE(conn) << h.seed_note();

  DeliveryChecker at_server("server");
  server.log_receives = false;
  server.on_event = [&](SimHost&, const Event& ev) {
    if (ev.type == EventType::receive) at_server.on_receive(ev);
  };
  PacedSender up{h,   client,     conn->client, 1,        Delivery::unsequenced,
                 4,   20000,      100,          10 * kMs, static_cast<std::uint32_t>(kTagSize),
                 300, UINT64_MAX, &at_server};
  h.before_step = [&] { up.tick(); };
  h.run_until([&] { return up.sent == up.total || !at_server.ok(); }, 600 * kSec);
  h.before_step = nullptr;
  h.run_for(3 * kSec);
  h.print_summary();

  const double fraction = static_cast<double>(at_server.total()) / up.total;
  std::printf(
      "[sim] unsequenced: %llu/%u delivered (%.1f%%), %llu duplicates dropped\n",
      static_cast<unsigned long long>(at_server.total()), up.total, fraction * 100,
      static_cast<unsigned long long>(server.core->counters().drops[proto::Drop::duplicate]));
  EXPECT_EQ(up.sent, up.total) << h.seed_note();
  EXPECT_TRUE(at_server.ok()) << at_server.report() << "\n" << h.seed_note();
  EXPECT_GE(fraction, 0.5) << h.seed_note();
  EXPECT_GT(h.net().stats().duplicated, 100u) << "the link did not duplicate; " << h.seed_note();
  EXPECT_GT(server.core->counters().drops[proto::Drop::duplicate], 0u) << h.seed_note();
}

}  // namespace
}  // namespace tern::simtest
