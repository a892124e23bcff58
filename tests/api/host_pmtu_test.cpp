// Path MTU discovery (HostOptions::path_mtu; WIRE.md, "Path MTU discovery") on the simulated
// network, whose links drop datagrams larger than their mtu: the MTU found on an open path, on
// links narrower and wider than the negotiated one, after the path shrinks, and a peer that
// does not run it keeping the negotiated MTU. Messages sent once the MTU is found arrive whole.
#include "sim_pairs.hpp"

namespace tern::apitest {
namespace {

HostOptions with_pmtu() {
  HostOptions o;
  o.path_mtu = true;
  return o;
}

class HostPmtu : public SimPairs {
 protected:
  static std::uint32_t mtu_of(const Host& h, PeerHandle peer) {
    PeerStats s;
    EXPECT_TRUE(h.peer_stats(peer, s));
    return s.mtu;
  }

  void limit(const Pair& p, std::uint32_t mtu) {
    tern::drv::LinkConditions link;
    link.latency_us = kOneWayLatencyUs;
    link.mtu = mtu;
    net_.set_link(p.client_at, p.server_at, link);
    net_.set_link(p.server_at, p.client_at, link);
  }

  // `count` reliable messages of `size` bytes from the client, `per_step` at a time, then
  // until the server has them all; true when they came whole and in order.
  bool stream(Pair& p, std::uint32_t count, std::size_t size, std::uint32_t per_step) {
    const std::size_t before = received(p, 0).size();
    for (std::uint32_t i = 0; i < count; ++i) {
      const auto m = numbered(i, size);
      EXPECT_EQ(p.client->send(p.at_client, 0, Delivery::reliable, m), SendResult::ok);
      if ((i + 1) % per_step == 0) step();
    }
    if (!run_until([&] { return received(p, 0).size() >= before + count; }, 30'000'000)) {
      return false;
    }
    std::vector<std::uint32_t> got = received(p, 0);
    got.erase(got.begin(), got.begin() + static_cast<std::ptrdiff_t>(before));
    for (const Event& e : p.server_events) {
      if (e.type == EventType::receive && e.payload().size() != size) return false;
    }
    return got == first_n(count);
  }
};

TEST_F(HostPmtu, OpenPathReachesTheCeilingAndCarriesMessagesInFewerDatagrams) {
  Pair& on = add_pair(with_pmtu(), with_pmtu());
  Pair& off = add_pair(HostOptions{}, HostOptions{});
  connect_all();
  run_for(3'000'000);
  for (auto [host, peer] :
       {std::pair{on.client.get(), on.at_client}, std::pair{on.server.get(), on.at_server}}) {
    EXPECT_GE(mtu_of(*host, peer), 4096u - 16);
    EXPECT_LE(mtu_of(*host, peer), 4096u);
  }
  EXPECT_EQ(mtu_of(*off.client, off.at_client), 1400u);
  const std::uint64_t on_before = on.client->stats().datagrams_out;
  const std::uint64_t off_before = off.client->stats().datagrams_out;
  ASSERT_TRUE(stream(on, 20, 50'000, 1));
  ASSERT_TRUE(stream(off, 20, 50'000, 1));
  const std::uint64_t on_sent = on.client->stats().datagrams_out - on_before;
  const std::uint64_t off_sent = off.client->stats().datagrams_out - off_before;
  std::printf("1 MB in %llu datagrams at the found MTU, %llu at 1400\n",
              static_cast<unsigned long long>(on_sent), static_cast<unsigned long long>(off_sent));
  EXPECT_LT(on_sent * 2, off_sent);
}

// Links of 3000 (above the negotiated 1400) and 1200 (below it: the negotiated size is lost,
// the connection drops to 576 and searches up from there).
TEST_F(HostPmtu, LimitedLinksAreFound) {
  Pair& wide = add_pair(with_pmtu(), with_pmtu());
  Pair& narrow = add_pair(with_pmtu(), with_pmtu());
  connect_all();  // on open links: the handshake's datagrams are small anyway
  limit(wide, 3000);
  limit(narrow, 1200);
  run_for(10'000'000);
  for (auto [pair, cap] : {std::pair{&wide, 3000u}, std::pair{&narrow, 1200u}}) {
    const std::uint32_t c = mtu_of(*pair->client, pair->at_client);
    const std::uint32_t s = mtu_of(*pair->server, pair->at_server);
    std::printf("link mtu %u: found %u (client) %u (server)\n", cap, c, s);
    EXPECT_LE(c, cap);
    EXPECT_GE(c, cap - 16);
    EXPECT_LE(s, cap);
    EXPECT_GE(s, cap - 16);
    EXPECT_TRUE(stream(*pair, 50, 10'000, 2)) << cap;
  }
  EXPECT_GE(narrow.client->stats().pmtu_lowered, 1u);
}

TEST_F(HostPmtu, APeerWithoutItKeepsTheNegotiatedMtu) {
  Pair& p = add_pair(with_pmtu(), HostOptions{});
  connect_all();
  run_for(3'000'000);
  EXPECT_EQ(mtu_of(*p.client, p.at_client), 1400u);
  EXPECT_EQ(mtu_of(*p.server, p.at_server), 1400u);
  PeerStats s;
  ASSERT_TRUE(p.server->peer_stats(p.at_server, s));
  EXPECT_FALSE(s.path_mtu);
  EXPECT_EQ(p.server->stats().pmtu_probes_sent, 0u);
  EXPECT_EQ(p.client->stats().pmtu_probes_sent, 0u);
  EXPECT_TRUE(stream(p, 20, 5'000, 1));
}

// The path narrows to 1500 under a connection at 4096: datagrams packed with messages are
// lost, the retransmission timeout has the size checked, the check is lost twice, and the
// connection searches again from 576. Every message arrives (each fits 1500 on its own).
TEST_F(HostPmtu, AShrunkenPathIsFoundAgain) {
  Pair& p = add_pair(with_pmtu(), with_pmtu());
  connect_all();
  run_for(3'000'000);
  ASSERT_GE(mtu_of(*p.client, p.at_client), 4096u - 16);
  limit(p, 1500);
  EXPECT_TRUE(stream(p, 300, 1000, 3));
  run_for(3'000'000);
  const std::uint32_t found = mtu_of(*p.client, p.at_client);
  std::printf("after the path shrank to 1500: %u\n", found);
  EXPECT_LE(found, 1500u);
  EXPECT_GE(found, 1500u - 16);
  EXPECT_GE(p.client->stats().pmtu_lowered, 1u);
  EXPECT_EQ(p.client->peer_state(p.at_client), PeerState::connected);
}

}  // namespace
}  // namespace tern::apitest
