// Idle pings through tern::Host (HostOptions::idle_ping_intervals; WIRE.md, feature bit 5): an
// idle connection between Tern hosts costs fewer datagrams at the default than with ENet's
// interval asked for on either side, and stays up either way.
#include "sim_pairs.hpp"

#include <algorithm>
#include <bit>
#include <map>

namespace tern::apitest {
namespace {

HostOptions with_intervals(std::uint32_t n) {
  HostOptions o;
  o.idle_ping_intervals = n;
  return o;
}

class HostIdlePings : public SimPairs {
 protected:
  static std::uint64_t datagrams(const Pair& p) {
    return p.client->stats().datagrams_out + p.server->stats().datagrams_out;
  }
};

TEST_F(HostIdlePings, TheOptionSetsHowOftenAnIdleConnectionPings) {
  Pair& idle = add_pair(HostOptions{}, HostOptions{});
  Pair& enet_client = add_pair(HostOptions{}, with_intervals(1));
  Pair& enet_server = add_pair(with_intervals(0), HostOptions{});
  connect_all();
  run_for(2'000'000);  // past the handshake's first pings
  const std::uint64_t before[] = {datagrams(idle), datagrams(enet_client), datagrams(enet_server)};
  run_for(20'000'000);
  const std::uint64_t idle_n = datagrams(idle) - before[0];
  const std::uint64_t client_n = datagrams(enet_client) - before[1];
  const std::uint64_t server_n = datagrams(enet_server) - before[2];
  std::printf("datagrams in 20 s idle: default %llu, client at 1 %llu, server at 0 %llu\n",
              static_cast<unsigned long long>(idle_n), static_cast<unsigned long long>(client_n),
              static_cast<unsigned long long>(server_n));
  // ENet's interval: a ping every 500 ms and its ack, at least 80 in 20 s; idle pings: a
  // client ping every 2 s with the server's riding on its answer, about 30.
  EXPECT_GE(client_n, 80u);
  EXPECT_GE(server_n, 80u);
  EXPECT_LE(idle_n, 40u);
  EXPECT_GT(idle_n, 0u);
  for (const Pair* p : {&idle, &enet_client, &enet_server}) {
    EXPECT_EQ(count(p->client_events, EventType::disconnect), 0u);
    EXPECT_EQ(count(p->server_events, EventType::disconnect), 0u);
  }
}

// Connections that began in the same millisecond (a load generator's, or every client
// reconnecting after a server restart) must not keep pinging in the same millisecond: each
// round would be a burst of pings and acknowledgements on both sides. Each client ping comes a
// sixteenth of the interval early or late at most, drawn afresh per ping, so rounds drift
// apart; a host's pings then share 16 ms steps (the bins here), a few at a time.
TEST_F(HostIdlePings, ConnectionsThatBeganTogetherDoNotPingTogether) {
  constexpr std::size_t kPairs = 32;
  constexpr std::uint64_t kBinUs = 16'000;
  for (std::size_t i = 0; i < kPairs; ++i) add_pair(HostOptions{}, HostOptions{});
  connect_all();
  run_for(30'000'000);  // rounds to drift apart
  std::vector<std::uint64_t> sent(kPairs);
  for (std::size_t i = 0; i < kPairs; ++i) sent[i] = pairs_[i]->client->stats().datagrams_out;
  std::map<std::uint64_t, std::uint64_t> senders_per_bin;  // a bit per client, by 16 ms of time
  const std::uint64_t end = net_.now_us() + 20'000'000;
  while (net_.now_us() < end) {
    step();
    for (std::size_t i = 0; i < kPairs; ++i) {
      const std::uint64_t now_sent = pairs_[i]->client->stats().datagrams_out;
      if (now_sent != sent[i]) senders_per_bin[net_.now_us() / kBinUs] |= std::uint64_t{1} << i;
      sent[i] = now_sent;
    }
  }
  std::size_t busiest = 0, total = 0;
  for (const auto& [bin, senders] : senders_per_bin) {
    busiest = std::max<std::size_t>(busiest, std::popcount(senders));
    total += std::popcount(senders);
  }
  std::printf("%zu client-bins with sends in 20 s, at most %zu clients in one 16 ms\n", total,
              busiest);
  EXPECT_GE(total, kPairs * 8);  // still about one ping per 2 s each
  EXPECT_LE(busiest, kPairs / 4);
  for (const auto& p : pairs_) {
    EXPECT_EQ(count(p->client_events, EventType::disconnect), 0u);
    EXPECT_EQ(count(p->server_events, EventType::disconnect), 0u);
  }
}

}  // namespace
}  // namespace tern::apitest
