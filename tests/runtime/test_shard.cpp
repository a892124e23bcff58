// ShardGroup on loopback: echo through SO_REUSEPORT shards, post() affinity, graceful stop.
//
// Clients are tern::Host instances bound to distinct 127.0.0.x addresses so the kernel's
// 4-tuple hash spreads them over the shards. Every wait is bounded by a wall-clock deadline.
#include "shard.hpp"

#include <tern/host.hpp>

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tern::rt {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr std::size_t kClients = 200;
constexpr std::uint32_t kMessages = 20;
// Generous: the suite also runs under ThreadSanitizer on two cores.
constexpr auto kDeadline = 60s;

struct Client {
  std::unique_ptr<Host> host;
  PeerHandle peer;
  std::uint32_t id = 0;
  bool connected = false;
  std::uint32_t next_expected = 0;  // echoes arrive once and in order
  std::uint32_t errors = 0;
  bool disconnected = false;
  DisconnectReason reason = DisconnectReason::none;
  bool sent = false;  // its messages are queued (a KCP client sends before its connect event)
};

// Payload: client id, then sequence number, so the receiver can check both.
std::array<std::byte, 8> encode(std::uint32_t id, std::uint32_t seq) {
  std::array<std::byte, 8> b;
  std::memcpy(b.data(), &id, 4);
  std::memcpy(b.data() + 4, &seq, 4);
  return b;
}

void handle(Client& c, Event& ev) {
  switch (ev.type) {
    case EventType::connect:
      c.connected = true;
      if (c.sent) break;
      c.sent = true;
      for (std::uint32_t seq = 0; seq < kMessages; ++seq) {
        const auto msg = encode(c.id, seq);
        if (c.host->send(c.peer, 0, Delivery::reliable, std::span<const std::byte>(msg)) !=
            SendResult::ok) {
          ++c.errors;
        }
      }
      break;
    case EventType::receive: {
      const auto bytes = ev.packet.bytes();
      std::uint32_t id = 0;
      std::uint32_t seq = 0;
      if (bytes.size() != 8) {
        ++c.errors;
        break;
      }
      std::memcpy(&id, bytes.data(), 4);
      std::memcpy(&seq, bytes.data() + 4, 4);
      if (id != c.id || seq != c.next_expected) ++c.errors;
      ++c.next_expected;
      break;
    }
    case EventType::disconnect:
      c.disconnected = true;
      c.reason = ev.reason;
      break;
    case EventType::none:
    case EventType::receipt:               // never asked for here
    case EventType::block_refused: break;  // no block sent here
  }
}

// One non-blocking pass over every client.
void pump(std::vector<Client>& clients) {
  Event ev;
  for (Client& c : clients) {
    while (c.host->service(ev, 0us)) handle(c, ev);
  }
}

template <class Done>
bool pump_until(std::vector<Client>& clients, Done done) {
  const auto deadline = Clock::now() + kDeadline;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    pump(clients);
    // Two cores are shared with the shards: leave them room.
    std::this_thread::sleep_for(200us);
  }
  return true;
}

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Services `client` until it reports an event of type `want`; false after `limit`.
bool service_until(Host& client, EventType want, std::chrono::milliseconds limit) {
  Event ev;
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    while (client.service(ev, 1ms)) {
      if (ev.type == want) return true;
    }
  }
  return false;
}

ShardGroupOptions echo_options(DriverKind kind) {
  ShardGroupOptions o;
  o.open_driver = rt::open_driver;
  o.bind = *Endpoint::parse("127.0.0.1:0");
  o.shards = 2;
  o.driver = kind;
  return o;
}

void echo_handler(Shard& s, Event& ev) {
  if (ev.type == EventType::receive) {
    s.core().send(ev.peer, ev.channel, ev.delivery, std::move(ev.packet));
  }
}

std::vector<Client> open_clients(const Endpoint& server) {
  std::vector<Client> clients(kClients);
  HostOptions ho;
  ho.socket_receive_buffer = 256 << 10;
  ho.socket_send_buffer = 256 << 10;
  for (std::size_t i = 0; i < kClients; ++i) {
    Client& c = clients[i];
    c.id = static_cast<std::uint32_t>(i);
    std::string error;
    // 127.0.0.2, 127.0.0.3, ...: distinct sources so SO_REUSEPORT spreads them.
    const Endpoint bind = Endpoint::v4(0x7f000002u + static_cast<std::uint32_t>(i), 0);
    c.host = Host::listen(ho, bind, error);
    EXPECT_NE(c.host, nullptr) << bind.to_string() << ": " << error;
    if (c.host == nullptr) return {};
    c.peer = c.host->connect(server, 1);
    EXPECT_TRUE(c.peer.valid());
  }
  return clients;
}

// Echo through the group, then a graceful stop while the clients keep servicing.
void run_echo_and_stop(DriverKind kind) {
  ShardGroup group(echo_options(kind));
  group.set_event_handler(echo_handler);
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  if (kind == DriverKind::uring && group.driver_name(0) != "uring") {
    const std::string reason = "io_uring unavailable; shards run " + group.driver_name(0);
    std::printf("skipping: %s\n", reason.c_str());
    GTEST_SKIP() << reason;
  }
  for (std::size_t i = 0; i < group.size(); ++i) {
    EXPECT_EQ(group.driver_name(i), kind == DriverKind::uring ? "uring" : "socket");
  }
  const Endpoint server = group.local_endpoint();
  ASSERT_NE(server.port, 0);

  std::vector<Client> clients = open_clients(server);
  ASSERT_EQ(clients.size(), kClients);

  const bool echoed = pump_until(clients, [&] {
    for (const Client& c : clients) {
      if (c.next_expected < kMessages || c.disconnected) return false;
    }
    return true;
  });
  ASSERT_TRUE(echoed) << "not every client got its " << kMessages << " echoes in time";
  for (const Client& c : clients) {
    EXPECT_TRUE(c.connected) << c.id;
    EXPECT_EQ(c.errors, 0u) << "client " << c.id << ": duplicate, missing or reordered echo";
    EXPECT_EQ(c.next_expected, kMessages) << c.id;
  }

  // The shard publishes its counters after the transmit that carried the last echo.
  constexpr std::uint64_t kTotal = std::uint64_t{kClients} * kMessages;
  EXPECT_TRUE(wait_until([&] { return group.total().messages_in >= kTotal; }, 5000ms));
  const ShardCounters total = group.total();
  EXPECT_EQ(total.messages_in, kTotal);
  EXPECT_EQ(total.messages_out, kTotal);
  EXPECT_EQ(total.connects, kClients);
  EXPECT_EQ(total.peers, kClients);
  // Drops are legitimate here (a retransmitted command whose original was late is a
  // duplicate); list them by name from inside the shards, which is also what post() is for.
  for (std::size_t i = 0; i < group.size(); ++i) {
    std::promise<std::string> listed;
    auto names = listed.get_future();
    group.post(i, [&listed](Shard& s) {
      std::string out;
      const auto& drops = s.core().counters().drops;
      for (std::size_t d = 0; d < proto::kDropCount; ++d) {
        if (drops.by_reason[d] == 0) continue;
        out += std::string(" ") + proto::drop_name(static_cast<proto::Drop>(d)) + "=" +
               std::to_string(drops.by_reason[d]);
      }
      listed.set_value(out);
    });
    ASSERT_EQ(names.wait_for(5s), std::future_status::ready);
    std::printf("shard %zu drops:%s\n", i, names.get().c_str());
  }
  std::uint64_t peers = 0;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const ShardCounters c = group.counters(i);
    std::printf("shard %zu (%s): peers %llu, messages in %llu, iterations %llu, idle waits %llu\n",
                i, group.driver_name(i).c_str(), static_cast<unsigned long long>(c.peers),
                static_cast<unsigned long long>(c.messages_in),
                static_cast<unsigned long long>(c.iterations),
                static_cast<unsigned long long>(c.idle_waits));
    EXPECT_GT(c.peers, 0u) << "SO_REUSEPORT gave shard " << i << " no client";
    EXPECT_GT(c.messages_in, 0u) << i;
    EXPECT_EQ(c.messages_in, c.peers * kMessages) << i;
    EXPECT_GT(c.datagrams_in, 0u);
    EXPECT_GT(c.datagrams_out, 0u);
    EXPECT_GT(c.iterations, 0u);
    peers += c.peers;
  }
  EXPECT_EQ(peers, kClients);

  // stop() blocks until the shards finish, so it runs beside the clients' pump.
  constexpr auto kGraceful = 10000ms;
  std::atomic<bool> stopped{false};
  bool all_gone = false;
  Clock::duration took{};
  std::thread stopper([&] {
    const auto t0 = Clock::now();
    all_gone = group.stop(kGraceful);
    took = Clock::now() - t0;
    stopped.store(true);
  });
  const bool disconnected = pump_until(clients, [&] {
    for (const Client& c : clients) {
      if (!c.disconnected) return false;
    }
    return true;
  });
  // Keep acknowledging until the shards have seen every ack (bounded by kGraceful).
  pump_until(clients, [&] { return stopped.load(); });
  stopper.join();
  EXPECT_TRUE(disconnected);
  EXPECT_TRUE(all_gone);
  EXPECT_LT(took, kGraceful);
  for (const Client& c : clients) {
    EXPECT_EQ(c.reason, DisconnectReason::remote) << c.id << ": " << to_string(c.reason);
  }
  EXPECT_EQ(group.total().peers, 0u);
  EXPECT_FALSE(group.running());
}

TEST(Shard, EchoSocketDriver) { run_echo_and_stop(DriverKind::socket); }

TEST(Shard, EchoUringDriver) { run_echo_and_stop(DriverKind::uring); }

TEST(Shard, PostRunsOnTheRequestedShardThread) {
  ShardGroupOptions o = echo_options(DriverKind::socket);
  ShardGroup group(o);
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  constexpr int kRounds = 50;
  for (std::size_t i = 0; i < group.size(); ++i) {
    for (int round = 0; round < kRounds; ++round) {
      std::promise<std::pair<std::thread::id, std::size_t>> ran;
      auto result = ran.get_future();
      ASSERT_TRUE(group.post(i, [&ran](Shard& s) {
        ran.set_value({std::this_thread::get_id(), s.index()});
      }));
      ASSERT_EQ(result.wait_for(5s), std::future_status::ready) << "shard " << i;
      const auto [thread, index] = result.get();
      EXPECT_EQ(thread, group.thread_id(i));
      EXPECT_NE(thread, std::this_thread::get_id());
      EXPECT_EQ(index, i);
    }
  }
  EXPECT_NE(group.thread_id(0), group.thread_id(1));
  EXPECT_FALSE(group.post(group.size(), [](Shard&) {}));

  // From several threads at once: every task runs exactly once.
  std::atomic<int> count{0};
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&, t] {
      for (int k = 0; k < 100; ++k) {
        group.post(static_cast<std::size_t>(t + k) % group.size(),
                   [&count](Shard&) { count.fetch_add(1); });
      }
    });
  }
  for (auto& p : posters) p.join();
  EXPECT_TRUE(wait_until([&] { return count.load() == 400; }, 5000ms));
  EXPECT_TRUE(group.stop(1000ms));
  EXPECT_EQ(count.load(), 400);
  EXPECT_EQ(group.total().posted_run, 400u + group.size() * kRounds);
  EXPECT_FALSE(group.post(0, [](Shard&) {}));
}

// A shard far behind its input (its thread held while 30,000 CONNECTs queue in its socket)
// leaves CONNECTs unanswered until it has read the backlog (HostCore::shed_connects), then
// answers them again: a client connects afterwards.
TEST(Shard, AShardFarBehindItsInputShedsConnectsUntilItCatchesUp) {
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.shards = 1;
  o.pin = false;
  o.socket_receive_buffer = 64 << 20;  // the backlog must queue, not be dropped by the kernel
  ShardGroup group(o);
  group.set_event_handler(echo_handler);
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  const Endpoint server = group.local_endpoint();

  // A CONNECT as a client sends it, repeated from one source in another /24 than the client
  // below (the per-source limits refuse most of them; those past the limit are still read).
  proto::HostCore source{proto::HostConfig{}};
  source.connect(1'000'000, server, 2, 0);
  std::vector<proto::OutDatagram> out(4);
  ASSERT_EQ(source.flush(1'000'000, out), 1u);
  const auto connect = out[0].view();
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  from.sin_addr.s_addr = htonl(0x7f000909);  // 127.0.9.9
  ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from), 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(0x7f000001);
  to.sin_port = htons(server.port);

  std::atomic<bool> holding{false}, release{false};
  ASSERT_TRUE(group.post(0, [&](Shard&) {
    holding = true;
    while (!release) std::this_thread::sleep_for(1ms);
  }));
  ASSERT_TRUE(wait_until([&] { return holding.load(); }, 5000ms));
  constexpr int kBacklog = 30'000;
  int sent = 0;
  for (int i = 0; i < kBacklog; ++i) {
    sent += ::sendto(fd, connect.data(), connect.size(), 0, reinterpret_cast<const sockaddr*>(&to),
                     sizeof to) == static_cast<ssize_t>(connect.size());
  }
  ::close(fd);
  EXPECT_EQ(sent, kBacklog);
  release = true;
  ASSERT_TRUE(wait_until(
      [&] {
        const ShardCounters c = group.counters(0);
        return c.datagrams_in + c.rx_kernel_dropped >= static_cast<std::uint64_t>(kBacklog);
      },
      10000ms));
  const ShardCounters behind = group.counters(0);
  EXPECT_EQ(behind.rx_kernel_dropped, 0u) << "the backlog did not fit the socket buffer";
  EXPECT_GT(behind.connects_shed, 0u) << "30,000 datagrams read without a break shed nothing";
  EXPECT_LT(behind.connects_shed, static_cast<std::uint64_t>(kBacklog))
      << "shed from the first receive on";

  // Caught up: a new client's CONNECT is answered.
  HostOptions ho;
  auto client = Host::listen(ho, Endpoint::v4(0x7f000002u, 0), error);
  ASSERT_NE(client, nullptr) << error;
  const PeerHandle peer = client->connect(server, 1);
  bool connected = false;
  const auto deadline = Clock::now() + 5s;
  while (!connected && Clock::now() < deadline) {
    Event ev;
    if (client->service(ev, 10ms)) connected = ev.type == EventType::connect;
  }
  EXPECT_TRUE(connected);
  EXPECT_EQ(group.counters(0).connects_shed, behind.connects_shed);
  client->disconnect_now(peer, 0);
  EXPECT_TRUE(group.stop(5000ms));
}

TEST(Shard, PortZeroIsSharedAndStopWithoutPeersIsPrompt) {
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.shards = 3;
  o.idle = IdlePolicy::busy_poll;
  o.pin = false;
  ShardGroup group(o);
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  EXPECT_EQ(group.size(), 3u);
  EXPECT_NE(group.local_endpoint().port, 0);
  EXPECT_TRUE(wait_until([&] { return group.counters(2).iterations > 10; }, 5000ms));
  const auto t0 = Clock::now();
  EXPECT_TRUE(group.stop(5000ms));
  EXPECT_LT(Clock::now() - t0, 1s);
  EXPECT_EQ(group.total().idle_waits, 0u);  // busy_poll never sleeps
}

TEST(Shard, BusyPollingCountsThePollsThatFoundNothingApartFromWork) {
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.idle = IdlePolicy::busy_poll;
  o.pin = false;
  ShardGroup group(o);
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  // No traffic: the iterations find nothing, except the one that runs a posted task that
  // works for 50 ms. (Read after the stop: a live snapshot may mix two publications.)
  ASSERT_TRUE(wait_until([&] { return group.counters(0).iterations > 1000; }, 5000ms));
  std::atomic<bool> ran{false};
  ASSERT_TRUE(group.post(0, [&](Shard&) {
    const auto until = Clock::now() + 50ms;
    while (Clock::now() < until) {
    }
    ran = true;
  }));
  ASSERT_TRUE(wait_until([&] { return ran.load(); }, 5000ms));
  const std::uint64_t seen = group.counters(0).iterations;
  ASSERT_TRUE(wait_until([&] { return group.counters(0).iterations > seen + 1000; }, 5000ms));
  EXPECT_TRUE(group.stop(5000ms));
  const ShardCounters c = group.counters(0);
  EXPECT_EQ(c.idle_polls + 1, c.iterations);
  EXPECT_GE(c.loop_time_us - c.idle_poll_us, 50'000u);
  EXPECT_LT(c.idle_poll_us, c.loop_time_us);
}

TEST(Shard, CountsRetransmitsAndTimeoutsOfAPeerThatStopsAnswering) {
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.shards = 1;
  o.host.timeout_minimum_ms = 300;  // give up on a silent peer within a second or so
  o.host.timeout_maximum_ms = 1000;
  ShardGroup group(o);
  group.set_event_handler([](Shard& s, Event& ev) {
    if (ev.type != EventType::connect) return;
    const std::array<std::byte, 4> hello{};
    s.core().send(ev.peer, 0, Delivery::reliable, std::span<const std::byte>(hello));
  });
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  auto client = Host::listen(HostOptions{}, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(client, nullptr) << error;
  const PeerHandle peer = client->connect(group.local_endpoint(), 1);
  ASSERT_TRUE(peer.valid());
  // Service until the shard's message arrives, then fall silent: the shard's pings (reliable,
  // every 500 ms) go unacknowledged, are resent, and the peer is given up for timed out.
  ASSERT_TRUE(service_until(*client, EventType::receive, 10000ms));
  EXPECT_EQ(group.counters(0).timeouts, 0u);
  EXPECT_TRUE(wait_until([&] { return group.counters(0).timeouts == 1; }, 10000ms));
  const ShardCounters c = group.counters(0);
  EXPECT_GT(c.retransmits, 0u);
  EXPECT_EQ(c.peers, 0u);
  EXPECT_TRUE(group.stop(5000ms));
}

std::uint64_t steady_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// One datagram carrying many messages is one burst: every message gets the same delivery time,
// read after the client sent them. Outside the handler the clock is read afresh.
TEST(Shard, MessagesOfOneBurstShareTheirDeliveryTime) {
  constexpr std::size_t kBurst = 40;
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.shards = 1;
  ShardGroup group(o);
  std::array<std::uint64_t, kBurst> seen{};
  std::atomic<std::size_t> received{0};
  group.set_event_handler([&](Shard& s, Event& ev) {
    if (ev.type != EventType::receive) return;
    const std::size_t i = received.load(std::memory_order_relaxed);
    if (i < kBurst) seen[i] = s.delivery_time_ns();
    received.store(i + 1, std::memory_order_release);
  });
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  auto client = Host::listen(HostOptions{}, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(client, nullptr) << error;
  const PeerHandle peer = client->connect(group.local_endpoint(), 1);
  ASSERT_TRUE(peer.valid());
  ASSERT_TRUE(service_until(*client, EventType::connect, 10000ms));
  const std::uint64_t before_send = steady_ns();
  for (std::uint32_t seq = 0; seq < kBurst; ++seq) {
    const auto msg = encode(1, seq);
    ASSERT_EQ(client->send(peer, 0, Delivery::reliable, std::span<const std::byte>(msg)),
              SendResult::ok);
  }
  client->flush();  // all of them in one datagram
  EXPECT_TRUE(
      wait_until([&] { return received.load(std::memory_order_acquire) >= kBurst; }, 10000ms));
  const std::uint64_t after = steady_ns();
  ASSERT_EQ(received.load(std::memory_order_acquire), kBurst);
  EXPECT_GE(seen[0], before_send);
  EXPECT_LE(seen[0], after);
  for (std::size_t i = 1; i < kBurst; ++i) EXPECT_EQ(seen[i], seen[0]) << "message " << i;

  std::atomic<std::uint64_t> apart{0};
  ASSERT_TRUE(group.post(0, [&](Shard& s) {
    const std::uint64_t first = s.delivery_time_ns();
    std::this_thread::sleep_for(2ms);
    apart = s.delivery_time_ns() - first;
  }));
  EXPECT_TRUE(wait_until([&] { return apart.load() != 0; }, 5000ms));
  EXPECT_GE(apart.load(), 2'000'000u);
  client->disconnect(peer, 0);
  EXPECT_TRUE(service_until(*client, EventType::disconnect, 10000ms));
  EXPECT_TRUE(group.stop(5000ms));
}

// busy_poll_only_connected: a busy-polling server with no connection waits (idle_waits grows);
// while a client is connected it spins (no waits); once the client is gone it waits again.
TEST(Shard, ABusyServerSpinsOnlyWhileSomeoneIsConnected) {
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.shards = 1;
  o.idle = IdlePolicy::busy_poll;
  o.busy_poll_only_connected = true;
  o.max_wait = std::chrono::microseconds(1000);
  o.pin = false;
  ShardGroup group(o);
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  EXPECT_TRUE(wait_until([&] { return group.counters(0).idle_waits > 10; }, 5000ms));

  auto client = Host::listen(HostOptions{}, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(client, nullptr) << error;
  const PeerHandle peer = client->connect(group.local_endpoint(), 1);
  ASSERT_TRUE(peer.valid());
  ASSERT_TRUE(service_until(*client, EventType::connect, 10000ms));
  // The server's peer comes with the client's acknowledgement, which the client sends as it
  // services.
  Event pending;
  ASSERT_TRUE(wait_until(
      [&] {
        client->service(pending, std::chrono::milliseconds(1));
        return group.counters(0).peers == 1;
      },
      5000ms));
  const std::uint64_t waits_connected = group.counters(0).idle_waits;
  const std::uint64_t iterations_connected = group.counters(0).iterations;
  Event ev;
  const auto until = Clock::now() + 200ms;
  while (Clock::now() < until) client->service(ev, 1ms);
  EXPECT_EQ(group.counters(0).idle_waits, waits_connected);
  EXPECT_GT(group.counters(0).iterations, iterations_connected + 1000);  // spinning

  client->disconnect(peer, 0);
  EXPECT_TRUE(service_until(*client, EventType::disconnect, 10000ms));
  EXPECT_TRUE(
      wait_until([&] { return group.counters(0).idle_waits > waits_connected + 10; }, 5000ms));
  EXPECT_TRUE(group.stop(5000ms));
}

TEST(Shard, StartFailsCleanlyWhenThePortIsTaken) {
  // A plain socket without SO_REUSEPORT owns the port, so shard 0 cannot bind it.
  std::string error;
  auto blocker = Host::listen(HostOptions{}, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(blocker, nullptr) << error;
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.bind = blocker->local_endpoint();
  ShardGroup group(o);
  EXPECT_FALSE(group.start(error));
  EXPECT_FALSE(error.empty());
  EXPECT_FALSE(group.running());
}

// The KCP personality beside ENet (ShardGroupOptions::kcp_listen): KCP clients (tern::Host with
// Personality::kcp) and ENet clients echo through the same shards and the same handler, which
// tells them apart by Shard::is_kcp; a server-side disconnect of a KCP session still yields its
// disconnect event; a graceful stop lets the sessions go once their echoes are acknowledged.
TEST(Shard, KcpSessionsShareTheEventsWithEnetPeers) {
  constexpr std::size_t kKcpClients = 24;
  constexpr std::size_t kEnetClients = 8;
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.kcp_listen = true;
  o.kcp_bind = *Endpoint::parse("127.0.0.1:0");
  ShardGroup group(o);
  std::atomic<std::uint32_t> kcp_connects{0}, enet_connects{0}, kcp_closed{0};
  std::atomic<std::uint32_t> kcp_closed_data{0}, kcp_receives{0}, enet_receives{0};
  std::atomic<std::uint32_t> wrong_personality{0};
  group.set_event_handler([&](Shard& s, Event& ev) {
    const bool kcp = Shard::is_kcp(ev.peer);
    switch (ev.type) {
      case EventType::connect:
        ++(kcp ? kcp_connects : enet_connects);
        if (kcp != (ev.address.port != 0 && ev.data >= 1000)) ++wrong_personality;
        break;
      case EventType::receive:
        ++(kcp ? kcp_receives : enet_receives);
        if (s.send(ev.peer, ev.channel, ev.delivery, std::move(ev.packet)) != SendResult::ok)
          ++wrong_personality;
        break;
      case EventType::disconnect:
        if (kcp) {
          ++kcp_closed;
          kcp_closed_data.store(ev.data);
        }
        break;
      default: break;
    }
  });
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  const Endpoint kcp_server = group.kcp_endpoint();
  ASSERT_NE(kcp_server.port, 0);
  ASSERT_NE(kcp_server.port, group.local_endpoint().port);
  for (std::size_t i = 1; i < group.size(); ++i) EXPECT_EQ(group.kcp_endpoint(i), kcp_server);

  std::vector<Client> clients(kKcpClients + kEnetClients);
  for (std::size_t i = 0; i < clients.size(); ++i) {
    Client& c = clients[i];
    c.id = static_cast<std::uint32_t>(i);
    const bool kcp = i < kKcpClients;
    HostOptions ho;
    ho.socket_receive_buffer = 256 << 10;
    ho.socket_send_buffer = 256 << 10;
    if (kcp) ho.personality = Personality::kcp;
    c.host = Host::listen(ho, Endpoint::v4(0x7f000002u + static_cast<std::uint32_t>(i), 0), error);
    ASSERT_NE(c.host, nullptr) << error;
    // KCP conversations from 1000 up (the handler checks the personality by it); ENet connect
    // data 0.
    c.peer = kcp ? c.host->connect(kcp_server, 1, 1000 + c.id)
                 : c.host->connect(group.local_endpoint(), 1);
    ASSERT_TRUE(c.peer.valid());
    // A KCP session may send at once; its connect event comes with the first echo.
    if (kcp) {
      c.sent = true;
      for (std::uint32_t seq = 0; seq < kMessages; ++seq) {
        const auto msg = encode(c.id, seq);
        ASSERT_EQ(c.host->send(c.peer, 0, Delivery::reliable, std::span<const std::byte>(msg)),
                  SendResult::ok);
      }
    }
  }
  ASSERT_TRUE(pump_until(clients, [&] {
    for (const Client& c : clients) {
      if (c.next_expected < kMessages) return false;
    }
    return true;
  })) << "not every client got its echoes in time";
  for (const Client& c : clients) {
    EXPECT_EQ(c.errors, 0u) << "client " << c.id;
    EXPECT_EQ(c.next_expected, kMessages) << c.id;
  }
  EXPECT_EQ(kcp_connects.load(), kKcpClients);
  EXPECT_EQ(enet_connects.load(), kEnetClients);
  EXPECT_EQ(kcp_receives.load(), kKcpClients * kMessages);
  EXPECT_EQ(enet_receives.load(), kEnetClients * kMessages);
  EXPECT_EQ(wrong_personality.load(), 0u);
  ASSERT_TRUE(wait_until([&] { return group.total().kcp_messages_out >= kKcpClients * kMessages; },
                         5000ms));
  const ShardCounters total = group.total();
  EXPECT_EQ(total.kcp_sessions, kKcpClients);
  EXPECT_EQ(total.kcp_connects, kKcpClients);
  EXPECT_EQ(total.kcp_messages_in, kKcpClients * kMessages);
  EXPECT_EQ(total.kcp_messages_out, kKcpClients * kMessages);
  // The only segments the server may drop are copies of ones it had already: a client's resend
  // that crossed the original's ack (a slow machine, TSan). Nothing malformed, nothing refused.
  std::uint64_t client_resends = 0;
  for (std::size_t i = 0; i < kKcpClients; ++i)
    client_resends += clients[i].host->stats().retransmits;
  EXPECT_LE(total.kcp_drops, client_resends);
  EXPECT_EQ(total.messages_in, kEnetClients * kMessages);  // the ENet core's own
  EXPECT_EQ(total.peers, kEnetClients);
  std::uint64_t on_both = 0;
  for (std::size_t i = 0; i < group.size(); ++i) on_both += group.counters(i).kcp_sessions != 0;
  EXPECT_EQ(on_both, group.size()) << "SO_REUSEPORT gave a shard no KCP session";

  // The server forgets one KCP session: the handler still hears of it, with the data given.
  std::promise<bool> done;
  auto closed = done.get_future();
  group.post(0, [&](Shard& s) {
    bool found = false;
    for (std::uint32_t slot = 0; slot < 64 && !found; ++slot) {
      for (std::uint32_t gen = 1; gen < 4 && !found; ++gen) {
        const PeerHandle h{slot | Shard::kKcpPeer, gen};
        if (s.peer_state(h) != PeerState::connected) continue;
        s.disconnect(h, 77);
        found = s.peer_state(h) == PeerState::disconnected;
      }
    }
    done.set_value(found);
  });
  ASSERT_EQ(closed.wait_for(5s), std::future_status::ready);
  EXPECT_TRUE(closed.get());
  EXPECT_TRUE(wait_until([&] { return kcp_closed.load() == 1; }, 5000ms));
  EXPECT_EQ(kcp_closed_data.load(), 77u);

  // Graceful stop: every session is let go (its echoes were acknowledged), every ENet peer
  // disconnects, well inside the limit.
  std::atomic<bool> stopped{false};
  bool all_gone = false;
  std::thread stopper([&] {
    all_gone = group.stop(10000ms);
    stopped.store(true);
  });
  pump_until(clients, [&] { return stopped.load(); });
  stopper.join();
  EXPECT_TRUE(all_gone);
  EXPECT_EQ(kcp_closed.load(), kKcpClients);
}

// Shard::hold_intake on a KCP session (KcpCore::hold): its messages wait, acknowledged, while the
// window it advertises closes on Tern's KCP client, which then stops; released, every message
// arrives once and in order. Then the server ends the session: the client's further messages
// open no new one and are not acknowledged.
TEST(Shard, KcpHoldClosesTheWindowAndRefusedSessionsStayRefused) {
  constexpr std::uint32_t kHeld = 600;  // well past the 128-segment window
  ShardGroupOptions o = echo_options(DriverKind::socket);
  o.shards = 1;
  o.kcp_listen = true;
  o.kcp_bind = *Endpoint::parse("127.0.0.1:0");
  ShardGroup group(o);
  std::mutex mu;
  PeerHandle session;
  std::vector<std::uint32_t> got;
  std::atomic<std::uint32_t> connects{0};
  group.set_event_handler([&](Shard& s, Event& ev) {
    if (ev.type == EventType::connect) {
      ++connects;
      s.hold_intake(ev.peer, true);
      std::lock_guard lock(mu);
      session = ev.peer;
    } else if (ev.type == EventType::receive && ev.packet.size() == 8) {
      std::uint32_t seq = 0;
      std::memcpy(&seq, ev.packet.bytes().data() + 4, 4);
      std::lock_guard lock(mu);
      got.push_back(seq);
    }
  });
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;

  HostOptions ho;
  ho.personality = Personality::kcp;
  auto client = Host::listen(ho, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(client, nullptr) << error;
  const PeerHandle peer = client->connect(group.kcp_endpoint(), 1, 4321);
  ASSERT_TRUE(peer.valid());
  for (std::uint32_t seq = 0; seq < kHeld; ++seq) {
    const auto msg = encode(7, seq);
    ASSERT_EQ(client->send(peer, 0, Delivery::reliable, std::span<const std::byte>(msg)),
              SendResult::ok);
  }
  auto pump_client = [&](auto done, std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    Event ev;
    while (!done()) {
      if (Clock::now() > deadline) return false;
      while (client->service(ev, 1ms)) {
      }
    }
    return true;
  };
  auto received = [&] {
    std::lock_guard lock(mu);
    return got.size();
  };
  // The window closes: the client sees a remote window of 0 with messages still to send.
  PeerStats ps;
  ASSERT_TRUE(pump_client(
      [&] { return client->peer_stats(peer, ps) && ps.window_size == 0 && ps.queued_bytes != 0; },
      20000ms))
      << "window " << ps.window_size;
  // What came with the first datagram may have been delivered before the hold; no more.
  const std::size_t before = received();
  EXPECT_LT(before, std::size_t{kHeld});
  pump_client([] { return false; }, 300ms);
  EXPECT_EQ(received(), before);
  EXPECT_EQ(connects.load(), 1u);

  group.post(0, [&](Shard& s) {
    std::lock_guard lock(mu);
    s.hold_intake(session, false);
  });
  ASSERT_TRUE(pump_client([&] { return received() == kHeld; }, 30000ms)) << received();
  {
    std::lock_guard lock(mu);
    for (std::uint32_t i = 0; i < kHeld; ++i) ASSERT_EQ(got[i], i);
  }

  // The server ends the session; the client, which cannot know (KCP has no goodbye), goes on.
  std::promise<void> ended;
  group.post(0, [&](Shard& s) {
    std::lock_guard lock(mu);
    s.disconnect(session, 9);
    ended.set_value();
  });
  ASSERT_EQ(ended.get_future().wait_for(5s), std::future_status::ready);
  for (std::uint32_t seq = kHeld; seq < kHeld + 20; ++seq) {
    const auto msg = encode(7, seq);
    ASSERT_EQ(client->send(peer, 0, Delivery::reliable, std::span<const std::byte>(msg)),
              SendResult::ok);
  }
  ASSERT_TRUE(pump_client([&] { return group.total().kcp_refused != 0; }, 20000ms));
  pump_client([] { return false; }, 500ms);
  const ShardCounters total = group.total();
  EXPECT_EQ(total.kcp_connects, 1u);
  EXPECT_EQ(connects.load(), 1u);
  EXPECT_EQ(received(), std::size_t{kHeld});
  // Nothing of the 20 was acknowledged: they are all still queued or in flight at the client.
  ASSERT_TRUE(client->peer_stats(peer, ps));
  EXPECT_GE(ps.queued_bytes, 20u * 8u);
  group.stop(0ms);
}

}  // namespace
}  // namespace tern::rt
