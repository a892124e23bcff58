// HostConfig::fast_retransmit: a reliable command is resent once acknowledgements arrive for
// commands sent well after it, without waiting out its retransmission timeout; and with
// HostConfig::congestion_window, only a stall (nothing later acknowledged) shrinks the window.
#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <map>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

// Both directions of a path with a one-way delay drawn for each millisecond between `low_ms`
// and `high_ms` (jitter, which widens ENet's retransmission timeout), first in first out (a
// datagram never overtakes one sent before it). `lose` picks server datagrams to drop.
class JitterLink {
 public:
  JitterLink(CorePair& pair, std::uint32_t low_ms, std::uint32_t high_ms)
      : pair_(pair), low_ms_(low_ms), high_ms_(high_ms) {}

  std::function<bool(std::uint64_t index)> lose = [](std::uint64_t) { return false; };

  // One millisecond: both sides flush, due datagrams arrive, events drain.
  void tick() {
    pair_.now_us += 1000;
    const std::uint64_t now_ms = pair_.now_us / 1000;
    random_ = random_ * 6364136223846793005ull + 1442695040888963407ull;
    const std::uint64_t delay = low_ms_ + (random_ >> 33) % (high_ms_ - low_ms_ + 1);
    for (auto& d : pair_.take_server_output()) {
      if (lose(server_index_++)) continue;
      to_client_.push_back({std::max(now_ms + delay, last_to_client_), std::move(d)});
      last_to_client_ = to_client_.back().arrival_ms;
    }
    const std::size_t n = pair_.client.flush(pair_.now_us, out_);
    for (std::size_t i = 0; i < n; ++i) {
      const auto v = out_[i].view();
      to_server_.push_back(
          {std::max(now_ms + delay, last_to_server_), std::vector<std::byte>(v.begin(), v.end())});
      last_to_server_ = to_server_.back().arrival_ms;
    }
    while (!to_client_.empty() && to_client_.front().arrival_ms <= now_ms) {
      pair_.client.on_datagram(pair_.now_us, pair_.server_ep, to_client_.front().bytes);
      to_client_.pop_front();
    }
    while (!to_server_.empty() && to_server_.front().arrival_ms <= now_ms) {
      pair_.server.on_datagram(pair_.now_us, pair_.client_ep, to_server_.front().bytes);
      to_server_.pop_front();
    }
    pair_.drain();
  }

  std::uint64_t server_datagrams() const { return server_index_; }

 private:
  struct InFlight {
    std::uint64_t arrival_ms;
    std::vector<std::byte> bytes;
  };
  CorePair& pair_;
  std::uint32_t low_ms_, high_ms_;
  std::uint64_t random_ = 42;
  std::deque<InFlight> to_client_, to_server_;
  std::uint64_t last_to_client_ = 0, last_to_server_ = 0;
  std::uint64_t server_index_ = 0;
  std::vector<OutDatagram> out_ = std::vector<OutDatagram>(32);
};

HostConfig sender(bool fast_retransmit, bool congestion_window = false) {
  HostConfig c;
  c.congestion_control = false;  // ENet's window, with and without the stall window
  c.fast_retransmit = fast_retransmit;
  c.congestion_window = congestion_window;
  return c;
}

struct Outcome {
  std::uint64_t recovery_ms = 0;  // from the lost message's send to its delivery
  std::uint64_t retransmits = 0;
  std::uint64_t fast_retransmits = 0;
  std::size_t delivered = 0;
  bool in_order = true;
  std::uint32_t rto_floor_ms = 0;  // the sender's RTT + 4 variances when the loss happened
};

constexpr std::uint32_t kMessages = 200;
constexpr std::uint32_t kLostMessage = 100;

// The server sends one reliable message per millisecond over a jittery path; the datagram
// carrying message kLostMessage is dropped (when `lose_one`).
Outcome run(bool fast_retransmit, bool lose_one) {
  CorePair pair(HostConfig{}, sender(fast_retransmit));
  pair.handshake(1);
  JitterLink link(pair, 10, 40);
  // Pings settle the RTT estimate (the handshake ran without delay: the first pings on this
  // path time out), and only what happens after counts.
  for (int i = 0; i < 3000; ++i) link.tick();
  const HostCounters before = pair.server.counters();
  Outcome o;
  std::map<std::uint32_t, std::uint64_t> sent_at_ms;
  std::uint32_t next_expected = 0;
  pair.on_client_event = [&](Event& ev) {
    if (ev.type != EventType::receive) return;
    const std::uint32_t index = tern::test::payload_index(ev.packet.bytes());
    o.in_order = o.in_order && index == next_expected;
    next_expected = index + 1;
    ++o.delivered;
    if (index == kLostMessage) o.recovery_ms = pair.now_us / 1000 - sent_at_ms[index];
  };
  std::uint64_t drop_index = ~std::uint64_t{0};
  link.lose = [&](std::uint64_t index) { return index == drop_index; };
  for (std::uint32_t i = 0; i < kMessages; ++i) {
    EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                               tern::test::numbered_payload(i, 64)),
              SendResult::ok);
    sent_at_ms[i] = pair.now_us / 1000 + 1;  // it leaves with the next tick's flush
    if (i == kLostMessage && lose_one) {
      drop_index = link.server_datagrams();  // the next datagram the server writes
      PeerStats s;
      EXPECT_TRUE(pair.server.peer_stats(pair.server_peer, s));
      o.rto_floor_ms = s.rtt_ms + 4 * s.rtt_variance_ms;
    }
    link.tick();
  }
  for (int i = 0; i < 3000; ++i) link.tick();
  o.retransmits = pair.server.counters().retransmits - before.retransmits;
  o.fast_retransmits = pair.server.counters().fast_retransmits - before.fast_retransmits;
  return o;
}

TEST(HostFastRetransmit, ALostMessageGoesAgainOnLaterAcksBeforeItsTimeout) {
  const Outcome fast = run(true, true);
  const Outcome enet = run(false, true);
  for (const Outcome* o : {&fast, &enet}) {
    EXPECT_EQ(o->delivered, kMessages);
    EXPECT_TRUE(o->in_order);
    EXPECT_GE(o->retransmits, 1u);
  }
  EXPECT_GE(fast.fast_retransmits, 1u);
  EXPECT_EQ(enet.fast_retransmits, 0u);
  // ENet waits its timeout, which the jitter widened; later acks arrive well before it.
  EXPECT_GE(enet.recovery_ms, enet.rto_floor_ms);
  EXPECT_LT(fast.recovery_ms + 20, enet.recovery_ms)
      << "fast " << fast.recovery_ms << " ms, timeout " << enet.recovery_ms << " ms";
  std::printf(
      "[fast retransmit] jitter 10-40 ms one way: the lost message arrived %llu ms after its "
      "send, %llu ms with timeouts only (retransmission timeout %u ms)\n",
      static_cast<unsigned long long>(fast.recovery_ms),
      static_cast<unsigned long long>(enet.recovery_ms), enet.rto_floor_ms);
}

// Jitter without loss never looks like loss: the path is first in first out, and the margin
// (a quarter of the RTT) covers acks that share or trail a datagram.
TEST(HostFastRetransmit, NothingIsResentWhenNothingIsLost) {
  const Outcome o = run(true, false);
  EXPECT_EQ(o.delivered, kMessages);
  EXPECT_TRUE(o.in_order);
  EXPECT_EQ(o.fast_retransmits, 0u);
  EXPECT_EQ(o.retransmits, 0u);
}

// With the congestion window on: random loss on a delivering path mostly leaves the window
// open (the losses are found by later acks, or time out while later commands were
// acknowledged), and a tail loss that does close it costs a few doubling round trips, so a
// lossy link moves data nearly as fast as without the window.
TEST(HostFastRetransmit, RandomLossDoesNotCloseTheCongestionWindow) {
  auto deliver_under_loss = [](bool window) {
    CorePair pair(HostConfig{}, sender(true, window));
    pair.handshake(1);
    JitterLink link(pair, 10, 10);
    std::uint64_t state = 12345;
    link.lose = [&](std::uint64_t) {  // one server datagram in five
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return (state >> 33) % 5 == 0;
    };
    for (int i = 0; i < 500; ++i) link.tick();
    std::size_t delivered = 0;
    pair.on_client_event = [&](Event& ev) { delivered += ev.type == EventType::receive; };
    std::uint32_t n = 0;
    int ms = 0;
    for (; ms < 60'000 && delivered < 2000; ++ms) {
      // Keep 20 messages of 500 B queued or in flight: a steady stream.
      while (n < 2000 && n - delivered < 20) {
        EXPECT_EQ(pair.server.send(pair.server_peer, 0, Delivery::reliable,
                                   tern::test::numbered_payload(n++, 500)),
                  SendResult::ok);
      }
      link.tick();
    }
    EXPECT_EQ(delivered, 2000u);
    return ms;
  };
  const int plain_ms = deliver_under_loss(false);
  const int window_ms = deliver_under_loss(true);
  // (With TCP's congestion avoidance after each timeout it took 31% longer.)
  EXPECT_LT(window_ms, plain_ms * 115 / 100) << "window " << window_ms << " ms, plain " << plain_ms;
  std::printf(
      "[fast retransmit] 2000 x 500 B at 20%% loss, 10 ms one way: %d ms with the congestion "
      "window, %d ms without\n",
      window_ms, plain_ms);
}

}  // namespace
