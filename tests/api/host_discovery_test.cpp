// tern::Host's offline discovery and per-peer settings on the simulated network:
// Host::discover against servers with and without discovery, the info a server sets (and
// changes), and set_peer_timeout / set_peer_throttle / set_peer_ping_interval taking effect
// on both sides (the throttle's through THROTTLE_CONFIGURE).
#include "sim_pairs.hpp"

#include <string>

namespace tern::apitest {
namespace {

std::vector<std::byte> text(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::string as_text(const Packet& p) {
  return {reinterpret_cast<const char*>(p.bytes().data()), p.size()};
}

class HostDiscovery : public SimPairs {
 protected:
  static HostOptions server_options() {
    HostOptions o;
    o.discovery = true;
    return o;
  }

  std::vector<DiscoveryAnswer> answers(Host& h, std::uint64_t for_us) {
    std::vector<DiscoveryAnswer> out;
    const std::uint64_t end = net_.now_us() + for_us;
    while (net_.now_us() < end) {
      step();
      DiscoveryAnswer a;
      while (h.poll_discovery(a)) out.push_back(std::move(a));
    }
    return out;
  }
};

TEST_F(HostDiscovery, ServersAnswerWithTheirInfoAndRtt) {
  Pair& one = add_pair(server_options(), HostOptions{});
  Pair& quiet = add_pair(HostOptions{}, HostOptions{});  // discovery off
  one.server->set_discovery_info(text("name=one\nplayers=0\n"));
  quiet.server->set_discovery_info(text("name=quiet\n"));
  const std::uint32_t n1 = one.client->discover(one.server_at);
  const std::uint32_t n2 = one.client->discover(quiet.server_at);
  ASSERT_NE(n1, 0u);
  ASSERT_NE(n2, 0u);
  std::vector<DiscoveryAnswer> got = answers(*one.client, 1'000'000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].from, one.server_at);
  EXPECT_EQ(got[0].nonce, n1);
  EXPECT_EQ(as_text(got[0].info), "name=one\nplayers=0\n");
  // Two one-way latencies, within a step each way (the host reads its clock once per pass).
  EXPECT_GE(got[0].rtt_us, 2 * kOneWayLatencyUs - kMaxStepUs);
  EXPECT_LE(got[0].rtt_us, 2 * kOneWayLatencyUs + 3 * kMaxStepUs);
  EXPECT_EQ(quiet.server->stats().discovery_refused, 1u);
  EXPECT_EQ(quiet.server->stats().discovery_pongs_out, 0u);
  // No connection was made on either server.
  EXPECT_EQ(one.server->peer_count(), 0u);
  EXPECT_EQ(quiet.server->peer_count(), 0u);

  // The info changes (a player joined); a small ping gets it cut to its room.
  one.server->set_discovery_info(text("name=one\nplayers=1\n"));
  one.client->discover(one.server_at, 8);
  got = answers(*one.client, 1'000'000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(got[0].truncated);
  EXPECT_EQ(as_text(got[0].info), "name=one");
  one.client->discover(one.server_at);
  got = answers(*one.client, 1'000'000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].truncated);
  EXPECT_EQ(as_text(got[0].info), "name=one\nplayers=1\n");
  const HostStats s = one.server->stats();
  EXPECT_EQ(s.discovery_pongs_out, 3u);
  EXPECT_EQ(s.discovery_truncated, 1u);
  EXPECT_LE(s.discovery_bytes_out, s.discovery_bytes_in);
  EXPECT_EQ(one.client->stats().discovery_answers, 3u);
}

TEST_F(HostDiscovery, AConnectedServerStillAnswers) {
  Pair& p = add_pair(server_options(), HostOptions{});
  p.server->set_discovery_info(text("busy"));
  connect_all();
  p.client->discover(p.server_at);
  std::vector<DiscoveryAnswer> got = answers(*p.client, 1'000'000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(as_text(got[0].info), "busy");
  EXPECT_EQ(p.server->peer_count(), 1u);
  EXPECT_EQ(p.client->peer_state(p.at_client), PeerState::connected);
}

TEST_F(HostDiscovery, PeerTimeoutEndsADeadConnectionSooner) {
  Pair& fast = add_pair(HostOptions{}, HostOptions{});
  Pair& slow = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  fast.client->set_peer_timeout(fast.at_client, 4, 300, 1000);
  PeerStats st;
  ASSERT_TRUE(fast.client->peer_stats(fast.at_client, st));
  EXPECT_EQ(st.timeout_limit, 4u);
  EXPECT_EQ(st.timeout_minimum_ms, 300u);
  EXPECT_EQ(st.timeout_maximum_ms, 1000u);
  ASSERT_TRUE(slow.client->peer_stats(slow.at_client, st));
  EXPECT_EQ(st.timeout_minimum_ms, 5000u);
  tern::drv::LinkConditions dead;
  dead.down = true;
  for (Pair* p : {&fast, &slow}) {
    net_.set_link(p->client_at, p->server_at, dead);
    net_.set_link(p->server_at, p->client_at, dead);
    const auto m = numbered(1, 32);
    ASSERT_EQ(p->client->send(p->at_client, 0, Delivery::reliable, m), SendResult::ok);
  }
  const std::uint64_t start = net_.now_us();
  ASSERT_TRUE(
      run_until([&] { return find(fast.client_events, EventType::disconnect); }, 10'000'000));
  EXPECT_EQ(find(fast.client_events, EventType::disconnect)->reason, DisconnectReason::timeout);
  EXPECT_LE(net_.now_us() - start, 1'500'000u);
  // The host's defaults still hold the other connection: at least five seconds.
  EXPECT_EQ(find(slow.client_events, EventType::disconnect), nullptr);
}

TEST_F(HostDiscovery, PeerThrottleIsSentToTheOtherSide) {
  Pair& p = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  p.server->set_peer_throttle(p.at_server, 1000, 3, 4);
  p.server->set_peer_ping_interval(p.at_server, 250);
  PeerStats st;
  ASSERT_TRUE(p.server->peer_stats(p.at_server, st));
  EXPECT_EQ(st.throttle_interval_ms, 1000u);
  EXPECT_EQ(st.ping_interval_ms, 250u);
  ASSERT_TRUE(run_until(
      [&] {
        PeerStats c;
        return p.client->peer_stats(p.at_client, c) && c.throttle_interval_ms == 1000;
      },
      1'000'000));
  ASSERT_TRUE(p.client->peer_stats(p.at_client, st));
  EXPECT_EQ(st.throttle_acceleration, 3u);
  EXPECT_EQ(st.throttle_deceleration, 4u);
  EXPECT_EQ(st.ping_interval_ms, 500u);  // the ping interval is this side's own
}

}  // namespace
}  // namespace tern::apitest
