// HostCore::input_read_until: a runtime reading behind its input has acks waiting unread in
// its own queue. Judged by the clock, what they acknowledge times out and is resent (and each
// resend earns another ack to read); judged at the time up to which the input was read, it is
// not. A loss is still repaired, and a runtime that stops telling cannot hold timeouts off
// for more than kMaxInputLagMs.
#include "host_core.hpp"
#include "server_stream.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;
using tern::test::expect_complete;
using tern::test::kNoLoss;
using tern::test::kStreamMessages;
using tern::test::ServerStream;
using tern::test::StreamOutcome;

constexpr std::uint32_t kMessages = kStreamMessages;

enum class Horizon {
  untold,  // the runtime never calls input_read_until: the clock
  read,    // told after every receive that found the input empty
  frozen,  // told until message 100, then never again
};

// The server streams a message a millisecond (server_stream.hpp). For `unread_ms` from message
// 100 on, the client's datagrams (its acks) wait in the server's input unread, then are all
// read at once. When `lose` names a message, the datagram carrying it is lost.
StreamOutcome run(Horizon horizon, std::uint32_t unread_ms, std::uint32_t lose,
                  std::uint32_t tail_ms = 3000) {
  ServerStream stream;
  CorePair& pair = stream.pair;
  stream.settle([&] {
    if (horizon != Horizon::untold) pair.server.input_read_until(pair.now_us);
  });
  std::vector<OutDatagram> out(64);
  std::vector<std::vector<std::byte>> unread;
  std::uint32_t unread_left = 0;
  bool frozen = false;
  const auto before_tick = [&](std::uint32_t ms) {
    if (ms == 100) {
      unread_left = unread_ms;
      frozen = horizon == Horizon::frozen;
    }
  };
  const auto move = [&](std::uint32_t, bool lost) {
    // The server's receive step: the client's datagrams, read now or left in its input.
    for (std::size_t n = out.size(); n == out.size();) {
      n = pair.client.flush(pair.now_us, out);
      for (std::size_t i = 0; i < n; ++i) {
        const auto bytes = out[i].view();
        if (unread_left > 0) {
          unread.emplace_back(bytes.begin(), bytes.end());
        } else {
          pair.server.on_datagram(pair.now_us, pair.client_ep, bytes);
        }
      }
    }
    if (unread_left > 0 && --unread_left == 0) {
      for (const auto& d : unread) pair.server.on_datagram(pair.now_us, pair.client_ep, d);
      unread.clear();
    }
    if (horizon != Horizon::untold && unread_left == 0 && !frozen) {
      pair.server.input_read_until(pair.now_us);
    }
    // The server's transmit step.
    if (lost) {
      pair.take_server_output();
    } else {
      pair.server_output_to_client();
    }
    pair.drain();
  };
  return stream.run(lose, tail_ms, before_tick, move);
}

TEST(HostInputHorizon, AcksWaitingUnreadAreNotTakenForLoss) {
  const StreamOutcome clock = run(Horizon::untold, 20, kNoLoss);
  const StreamOutcome read = run(Horizon::read, 20, kNoLoss);
  expect_complete(clock);
  expect_complete(read);
  // The premise: judged by the clock, 20 ms of unread acks time out what they acknowledge.
  EXPECT_GE(clock.retransmits, 1u);
  EXPECT_EQ(clock.timeouts_deferred, 0u);
  EXPECT_EQ(read.retransmits, 0u);
  EXPECT_GE(read.timeouts_deferred, 1u);
  std::printf(
      "[input horizon] 20 ms of unread acks: %llu resends by the clock, %llu (%llu "
      "timeouts put off) by the input read\n",
      static_cast<unsigned long long>(clock.retransmits),
      static_cast<unsigned long long>(read.retransmits),
      static_cast<unsigned long long>(read.timeouts_deferred));
}

TEST(HostInputHorizon, ALossIsStillRepairedWhileTheInputIsRead) {
  const StreamOutcome o = run(Horizon::read, 0, kMessages - 1);
  expect_complete(o);
  EXPECT_EQ(o.retransmits, 1u);
  EXPECT_EQ(o.timeouts_deferred, 0u);
  EXPECT_LT(o.lost_message_ms, 100u);
}

// A runtime that stops telling (its input never found empty again) holds timeouts off for at
// most kMaxInputLagMs: the loss is repaired then, and a dead peer would time out.
TEST(HostInputHorizon, AFrozenHorizonHoldsTimeoutsOffForABoundedTime) {
  const StreamOutcome o = run(Horizon::frozen, 0, kMessages - 1, HostCore::kMaxInputLagMs + 3000);
  expect_complete(o);
  EXPECT_GE(o.retransmits, 1u);
  EXPECT_GE(o.timeouts_deferred, 1u);
  EXPECT_GE(o.lost_message_ms, HostCore::kMaxInputLagMs - 200);
  EXPECT_LE(o.lost_message_ms, HostCore::kMaxInputLagMs + 200);
}

}  // namespace
