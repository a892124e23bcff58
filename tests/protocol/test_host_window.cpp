// Reliable receive-window edges. After a real handshake the test impersonates the client:
// hand-crafted SEND_RELIABLE datagrams carry the header (peer ID, session) the real client
// uses, with sequence numbers just inside and just outside the receive window.
//
// The rules under test (engine/protocol/WIRE.md, "Reliable delivery", after libenet's
// enet_peer_queue_incoming_command): 16 windows of 4096 sequence numbers; a receiver accepts
// a sequence number in the current window or the next six, ahead of the last delivered one.
// Anything behind it (the last delivered itself included, and anything already held) is a
// `duplicate` and is still acknowledged, so the sender stops retransmitting; anything further
// ahead is `out_of_window` and is not acknowledged.
#include "core_pair.hpp"
#include "host_core.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
using tern::test::CorePair;

constexpr std::uint8_t kChannel = 0;
constexpr std::uint32_t kWindow = kReliableWindowSize;

class ReliableWindow : public ::testing::Test {
 protected:
  void SetUp() override {
    pair_.on_server_event = [this](Event& ev) {
      if (ev.type == EventType::receive) {
        EXPECT_EQ(ev.channel, kChannel);
        delivered_.push_back(tern::test::payload_index(ev.packet.bytes()));
      }
      if (ev.type == EventType::disconnect) disconnected_ = true;
    };
    pair_.handshake(2);
    ASSERT_FALSE(HasFatalFailure());
    DecodedHeader dh;
    Drop why = Drop::count_;
    ASSERT_TRUE(decode_header(pair_.last_client_datagram, false, dh, why)) << drop_name(why);
    header_ = dh.header;
    ASSERT_NE(header_.peer_id, kMaxPeerId);
    header_.has_sent_time = true;
    pair_.take_server_output();
    delivered_.clear();
  }

  // One datagram with a SEND_RELIABLE per sequence number (taken mod 65536); each payload
  // carries the 16-bit sequence it was sent with.
  void inject(std::initializer_list<std::uint32_t> seqs) {
    inject(std::vector<std::uint32_t>(seqs));
  }
  void inject(const std::vector<std::uint32_t>& seqs) {
    std::vector<std::byte> dg(kMaxMtu);
    header_.sent_time = static_cast<std::uint16_t>(pair_.now_us / 1000);
    std::size_t at = encode_header(dg, header_, false);
    ASSERT_GT(at, 0u);
    for (std::uint32_t seq : seqs) {
      Command c;
      c.command = static_cast<std::uint8_t>(Cmd::send_reliable) | kFlagAcknowledge;
      c.channel_id = kChannel;
      c.reliable_seq = static_cast<std::uint16_t>(seq);
      c.reliable.data_length = 4;
      const std::size_t n = encode_command(std::span<std::byte>(dg).subspan(at), c);
      ASSERT_EQ(n, command_size(Cmd::send_reliable));
      at += n;
      const auto payload = tern::test::numbered_payload(seq & 0xFFFF, 4);
      ASSERT_LE(at + payload.size(), dg.size());
      std::copy(payload.begin(), payload.end(), dg.begin() + static_cast<std::ptrdiff_t>(at));
      at += payload.size();
    }
    dg.resize(at);
    pair_.server.on_datagram(pair_.now_us, pair_.client_ep, dg);
    pair_.drain();
    // The server's answer is read for acknowledgements, then dropped: the real client is not
    // told about commands it never sent.
    acked_.clear();
    for (const auto& out : pair_.take_server_output()) {
      DecodedHeader dh;
      Drop why = Drop::count_;
      ASSERT_TRUE(decode_header(out, false, dh, why)) << drop_name(why);
      CommandDecoder dec(out, dh.size);
      Command c;
      while (dec.next(c, why)) {
        if (c.type() == Cmd::acknowledge && c.channel_id == kChannel) {
          acked_.push_back(c.ack.received_reliable_seq);
        }
        // Both cores are Tern's, so the acks come as selective-ack ranges.
        if (c.type() == Cmd::ack_range && c.channel_id == kChannel) {
          acked_.push_back(c.reliable_seq);
          for (std::uint32_t i = 0; i < 32; ++i) {
            if ((c.ack_range.bits >> i) & 1u)
              acked_.push_back(static_cast<std::uint16_t>(c.reliable_seq + 1 + i));
          }
        }
      }
    }
  }

  // Whether the server acknowledged `seq` in answer to the last injected datagram.
  bool acked(std::uint32_t seq) const {
    return std::find(acked_.begin(), acked_.end(), static_cast<std::uint16_t>(seq)) != acked_.end();
  }

  // Delivers first..last in order, packed 100 commands to a datagram.
  void deliver_range(std::uint32_t first, std::uint32_t last) {
    std::vector<std::uint32_t> batch;
    for (std::uint32_t s = first; s <= last; ++s) {
      batch.push_back(s);
      if (batch.size() == 100 || s == last) {
        inject(batch);
        batch.clear();
      }
    }
  }

  std::uint64_t drops(Drop d) const { return pair_.server.counters().drops[d]; }

  CorePair pair_;
  Header header_;
  std::vector<std::uint32_t> delivered_;
  std::vector<std::uint16_t> acked_;
  bool disconnected_ = false;
};

// Runs `body` and checks the drop counters moved by exactly the given amounts.
#define EXPECT_DROPS(body, dup, oow)                                                      \
  do {                                                                                    \
    const std::uint64_t dup0 = drops(Drop::duplicate), oow0 = drops(Drop::out_of_window); \
    const std::uint64_t total0 = pair_.server.counters().drops.total();                   \
    body;                                                                                 \
    EXPECT_EQ(drops(Drop::duplicate) - dup0, std::uint64_t{dup}) << "duplicate";          \
    EXPECT_EQ(drops(Drop::out_of_window) - oow0, std::uint64_t{oow}) << "out_of_window";  \
    EXPECT_EQ(pair_.server.counters().drops.total() - total0, std::uint64_t{dup} + (oow)) \
        << "other drops";                                                                 \
  } while (0)

TEST_F(ReliableWindow, NextExpectedIsDeliveredAndRepeatsAreDuplicates) {
  // Nothing delivered yet on the channel: the last delivered sequence is 0.
  EXPECT_DROPS(inject({0}), 1, 0);
  EXPECT_TRUE(acked(0));
  EXPECT_TRUE(delivered_.empty());
  EXPECT_DROPS(inject({1}), 0, 0);
  EXPECT_TRUE(acked(1));
  EXPECT_EQ(delivered_, (std::vector<std::uint32_t>{1}));
  EXPECT_DROPS(inject({1}), 1, 0);
  EXPECT_TRUE(acked(1)) << "a duplicate is acknowledged again";
  EXPECT_EQ(delivered_.size(), 1u);

  // Out of order: 3 waits for 2; a second 3 while it waits is a duplicate.
  EXPECT_DROPS(inject({3}), 0, 0);
  EXPECT_TRUE(acked(3));
  EXPECT_EQ(delivered_.size(), 1u);
  EXPECT_DROPS(inject({3}), 1, 0);
  EXPECT_DROPS(inject({2}), 0, 0);
  EXPECT_EQ(delivered_, (std::vector<std::uint32_t>{1, 2, 3}));
  EXPECT_FALSE(disconnected_);
}

TEST_F(ReliableWindow, FirstWindowEdges) {
  // Current window 0: windows 0..6 are accepted, window 7 (from 28672) is not.
  EXPECT_DROPS(inject({7 * kWindow}), 0, 1);
  EXPECT_FALSE(acked(7 * kWindow));
  EXPECT_DROPS(inject({7 * kWindow + 1}), 0, 1);
  EXPECT_DROPS(inject({8 * kWindow - 1}), 0, 1);
  EXPECT_FALSE(acked(8 * kWindow - 1));
  // 65535 is the sequence just before 0: behind, not ahead.
  EXPECT_DROPS(inject({65535}), 1, 0);
  EXPECT_TRUE(acked(65535));

  const std::size_t buffered0 = pair_.server.counters().buffered_bytes;
  EXPECT_DROPS(inject({7 * kWindow - 1}), 0, 0);  // last sequence of window 6: held
  EXPECT_TRUE(acked(7 * kWindow - 1));
  EXPECT_TRUE(delivered_.empty());
  EXPECT_GT(pair_.server.counters().buffered_bytes, buffered0);
  EXPECT_DROPS(inject({7 * kWindow - 1}), 1, 0);
  EXPECT_DROPS(inject({1}), 0, 0);
  EXPECT_EQ(delivered_, (std::vector<std::uint32_t>{1}));
}

TEST_F(ReliableWindow, EdgesMoveWithDelivery) {
  deliver_range(1, 5000);  // last delivered 5000, current window 1
  ASSERT_EQ(delivered_.size(), 5000u);
  for (std::uint32_t i = 0; i < delivered_.size(); ++i) ASSERT_EQ(delivered_[i], i + 1);
  delivered_.clear();

  EXPECT_DROPS(inject({100}), 1, 0);  // window 0: behind
  EXPECT_TRUE(acked(100));
  EXPECT_DROPS(inject({4999}), 1, 0);         // just below the last delivered
  EXPECT_DROPS(inject({kWindow}), 1, 0);      // first of the current window, already past
  EXPECT_DROPS(inject({5000}), 1, 0);         // the last delivered itself
  EXPECT_DROPS(inject({8 * kWindow}), 0, 1);  // window 8 = current + 7
  EXPECT_FALSE(acked(8 * kWindow));
  EXPECT_DROPS(inject({8 * kWindow - 1}), 0, 0);  // window 7: held
  EXPECT_TRUE(acked(8 * kWindow - 1));
  EXPECT_TRUE(delivered_.empty());
  EXPECT_DROPS(inject({5001}), 0, 0);
  EXPECT_EQ(delivered_, (std::vector<std::uint32_t>{5001}));
}

TEST_F(ReliableWindow, CommandCutAfterItsHeaderIsCounted) {
  // A datagram whose last command stops right after its 4-byte command header is malformed
  // (WIRE.md: `truncated_command`) and must be counted like any other refusal.
  std::vector<std::byte> dg(8);
  header_.sent_time = static_cast<std::uint16_t>(pair_.now_us / 1000);
  ASSERT_EQ(encode_header(dg, header_, false), 4u);
  dg[4] = std::byte{static_cast<std::uint8_t>(Cmd::send_reliable) | kFlagAcknowledge};
  dg[5] = std::byte{kChannel};
  dg[6] = std::byte{0};
  dg[7] = std::byte{1};
  const std::uint64_t before = drops(Drop::truncated_command);
  const std::uint64_t total = pair_.server.counters().drops.total();
  pair_.server.on_datagram(pair_.now_us, pair_.client_ep, dg);
  EXPECT_EQ(drops(Drop::truncated_command) - before, 1u);
  EXPECT_EQ(pair_.server.counters().drops.total() - total, 1u);
  pair_.drain();
  EXPECT_TRUE(delivered_.empty());
}

TEST_F(ReliableWindow, WindowsWrapPast65535) {
  // Last delivered 61500 (window 15): windows 15 and 0..5 (next lap) are ahead, 6 is not.
  deliver_range(1, 61500);
  ASSERT_EQ(delivered_.size(), 61500u);
  ASSERT_EQ(delivered_.back(), 61500u);
  delivered_.clear();

  EXPECT_DROPS(inject({6 * kWindow}), 0, 1);  // 16 + 6 = 22 = current + 7
  EXPECT_FALSE(acked(6 * kWindow));
  EXPECT_DROPS(inject({6 * kWindow - 1}), 0, 0);  // 16 + 5: held
  EXPECT_DROPS(inject({100}), 0, 0);              // next lap, window 0: held
  EXPECT_DROPS(inject({100}), 1, 0);
  EXPECT_DROPS(inject({14 * kWindow}), 1, 0);  // window 14: behind
  EXPECT_TRUE(delivered_.empty());

  // Fill the gap across 65535 -> 0; everything up to 100 comes out in order.
  deliver_range(61501, 65535 + 101);
  ASSERT_FALSE(delivered_.empty());
  for (std::size_t i = 0; i < delivered_.size(); ++i) {
    ASSERT_EQ(delivered_[i], (61501 + i) & 0xFFFF) << "position " << i;
  }
  EXPECT_EQ(delivered_.back(), 100u);
  EXPECT_EQ(delivered_.size(), 65535u + 101 - 61501 + 1);
  EXPECT_FALSE(disconnected_);
}

}  // namespace
