// tern-relay's [discovery]: a discovery ping (tern::Host::discover over a loopback socket) is
// answered with the configured name and info and the number of clients connected to the
// whole relay, and counted; a relay without the section stays silent.
#include "relay_fixture.hpp"

#include <tern/host.hpp>

namespace tern::relay {
namespace {

class RelayDiscovery : public RelayFixture {
 protected:
  // One discovery ping from a fresh socket; the first answer's info, or "" when none came
  // within `limit` (a hang guard: nothing here asserts on time).
  std::string discover(std::chrono::milliseconds limit) {
    std::string error;
    auto host = Host::listen(HostOptions{}, Endpoint::v4(0x7f000001u, 0), error);
    EXPECT_NE(host, nullptr) << error;
    if (host == nullptr) return {};
    EXPECT_NE(host->discover(relay_->local_endpoint()), 0u);
    const auto deadline = SteadyClock::now() + limit;
    while (SteadyClock::now() < deadline) {
      for (auto& c : clients_) c->service();
      Event ev;
      host->service(ev, 1ms);
      DiscoveryAnswer a;
      if (host->poll_discovery(a)) {
        return {reinterpret_cast<const char*>(a.info.bytes().data()), a.info.size()};
      }
    }
    return {};
  }
};

TEST_F(RelayDiscovery, AnswersWithNameInfoAndPlayers) {
  RelayConfig c;
  c.discovery = true;
  c.discovery_name = "arena";
  c.discovery_info = "mode=ctf\n";
  c.max_peers = 100;
  start(c);
  EXPECT_EQ(discover(10s), "name=arena\nplayers=0\nmax_players=100\nmode=ctf\n");
  connect(1);
  connect(1);
  ASSERT_TRUE(run_until([&] { return all_connected(); }));
  // A client counts itself connected when the VERIFY arrives, the relay once the client's ack
  // does, and a shard rewrites its answer once per loop: ask until the count moved (bounded).
  const std::string two = "name=arena\nplayers=2\nmax_players=100\nmode=ctf\n";
  std::string answer;
  for (int attempt = 0; attempt < 50 && answer != two; ++attempt) answer = discover(10s);
  EXPECT_EQ(answer, two);
  const std::string metrics = relay_->metrics_text();
  EXPECT_NE(metrics.find("tern_relay_discovery_answers_total"), std::string::npos);
}

TEST_F(RelayDiscovery, OffWithoutTheSection) {
  start(RelayConfig{});
  EXPECT_EQ(discover(500ms), "");
}

}  // namespace
}  // namespace tern::relay
