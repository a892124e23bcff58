// Cross-shard messages: exactly once and in order per sending shard, one stored payload for
// many recipients, and a sleeping shard woken at once by post() and by messages.
#include "shard.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace tern::rt {
namespace {

using namespace std::chrono_literals;
using SteadyTime = std::chrono::steady_clock;

ShardGroupOptions quiet_group(std::size_t shards) {
  ShardGroupOptions o;
  o.open_driver = rt::open_driver;
  o.bind = Endpoint::v4(0x7f000001u, 0);
  o.shards = shards;
  // Long sleeps: anything that arrives promptly was woken, not found by a timeout.
  o.max_wait = 10s;
  return o;
}

template <class Pred>
bool wait_until(Pred pred, std::chrono::milliseconds limit) {
  const auto deadline = SteadyTime::now() + limit;
  while (!pred()) {
    if (SteadyTime::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Every shard sends kPerPair numbered messages to every shard (itself included) through the
// bounded rings, retrying on a later iteration whenever a ring is full. Each receiver checks
// that every sender's sequence arrives exactly once and in order, with its own payload.
TEST(ShardCross, ExactlyOnceAndInOrderPerSender) {
  constexpr std::size_t kShards = 3;
  constexpr std::uint32_t kPerPair = 20'000;  // far past the ring capacity: exercises full

  struct Receiver {
    std::vector<std::uint32_t> next;  // per sender; touched only by the receiving shard
    std::uint64_t errors = 0;
    std::uint64_t received = 0;
  };
  std::vector<Receiver> receivers(kShards);
  for (auto& r : receivers) r.next.assign(kShards, 0);
  std::atomic<std::size_t> finished{0};
  // Sender state lives on its shard; a task sends what fits and re-posts itself.
  struct Sender {
    std::vector<std::uint32_t> sent;
    std::uint64_t full = 0;
  };
  std::vector<Sender> senders(kShards);
  for (auto& s : senders) s.sent.assign(kShards, 0);
  // Declared after the state its threads touch, so it stops them before that state goes.
  ShardGroup group(quiet_group(kShards));

  group.set_message_handler([&](Shard& s, ShardMessage& m) {
    Receiver& r = receivers[s.index()];
    std::uint32_t in_payload = 0;
    if (m.packet.size() == 4) std::memcpy(&in_payload, m.packet.bytes().data(), 4);
    if (m.tag >= kShards || m.data != r.next[m.tag] || in_payload != m.data) {
      ++r.errors;
      return;
    }
    ++r.next[m.tag];
    if (++r.received == kShards * kPerPair) finished.fetch_add(1);
  });
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;

  std::function<void(Shard&)> pump = [&](Shard& s) {
    Sender& me = senders[s.index()];
    bool more = false;
    for (std::size_t to = 0; to < kShards; ++to) {
      while (me.sent[to] < kPerPair) {
        const std::uint32_t seq = me.sent[to];
        Packet p = Packet::allocate(4);
        std::memcpy(p.mutable_bytes().data(), &seq, 4);
        ShardMessage m;
        m.tag = s.index();
        m.data = seq;
        m.packet = std::move(p);
        if (!s.send_to_shard(to, std::move(m))) {
          ++me.full;
          break;
        }
        ++me.sent[to];
      }
      more = more || me.sent[to] < kPerPair;
    }
    if (more) group.post(s.index(), pump);
  };
  for (std::size_t i = 0; i < kShards; ++i) ASSERT_TRUE(group.post(i, pump));

  const bool done = wait_until([&] { return finished.load() == kShards; }, 60s);
  group.stop(0ms);  // before reading the shards' state
  ASSERT_TRUE(done) << "cross_sent=" << group.total().cross_sent
                    << " cross_received=" << group.total().cross_received
                    << " posted_run=" << group.total().posted_run;
  std::uint64_t full = 0;
  for (std::size_t i = 0; i < kShards; ++i) {
    EXPECT_EQ(receivers[i].errors, 0u) << "shard " << i;
    EXPECT_EQ(receivers[i].received, kShards * kPerPair) << "shard " << i;
    full += senders[i].full;
  }
  const ShardCounters t = group.total();
  EXPECT_EQ(t.cross_received, kShards * kShards * kPerPair);
  // Refused pushes were retried, so they show up as drops but never as losses above.
  EXPECT_EQ(t.cross_sent, kShards * kShards * kPerPair);
  EXPECT_EQ(t.cross_dropped, full);
  std::printf("[cross] %u messages per ordered pair, %llu pushes refused by full rings\n", kPerPair,
              static_cast<unsigned long long>(full));
}

// One packet fanned out to every shard is one buffer: every receiver sees the same bytes at
// the same address, and the buffer goes back once the last reference is dropped.
TEST(ShardCross, OnePayloadForManyRecipients) {
  constexpr std::size_t kShards = 2;
  ShardGroup group(quiet_group(kShards));
  std::atomic<const std::byte*> seen[kShards] = {};
  std::atomic<std::uint32_t> uses{0};
  group.set_message_handler([&](Shard& s, ShardMessage& m) {
    seen[s.index()].store(m.packet.bytes().data());
    uses.fetch_add(1);
  });
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  std::promise<const std::byte*> original;
  ASSERT_TRUE(group.post(0, [&](Shard& s) {
    Packet p = Packet::copy_of(std::as_bytes(std::span("spectator frame")));
    original.set_value(p.bytes().data());
    for (std::size_t to = 0; to < s.shard_count(); ++to) {
      ShardMessage m;
      m.packet = p;  // another reference, not another copy
      EXPECT_TRUE(s.send_to_shard(to, std::move(m)));
    }
  }));
  const std::byte* where = original.get_future().get();
  ASSERT_TRUE(wait_until([&] { return uses.load() == kShards; }, 5s));
  for (std::size_t i = 0; i < kShards; ++i) EXPECT_EQ(seen[i].load(), where) << "shard " << i;
  group.stop(0ms);
}

// With max_wait at 10 s, a sleeping shard runs a post()ed task and a cross-shard message
// promptly only if the eventfd wakes it.
TEST(ShardCross, SleepingShardIsWokenAtOnce) {
  ShardGroup group(quiet_group(2));
  std::atomic<std::int64_t> message_at_ns{0};
  group.set_message_handler([&](Shard&, ShardMessage&) {
    message_at_ns.store(SteadyTime::now().time_since_epoch().count());
  });
  std::string error;
  ASSERT_TRUE(group.start(error)) << error;
  // Both shards have nothing to do: let them fall asleep.
  ASSERT_TRUE(wait_until([&] { return group.total().idle_waits >= 2; }, 5s));
  std::this_thread::sleep_for(50ms);

  std::promise<SteadyTime::time_point> ran;
  const auto posted = SteadyTime::now();
  ASSERT_TRUE(group.post(1, [&](Shard& s) {
    ran.set_value(SteadyTime::now());
    ShardMessage m;
    EXPECT_TRUE(s.send_to_shard(0, std::move(m)));  // shard 0 is asleep too
  }));
  auto fut = ran.get_future();
  ASSERT_EQ(fut.wait_for(5s), std::future_status::ready) << "post() never ran";
  const auto post_delay = fut.get() - posted;
  ASSERT_TRUE(wait_until([&] { return message_at_ns.load() != 0; }, 5s));
  const auto message_delay =
      SteadyTime::time_point(SteadyTime::duration(message_at_ns.load())) - posted;
  std::printf("[wake] post ran after %lld us, message after %lld us\n",
              static_cast<long long>(post_delay / 1us),
              static_cast<long long>(message_delay / 1us));
  EXPECT_LT(post_delay, 1s);
  EXPECT_LT(message_delay, 1s);
  EXPECT_GE(group.total().wakeups_sent, 2u);
  const auto stop_started = SteadyTime::now();
  group.stop(0ms);
  EXPECT_LT(SteadyTime::now() - stop_started, 1s) << "stop() waited out max_wait";
}

}  // namespace
}  // namespace tern::rt
