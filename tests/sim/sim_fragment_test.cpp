// Fragmentation and reassembly: every size from 1 byte to 4 MiB, across the MTU boundaries,
// under 10% loss (plus some duplication and reordering, which reassembly must also absorb).
#include "delivery_checker.hpp"
#include "scenario.hpp"
#include "sim_harness.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <vector>

namespace tern::simtest {
namespace {

constexpr std::uint32_t kMiB = 1u << 20;

drv::LinkConditions lossy_link() {
  drv::LinkConditions c;
  c.loss = 0.10;
  c.duplicate = 0.02;
  c.reorder = 0.05;
  c.latency_us = 10 * kMs;
  c.jitter_us = 5 * kMs;
  c.reorder_delay_us = 10 * kMs;
  return c;
}

proto::HostConfig big_message_config() {
  proto::HostConfig c = patient_config();  // thousands of fragments over 10% loss
  c.max_packet_size = 8 * kMiB;
  c.max_waiting_data = 16 * kMiB;
  return c;
}

// With the default MTU (1400), a 4-byte header with sent time, a 6-byte SEND_RELIABLE and a
// 24-byte SEND_FRAGMENT: 1372 is the most one fragment carries (ENet fragments above it) and
// 1390 the most a single unfragmented command could carry.
std::vector<std::uint32_t> reliable_sizes() {
  return {1,    2,    100,  1000, 1371, 1372,  1373, 1389,     1390,  1391,
          2743, 2744, 2745, 4096, 4097, 65536, kMiB, 4 * kMiB, 65537, 3};
}

TEST(SimFragments, ReliableSizesReassembleIntact) {
  SimHarness h(0x7F01, "fragments_reliable");
  h.net().set_default_link(lossy_link());
  auto& server = h.add_host("server", big_message_config());
  auto& client = h.add_host("client", big_message_config());
  const auto conn = h.connect(client, server, 2, 7);
  ASSERT_TRUE(conn) << h.seed_note();

  // Both directions at once, so reassembly and retransmission interleave with acks for the
  // other direction.
  const auto sizes = reliable_sizes();
  struct Side {
    SimHost* receiver;
    std::uint32_t stream;
    std::size_t next = 0;
    std::vector<std::string> errors;
  };
  Side at_server{&server, 1}, at_client{&client, 2};
  auto check = [&](Side& side, const Event& ev) {
    if (ev.type != EventType::receive) return;
    const std::size_t k = side.next++;
    if (k >= sizes.size()) {
      side.errors.push_back("extra message of " + std::to_string(ev.packet.size()) + " bytes");
      return;
    }
    const Tag t{side.stream, 0, Delivery::reliable, static_cast<std::uint32_t>(k), sizes[k]};
    if (ev.channel != 0 || ev.delivery != Delivery::reliable) {
      side.errors.push_back("message " + std::to_string(k) + " on channel " +
                            std::to_string(ev.channel) + " as " + to_string(ev.delivery));
    }
    if (!check_payload(ev.packet.bytes(), t)) {
      side.errors.push_back("message " + std::to_string(k) + " of " + std::to_string(sizes[k]) +
                            " bytes arrived as " + std::to_string(ev.packet.size()) +
                            " bytes that do not match");
    }
  };
  server.log_receives = client.log_receives = false;
  server.on_event = [&](SimHost&, const Event& ev) { check(at_server, ev); };
  client.on_event = [&](SimHost&, const Event& ev) { check(at_client, ev); };

  for (std::uint32_t k = 0; k < sizes.size(); ++k) {
    const Tag up{1, 0, Delivery::reliable, k, sizes[k]};
    const Tag down{2, 0, Delivery::reliable, k, sizes[k]};
    ASSERT_EQ(client.core->send(conn->client, 0, Delivery::reliable, make_payload(up)),
              SendResult::ok)
        << "size " << sizes[k];
    ASSERT_EQ(server.core->send(conn->server, 0, Delivery::reliable, make_payload(down)),
              SendResult::ok)
        << "size " << sizes[k];
  }
  const std::uint64_t start = h.now();
  const bool done =
      h.run_until([&] { return at_server.next >= sizes.size() && at_client.next >= sizes.size(); },
                  1200 * kSec);
  std::printf("[sim] fragments_reliable: %.1f MiB each way in %.3f s simulated\n",
              static_cast<double>(std::accumulate(sizes.begin(), sizes.end(), 0.0)) / kMiB,
              static_cast<double>(h.now() - start) / 1e6);
  h.run_for(2 * kSec);
  h.print_summary();

  EXPECT_TRUE(done) << "server got " << at_server.next << ", client got " << at_client.next
                    << " of " << sizes.size() << "; " << h.seed_note();
  for (const auto* side : {&at_server, &at_client}) {
    std::string all;
    for (const auto& e : side->errors) all += "\n  " + e;
    EXPECT_TRUE(side->errors.empty()) << side->receiver->name << ":" << all << "\n"
                                      << h.seed_note();
    EXPECT_EQ(side->next, sizes.size()) << side->receiver->name << "; " << h.seed_note();
  }
  // Reassembly buffers are released once the messages are delivered.
  EXPECT_EQ(server.core->counters().buffered_bytes, 0u) << h.seed_note();
  EXPECT_EQ(client.core->counters().buffered_bytes, 0u) << h.seed_note();
}

TEST(SimFragments, UnreliableFragmentsIntactOrAbsentUnsequencedArrive) {
  SimHarness h(0x7F02, "fragments_unreliable");
  h.net().set_default_link(lossy_link());
  auto& server = h.add_host("server", big_message_config());
  auto& client = h.add_host("client", big_message_config());
  const auto conn = h.connect(client, server, 3, 8);
  ASSERT_TRUE(conn) << h.seed_note();

  // Channel 1: unreliable messages above the MTU travel as unreliable fragments; losing one
  // fragment loses the message, never corrupts it. Channel 2: unsequenced messages above the
  // MTU travel as reliable fragments (as in ENet), so every one of them arrives, once.
  const std::vector<std::uint32_t> unreliable_sizes = {1373, 1500, 2745, 4096, 16384, 65536};
  const std::vector<std::uint32_t> unsequenced_sizes = {1500, 4096, 65536, 300000};
  DeliveryChecker at_server("server");
  std::map<std::uint32_t, std::uint32_t> unreliable_arrived;  // by size
  std::set<std::uint32_t> unsequenced_arrived;
  server.log_receives = false;
  server.on_event = [&](SimHost&, const Event& ev) {
    if (ev.type != EventType::receive) return;
    if (ev.channel == 2) {
      const auto tag = read_tag(ev.packet.bytes());
      if (!tag || !check_payload(ev.packet.bytes(), *tag) || tag->channel != 2) {
        at_server.fail("corrupt unsequenced message of " + std::to_string(ev.packet.size()) +
                       " bytes");
        return;
      }
      // The wire carries them as reliable fragments; either label is faithful to ENet.
      if (ev.delivery == Delivery::unreliable) at_server.fail("unsequenced arrived as unreliable");
      if (!unsequenced_arrived.insert(tag->seq).second) {
        at_server.fail("unsequenced seq " + std::to_string(tag->seq) + " delivered twice");
      }
      return;
    }
    at_server.on_receive(ev);
    if (const auto tag = read_tag(ev.packet.bytes())) ++unreliable_arrived[tag->size];
  };

  constexpr std::uint32_t kRounds = 120;
  std::uint32_t round = 0;
  std::uint32_t unreliable_seq = 0;
  std::uint32_t unsequenced_seq = 0;
  std::uint64_t next_send = h.now();
  std::uint64_t refused = 0;
  h.before_step = [&] {
    if (round >= kRounds || h.now() < next_send) return;
    next_send = h.now() + 50 * kMs;
    h.wake_at(next_send);
    const std::uint32_t size = unreliable_sizes[round % unreliable_sizes.size()];
    const Tag t{1, 1, Delivery::unreliable, unreliable_seq++, size};
    if (client.core->send(conn->client, 1, Delivery::unreliable, make_payload(t)) !=
        SendResult::ok) {
      ++refused;
    }
    if (round % 4 == 0) {
      const std::uint32_t usize = unsequenced_sizes[(round / 4) % unsequenced_sizes.size()];
      const Tag u{1, 2, Delivery::unsequenced, unsequenced_seq++, usize};
      if (client.core->send(conn->client, 2, Delivery::unsequenced, make_payload(u)) !=
          SendResult::ok) {
        ++refused;
      }
    }
    ++round;
  };
  const bool done =
      h.run_until([&] { return round >= kRounds && unsequenced_arrived.size() == unsequenced_seq; },
                  600 * kSec);
  h.before_step = nullptr;
  h.run_for(2 * kSec);
  h.print_summary();

  std::string arrivals;
  for (auto [size, n] : unreliable_arrived) {
    arrivals.append(" ").append(std::to_string(size)).append("B:").append(std::to_string(n));
  }
  std::printf("[sim] fragments_unreliable: %llu/%u unreliable arrived (%s ), %zu/%u unsequenced\n",
              static_cast<unsigned long long>(at_server.total()), kRounds, arrivals.c_str(),
              unsequenced_arrived.size(), unsequenced_seq);
  EXPECT_EQ(refused, 0u) << h.seed_note();
  EXPECT_TRUE(done) << h.seed_note();
  EXPECT_TRUE(at_server.ok()) << at_server.report() << "\n" << h.seed_note();
  EXPECT_EQ(unsequenced_arrived.size(), unsequenced_seq) << h.seed_note();
  // Two-fragment messages survive 10% loss four times in five: some must have made it, or the
  // unreliable fragment path never delivers at all.
  EXPECT_GT(unreliable_arrived[1373] + unreliable_arrived[1500] + unreliable_arrived[2745], 0u)
      << h.seed_note();
}

}  // namespace
}  // namespace tern::simtest
