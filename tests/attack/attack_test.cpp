// Malicious peers (DESIGN §5). A server with small memory limits, an honest client and an
// attacker, connected through the simulated network. The attacker is a real client HostCore;
// its connection's header bytes (peer ID and session, read from its own datagrams) are reused
// in hand-crafted datagrams that go straight into the server's on_datagram as exact-size heap
// copies, so a sanitizer build catches any read past the end.
//
// For every attack: the specific Drop counter moves, nothing from the bad input reaches the
// application, the server's buffered bytes never exceed its memory cap, and the honest client
// still completes a reliable round trip afterwards.
#include "payload.hpp"
#include "sim_harness.hpp"

#include "drop.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace tern::simtest {
namespace {

using proto::Cmd;
using proto::Command;
using proto::Drop;

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::uint8_t kAttackerChannels = 32;

proto::HostConfig server_config() {
  proto::HostConfig c;
  c.memory_cap = 8 * kMiB;
  c.max_packet_size = 2 * kMiB;
  // Per connection, below the host-wide cap: one peer alone cannot fill the host.
  c.max_waiting_data = 4 * kMiB;
  return c;
}

// Bytes that mark attacker payloads, so any delivery of them anywhere is visible.
constexpr char kEvil[] = "EVIL-PAYLOAD";

std::vector<std::byte> evil(std::size_t n) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    v[i] = std::byte(kEvil[i % (sizeof kEvil - 1)]);
  }
  return v;
}

bool contains_evil(std::span<const std::byte> bytes) {
  const auto* b = reinterpret_cast<const char*>(bytes.data());
  return std::search(b, b + bytes.size(), kEvil, kEvil + 4) != b + bytes.size();
}

// Builds a datagram from a header and commands with the real encoders.
class Datagram {
 public:
  explicit Datagram(const proto::Header& h) {
    bytes_.resize(16);
    bytes_.resize(proto::encode_header(bytes_, h, false));
  }
  Datagram& command(const Command& c, std::span<const std::byte> payload = {}) {
    std::array<std::byte, 64> tmp{};
    const std::size_t n = proto::encode_command(tmp, c);
    EXPECT_GT(n, 0u) << "could not encode command " << int(c.command);
    bytes_.insert(bytes_.end(), tmp.begin(), tmp.begin() + static_cast<std::ptrdiff_t>(n));
    bytes_.insert(bytes_.end(), payload.begin(), payload.end());
    return *this;
  }
  Datagram& raw(std::span<const std::byte> b) {
    bytes_.insert(bytes_.end(), b.begin(), b.end());
    return *this;
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

Command reliable(std::uint8_t channel, std::uint16_t seq, std::size_t len) {
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::send_reliable) | proto::kFlagAcknowledge;
  c.channel_id = channel;
  c.reliable_seq = seq;
  c.reliable.data_length = static_cast<std::uint16_t>(len);
  return c;
}

Command unreliable(std::uint8_t channel, std::uint16_t useq, std::size_t len) {
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::send_unreliable);
  c.channel_id = channel;
  c.unreliable.unreliable_seq = useq;
  c.unreliable.data_length = static_cast<std::uint16_t>(len);
  return c;
}

struct Frag {
  std::uint16_t start;
  std::uint32_t count;
  std::uint32_t number;
  std::uint32_t total;
  std::uint32_t offset;
  std::size_t len;
};

// A reliable fragment as an ENet sender numbers it: sequence = start + number.
Command fragment(std::uint8_t channel, const Frag& f) {
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::send_fragment) | proto::kFlagAcknowledge;
  c.channel_id = channel;
  c.reliable_seq = static_cast<std::uint16_t>(f.start + f.number);
  c.fragment.start_seq = f.start;
  c.fragment.data_length = static_cast<std::uint16_t>(f.len);
  c.fragment.fragment_count = f.count;
  c.fragment.fragment_number = f.number;
  c.fragment.total_length = f.total;
  c.fragment.fragment_offset = f.offset;
  return c;
}

// An unreliable fragment: it follows reliable sequence 0 (none sent on the channel yet) and
// its set is keyed by the unreliable sequence in start.
Command unreliable_fragment(std::uint8_t channel, const Frag& f) {
  Command c = fragment(channel, f);
  c.command = static_cast<std::uint8_t>(Cmd::send_unreliable_fragment);
  c.reliable_seq = 0;
  return c;
}

Command ack(std::uint8_t channel, std::uint16_t seq, std::uint16_t sent_time) {
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::acknowledge);
  c.channel_id = channel;
  c.reliable_seq = seq;
  c.ack.received_reliable_seq = seq;
  c.ack.received_sent_time = sent_time;
  return c;
}

std::uint64_t name_seed() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::uint64_t h = 0xA77AC4;
  for (const char* p = info->name(); *p != '\0'; ++p) h = h * 131 + static_cast<unsigned char>(*p);
  return h;
}

class Attack : public ::testing::Test {
 protected:
  void SetUp() override {
    h_ = std::make_unique<SimHarness>(
        name_seed(),
        std::string("attack.") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    drv::LinkConditions link;
    link.latency_us = 5 * kMs;
    h_->net().set_default_link(link);
    server_ = &h_->add_host("server", server_config());
    honest_ = &h_->add_host("honest", proto::HostConfig{});
    attacker_ = &add_attacker("attacker", attacker_header_);
    honest_->on_tx = [this](SimHost&, const proto::OutDatagram& d) { learn(d, honest_header_); };

    // The server echoes whatever the honest client sends, reliably, on the same channel.
    server_->on_event = [this](SimHost& s, const Event& ev) {
      if (ev.type == EventType::receive && ev.peer == honest_conn_.server) {
        s.core->send(ev.peer, ev.channel, Delivery::reliable, ev.packet);
      }
    };
    h_->after_step = [this] { note_buffered(); };

    auto hc = h_->connect(*honest_, *server_, 2, 1);
    ASSERT_TRUE(hc) << h_->seed_note();
    honest_conn_ = *hc;
    auto ac = h_->connect(*attacker_, *server_, kAttackerChannels, 2);
    ASSERT_TRUE(ac) << h_->seed_note();
    attacker_conn_ = *ac;
    h_->run_for(600 * kMs);  // pings and acks: both clients have sent post-handshake headers
    ASSERT_TRUE(attacker_header_.has_value()) << "never saw the attacker's header";
    ASSERT_TRUE(honest_header_.has_value()) << "never saw the honest client's header";
    ASSERT_TRUE(round_trip()) << "honest round trip fails before any attack";
  }

  // A plain ENet peer: it never offers Tern's extensions, so the server must refuse them.
  SimHost& add_attacker(const std::string& name, std::optional<proto::Header>& header) {
    proto::HostConfig plain;
    plain.selective_acks = false;
    plain.delivery_modes = false;
    plain.blocks = false;
    plain.congestion_control = false;
    SimHost& a = h_->add_host(name, plain);
    a.on_tx = [this, &header](SimHost&, const proto::OutDatagram& d) { learn(d, header); };
    return a;
  }

  // A Tern client with every extension the server offers, connected and past its first pings,
  // the header of its datagrams learnt: an attacker the extensions' commands are not refused
  // to for want of agreement.
  void connect_tern_attacker() {
    tern_attacker_ = &h_->add_host("tern-attacker", proto::HostConfig{});
    tern_attacker_->on_tx = [this](SimHost&, const proto::OutDatagram& d) {
      learn(d, tern_header_);
    };
    auto conn = h_->connect(*tern_attacker_, *server_, 2, 3);
    ASSERT_TRUE(conn) << h_->seed_note();
    tern_conn_ = *conn;
    h_->run_for(600 * kMs);
    ASSERT_TRUE(tern_header_.has_value()) << "never saw the Tern attacker's header";
  }

  // Remembers the header a client puts on its datagrams once the server assigned its ID.
  static void learn(const proto::OutDatagram& d, std::optional<proto::Header>& out) {
    proto::DecodedHeader dh;
    Drop why{};
    if (proto::decode_header(d.view(), false, dh, why) && dh.header.peer_id != proto::kMaxPeerId) {
      out = dh.header;
    }
  }

  // The attacker's header, stamped with the current time (reliable commands need one).
  proto::Header header() const { return header_of(*attacker_header_); }
  proto::Header header_of(proto::Header h) const {
    h.has_sent_time = true;
    h.sent_time = static_cast<std::uint16_t>(h_->now() / kMs);
    h.compressed = false;
    return h;
  }

  void note_buffered() {
    max_buffered_ = std::max(max_buffered_, server_->core->counters().buffered_bytes);
  }

  // Feeds one datagram to the server as if it came from `from` (the attacker by default),
  // as an exact-size heap copy, then lets the hosts run briefly.
  void inject(const std::vector<std::byte>& bytes, std::optional<Endpoint> from = std::nullopt,
              std::uint64_t settle_us = 10 * kMs) {
    auto copy = std::make_unique<std::byte[]>(std::max<std::size_t>(bytes.size(), 1));
    if (!bytes.empty()) std::memcpy(copy.get(), bytes.data(), bytes.size());
    server_->core->on_datagram(h_->now(), from.value_or(attacker_->address),
                               std::span<const std::byte>(copy.get(), bytes.size()));
    note_buffered();
    if (settle_us > 0) h_->run_for(settle_us);
  }

  std::uint64_t drops(Drop d) const { return server_->core->counters().drops[d]; }

  // Injects and expects `reason` to count at least once more.
  void expect_drop(Drop reason, const std::vector<std::byte>& bytes, const char* what,
                   std::optional<Endpoint> from = std::nullopt) {
    const std::uint64_t before = drops(reason);
    inject(bytes, from);
    EXPECT_GT(drops(reason), before)
        << what << ": " << proto::drop_name(reason) << " did not count; " << h_->seed_note();
  }

  // A reliable message from the honest client to the server and back.
  bool round_trip() {
    const Tag t{77, 0, Delivery::reliable, rt_seq_++, 64};
    if (honest_->core->send(honest_conn_.client, 0, Delivery::reliable, make_payload(t)) !=
        SendResult::ok) {
      return false;
    }
    return h_->run_until(
        [&] {
          for (const auto& e : honest_->log) {
            if (e.event.type == EventType::receive && check_payload(e.event.packet.bytes(), t)) {
              return true;
            }
          }
          return false;
        },
        10 * kSec);
  }

  // The checks every attack ends with.
  void expect_unharmed() {
    h_->run_for(200 * kMs);
    EXPECT_EQ(server_->count(EventType::receive, attacker_conn_.server), 0u)
        << "the server application received attacker data; " << h_->seed_note();
    for (const SimHost* host : {server_, honest_}) {
      for (const auto& e : host->log) {
        if (e.event.type == EventType::receive && contains_evil(e.event.packet.bytes())) {
          ADD_FAILURE() << host->name << " application received attacker bytes; "
                        << h_->seed_note();
        }
      }
    }
    EXPECT_LE(max_buffered_, server_config().memory_cap) << h_->seed_note();
    EXPECT_EQ(server_->core->peer_state(honest_conn_.server), PeerState::connected);
    EXPECT_TRUE(round_trip()) << "honest round trip failed after the attack; " << h_->seed_note();
    EXPECT_EQ(server_->count(EventType::disconnect, honest_conn_.server), 0u);
    h_->print_summary();
  }

  std::unique_ptr<SimHarness> h_;
  SimHost* server_ = nullptr;
  SimHost* honest_ = nullptr;
  SimHost* attacker_ = nullptr;
  Connection honest_conn_;
  Connection attacker_conn_;
  std::optional<proto::Header> attacker_header_;
  std::optional<proto::Header> honest_header_;
  SimHost* tern_attacker_ = nullptr;  // connect_tern_attacker()
  Connection tern_conn_;
  std::optional<proto::Header> tern_header_;
  std::size_t max_buffered_ = 0;
  std::uint32_t rt_seq_ = 0;
};

TEST_F(Attack, FragmentNumberPastCount) {
  const auto data = evil(500);
  expect_drop(Drop::fragment_number_out_of_range,
              Datagram(header()).command(fragment(1, {1, 4, 7, 2000, 0, 500}), data).bytes(),
              "number 7 of 4");
  expect_drop(Drop::fragment_number_out_of_range,
              Datagram(header()).command(fragment(1, {1, 4, 4, 2000, 1500, 500}), data).bytes(),
              "number 4 of 4");
  expect_drop(
      Drop::fragment_number_out_of_range,
      Datagram(header()).command(fragment(1, {1, 4, 0xFFFFFFFFu, 2000, 0, 500}), data).bytes(),
      "number 2^32-1 of 4");
  expect_drop(
      Drop::fragment_number_out_of_range,
      Datagram(header()).command(unreliable_fragment(2, {1, 4, 9, 2000, 0, 500}), data).bytes(),
      "unreliable number 9 of 4");
  expect_unharmed();
}

TEST_F(Attack, FragmentCountChangesWithinOneSet) {
  const auto data = evil(1000);
  // A valid first fragment opens the set; later ones contradict it.
  inject(Datagram(header()).command(fragment(1, {1, 4, 0, 4000, 0, 1000}), data).bytes());
  expect_drop(Drop::fragment_mismatch,
              Datagram(header()).command(fragment(1, {1, 5, 1, 4000, 1000, 1000}), data).bytes(),
              "count 4 -> 5");
  expect_drop(Drop::fragment_mismatch,
              Datagram(header()).command(fragment(1, {1, 4, 2, 8000, 2000, 1000}), data).bytes(),
              "total 4000 -> 8000");
  inject(
      Datagram(header()).command(unreliable_fragment(2, {1, 4, 0, 4000, 0, 1000}), data).bytes());
  expect_drop(
      Drop::fragment_mismatch,
      Datagram(header()).command(unreliable_fragment(2, {1, 3, 1, 4000, 1000, 1000}), data).bytes(),
      "unreliable count 4 -> 3");
  // Completing the rest of the reliable set with the original numbers must not deliver a set
  // whose contradicting fragments were refused: fragments 1 and 2 are still missing.
  inject(Datagram(header()).command(fragment(1, {1, 4, 3, 4000, 3000, 1000}), data).bytes());
  expect_unharmed();
}

TEST_F(Attack, DataPastTotalLength) {
  const auto data = evil(1000);
  expect_drop(Drop::fragment_past_total,
              Datagram(header()).command(fragment(1, {1, 2, 1, 1500, 1000, 1000}), data).bytes(),
              "offset 1000 + 1000 > 1500");
  expect_drop(Drop::fragment_past_total,
              Datagram(header()).command(fragment(1, {1, 2, 1, 1500, 1500, 10}), data).bytes(),
              "offset == total");
  expect_drop(
      Drop::fragment_past_total,
      Datagram(header()).command(fragment(1, {1, 2, 0, 1500, 0xFFFFFF00u, 1000}), data).bytes(),
      "offset near 2^32 (wraps if added naively)");
  expect_drop(
      Drop::fragment_past_total,
      Datagram(header()).command(unreliable_fragment(2, {1, 2, 1, 1500, 1200, 1000}), data).bytes(),
      "unreliable past total");
  expect_unharmed();
}

TEST_F(Attack, PayloadLengthPastDatagramEnd) {
  const auto data = evil(10);
  expect_drop(Drop::payload_past_datagram,
              Datagram(header()).command(reliable(1, 1, 1000), data).bytes(),
              "reliable claims 1000, carries 10");
  expect_drop(Drop::payload_past_datagram,
              Datagram(header()).command(unreliable(1, 1, 65535), data).bytes(),
              "unreliable claims 65535");
  expect_drop(Drop::payload_past_datagram,
              Datagram(header()).command(fragment(2, {1, 2, 0, 2000, 0, 1000}), data).bytes(),
              "fragment claims 1000");
  // A well-formed ping first, then the lie: parsing stops at the lie, not before it.
  Command ping;
  ping.command = static_cast<std::uint8_t>(Cmd::ping) | proto::kFlagAcknowledge;
  ping.channel_id = proto::kSystemChannel;
  ping.reliable_seq = 0x7000;
  expect_drop(Drop::payload_past_datagram,
              Datagram(header()).command(ping).command(unreliable(3, 1, 2000), data).bytes(),
              "second command");
  expect_unharmed();
}

TEST_F(Attack, SetsPromisingOneGiB) {
  const auto data = evil(1000);
  constexpr std::uint32_t kGiB = 1u << 30;
  // What an ENet sender would number a 1 GiB message with 1372-byte fragments: a valid count,
  // a total far above max_packet_size.
  const std::uint32_t count = (kGiB + 1371) / 1372;
  expect_drop(Drop::message_too_large,
              Datagram(header()).command(fragment(1, {1, count, 0, kGiB, 0, 1000}), data).bytes(),
              "reliable 1 GiB");
  expect_drop(Drop::message_too_large,
              Datagram(header())
                  .command(unreliable_fragment(2, {1, count, 0, kGiB, 0, 1000}), data)
                  .bytes(),
              "unreliable 1 GiB");
  expect_drop(
      Drop::message_too_large,
      Datagram(header()).command(fragment(3, {1, count, 5, 0xFFFFFFFFu, 0, 1000}), data).bytes(),
      "reliable 4 GiB - 1");
  // More fragments than ENet allows, and more fragments than bytes.
  expect_drop(Drop::fragment_count_invalid,
              Datagram(header()).command(fragment(4, {1, 2000000, 0, kGiB, 0, 1000}), data).bytes(),
              "2,000,000 fragments");
  expect_drop(Drop::fragment_count_invalid,
              Datagram(header()).command(fragment(5, {1, 100, 0, 50, 0, 10}), data).bytes(),
              "100 fragments of a 50-byte message");
  expect_drop(Drop::fragment_count_invalid,
              Datagram(header()).command(fragment(6, {1, 0, 0, 1000, 0, 10}), data).bytes(),
              "zero fragments");
  EXPECT_EQ(server_->core->counters().buffered_bytes, 0u) << "refused sets still hold memory";
  expect_unharmed();
}

// Thousands of maximum-size sets, each opened with two fragments: per-peer and host-wide caps
// must hold whether the core reserves a set's total up front or only what arrived.
TEST_F(Attack, FloodOfMaximumSizeSets) {
  const std::uint32_t total = static_cast<std::uint32_t>(server_config().max_packet_size);
  const std::uint32_t count = (total + 999) / 1000;
  const auto data = evil(1000);
  const std::uint64_t cap_drops_before = drops(Drop::waiting_data_cap) + drops(Drop::memory_cap);
  for (std::uint32_t k = 0; k < 3000; ++k) {
    // Distinct start sequence numbers, all inside the receive window (7 x 4096 ahead).
    const auto start = static_cast<std::uint16_t>(1 + 8 * k);
    for (std::uint32_t n = 0; n < 2; ++n) {
      inject(Datagram(header())
                 .command(fragment(1, {start, count, n, total, n * 1000, 1000}), data)
                 .bytes(),
             std::nullopt, 0);
      inject(Datagram(header())
                 .command(unreliable_fragment(2, {static_cast<std::uint16_t>(k + 1), count, n,
                                                  total, n * 1000, 1000}),
                          data)
                 .bytes(),
             std::nullopt, 0);
    }
    if (k % 100 == 99) h_->run_for(5 * kMs);
  }
  h_->run_for(100 * kMs);
  const std::uint64_t cap_drops = drops(Drop::waiting_data_cap) + drops(Drop::memory_cap);
  std::printf("[attack] flood: waiting_data_cap=%llu memory_cap=%llu max buffered=%zu\n",
              static_cast<unsigned long long>(drops(Drop::waiting_data_cap)),
              static_cast<unsigned long long>(drops(Drop::memory_cap)), max_buffered_);
  // One peer alone meets its own cap (max_waiting_data) first.
  EXPECT_GT(drops(Drop::waiting_data_cap), 0u) << h_->seed_note();
  EXPECT_GT(cap_drops, cap_drops_before);
  EXPECT_LE(max_buffered_, server_config().max_waiting_data + 64 * 1024)
      << "one peer held more than its share; " << h_->seed_note();
  expect_unharmed();
}

// Several attackers together reach the host-wide cap; the honest client must still get
// through. Each set is sized so that the attackers fill the host to within a few bytes.
TEST_F(Attack, FloodFromSeveralPeersMeetsMemoryCap) {
  std::vector<std::pair<SimHost*, std::optional<proto::Header>>> gang(3);
  std::vector<Connection> conns;
  for (std::size_t i = 0; i < gang.size(); ++i) {
    gang[i].first = &add_attacker("gang" + std::to_string(i), gang[i].second);
    auto c = h_->connect(*gang[i].first, *server_, 4, 10 + static_cast<std::uint32_t>(i));
    ASSERT_TRUE(c);
    conns.push_back(*c);
  }
  h_->run_for(600 * kMs);
  const auto data = evil(1000);
  std::uint32_t total = static_cast<std::uint32_t>(server_config().max_packet_size);
  std::uint64_t gang_datagrams = 0;
  std::uint64_t gang_bytes = 0;
  for (std::uint32_t round = 0; round < 40; ++round) {
    for (auto& [who, hdr] : gang) {
      ASSERT_TRUE(hdr.has_value());
      // Halve the set size whenever the last one was refused, down to tiny sets: greedy
      // filling leaves the host almost nothing.
      const std::size_t free_bytes =
          server_config().memory_cap - server_->core->counters().buffered_bytes;
      std::uint32_t t = std::min<std::uint32_t>(total, static_cast<std::uint32_t>(free_bytes));
      t = std::max<std::uint32_t>(t, 2);
      const std::uint32_t count = (t + 999) / 1000;
      const auto start = static_cast<std::uint16_t>(1 + 2 * round);
      const std::size_t len = std::min<std::size_t>(t, 1000);
      const auto d = Datagram(header_of(*hdr))
                         .command(fragment(1, {start, count, 0, t, 0, len}),
                                  std::span<const std::byte>(data).first(len))
                         .bytes();
      inject(d, who->address, 0);
      ++gang_datagrams;
      gang_bytes += d.size();
      if (t < total) total = std::max<std::uint32_t>(t / 2, 2);
    }
  }
  h_->run_for(100 * kMs);
  std::printf(
      "[attack] gang: %llu datagrams (%llu bytes) pin %zu of %zu buffered bytes; "
      "waiting_data_cap=%llu memory_cap=%llu\n",
      static_cast<unsigned long long>(gang_datagrams), static_cast<unsigned long long>(gang_bytes),
      server_->core->counters().buffered_bytes, server_config().memory_cap,
      static_cast<unsigned long long>(drops(Drop::waiting_data_cap)),
      static_cast<unsigned long long>(drops(Drop::memory_cap)));
  const std::uint64_t refused_before = drops(Drop::memory_cap);
  EXPECT_GT(drops(Drop::memory_cap), 0u) << h_->seed_note();
  for (const auto& c : conns) EXPECT_EQ(server_->count(EventType::receive, c.server), 0u);
  expect_unharmed();
  std::printf("[attack] gang: memory_cap refusals while the honest client tried: %llu\n",
              static_cast<unsigned long long>(drops(Drop::memory_cap) - refused_before));
}

// Complete reliable messages parked behind a sequence number that never comes: not
// reassembly, but buffered just the same. Several attackers together go past the host-wide
// cap; the honest client must still get through.
TEST_F(Attack, OutOfOrderReliableFromSeveralPeersMeetsMemoryCap) {
  std::vector<std::pair<SimHost*, std::optional<proto::Header>>> gang(3);
  for (std::size_t i = 0; i < gang.size(); ++i) {
    gang[i].first = &add_attacker("gang" + std::to_string(i), gang[i].second);
    ASSERT_TRUE(h_->connect(*gang[i].first, *server_, 4, 20 + static_cast<std::uint32_t>(i)));
  }
  h_->run_for(600 * kMs);
  const auto data = evil(1300);
  // Sequence 1 is never sent; 2.. wait for it. 4000 x 1300 B is past each peer's 4 MiB.
  for (std::uint16_t seq = 2; seq < 4002; ++seq) {
    for (auto& [who, hdr] : gang) {
      ASSERT_TRUE(hdr.has_value());
      inject(Datagram(header_of(*hdr)).command(reliable(1, seq, data.size()), data).bytes(),
             who->address, 0);
    }
    if (seq % 200 == 0) h_->run_for(5 * kMs);
  }
  h_->run_for(100 * kMs);
  std::printf("[attack] parked: buffered=%zu, waiting_data_cap=%llu memory_cap=%llu\n",
              server_->core->counters().buffered_bytes,
              static_cast<unsigned long long>(drops(Drop::waiting_data_cap)),
              static_cast<unsigned long long>(drops(Drop::memory_cap)));
  EXPECT_GT(drops(Drop::memory_cap) + drops(Drop::waiting_data_cap), 0u) << h_->seed_note();
  expect_unharmed();
}

TEST_F(Attack, ForgedPeerIdsAndSessions) {
  const auto data = evil(100);
  // The honest client's peer ID and session, from the attacker's address. The server mirrors
  // each client's own peer index as its ID, so both clients may well hold the same ID on
  // their separate addresses; then this header is simply the attacker's own connection and the
  // neighbouring-ID case below is the forgery.
  if (honest_header_->peer_id != attacker_header_->peer_id) {
    expect_drop(Drop::unknown_peer,
                Datagram(header_of(*honest_header_)).command(reliable(0, 1, 100), data).bytes(),
                "honest client's peer ID");
  } else if (honest_header_->session != attacker_header_->session) {
    expect_drop(Drop::bad_session,
                Datagram(header_of(*honest_header_)).command(reliable(0, 1, 100), data).bytes(),
                "honest client's session");
  }
  proto::Header other = header();
  other.peer_id = static_cast<std::uint16_t>((other.peer_id + 1) & proto::kMaxPeerId);
  if (other.peer_id == proto::kMaxPeerId) other.peer_id = 0;
  expect_drop(Drop::unknown_peer, Datagram(other).command(reliable(0, 1, 100), data).bytes(),
              "neighbouring peer ID");
  for (std::uint8_t s = 1; s < 4; ++s) {
    proto::Header wrong = header();
    wrong.session = static_cast<std::uint8_t>((wrong.session + s) & 3);
    expect_drop(Drop::bad_session, Datagram(wrong).command(reliable(0, 1, 100), data).bytes(),
                "wrong session");
  }
  // The attacker's valid header from an address with no connection.
  const Endpoint elsewhere = h_->next_address(4444);
  expect_drop(Drop::unknown_peer, Datagram(header()).command(reliable(0, 1, 100), data).bytes(),
              "right header, wrong address", elsewhere);
  // The honest client's header from an address with no connection.
  expect_drop(Drop::unknown_peer,
              Datagram(header_of(*honest_header_)).command(reliable(0, 1, 100), data).bytes(),
              "honest header, wrong address", elsewhere);
  expect_unharmed();
}

TEST_F(Attack, TruncatedDatagrams) {
  const proto::Header hd = header();
  const auto full = Datagram(hd).command(fragment(1, {1, 2, 0, 2000, 0, 100}), evil(100)).bytes();
  expect_drop(Drop::truncated_header, {}, "0 bytes");
  expect_drop(Drop::truncated_header, {full.begin(), full.begin() + 1}, "1 byte");
  // 3 bytes of a header that announces a sent time (4 bytes).
  expect_drop(Drop::truncated_header, {full.begin(), full.begin() + 3}, "3 bytes, sent time");
  // 2-byte header without sent time, then 1 byte of a command.
  proto::Header no_time = hd;
  no_time.has_sent_time = false;
  auto three = Datagram(no_time).bytes();
  three.push_back(std::byte{static_cast<std::uint8_t>(Cmd::ping)});
  expect_drop(Drop::truncated_command, three, "3 bytes, 1 of a command");
  // Half a 24-byte fragment command.
  expect_drop(Drop::truncated_command, {full.begin(), full.begin() + 4 + 12}, "half a command");
  // A command header with nothing of its body.
  expect_drop(Drop::truncated_command, {full.begin(), full.begin() + 4 + 4}, "command header only");
  expect_unharmed();
}

TEST_F(Attack, OversizeDatagrams) {
  const auto data = evil(4000);
  auto d = Datagram(header()).command(reliable(1, 1, 4000), data).bytes();
  d.resize(proto::kMaxMtu + 1, std::byte{0});
  expect_drop(Drop::oversize_datagram, d, "4097 bytes");
  d.resize(65507, std::byte{0x41});
  expect_drop(Drop::oversize_datagram, d, "65507 bytes");
  expect_unharmed();
}

TEST_F(Attack, UnknownCommands) {
  for (std::uint8_t number : {0}) {
    auto d = Datagram(header()).bytes();
    // The unknown command, then a well-formed reliable command that must not be reached:
    // parsing stops at the first command it cannot size (as libenet does).
    const std::array<std::byte, 4> unknown = {std::byte{number}, std::byte{1}, std::byte{0},
                                              std::byte{1}};
    d.insert(d.end(), unknown.begin(), unknown.end());
    const auto rest = Datagram(proto::Header{}).command(reliable(1, 1, 40), evil(40)).bytes();
    d.insert(d.end(), rest.begin() + 2, rest.end());  // without that builder's own header
    std::string what = "command " + std::to_string(number);
    expect_drop(Drop::unknown_command, d, what.c_str());
    // With the acknowledge flag too.
    d[4] = std::byte{static_cast<std::uint8_t>(number | proto::kFlagAcknowledge)};
    expect_drop(Drop::unknown_command, d, (what + " | ACK").c_str());
  }
  expect_unharmed();
}

TEST_F(Attack, ExtensionCommandsFromAPlainPeer) {
  // A hello after the handshake changes nothing: the connection stays plain ENet.
  Command hello;
  hello.command = static_cast<std::uint8_t>(Cmd::tern_hello);
  hello.channel_id = proto::kSystemChannel;
  hello.hello.features = 0xFFFFFFFFu;
  inject(Datagram(header()).command(hello).bytes());
  PeerStats stats;
  ASSERT_TRUE(server_->core->peer_stats(attacker_conn_.server, stats));
  EXPECT_FALSE(stats.selective_acks);
  // An ack range from a peer that never agreed to them ends the datagram, with or without
  // the acknowledge flag, and the reliable command behind it is never reached.
  for (std::uint8_t flags : {std::uint8_t{0}, proto::kFlagAcknowledge}) {
    Command range;
    range.command = static_cast<std::uint8_t>(static_cast<std::uint8_t>(Cmd::ack_range) | flags);
    range.channel_id = 0;
    range.reliable_seq = 1;
    range.ack_range.bits = 0xFFFFFFFFu;
    const auto d = Datagram(header()).command(range).command(reliable(1, 1, 40), evil(40)).bytes();
    expect_drop(Drop::extension_not_agreed, d, "ack_range");
  }
  // The extension command, of any kind, is refused the same way.
  for (std::uint8_t kind : {1, 5, 8, 200}) {
    Command ext;
    ext.command = static_cast<std::uint8_t>(Cmd::tern_ext);
    ext.channel_id = proto::kSystemChannel;
    ext.ext.kind = kind;
    ext.ext.data_length = 0;
    const auto d = Datagram(header()).command(ext).command(reliable(1, 1, 40), evil(40)).bytes();
    expect_drop(Drop::extension_not_agreed, d, "tern_ext");
  }
  expect_unharmed();
}

TEST_F(Attack, AckRangesForCommandsNeverSent) {
  // A Tern peer that agreed to ack ranges acknowledges sequence numbers the server never sent
  // (and the whole window around them): each is counted and nothing is freed twice.
  ASSERT_NO_FATAL_FAILURE(connect_tern_attacker());
  SimHost& tern_attacker = *tern_attacker_;
  const std::optional<proto::Header>& tern_header = tern_header_;
  const auto conn = &tern_conn_;
  PeerStats stats;
  ASSERT_TRUE(server_->core->peer_stats(conn->server, stats));
  ASSERT_TRUE(stats.selective_acks) << "the Tern client and server did not agree on ack ranges";
  const std::uint64_t before = drops(Drop::unexpected_ack);
  for (std::uint32_t base = 0; base < 65536; base += 4099) {
    Command range;
    range.command = static_cast<std::uint8_t>(Cmd::ack_range);
    range.channel_id = 1;
    range.reliable_seq = static_cast<std::uint16_t>(base);
    range.ack_range.received_sent_time = header_of(*tern_header).sent_time;
    range.ack_range.bits = 0xFFFFFFFFu;
    inject(Datagram(header_of(*tern_header)).command(range).bytes(), tern_attacker.address);
  }
  EXPECT_EQ(drops(Drop::unexpected_ack) - before, 16u * 33u);
  // On a channel the connection does not have: refused.
  Command bad;
  bad.command = static_cast<std::uint8_t>(Cmd::ack_range);
  bad.channel_id = 7;
  expect_drop(Drop::bad_channel, Datagram(header_of(*tern_header)).command(bad).bytes(),
              "ack_range past the channel count", tern_attacker.address);
  // An extension command of a kind no extension of this host handles ends the datagram.
  Command ext;
  ext.command = static_cast<std::uint8_t>(Cmd::tern_ext);
  ext.channel_id = proto::kSystemChannel;
  ext.ext.kind = 0xEE;
  ext.ext.data_length = 4;
  expect_drop(Drop::unknown_ext_kind,
              Datagram(header_of(*tern_header)).command(ext, evil(4)).bytes(),
              "tern_ext of an unknown kind", tern_attacker.address);
  expect_unharmed();
}

// Large blocks (WIRE.md, "Large blocks"): a block_slice's data, with the real field order.
struct Slice {
  std::uint16_t id;
  std::uint16_t slice_size;
  std::uint32_t total;
  std::uint32_t count;
  std::uint32_t index;
  std::size_t len;  // slice bytes that follow
};

std::vector<std::byte> slice_data(const Slice& s) {
  std::vector<std::byte> out(proto::kBlockSliceHeader);
  proto::Writer w(out);
  w.u16(s.id);
  w.u16(s.slice_size);
  w.u32(s.total);
  w.u32(s.count);
  w.u32(s.index);
  const auto body = evil(s.len);
  out.insert(out.end(), body.begin(), body.end());
  return out;
}

Command ext_command(proto::TernExtKind kind, std::uint8_t channel, std::size_t data_length) {
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::tern_ext);
  c.channel_id = channel;
  c.ext.kind = static_cast<std::uint8_t>(kind);
  c.ext.data_length = static_cast<std::uint16_t>(data_length);
  return c;
}

TEST_F(Attack, ForgedBlockSlicesAndAcks) {
  // A Tern peer that agreed to blocks forges slices: every field against the others and
  // against the server's limits. Nothing is delivered, nothing beyond one honest-sized buffer
  // is taken, and what it did take goes back when it is disconnected.
  ASSERT_NO_FATAL_FAILURE(connect_tern_attacker());
  SimHost& tern_attacker = *tern_attacker_;
  const std::optional<proto::Header>& tern_header = tern_header_;
  const auto conn = &tern_conn_;
  PeerStats stats;
  ASSERT_TRUE(server_->core->peer_stats(conn->server, stats));
  ASSERT_TRUE(stats.blocks) << "the Tern client and server did not agree on blocks";
  const std::size_t buffered_before = server_->core->counters().buffered_bytes;
  // A refused slice ends the datagram: the reliable command behind it is never reached.
  auto slice = [&](const Slice& s, std::uint8_t channel = 1, bool trailing = true) {
    const auto data = slice_data(s);
    Datagram d(header_of(*tern_header));
    d.command(ext_command(proto::TernExtKind::block_slice, channel, data.size()), data);
    if (trailing) d.command(reliable(1, 1, 40), evil(40));
    return d.bytes();
  };
  auto expect = [&](Drop why, const Slice& s, const char* what, std::uint8_t channel = 1) {
    expect_drop(why, slice(s, channel, why != Drop::duplicate), what, tern_attacker.address);
  };
  // Fields that disagree with each other, or with what this host allows.
  expect(Drop::block_slice_out_of_range, {1, 1000, 10'000, 10, 10, 1000}, "index == count");
  expect(Drop::block_slice_out_of_range, {1, 1000, 10'000, 10, 0xFFFFFFFF, 1000}, "index ~0");
  expect(Drop::block_malformed, {1, 1000, 10'000, 11, 0, 1000}, "count above the sizes'");
  expect(Drop::block_malformed, {1, 1000, 10'000, 0, 0, 1000}, "count zero");
  expect(Drop::block_malformed, {1, 0, 10'000, 10, 0, 0}, "slice size zero");
  expect(Drop::block_malformed, {1, 5000, 100, 1, 0, 100}, "slice size above any MTU");
  expect(Drop::block_malformed, {1, 1000, 0, 0, 0, 0}, "total zero");
  expect(Drop::block_malformed, {1, 1000, 10'000, 10, 3, 999}, "short slice");
  expect(Drop::block_malformed, {1, 1000, 10'500, 11, 10, 1000}, "last slice too long");
  expect(Drop::block_too_large, {1, 1000, (64u << 20) + 1, 67'109, 0, 1000}, "past max_block_size");
  expect(Drop::block_too_large, {1, 1000, 0xFFFFFFFF, 4'294'968, 0, 1000}, "4 GiB");
  // Within max_block_size but past the host's memory cap (8 MiB here): refused, not taken.
  expect(Drop::memory_cap, {1, 1000, 32u << 20, 33'555, 0, 1000}, "past the memory cap");
  expect(Drop::bad_channel, {1, 1000, 10'000, 10, 0, 1000}, "channel past the count", 7);
  expect(Drop::bad_channel, {1, 1000, 10'000, 10, 0, 1000}, "system channel",
         proto::kSystemChannel);
  EXPECT_EQ(server_->core->counters().buffered_bytes, buffered_before);
  // A block in progress: another block ID, or the same ID with other sizes, is refused.
  inject(slice({9, 1000, 10'000, 10, 0, 1000}, 1, false), tern_attacker.address);
  EXPECT_EQ(server_->core->counters().buffered_bytes, buffered_before + 10'000);
  expect(Drop::block_mismatch, {10, 1000, 10'000, 10, 1, 1000}, "another block ID");
  expect(Drop::block_mismatch, {9, 1000, 20'000, 20, 1, 1000}, "another total");
  expect(Drop::block_mismatch, {9, 500, 10'000, 20, 1, 500}, "another slice size");
  expect(Drop::duplicate, {9, 1000, 10'000, 10, 0, 1000}, "the same slice again");
  EXPECT_EQ(server_->core->counters().buffered_bytes, buffered_before + 10'000);
  // On the other channel a block of its own, but not past max_block_size for the peer.
  // (64 MiB would be, with the 10,000 bytes already held; it is also past the memory cap.)
  expect(Drop::block_memory, {3, 1000, 64u << 20, 67'109, 0, 1000}, "past the peer's share", 0);
  // Acks the server never asked for: malformed, or for no block it is sending.
  std::vector<std::byte> ack(proto::kBlockAckData);
  expect_drop(Drop::unexpected_ack,
              Datagram(header_of(*tern_header))
                  .command(ext_command(proto::TernExtKind::block_ack, 1, ack.size()), ack)
                  .bytes(),
              "ack of no block", tern_attacker.address);
  // An ack of the server's own block: a field start not above the base, and a base past the
  // count, are malformed.
  // Large enough to be still in flight through both (about 120 ms at this RTT).
  ASSERT_EQ(server_->core->send_block(conn->server, 1, Packet::copy_of(evil(4 * kMiB))),
            SendResult::ok);
  auto block_ack = [&](std::uint32_t base, std::uint32_t field) {
    std::vector<std::byte> a(proto::kBlockAckData);
    proto::Writer w(a);
    w.u16(0);  // the server's first block on this connection
    w.u16(0);
    w.u32(base);
    w.u32(field);
    return Datagram(header_of(*tern_header))
        .command(ext_command(proto::TernExtKind::block_ack, 1, a.size()), a)
        .bytes();
  };
  expect_drop(Drop::block_malformed, block_ack(1, 1), "field start at the base",
              tern_attacker.address);
  expect_drop(Drop::block_malformed, block_ack(0xFFFFFF00u, 0xFFFFFF01u), "base past the count",
              tern_attacker.address);
  ack.resize(12);
  expect_drop(Drop::block_malformed,
              Datagram(header_of(*tern_header))
                  .command(ext_command(proto::TernExtKind::block_ack, 1, ack.size()), ack)
                  .bytes(),
              "short ack", tern_attacker.address);
  // Forged refusals of the server's block: for another block ID (late, ignored), of another
  // length, or naming a cap the block fits in. The block stays in flight, no event comes.
  auto refusal = [&](std::uint16_t id, std::uint32_t cap, std::size_t length) {
    std::vector<std::byte> r(length);
    proto::Writer w(r);
    w.u16(id);
    w.u16(0);
    w.u32(cap);
    return Datagram(header_of(*tern_header))
        .command(ext_command(proto::TernExtKind::block_refused, 1, r.size()), r)
        .bytes();
  };
  expect_drop(Drop::unexpected_ack, refusal(7, 1000, proto::kBlockRefusedData),
              "refusal of another block", tern_attacker.address);
  expect_drop(Drop::block_malformed, refusal(0, 8 * kMiB, proto::kBlockRefusedData),
              "refusal naming a cap the block fits in", tern_attacker.address);
  expect_drop(Drop::block_malformed, refusal(0, 1000, proto::kBlockRefusedData + 4), "long refusal",
              tern_attacker.address);
  EXPECT_TRUE(server_->core->block_in_flight(conn->server, 1));
  EXPECT_EQ(server_->count(EventType::block_refused, conn->server), 0u);
  EXPECT_EQ(server_->core->counters().blocks_refused, 0u);
  EXPECT_EQ(server_->count(EventType::receive, conn->server), 0u);
  // The incomplete block's buffer goes back with the connection.
  server_->core->disconnect_now(conn->server, 0);
  h_->run_for(50 * kMs);
  EXPECT_EQ(server_->core->counters().buffered_bytes, buffered_before);
  expect_unharmed();
}

TEST_F(Attack, BlockCommandsFromAPeerThatDidNotAgree) {
  // The plain attacker on a channel it has: slices and acks are refused all the same.
  const auto data = slice_data({1, 1000, 10'000, 10, 0, 1000});
  expect_drop(Drop::extension_not_agreed,
              Datagram(header())
                  .command(ext_command(proto::TernExtKind::block_slice, 1, data.size()), data)
                  .command(reliable(1, 1, 40), evil(40))
                  .bytes(),
              "block_slice");
  std::vector<std::byte> ack(proto::kBlockAckData);
  expect_drop(Drop::extension_not_agreed,
              Datagram(header())
                  .command(ext_command(proto::TernExtKind::block_ack, 1, ack.size()), ack)
                  .bytes(),
              "block_ack");
  std::vector<std::byte> refused(proto::kBlockRefusedData);
  expect_drop(
      Drop::extension_not_agreed,
      Datagram(header())
          .command(ext_command(proto::TernExtKind::block_refused, 1, refused.size()), refused)
          .bytes(),
      "block_refused");
  expect_unharmed();
}

TEST_F(Attack, ChannelPastNegotiatedCount) {
  const auto data = evil(100);
  for (std::uint8_t ch :
       {kAttackerChannels, std::uint8_t{40}, std::uint8_t{200}, std::uint8_t{254}}) {
    const std::string what = "channel " + std::to_string(ch);
    expect_drop(Drop::bad_channel, Datagram(header()).command(reliable(ch, 1, 100), data).bytes(),
                (what + " reliable").c_str());
    expect_drop(Drop::bad_channel, Datagram(header()).command(unreliable(ch, 1, 100), data).bytes(),
                (what + " unreliable").c_str());
    expect_drop(Drop::bad_channel,
                Datagram(header()).command(fragment(ch, {1, 2, 0, 200, 0, 100}), data).bytes(),
                (what + " fragment").c_str());
  }
  expect_unharmed();
}

TEST_F(Attack, AcknowledgementsForNothingInFlight) {
  const auto st = static_cast<std::uint16_t>(h_->now() / kMs);
  expect_drop(Drop::unexpected_ack, Datagram(header()).command(ack(0, 4000, st)).bytes(),
              "channel 0, never sent");
  expect_drop(Drop::unexpected_ack,
              Datagram(header()).command(ack(proto::kSystemChannel, 40000, st)).bytes(),
              "system channel, never sent");
  expect_drop(Drop::unexpected_ack, Datagram(header()).command(ack(5, 1, st)).bytes(),
              "channel 5, nothing sent on it");
  // Thirty of them in one datagram.
  Datagram many(header());
  for (std::uint16_t i = 0; i < 30; ++i)
    many.command(ack(0, static_cast<std::uint16_t>(100 + i), st));
  const std::uint64_t before = drops(Drop::unexpected_ack);
  inject(many.bytes());
  EXPECT_GE(drops(Drop::unexpected_ack), before + 30);
  expect_unharmed();
}

// Fragments that overlap complete a set without writing all of its bytes. Whatever the core
// does with such a set, the bytes it never received must not be stale memory: earlier
// messages of other peers live in the same buffer pool.
TEST_F(Attack, OverlappingFragmentsLeakNoStaleMemory) {
  // Fill the pool's 2 KiB class with the honest client's bytes, then let them be freed.
  constexpr char kSecret[] = "HONEST-SECRET";
  for (int i = 0; i < 64; ++i) {
    Packet p = Packet::allocate(2000);
    auto b = p.mutable_bytes();
    for (std::size_t j = 0; j < b.size(); ++j) b[j] = std::byte(kSecret[j % (sizeof kSecret - 1)]);
    ASSERT_EQ(honest_->core->send(honest_conn_.client, 1, Delivery::reliable, std::move(p)),
              SendResult::ok);
  }
  h_->run_for(2 * kSec);
  // Fragments 0 and 1 of a 2000-byte set both claim offset 0: bytes 1000..1999 never arrive.
  const auto data = evil(1000);
  inject(Datagram(header()).command(fragment(1, {1, 2, 0, 2000, 0, 1000}), data).bytes());
  inject(Datagram(header()).command(fragment(1, {1, 2, 1, 2000, 0, 1000}), data).bytes());
  h_->run_for(200 * kMs);
  for (const auto& e : server_->log) {
    if (e.event.type != EventType::receive || e.event.peer != attacker_conn_.server) continue;
    const auto* b = reinterpret_cast<const char*>(e.event.packet.bytes().data());
    const auto n = e.event.packet.size();
    EXPECT_EQ(std::search(b, b + n, kSecret, kSecret + sizeof kSecret - 1), b + n)
        << "the attacker's half-written set was delivered carrying another peer's bytes; "
        << h_->seed_note();
  }
  std::printf("[attack] overlap: %zu message(s) delivered from the overlapping set\n",
              server_->count(EventType::receive, attacker_conn_.server));
  EXPECT_LE(max_buffered_, server_config().memory_cap);
  EXPECT_TRUE(round_trip()) << h_->seed_note();
}

}  // namespace
}  // namespace tern::simtest
