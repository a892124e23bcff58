// A 2-shard server on loopback with 20,000 concurrent client connections from 40 source
// addresses in 127.0.0.0/8: every client connects, exchanges reliable messages that come back
// exactly once and in order, and disconnects; the server's counters account for every
// connection and message exactly. Also: idle connections cost the shards no work per
// iteration, shown by the timer counters rather than by time.
#include "client_fleet.hpp"
#include "shard.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

namespace tern::rt {
namespace {

using namespace std::chrono_literals;
using test::ClientFleet;

constexpr std::size_t kSources = 40;
constexpr std::size_t kPeersPerSource = 500;
constexpr std::size_t kClients = kSources * kPeersPerSource;  // 20,000
constexpr std::uint32_t kMessages = 3;

std::array<std::byte, 8> encode(std::uint32_t id, std::uint32_t seq) {
  std::array<std::byte, 8> b;
  std::memcpy(b.data(), &id, 4);
  std::memcpy(b.data() + 4, &seq, 4);
  return b;
}

void echo(Shard& s, Event& ev) {
  if (ev.type == EventType::receive) {
    s.core().send(ev.peer, ev.channel, ev.delivery, std::move(ev.packet));
  }
}

struct ClientState {
  PeerHandle peer;
  bool connected = false;
  bool disconnected = false;
  std::uint32_t next_echo = 0;
  std::uint32_t errors = 0;
};

TEST(ShardScale, TwentyThousandClientsOnTwoShards) {
  ShardGroupOptions o;
  o.open_driver = rt::open_driver;
  o.bind = Endpoint::v4(0x7f000001u, 0);
  o.shards = 2;
  o.host.peer_limit = kClients;  // either shard may end up with most sources
  ShardGroup server(o);
  server.set_event_handler(echo);
  std::string error;
  ASSERT_TRUE(server.start(error)) << error;
  const Endpoint target = server.local_endpoint();

  ClientFleet fleet;
  std::vector<ClientState> clients(kClients);
  std::size_t connected = 0;
  std::size_t echoes = 0;
  std::size_t disconnected = 0;
  std::size_t errors = 0;
  fleet.on_event = [&](std::size_t, proto::HostCore&, Event& ev) {
    switch (ev.type) {
      case EventType::receive: {
        std::uint32_t who;
        std::uint32_t seq;
        if (ev.packet.size() != 8) {
          ++errors;
          return;
        }
        std::memcpy(&who, ev.packet.bytes().data(), 4);
        std::memcpy(&seq, ev.packet.bytes().data() + 4, 4);
        if (who >= kClients || clients[who].peer != ev.peer || seq != clients[who].next_echo) {
          ++errors;
          return;
        }
        ++clients[who].next_echo;
        ++echoes;
        break;
      }
      case EventType::disconnect: ++disconnected; break;
      default: break;  // connects are read from peer_state below
    }
  };
  proto::HostConfig base;
  base.random_seed = 20000;
  ASSERT_TRUE(fleet.open(kSources, kPeersPerSource, base, error)) << error;

  // All 20,000 connects are started at once.
  const std::uint64_t t0 = fleet.now_us();
  for (std::size_t s = 0; s < kSources; ++s) {
    for (std::size_t k = 0; k < kPeersPerSource; ++k) {
      const auto id = static_cast<std::uint32_t>(s * kPeersPerSource + k);
      clients[id].peer = fleet.source(s).core->connect(fleet.now_us(), target, 1, id);
      ASSERT_TRUE(clients[id].peer.valid());
    }
  }
  auto all_connected = [&] {
    connected = 0;
    for (std::size_t s = 0; s < kSources; ++s) {
      for (std::size_t k = 0; k < kPeersPerSource; ++k) {
        ClientState& c = clients[s * kPeersPerSource + k];
        if (!c.connected && fleet.source(s).core->peer_state(c.peer) == PeerState::connected) {
          c.connected = true;
        }
        connected += c.connected ? 1 : 0;
      }
    }
    return connected == kClients;
  };
  ASSERT_TRUE(fleet.run_until(all_connected, 60s)) << connected << " of " << kClients;
  const double connect_ms = static_cast<double>(fleet.now_us() - t0) / 1000.0;
  std::printf("[scale] %zu clients from %zu sources connected in %.1f ms\n", kClients, kSources,
              connect_ms);

  // The shards publish their counters at most 16 iterations late, and a shard still taking
  // the connect burst (up to 8 bursts of 64 datagrams an iteration) can be thousands of
  // connects behind its snapshot when the last client sees its handshake complete.
  fleet.run_until([&] { return server.total().peers >= kClients; }, 5s);
  const ShardCounters s0 = server.counters(0);
  const ShardCounters s1 = server.counters(1);
  std::printf("[scale] shard peers: %llu + %llu\n", static_cast<unsigned long long>(s0.peers),
              static_cast<unsigned long long>(s1.peers));
  {
    const ShardCounters t = server.total();
    std::printf(
        "[scale] handshakes: created %llu, evicted %llu, cookies %llu, capped %llu, "
        "promoted %llu, half-open %llu, expired %llu, invalid %llu, kernel drops %llu\n",
        static_cast<unsigned long long>(t.half_open_created),
        static_cast<unsigned long long>(t.half_open_evicted),
        static_cast<unsigned long long>(t.cookies_sent),
        static_cast<unsigned long long>(t.amplification_capped),
        static_cast<unsigned long long>(t.peers_promoted),
        static_cast<unsigned long long>(t.half_open),
        static_cast<unsigned long long>(t.cookies_expired),
        static_cast<unsigned long long>(t.cookies_invalid),
        static_cast<unsigned long long>(t.rx_kernel_dropped));
  }
  EXPECT_EQ(s0.peers + s1.peers, kClients);
  EXPECT_GT(s0.peers, 0u) << "the kernel put every source on shard 1";
  EXPECT_GT(s1.peers, 0u) << "the kernel put every source on shard 0";

  for (std::size_t s = 0; s < kSources; ++s) {
    for (std::size_t k = 0; k < kPeersPerSource; ++k) {
      const auto id = static_cast<std::uint32_t>(s * kPeersPerSource + k);
      for (std::uint32_t seq = 0; seq < kMessages; ++seq) {
        const auto msg = encode(id, seq);
        ASSERT_EQ(fleet.source(s).core->send(clients[id].peer, 0, Delivery::reliable,
                                             std::span<const std::byte>(msg)),
                  SendResult::ok);
      }
    }
  }
  ASSERT_TRUE(fleet.run_until([&] { return echoes == kClients * kMessages || errors != 0; }, 60s))
      << echoes << " echoes of " << kClients * kMessages;
  EXPECT_EQ(errors, 0u);
  EXPECT_EQ(echoes, kClients * kMessages);

  for (std::size_t s = 0; s < kSources; ++s) {
    for (std::size_t k = 0; k < kPeersPerSource; ++k) {
      fleet.source(s).core->disconnect(clients[s * kPeersPerSource + k].peer, 0);
    }
  }
  ASSERT_TRUE(
      fleet.run_until([&] { return disconnected == kClients && server.total().peers == 0; }, 60s))
      << disconnected << " client disconnects, " << server.total().peers << " server peers left";

  // The last acks land and the shards publish their counters (every 16 iterations): wait for
  // the figures to reach what they must be, then hold them to it.
  fleet.run_until(
      [&] {
        const ShardCounters t = server.total();
        return t.connects >= kClients && t.disconnects >= kClients &&
               t.messages_in >= kClients * kMessages && t.messages_out >= kClients * kMessages;
      },
      10s);
  const ShardCounters t = server.total();
  EXPECT_EQ(t.connects, kClients);
  EXPECT_EQ(t.disconnects, kClients);
  EXPECT_EQ(t.messages_in, kClients * kMessages);
  EXPECT_EQ(t.messages_out, kClients * kMessages);
  EXPECT_EQ(t.peers, 0u);
  std::printf("[scale] server: dgrams in/out %llu/%llu, drops %llu, iterations %llu\n",
              static_cast<unsigned long long>(t.datagrams_in),
              static_cast<unsigned long long>(t.datagrams_out),
              static_cast<unsigned long long>(t.drops),
              static_cast<unsigned long long>(t.iterations));
  EXPECT_TRUE(server.stop(1s));
}

// 2,000 idle connections and one busy one: over a thousand shard iterations for the busy
// client, the idle connections' timers never run. Time is not the measure, nor the window's
// length: iterations bound the window, and the count of peer timer runs is the measure.
TEST(ShardScale, IdlePeersCostNoWorkPerIteration) {
  constexpr std::size_t kIdle = 2000;
  ShardGroupOptions o;
  o.open_driver = rt::open_driver;
  o.bind = Endpoint::v4(0x7f000001u, 0);
  o.shards = 2;
  o.host.peer_limit = kIdle + 16;
  // No keep-alive pings inside the window: an idle connection then has nothing due at all.
  o.host.ping_interval_ms = 60'000;
  ShardGroup server(o);
  server.set_event_handler(echo);
  std::string error;
  ASSERT_TRUE(server.start(error)) << error;
  const Endpoint target = server.local_endpoint();

  proto::HostConfig base;
  base.random_seed = 4242;
  base.ping_interval_ms = 60'000;
  ClientFleet idle;
  ASSERT_TRUE(idle.open(4, kIdle / 4, base, error)) << error;
  for (std::size_t s = 0; s < idle.size(); ++s) {
    for (std::size_t k = 0; k < kIdle / 4; ++k) {
      ASSERT_TRUE(idle.source(s).core->connect(idle.now_us(), target, 1, 0).valid());
    }
  }
  ASSERT_TRUE(idle.run_until([&] { return server.total().peers == kIdle; }, 30s))
      << server.total().peers;
  // Let the handshakes' last acknowledgements settle.
  idle.run_until([] { return false; }, 300ms);

  ClientFleet busy;
  ASSERT_TRUE(busy.open(1, 1, base, error)) << error;
  PeerHandle peer = busy.source(0).core->connect(busy.now_us(), target, 1, 0);
  std::uint64_t echoes = 0;
  busy.on_event = [&](std::size_t, proto::HostCore& core, Event& ev) {
    if (ev.type == EventType::connect || ev.type == EventType::receive) {
      if (ev.type == EventType::receive) ++echoes;
      const auto msg = encode(0, static_cast<std::uint32_t>(echoes));
      core.send(peer, 0, Delivery::reliable, std::span<const std::byte>(msg));
    }
  };
  ASSERT_TRUE(busy.run_until([&] { return echoes >= 100; }, 10s));

  const ShardCounters before = server.total();
  const std::uint64_t echoes_before = echoes;
  // Ping-pong only (the idle fleet is not polled) for a thousand shard iterations, however long
  // a loaded machine takes for them; the deadline only catches shards that stopped iterating.
  busy.run_until([&] { return server.total().iterations - before.iterations >= 1000; }, 60s);
  const ShardCounters after = server.total();
  const std::uint64_t iterations = after.iterations - before.iterations;
  const std::uint64_t timer_runs = after.peer_timer_runs - before.peer_timer_runs;
  std::printf("[idle] %zu idle peers: %llu echoes, %llu shard iterations, %llu peer timer runs\n",
              kIdle, static_cast<unsigned long long>(echoes - echoes_before),
              static_cast<unsigned long long>(iterations),
              static_cast<unsigned long long>(timer_runs));
  EXPECT_GE(iterations, 1000u) << "the busy client did not keep the shards iterating";
  // With a scan over the peer table this would be about kIdle per iteration; with a timer
  // wheel it is only the busy connection's own timers.
  EXPECT_LE(timer_runs, (echoes - echoes_before) / 4 + 10);
  EXPECT_EQ(after.peers, kIdle + 1);
  server.stop(0ms);
}

}  // namespace
}  // namespace tern::rt
