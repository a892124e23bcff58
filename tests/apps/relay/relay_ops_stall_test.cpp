// The operations' questions to the shards when one shard is stalled: the answer comes
// without it (marked incomplete) instead of waiting on it, and the stalled shard's part is
// back once it runs again. In-process, with libenet clients on two shards. Waits out
// Relay::kAskTimeout while a shard is held: suite 'timing' too.
#include "relay_fixture.hpp"

#include <atomic>

namespace tern::relay {
namespace {

class RelayOpsTest : public RelayFixture {};

std::uint64_t members_in(const TopTraffic& t) {
  std::uint64_t n = t.other_rooms.members;
  for (const RoomTraffic& r : t.rooms) n += r.members;
  return n;
}

TEST_F(RelayOpsTest, AStalledShardIsLeftOutAndTheAnswerMarkedIncomplete) {
  start(RelayConfig{});
  constexpr std::size_t kClients = 8;
  for (std::size_t i = 0; i < kClients; ++i) connect(7);
  ASSERT_TRUE(run_until([&] { return all_connected(); }));
  std::vector<PeerTraffic> peers;
  bool complete = false;
  ASSERT_TRUE(run_until([&] {
    peers = relay_->peer_list(std::nullopt, 100, complete);
    return complete && peers.size() == kClients;
  }));
  std::size_t on_shard0 = 0;
  for (const PeerTraffic& p : peers) on_shard0 += p.shard == 0 ? 1 : 0;

  // Shard 1 stops between two polls until released (bounded, so a broken test cannot hang).
  std::atomic<bool> stalled{false}, release{false};
  ASSERT_TRUE(relay_->post(1, [&](rt::Shard&) {
    stalled = true;
    const auto bound = SteadyClock::now() + 30s;
    while (!release.load() && SteadyClock::now() < bound) std::this_thread::sleep_for(1ms);
  }));
  ASSERT_TRUE(run_until([&] { return stalled.load(); }));

  const TopTraffic partial = relay_->top_traffic(10, 10);
  EXPECT_FALSE(partial.complete);
  EXPECT_EQ(members_in(partial), on_shard0);
  const std::vector<PeerTraffic> listed = relay_->peer_list(std::nullopt, 100, complete);
  EXPECT_FALSE(complete);
  EXPECT_EQ(listed.size(), on_shard0);
  for (const PeerTraffic& p : listed) EXPECT_EQ(p.shard, 0u);

  release = true;
  ASSERT_TRUE(run_until([&] {
    const TopTraffic whole = relay_->top_traffic(10, 10);
    return whole.complete && members_in(whole) == kClients;
  }));
  const TopTraffic whole = relay_->top_traffic(1, 3);
  ASSERT_EQ(whole.rooms.size(), 1u);
  EXPECT_EQ(whole.rooms[0].room, 7u);
  EXPECT_EQ(whole.room_count, 1u);
  EXPECT_EQ(whole.talkers.size(), 3u);  // top_talkers bounds the series
}

}  // namespace
}  // namespace tern::relay
