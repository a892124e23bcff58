// Congestion control's express lane (HostConfig::cc_express_bytes): small reliable messages
// queue ahead of bulk, behind the express messages before them, in one step however deep the
// queue (PeerQueues::express_tail). What these tests pin down is that step's bookkeeping when
// the express messages before it have left the queue in every way they can: sent, sent and
// acknowledged (freed), or sent, lost and waiting at the front to be resent.
#include "core_pair.hpp"

#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace tern::test {
namespace {

constexpr std::size_t kExpressSize = 200;  // under cc_express_bytes: about six per datagram

class Express : public ::testing::Test {
 protected:
  void SetUp() override {
    pair.handshake(1);
    for (int i = 0; i < 20; ++i) pair.step(1000);
    PeerStats stats;
    ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
    ASSERT_TRUE(stats.congestion_control);
    pair.on_client_event = [this](Event& ev) {
      if (ev.type == EventType::receive) received.push_back(payload_index(ev.packet.bytes()));
    };
  }

  void queue(std::uint32_t from, std::uint32_t to) {
    for (std::uint32_t i = from; i < to; ++i) {
      ASSERT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                                 numbered_payload(i, kExpressSize)),
                SendResult::ok);
    }
  }

  // One datagram of the server's, or none: a flush into a batch of one.
  std::vector<std::byte> one_datagram() {
    const std::size_t n = pair.server.flush(pair.now_us, std::span(&one_, 1));
    if (n == 0) return {};
    return {one_.view().begin(), one_.view().end()};
  }

  void deliver(const std::vector<std::byte>& d) {
    pair.client.on_datagram(pair.now_us, pair.server_ep, d);
    pair.drain();
  }

  // The client's acknowledgements, all of them, to the server.
  void acks_to_server() {
    std::vector<proto::OutDatagram> batch(32);
    std::size_t n = 0;
    do {
      n = pair.client.flush(pair.now_us, batch);
      for (std::size_t i = 0; i < n; ++i) {
        pair.server.on_datagram(pair.now_us, pair.client_ep, batch[i].view());
      }
    } while (n == batch.size());
    pair.drain();
  }

  static std::vector<std::uint32_t> first_n(std::uint32_t n) {
    std::vector<std::uint32_t> v(n);
    for (std::uint32_t i = 0; i < n; ++i) v[i] = i;
    return v;
  }

  CorePair pair;
  std::vector<std::uint32_t> received;
  proto::OutDatagram one_;
};

// The newest express message was sent and acknowledged (its command freed) while older ones
// were lost; their resends wait at the front when the next express message is queued: it
// goes behind them and out in the same flush, and the receiver gets every message once, in
// order.
TEST_F(Express, QueuedWhileResendsWaitItFollowsThem) {
  constexpr std::uint32_t kFirst = 40, kLater = 10;
  queue(0, kFirst);
  std::vector<std::vector<std::byte>> sent = pair.take_server_output();
  ASSERT_GE(sent.size(), 5u);
  // The first two datagrams are lost, the rest arrive and are acknowledged.
  for (std::size_t i = 2; i < sent.size(); ++i) deliver(sent[i]);
  acks_to_server();
  EXPECT_TRUE(received.empty());  // held for the lost ones
  // Past the retransmission timeout: the lost messages go back to the front; one datagram of
  // them goes, the rest wait.
  pair.now_us += 2'000'000;
  const std::vector<std::byte> first_resend = one_datagram();
  ASSERT_FALSE(first_resend.empty());
  ASSERT_GT(pair.server.counters().retransmits, 0u);
  queue(kFirst, kFirst + kLater);
  deliver(first_resend);
  for (const auto& d : pair.take_server_output()) deliver(d);
  EXPECT_EQ(received, first_n(kFirst + kLater));
  pair.step(1000);
  PeerStats stats;
  ASSERT_TRUE(pair.server.peer_stats(pair.server_peer, stats));
  EXPECT_EQ(stats.reliable_in_transit, 0u);
}

// A deep express queue drained a datagram at a time while more is queued behind it: the
// order of the calls, every message once.
TEST_F(Express, ADeepQueueDrainedWhileItGrowsKeepsTheOrderOfTheCalls) {
  constexpr std::uint32_t kBatch = 500, kBatches = 6;
  std::uint32_t queued = 0;
  for (std::uint32_t b = 0; b < kBatches; ++b) {
    queue(queued, queued + kBatch);
    queued += kBatch;
    for (int i = 0; i < 30; ++i) {
      const std::vector<std::byte> d = one_datagram();
      if (d.empty()) break;
      deliver(d);
    }
  }
  for (int i = 0; i < 20; ++i) pair.step(1000);
  EXPECT_EQ(received, first_n(queued));
}

}  // namespace
}  // namespace tern::test
