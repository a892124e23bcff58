// tern::Host over real kernel sockets on loopback (Host::listen).
//
// Both hosts are serviced from this one thread with short timeouts. Loops are bounded by a
// generous wall-clock budget only so a broken build fails instead of hanging; nothing here
// asserts on how fast anything happens.
#include <tern/host.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
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
using tern::SendResult;

constexpr auto kBudget = 20s;

std::vector<std::byte> make_payload(std::size_t size, std::uint32_t tag) {
  std::vector<std::byte> out(size);
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<std::byte>((tag * 13 + i) & 0xff);
  return out;
}

bool same_bytes(std::span<const std::byte> a, const std::vector<std::byte>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), b.size()) == 0;
}

bool have_ipv6_loopback() {
  std::ifstream f("/proc/net/if_inet6");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("00000000000000000000000000000001", 0) == 0) return true;
  }
  return false;
}

struct LoopbackPair {
  std::unique_ptr<Host> server;
  std::unique_ptr<Host> client;
  std::vector<Event> server_events;
  std::vector<Event> client_events;

  bool open(const char* server_bind, const char* client_bind, HostOptions options = {}) {
    std::string error;
    server = Host::listen(options, *Endpoint::parse(server_bind), error);
    EXPECT_NE(server, nullptr) << error;
    client = Host::listen(options, *Endpoint::parse(client_bind), error);
    EXPECT_NE(client, nullptr) << error;
    return server != nullptr && client != nullptr;
  }

  void pump() {
    Event ev;
    if (server->service(ev, 1ms)) server_events.push_back(std::move(ev));
    if (client->service(ev, 1ms)) client_events.push_back(std::move(ev));
  }

  bool run_until(const std::function<bool()>& done) {
    const auto end = std::chrono::steady_clock::now() + kBudget;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      pump();
    }
    return true;
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

  // Connect, exchange a message on every delivery and channel each way, disconnect.
  void full_conversation(const Endpoint& server_at) {
    const PeerHandle at_client = client->connect(server_at, 3, 0xABCD);
    ASSERT_TRUE(at_client.valid());
    ASSERT_TRUE(run_until([&] {
      return find(client_events, EventType::connect) && find(server_events, EventType::connect);
    }));
    const Event sc = *find(server_events, EventType::connect);
    EXPECT_EQ(sc.data, 0xABCDu);
    EXPECT_EQ(sc.address.port, client->local_endpoint().port);
    EXPECT_EQ(find(client_events, EventType::connect)->peer, at_client);
    const PeerHandle at_server = sc.peer;
    server_events.clear();
    client_events.clear();

    std::uint32_t tag = 0;
    std::vector<std::pair<std::uint8_t, Delivery>> sent;
    for (std::uint8_t ch = 0; ch < 3; ++ch) {
      for (Delivery d : {Delivery::reliable, Delivery::unreliable, Delivery::unsequenced}) {
        ASSERT_EQ(client->send(at_client, ch, d, make_payload(100 + tag, tag)), SendResult::ok);
        ASSERT_EQ(server->send(at_server, ch, d, make_payload(100 + tag, tag)), SendResult::ok);
        sent.emplace_back(ch, d);
        ++tag;
      }
    }
    EXPECT_EQ(client->send(at_client, 3, Delivery::reliable, make_payload(8, 0)),
              SendResult::bad_channel);
    // Loopback does not lose datagrams under this little load, so unreliable ones arrive too.
    ASSERT_TRUE(run_until([&] {
      return count(server_events, EventType::receive) == sent.size() &&
             count(client_events, EventType::receive) == sent.size();
    }));
    for (const auto* events : {&server_events, &client_events}) {
      for (std::uint32_t t = 0; t < sent.size(); ++t) {
        const auto it = std::find_if(events->begin(), events->end(), [&](const Event& e) {
          return same_bytes(e.packet.bytes(), make_payload(100 + t, t));
        });
        ASSERT_NE(it, events->end()) << "message " << t;
        EXPECT_EQ(it->channel, sent[t].first);
        EXPECT_EQ(it->delivery, sent[t].second);
      }
    }
    server_events.clear();
    client_events.clear();

    client->disconnect(at_client, 77);
    ASSERT_TRUE(run_until([&] {
      return find(client_events, EventType::disconnect) &&
             find(server_events, EventType::disconnect);
    }));
    EXPECT_EQ(find(client_events, EventType::disconnect)->reason, DisconnectReason::local);
    const Event& sd = *find(server_events, EventType::disconnect);
    EXPECT_EQ(sd.reason, DisconnectReason::remote);
    EXPECT_EQ(sd.data, 77u);
    EXPECT_EQ(sd.peer, at_server);
    EXPECT_EQ(client->send(at_client, 0, Delivery::reliable, make_payload(8, 0)),
              SendResult::not_connected);
    EXPECT_GT(server->stats().datagrams_in, 0u);
    EXPECT_EQ(server->stats().messages_in, sent.size());
  }
};

TEST(HostSocket, ConversationOverIpv4Loopback) {
  LoopbackPair pair;
  ASSERT_TRUE(pair.open("127.0.0.1:0", "0.0.0.0:0"));
  const Endpoint at = pair.server->local_endpoint();
  ASSERT_NE(at.port, 0);
  pair.full_conversation(at);
}

TEST(HostSocket, ConversationWithChecksums) {
  HostOptions options;
  options.checksum = true;
  LoopbackPair pair;
  ASSERT_TRUE(pair.open("127.0.0.1:0", "0.0.0.0:0", options));
  pair.full_conversation(pair.server->local_endpoint());
}

TEST(HostSocket, DualStackServerAcceptsIpv4AndIpv6) {
  if (!have_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  LoopbackPair v4;
  ASSERT_TRUE(v4.open("*:0", "0.0.0.0:0"));
  v4.full_conversation(Endpoint::v4(0x7f000001, v4.server->local_endpoint().port));

  LoopbackPair v6;
  ASSERT_TRUE(v6.open("*:0", "[::]:0"));
  v6.full_conversation(
      *Endpoint::parse("[::1]:" + std::to_string(v6.server->local_endpoint().port)));
}

TEST(HostSocket, ListenOnBusyPortFailsWithReason) {
  std::string error;
  auto first = Host::listen({}, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(first, nullptr) << error;
  error.clear();
  auto second = Host::listen({}, first->local_endpoint(), error);
  EXPECT_EQ(second, nullptr);
  EXPECT_FALSE(error.empty());
}

TEST(HostSocket, IdleServiceWaitsOutItsTimeout) {
  std::string error;
  auto host = Host::listen({}, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(host, nullptr) << error;
  Event ev;
  const std::uint64_t before = host->now_us();
  EXPECT_FALSE(host->service(ev, 30ms));
  // A lower bound is a property of waiting, not of speed: returning early would be a spin.
  EXPECT_GE(host->now_us() - before, 30'000u);
  EXPECT_FALSE(host->service(ev, 0us));
}

TEST(HostSocket, ConnectToClosedPortFailsThroughAnEvent) {
  HostOptions quick;
  quick.timeout_minimum_ms = 300;
  quick.timeout_maximum_ms = 1000;
  LoopbackPair pair;
  ASSERT_TRUE(pair.open("127.0.0.1:0", "0.0.0.0:0", quick));
  const Endpoint nobody = pair.server->local_endpoint();
  pair.server.reset();  // the port is closed now
  const PeerHandle p = pair.client->connect(nobody, 1, 0);
  ASSERT_TRUE(p.valid());
  Event ev;
  bool got = false;
  const auto end = std::chrono::steady_clock::now() + kBudget;
  while (!got && std::chrono::steady_clock::now() < end) {
    got = pair.client->service(ev, 10ms);
  }
  ASSERT_TRUE(got);
  EXPECT_EQ(ev.type, EventType::disconnect);
  EXPECT_EQ(ev.peer, p);
  EXPECT_EQ(ev.reason, DisconnectReason::timeout);
}

}  // namespace
