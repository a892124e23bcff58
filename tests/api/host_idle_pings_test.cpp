// Idle pings through tern::Host (HostOptions::idle_ping_intervals; WIRE.md, feature bit 5): an
// idle connection between Tern hosts costs fewer datagrams at the default than with ENet's
// interval asked for on either side, and stays up either way.
#include "sim_pairs.hpp"

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

}  // namespace
}  // namespace tern::apitest
