// HostCore::send_many and Packet::Shares, the fan-out's one reference-count add: every peer
// but the skipped one gets the message, exactly once and intact; refused peers are not
// counted; and the packet's reference count is back where it started once every copy is
// acknowledged (the core drops the references of acknowledged copies together, at its next
// flush), whether the shares were all taken or not.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <tern/packet.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

TEST(PacketShares, TakesAndReturnsReferencesInOneStep) {
  const Packet p = Packet::copy_of(tern::test::numbered_payload(7, 64));
  ASSERT_EQ(p.use_count(), 1u);
  {
    Packet::Shares shares(p, 3);
    EXPECT_EQ(p.use_count(), 4u);
    Packet a = shares.take();
    Packet b = shares.take();
    EXPECT_EQ(p.use_count(), 4u);  // taken shares were already counted
    EXPECT_EQ(shares.left(), 1u);
    EXPECT_EQ(tern::test::payload_index(a.bytes()), 7u);
    EXPECT_EQ(a.bytes().data(), p.bytes().data());  // the same buffer, not a copy
    b.reset();
    EXPECT_EQ(p.use_count(), 3u);
  }  // `a` and the untaken share go back
  EXPECT_EQ(p.use_count(), 1u);
  {
    Packet::Shares none(p, 0);
    Packet extra = none.take();  // past the shares: an ordinary copy
    EXPECT_EQ(p.use_count(), 2u);
  }
  EXPECT_EQ(p.use_count(), 1u);
  Packet::Shares of_nothing(Packet{}, 5);
  EXPECT_EQ(of_nothing.left(), 0u);
  EXPECT_FALSE(of_nothing.take());
}

TEST(PacketShares, ReleaseRawDropsSeveralReferencesAndFreesOnTheLast) {
  const std::size_t live_before = Packet::thread_live_bytes();
  Packet p = Packet::copy_of(tern::test::numbered_payload(3, 64));
  Packet::Shares shares(p, 4);
  detail::PacketBuffer* raw = shares.take().into_raw();
  for (int i = 0; i < 3; ++i) (void)shares.take().into_raw();  // the same buffer each time
  ASSERT_EQ(p.use_count(), 5u);
  Packet::release_raw(raw, 3);
  EXPECT_EQ(p.use_count(), 2u);
  (void)std::move(p).into_raw();
  Packet::release_raw(raw, 2);  // the last two: the buffer goes back
  EXPECT_EQ(Packet::thread_live_bytes(), live_before);
}

// One client core holding several connections to the server core (as a load generator does).
struct Fanout {
  static constexpr std::size_t kPeers = 6;
  CorePair pair;
  std::vector<PeerHandle> client_side;  // index i: connection i, client's handle
  std::vector<PeerHandle> server_side;  // index i: connection i, server's handle
  std::map<std::uint32_t, std::vector<std::uint32_t>> received;  // connection -> indices

  Fanout() {
    server_side.resize(kPeers);
    pair.on_server_event = [&](Event& ev) {
      if (ev.type == EventType::connect) server_side[ev.data] = ev.peer;
    };
    pair.on_client_event = [&](Event& ev) {
      if (ev.type != EventType::receive) return;
      for (std::size_t i = 0; i < kPeers; ++i) {
        if (client_side[i] == ev.peer)
          received[static_cast<std::uint32_t>(i)].push_back(
              tern::test::payload_index(ev.packet.bytes()));
      }
    };
    for (std::size_t i = 0; i < kPeers; ++i) {
      client_side.push_back(
          pair.client.connect(pair.now_us, pair.server_ep, 1, static_cast<std::uint32_t>(i)));
    }
    for (int i = 0; i < 20; ++i) pair.step(1000);
  }
};

TEST(HostSendMany, EveryPeerButTheSkippedOneGetsTheMessageOnce) {
  Fanout f;
  for (std::size_t i = 0; i < Fanout::kPeers; ++i) {
    ASSERT_TRUE(f.server_side[i].valid()) << "connection " << i << " never connected";
  }
  const Packet message = Packet::copy_of(tern::test::numbered_payload(42, 64));
  const std::size_t accepted =
      f.pair.server.send_many(f.server_side, 0, Delivery::reliable, message, f.server_side[2]);
  EXPECT_EQ(accepted, Fanout::kPeers - 1);
  EXPECT_EQ(message.use_count(), Fanout::kPeers);  // ours and one per queued copy
  for (int i = 0; i < 5; ++i) f.pair.step(1000);
  for (std::uint32_t i = 0; i < Fanout::kPeers; ++i) {
    if (i == 2) {
      EXPECT_EQ(f.received.count(i), 0u) << "the skipped peer got a copy";
    } else {
      EXPECT_EQ(f.received[i], std::vector<std::uint32_t>{42}) << "connection " << i;
    }
  }
  // Every copy acknowledged: the core holds no reference any more.
  EXPECT_EQ(message.use_count(), 1u);
}

TEST(HostSendMany, RefusedPeersAreNotCountedAndGiveTheirShareBack) {
  Fanout f;
  f.pair.server.reset(f.server_side[0]);  // forgotten: not_connected
  std::vector<PeerHandle> peers = f.server_side;
  peers.push_back(PeerHandle{});  // never valid
  const Packet message = Packet::copy_of(tern::test::numbered_payload(9, 64));
  EXPECT_EQ(f.pair.server.send_many(peers, 0, Delivery::reliable, message), Fanout::kPeers - 1);
  EXPECT_EQ(message.use_count(), Fanout::kPeers);  // ours and the 5 queued copies
  // A channel the peers do not have: nothing accepted, nothing held.
  EXPECT_EQ(f.pair.server.send_many(peers, 3, Delivery::reliable, message), 0u);
  EXPECT_EQ(message.use_count(), Fanout::kPeers);
  for (int i = 0; i < 5; ++i) f.pair.step(1000);
  for (std::uint32_t i = 1; i < Fanout::kPeers; ++i) {
    EXPECT_EQ(f.received[i], std::vector<std::uint32_t>{9}) << "connection " << i;
  }
  EXPECT_EQ(message.use_count(), 1u);
}

TEST(HostSendMany, UnreliableAndUnsequencedCopiesArriveToo) {
  Fanout f;
  const Packet a = Packet::copy_of(tern::test::numbered_payload(1, 32));
  const Packet b = Packet::copy_of(tern::test::numbered_payload(2, 32));
  EXPECT_EQ(f.pair.server.send_many(f.server_side, 0, Delivery::unreliable, a), Fanout::kPeers);
  EXPECT_EQ(f.pair.server.send_many(f.server_side, 0, Delivery::unsequenced, b), Fanout::kPeers);
  for (int i = 0; i < 3; ++i) f.pair.step(1000);
  for (std::uint32_t i = 0; i < Fanout::kPeers; ++i) {
    EXPECT_EQ(f.received[i], (std::vector<std::uint32_t>{1, 2})) << "connection " << i;
  }
  EXPECT_EQ(a.use_count(), 1u);
  EXPECT_EQ(b.use_count(), 1u);
}

}  // namespace
