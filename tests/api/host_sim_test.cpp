// tern::Host over the simulated network: two hosts on one SimNetwork, time driven by the test.
//
// Every scenario runs on virtual time in a bounded loop (service with a zero timeout, then
// advance the network clock to the next thing that can happen), so the tests are
// deterministic and never sleep.
#include <cstdlib>
#include <tern/host.hpp>

#include "sim_network.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tern::Delivery;
using tern::DisconnectReason;
using tern::Endpoint;
using tern::Event;
using tern::EventType;
using tern::Host;
using tern::HostOptions;
using tern::PeerHandle;
using tern::PeerState;
using tern::SendResult;

// TERN_API_SEED=<n> replays the scenarios under another seed.
const std::uint64_t kSeed = [] {
  const char* text = std::getenv("TERN_API_SEED");
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 0) : 0x5eed0001ull;
}();
constexpr std::uint64_t kOneWayLatencyUs = 5000;
// Longest stretch a scenario may take on virtual time: ENet's maximum timeout with room.
constexpr std::uint64_t kMaxVirtualUs = 60'000'000;
// Upper bound on one clock step, so that a wrong deadline cannot skip over events.
constexpr std::uint64_t kMaxStepUs = 10'000;

std::vector<std::byte> make_payload(std::size_t size, std::uint32_t tag) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i) {
    out[i] = static_cast<std::byte>((tag * 31 + i * 7 + (i >> 8)) & 0xff);
  }
  return out;
}

bool same_bytes(std::span<const std::byte> a, const std::vector<std::byte>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size()) == 0;
}

class SimHosts : public ::testing::Test {
 protected:
  void SetUp() override {
    std::printf("sim seed %#llx\n", static_cast<unsigned long long>(kSeed));
    net_.set_default_link({.latency_us = kOneWayLatencyUs});
  }

  std::unique_ptr<Host> make_host(const Endpoint& at, HostOptions options = {}) {
    options.random_seed = kSeed ^ at.port;
    return Host::over(options, net_.attach(at), net_);
  }

  void start(HostOptions server_options = {}, HostOptions client_options = {}) {
    server_ = make_host(server_addr_, server_options);
    client_ = make_host(client_addr_, client_options);
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(client_, nullptr);
  }

  // One round: drain both hosts' events, then move virtual time to the next thing that can
  // happen (a delivery or a host timer), at most kMaxStepUs ahead.
  void step() {
    Event ev;
    while (server_ && server_->service(ev, 0us)) server_events_.push_back(std::move(ev));
    while (client_ && client_->service(ev, 0us)) client_events_.push_back(std::move(ev));
    const std::uint64_t now = net_.now_us();
    std::uint64_t next = net_.next_delivery_us();
    if (server_) next = std::min(next, server_->next_deadline_us());
    if (client_) next = std::min(next, client_->next_deadline_us());
    net_.advance_to(std::clamp(next, now + 1, now + kMaxStepUs));
  }

  // Runs until `done` holds; false if virtual time ran out first.
  bool run_until(const std::function<bool()>& done, std::uint64_t budget_us = kMaxVirtualUs) {
    const std::uint64_t end = net_.now_us() + budget_us;
    while (!done()) {
      if (net_.now_us() >= end) return false;
      step();
    }
    return true;
  }

  // Lets the network run for `us` of virtual time.
  void run_for(std::uint64_t us) {
    const std::uint64_t end = net_.now_us() + us;
    while (net_.now_us() < end) step();
  }

  static const Event* find(const std::vector<Event>& events, EventType type) {
    for (const auto& e : events) {
      if (e.type == type) return &e;
    }
    return nullptr;
  }
  static std::size_t count(const std::vector<Event>& events, EventType type) {
    return static_cast<std::size_t>(std::count_if(events.begin(), events.end(),
                                                  [&](const Event& e) { return e.type == type; }));
  }

  // Connects the client to the server; returns the handles on both sides.
  void connect(std::size_t channels, std::uint32_t data, PeerHandle& at_client,
               PeerHandle& at_server) {
    at_client = client_->connect(server_addr_, channels, data);
    ASSERT_TRUE(at_client.valid());
    ASSERT_TRUE(run_until([&] {
      return find(client_events_, EventType::connect) && find(server_events_, EventType::connect);
    }));
    at_server = find(server_events_, EventType::connect)->peer;
    server_events_.clear();
    client_events_.clear();
  }

  tern::drv::SimNetwork net_{kSeed};
  const Endpoint server_addr_ = Endpoint::v4(0x0a000001, 7777);
  const Endpoint client_addr_ = Endpoint::v4(0x0a000002, 40001);
  std::unique_ptr<Host> server_;
  std::unique_ptr<Host> client_;
  std::vector<Event> server_events_;
  std::vector<Event> client_events_;
};

TEST_F(SimHosts, ConnectCarriesDataAndBothSidesSeeIt) {
  start();
  const PeerHandle at_client = client_->connect(server_addr_, 4, 0xC0FFEE);
  ASSERT_TRUE(at_client.valid());
  EXPECT_EQ(client_->peer_state(at_client), PeerState::connecting);
  ASSERT_TRUE(run_until([&] {
    return find(client_events_, EventType::connect) && find(server_events_, EventType::connect);
  }));

  const Event& c = *find(client_events_, EventType::connect);
  EXPECT_EQ(c.peer, at_client);
  EXPECT_EQ(c.address, server_addr_);
  const Event& s = *find(server_events_, EventType::connect);
  EXPECT_EQ(s.data, 0xC0FFEEu);
  EXPECT_EQ(s.address, client_addr_);

  EXPECT_EQ(client_->peer_state(at_client), PeerState::connected);
  EXPECT_EQ(server_->peer_state(s.peer), PeerState::connected);
  EXPECT_EQ(client_->peer_address(at_client), server_addr_);
  EXPECT_EQ(server_->peer_address(s.peer), client_addr_);
  EXPECT_EQ(client_->peer_count(), 1u);
  EXPECT_EQ(server_->peer_count(), 1u);
  EXPECT_EQ(client_->local_endpoint(), client_addr_);

  tern::PeerStats ps;
  ASSERT_TRUE(client_->peer_stats(at_client, ps));
  EXPECT_EQ(ps.channel_count, 4u);
  ASSERT_TRUE(server_->peer_stats(s.peer, ps));
  EXPECT_EQ(ps.channel_count, 4u);
}

TEST_F(SimHosts, EveryDeliveryOnEveryChannelBothWays) {
  start();
  constexpr std::size_t kChannels = 4;
  PeerHandle at_client, at_server;
  connect(kChannels, 0, at_client, at_server);

  const Delivery deliveries[] = {Delivery::reliable, Delivery::unreliable, Delivery::unsequenced};
  struct Sent {
    std::uint8_t channel;
    Delivery delivery;
    std::vector<std::byte> bytes;
  };
  std::vector<Sent> sent;
  std::uint32_t tag = 0;
  for (std::uint8_t ch = 0; ch < kChannels; ++ch) {
    for (Delivery d : deliveries) {
      sent.push_back({ch, d, make_payload(32 + tag, tag)});
      ++tag;
    }
  }
  for (const Sent& m : sent) {
    ASSERT_EQ(client_->send(at_client, m.channel, m.delivery, m.bytes), SendResult::ok);
    // The Packet overload: the payload is shared, not copied.
    ASSERT_EQ(server_->send(at_server, m.channel, m.delivery, tern::Packet::copy_of(m.bytes)),
              SendResult::ok);
  }
  ASSERT_TRUE(run_until([&] {
    return count(server_events_, EventType::receive) == sent.size() &&
           count(client_events_, EventType::receive) == sent.size();
  }));

  for (const auto* events : {&server_events_, &client_events_}) {
    for (const Sent& m : sent) {
      const auto it = std::find_if(events->begin(), events->end(), [&](const Event& e) {
        return e.type == EventType::receive && same_bytes(e.packet.bytes(), m.bytes);
      });
      ASSERT_NE(it, events->end()) << "channel " << int(m.channel) << " " << to_string(m.delivery);
      EXPECT_EQ(it->channel, m.channel);
      EXPECT_EQ(it->delivery, m.delivery);
    }
  }
  for (const Event& e : server_events_) EXPECT_EQ(e.peer, at_server);
  for (const Event& e : client_events_) EXPECT_EQ(e.peer, at_client);

  const tern::HostStats ss = server_->stats();
  EXPECT_EQ(ss.messages_in, sent.size());
  EXPECT_EQ(ss.messages_out, sent.size());
  EXPECT_GT(ss.datagrams_in, 0u);
  EXPECT_GT(ss.bytes_in, 0u);
  EXPECT_GT(ss.datagrams_out, 0u);
  EXPECT_GT(ss.bytes_out, 0u);
  EXPECT_EQ(ss.connects, 1u);
  EXPECT_EQ(ss.peers, 1u);
}

TEST_F(SimHosts, LargeMessagesAreFragmentedAndReassembled) {
  start();
  PeerHandle at_client, at_server;
  connect(2, 0, at_client, at_server);
  const std::vector<std::byte> big_reliable = make_payload(100'000, 1);
  const std::vector<std::byte> big_unreliable = make_payload(9'000, 2);
  const std::vector<std::byte> big_unsequenced = make_payload(7'000, 3);
  ASSERT_EQ(client_->send(at_client, 0, Delivery::reliable, big_reliable), SendResult::ok);
  ASSERT_EQ(client_->send(at_client, 1, Delivery::unreliable, big_unreliable), SendResult::ok);
  ASSERT_EQ(client_->send(at_client, 1, Delivery::unsequenced, big_unsequenced), SendResult::ok);
  ASSERT_TRUE(run_until([&] { return count(server_events_, EventType::receive) == 3; }));
  for (const auto* want : {&big_reliable, &big_unreliable, &big_unsequenced}) {
    EXPECT_TRUE(std::any_of(server_events_.begin(), server_events_.end(),
                            [&](const Event& e) { return same_bytes(e.packet.bytes(), *want); }))
        << want->size() << " bytes";
  }
}

TEST_F(SimHosts, ReliableOrderSurvivesLoss) {
  start();
  PeerHandle at_client, at_server;
  connect(1, 0, at_client, at_server);
  net_.set_default_link({.loss = 0.2, .latency_us = kOneWayLatencyUs});
  constexpr std::uint32_t kMessages = 200;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(client_->send(at_client, 0, Delivery::reliable, make_payload(500, i)),
              SendResult::ok);
  }
  ASSERT_TRUE(run_until([&] { return count(server_events_, EventType::receive) == kMessages; }))
      << count(server_events_, EventType::receive) << " of " << kMessages << " received; client "
      << (find(client_events_, EventType::disconnect) ? "disconnected" : "connected") << ", "
      << client_->stats().retransmits << " retransmits";
  std::uint32_t i = 0;
  for (const Event& e : server_events_) {
    if (e.type != EventType::receive) continue;
    EXPECT_TRUE(same_bytes(e.packet.bytes(), make_payload(500, i))) << "message " << i;
    ++i;
  }
  EXPECT_EQ(i, kMessages);
  ASSERT_GT(net_.stats().lost, 0u);
  EXPECT_GT(client_->stats().retransmits, 0u);
}

TEST_F(SimHosts, GracefulDisconnectGivesRemoteAndLocalReasons) {
  start();
  PeerHandle at_client, at_server;
  connect(1, 0, at_client, at_server);
  client_->disconnect(at_client, 42);
  ASSERT_TRUE(run_until([&] {
    return find(client_events_, EventType::disconnect) &&
           find(server_events_, EventType::disconnect);
  }));
  const Event& c = *find(client_events_, EventType::disconnect);
  EXPECT_EQ(c.peer, at_client);
  EXPECT_EQ(c.reason, DisconnectReason::local);
  const Event& s = *find(server_events_, EventType::disconnect);
  EXPECT_EQ(s.peer, at_server);
  EXPECT_EQ(s.reason, DisconnectReason::remote);
  EXPECT_EQ(s.data, 42u);
  EXPECT_EQ(client_->peer_state(at_client), PeerState::disconnected);
  EXPECT_EQ(server_->peer_state(at_server), PeerState::disconnected);
  EXPECT_EQ(client_->peer_count(), 0u);
  EXPECT_EQ(server_->peer_count(), 0u);
  EXPECT_EQ(server_->stats().disconnects, 1u);
}

TEST_F(SimHosts, DisconnectNowHasNoLocalEvent) {
  start();
  PeerHandle at_client, at_server;
  connect(1, 0, at_client, at_server);
  client_->disconnect_now(at_client, 7);
  EXPECT_EQ(client_->peer_state(at_client), PeerState::disconnected);
  ASSERT_TRUE(run_until([&] { return find(server_events_, EventType::disconnect) != nullptr; }));
  const Event& s = *find(server_events_, EventType::disconnect);
  EXPECT_EQ(s.reason, DisconnectReason::remote);
  EXPECT_EQ(s.data, 7u);
  run_for(1'000'000);
  EXPECT_EQ(find(client_events_, EventType::disconnect), nullptr);
}

TEST_F(SimHosts, DisconnectLaterDeliversQueuedDataFirst) {
  start();
  PeerHandle at_client, at_server;
  connect(1, 0, at_client, at_server);
  constexpr std::uint32_t kMessages = 20;
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    ASSERT_EQ(server_->send(at_server, 0, Delivery::reliable, make_payload(600, i)),
              SendResult::ok);
  }
  server_->disconnect_later(at_server, 9);
  ASSERT_TRUE(run_until([&] {
    return find(client_events_, EventType::disconnect) &&
           find(server_events_, EventType::disconnect);
  }));
  EXPECT_EQ(count(client_events_, EventType::receive), kMessages);
  EXPECT_EQ(client_events_.back().type, EventType::disconnect);
  EXPECT_EQ(client_events_.back().reason, DisconnectReason::remote);
  EXPECT_EQ(client_events_.back().data, 9u);
  EXPECT_EQ(find(server_events_, EventType::disconnect)->reason, DisconnectReason::local);
}

TEST_F(SimHosts, SendResults) {
  HostOptions small;
  small.max_packet_size = 1000;
  start({}, small);
  PeerHandle at_client = client_->connect(server_addr_, 2, 0);
  // Still handshaking: not connected yet.
  EXPECT_EQ(client_->send(at_client, 0, Delivery::reliable, make_payload(8, 0)),
            SendResult::not_connected);
  ASSERT_TRUE(run_until([&] { return find(client_events_, EventType::connect) != nullptr; }));

  EXPECT_EQ(client_->send(at_client, 1, Delivery::reliable, make_payload(8, 0)), SendResult::ok);
  EXPECT_EQ(client_->send(at_client, 2, Delivery::reliable, make_payload(8, 0)),
            SendResult::bad_channel);
  EXPECT_EQ(client_->send(at_client, 255, Delivery::unsequenced, make_payload(8, 0)),
            SendResult::bad_channel);
  EXPECT_EQ(client_->send(at_client, 0, Delivery::reliable, make_payload(2000, 0)),
            SendResult::too_large);
  EXPECT_EQ(client_->send(PeerHandle{}, 0, Delivery::reliable, make_payload(8, 0)),
            SendResult::not_connected);
  EXPECT_EQ(client_->send(PeerHandle{12345, 3}, 0, Delivery::reliable, make_payload(8, 0)),
            SendResult::not_connected);

  client_->disconnect(at_client, 0);
  ASSERT_TRUE(run_until([&] { return find(client_events_, EventType::disconnect) != nullptr; }));
  EXPECT_EQ(client_->send(at_client, 0, Delivery::reliable, make_payload(8, 0)),
            SendResult::not_connected);
  tern::PeerStats ps;
  EXPECT_FALSE(client_->peer_stats(at_client, ps));
}

TEST_F(SimHosts, ConnectBeyondPeerLimitGivesInvalidHandle) {
  HostOptions one;
  one.peer_limit = 1;
  start({}, one);
  EXPECT_TRUE(client_->connect(server_addr_, 1, 0).valid());
  EXPECT_FALSE(client_->connect(Endpoint::v4(0x0a000009, 9), 1, 0).valid());
}

TEST_F(SimHosts, StaleHandleAfterReuseDoesNothing) {
  start();
  PeerHandle old_client, old_server;
  connect(2, 1, old_client, old_server);
  client_->disconnect(old_client, 0);
  ASSERT_TRUE(run_until([&] {
    return find(client_events_, EventType::disconnect) &&
           find(server_events_, EventType::disconnect);
  }));
  server_events_.clear();
  client_events_.clear();

  PeerHandle new_client, new_server;
  connect(2, 2, new_client, new_server);
  EXPECT_NE(new_client, old_client);
  EXPECT_NE(new_server, old_server);

  for (auto [host, stale] : {std::pair{client_.get(), old_client}, {server_.get(), old_server}}) {
    EXPECT_EQ(host->peer_state(stale), PeerState::disconnected);
    EXPECT_EQ(host->send(stale, 0, Delivery::reliable, make_payload(8, 0)),
              SendResult::not_connected);
    tern::PeerStats ps;
    EXPECT_FALSE(host->peer_stats(stale, ps));
    host->disconnect(stale, 0);
    host->disconnect_later(stale, 0);
    host->disconnect_now(stale, 0);
    host->reset(stale);
  }
  // The new connection is untouched: it stays up and carries traffic.
  run_for(2'000'000);
  EXPECT_EQ(find(client_events_, EventType::disconnect), nullptr);
  EXPECT_EQ(find(server_events_, EventType::disconnect), nullptr);
  EXPECT_EQ(client_->peer_state(new_client), PeerState::connected);
  EXPECT_EQ(server_->peer_state(new_server), PeerState::connected);
  ASSERT_EQ(client_->send(new_client, 1, Delivery::reliable, make_payload(8, 5)), SendResult::ok);
  ASSERT_TRUE(run_until([&] { return find(server_events_, EventType::receive) != nullptr; }));
  EXPECT_EQ(find(server_events_, EventType::receive)->peer, new_server);
}

TEST_F(SimHosts, ConnectToNobodyTimesOut) {
  HostOptions quick;
  quick.timeout_minimum_ms = 1000;
  quick.timeout_maximum_ms = 3000;
  start({}, quick);
  const PeerHandle p = client_->connect(Endpoint::v4(0x0a0000ff, 1234), 1, 0);
  ASSERT_TRUE(p.valid());
  ASSERT_TRUE(run_until([&] { return find(client_events_, EventType::disconnect) != nullptr; }));
  const Event& e = *find(client_events_, EventType::disconnect);
  EXPECT_EQ(e.peer, p);
  EXPECT_EQ(e.reason, DisconnectReason::timeout);
  EXPECT_EQ(client_->peer_state(p), PeerState::disconnected);
}

TEST_F(SimHosts, DeadLinkTimesOutBothSides) {
  HostOptions quick;
  quick.timeout_minimum_ms = 1000;
  quick.timeout_maximum_ms = 3000;
  start(quick, quick);
  PeerHandle at_client, at_server;
  connect(1, 0, at_client, at_server);
  net_.set_default_link({.down = true});
  ASSERT_TRUE(run_until([&] {
    return find(client_events_, EventType::disconnect) &&
           find(server_events_, EventType::disconnect);
  }));
  EXPECT_EQ(find(client_events_, EventType::disconnect)->reason, DisconnectReason::timeout);
  EXPECT_EQ(find(server_events_, EventType::disconnect)->reason, DisconnectReason::timeout);
  EXPECT_GE(server_->stats().timeouts, 1u);
}

TEST_F(SimHosts, ServiceOnVirtualTimeDoesOnePassAndReturns) {
  start();
  const std::uint64_t before = net_.now_us();
  Event ev;
  // A waitable driver would sleep for ten seconds here; the sim cannot, and must not spin.
  EXPECT_FALSE(server_->service(ev, 10s));
  EXPECT_EQ(net_.now_us(), before);
  EXPECT_EQ(server_->now_us(), before);
}

TEST_F(SimHosts, CheckEventsDoesNoIo) {
  start();
  PeerHandle at_client, at_server;
  connect(1, 0, at_client, at_server);
  ASSERT_EQ(client_->send(at_client, 0, Delivery::reliable, make_payload(8, 1)), SendResult::ok);
  net_.advance_to(net_.now_us() + 1'000'000);
  Event ev;
  // Nothing has been flushed, so nothing can have arrived.
  EXPECT_FALSE(server_->check_events(ev));
  client_->flush();
  net_.advance_to(net_.now_us() + 1'000'000);
  EXPECT_FALSE(server_->check_events(ev));  // arrived at the driver, not yet received
  ASSERT_TRUE(server_->service(ev, 0us));
  EXPECT_EQ(ev.type, EventType::receive);
}

TEST_F(SimHosts, DropsAreCountedByName) {
  start();
  auto raw = net_.attach(Endpoint::v4(0x0a000003, 5555));
  const std::byte junk[1] = {std::byte{0x42}};
  const tern::rt::TxFrame frame{server_addr_, junk};
  ASSERT_EQ(raw->tx_burst(std::span(&frame, 1)), 1u);
  run_for(100'000);
  const tern::HostStats s = server_->stats();
  EXPECT_GE(s.dropped, 1u);
  std::uint64_t sum = 0;
  bool named = false;
  for (const auto& [name, n] : s.drops_by_reason) {
    ASSERT_NE(name, nullptr);
    EXPECT_GT(n, 0u);
    sum += n;
    named = named || std::string(name) == "truncated_header";
  }
  EXPECT_EQ(sum, s.dropped);
  EXPECT_TRUE(named);
}

}  // namespace
