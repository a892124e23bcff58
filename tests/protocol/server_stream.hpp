// A server streaming one reliable 64 B message a millisecond to its client over CorePair's
// instant path, for the tests about when what is in flight is resent (test_host_min_rto.cpp,
// test_host_input_horizon.cpp): the test says, each millisecond, how datagrams move (a
// receiver that stalls, acks left unread, a datagram lost); the stream reports what arrived,
// in what order, how late the lost message was, and what the server resent.
#pragma once

#include "core_pair.hpp"
#include "host_core.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

namespace tern::test {

inline constexpr std::uint32_t kStreamMessages = 200;
inline constexpr std::uint32_t kNoLoss = ~std::uint32_t{0};

struct StreamOutcome {
  std::uint64_t retransmits = 0;
  std::uint64_t fast_retransmits = 0;
  std::uint64_t timeouts_deferred = 0;
  std::uint64_t lost_message_ms = 0;  // from its send to its delivery
  std::uint32_t delivered = 0;
  bool in_order = true;
};

// Every message arrived, once, in order.
inline void expect_complete(const StreamOutcome& o) {
  EXPECT_EQ(o.delivered, kStreamMessages);
  EXPECT_TRUE(o.in_order);
}

class ServerStream {
 public:
  explicit ServerStream(const proto::HostConfig& server_config = {})
      : pair(proto::HostConfig{}, server_config) {}

  CorePair pair;

  // The handshake, then two seconds of pings, which settle the RTT estimate at this path's
  // 1 ms; `each_ms` runs after every millisecond's exchange.
  void settle(const std::function<void()>& each_ms = [] {}) {
    pair.handshake(1);
    for (int i = 0; i < 2000; ++i) {
      pair.step(1000);
      each_ms();
    }
  }

  // Sends message `ms` for each of the first kStreamMessages milliseconds, then runs `tail_ms`
  // more. Each millisecond: the send, `before_tick(ms)`, the clock's step, then
  // `move(ms, lost)`, which moves the datagrams; `lost` says this millisecond's server output
  // carries message `lose` (sent alone, one message a millisecond) and must be dropped.
  StreamOutcome run(std::uint32_t lose, std::uint32_t tail_ms,
                    const std::function<void(std::uint32_t ms)>& before_tick,
                    const std::function<void(std::uint32_t ms, bool lost)>& move) {
    const proto::HostCounters before = pair.server.counters();
    StreamOutcome o;
    std::uint64_t lost_sent_ms = 0;
    pair.on_client_event = [&](Event& ev) {
      if (ev.type != EventType::receive) return;
      const std::uint32_t index = payload_index(ev.packet.bytes());
      o.in_order = o.in_order && index == o.delivered;
      ++o.delivered;
      if (index == lose) o.lost_message_ms = pair.now_us / 1000 - lost_sent_ms;
    };
    for (std::uint32_t ms = 0; ms < kStreamMessages + tail_ms; ++ms) {
      if (ms < kStreamMessages) {
        EXPECT_EQ(
            pair.server.send(pair.server_peer, 0, Delivery::reliable, numbered_payload(ms, 64)),
            SendResult::ok);
      }
      before_tick(ms);
      pair.now_us += 1000;
      if (ms == lose) lost_sent_ms = pair.now_us / 1000;
      move(ms, ms == lose);
    }
    pair.on_client_event = [](Event&) {};
    const proto::HostCounters& after = pair.server.counters();
    o.retransmits = after.retransmits - before.retransmits;
    o.fast_retransmits = after.fast_retransmits - before.fast_retransmits;
    o.timeouts_deferred = after.timeouts_deferred - before.timeouts_deferred;
    return o;
  }
};

}  // namespace tern::test
