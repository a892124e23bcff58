// The wire codec on its own: round trips of every command and header form, and every way a
// datagram can be cut short or malformed (DESIGN §5: decoders only read, every drop named).
#include "support.hpp"
#include "wire.hpp"
#include "wire_samples.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace tern::proto;
using tern::test::HeapBytes;
using tern::test::kAllCommands;
using tern::test::sample_command;

std::string name_of(Cmd c) { return cmd_name(c); }

// Where one command sits in a built datagram: [start, fixed_end) is the fixed part and
// [fixed_end, end) its payload.
struct Span3 {
  std::size_t start;
  std::size_t fixed_end;
  std::size_t end;
};

// Builds datagrams the way a sender does, remembering each command's boundaries so tests can
// predict what every prefix of the datagram must decode to.
class DatagramBuilder {
 public:
  DatagramBuilder(const Header& h, bool checksum) {
    bytes_.resize(header_size(h.has_sent_time, checksum));
    const std::size_t n = encode_header(bytes_, h, checksum);
    EXPECT_EQ(n, bytes_.size());
    header_end_ = n;
  }

  void add(const Command& c) {
    std::array<std::byte, 64> fixed{};
    const std::size_t n = encode_command(fixed, c);
    ASSERT_EQ(n, command_size(c.type())) << name_of(c.type());
    Span3 s{bytes_.size(), bytes_.size() + n, 0};
    bytes_.insert(bytes_.end(), fixed.begin(), fixed.begin() + static_cast<std::ptrdiff_t>(n));
    // A recognisable payload: each byte says which command and offset it belongs to.
    for (std::size_t i = 0; i < c.data_length(); ++i) {
      bytes_.push_back(static_cast<std::byte>((commands_.size() * 31 + i) & 0xff));
    }
    s.end = bytes_.size();
    spans_.push_back(s);
    commands_.push_back(c);
  }

  std::span<const std::byte> bytes() const { return bytes_; }
  std::size_t header_end() const { return header_end_; }
  const std::vector<Span3>& spans() const { return spans_; }
  const std::vector<Command>& commands() const { return commands_; }

 private:
  std::vector<std::byte> bytes_;
  std::size_t header_end_ = 0;
  std::vector<Span3> spans_;
  std::vector<Command> commands_;
};

std::vector<Command> decode_all(std::span<const std::byte> dg, std::size_t offset, bool& clean,
                                Drop& why) {
  std::vector<Command> out;
  CommandDecoder dec(dg, offset);
  Command c;
  while (dec.next(c, why)) out.push_back(c);
  clean = dec.at_end();
  return out;
}

// ---- commands ---------------------------------------------------------------------------

TEST(WireCommand, EveryCommandRoundTrips) {
  for (Cmd type : kAllCommands) {
    SCOPED_TRACE(name_of(type));
    // ENet's own flags, no flags, and both flags: the command byte is carried verbatim.
    for (std::uint8_t flags : {tern::test::enet_flags(type), std::uint8_t{0},
                               std::uint8_t(kFlagAcknowledge | kFlagUnsequenced)}) {
      const Command want = sample_command(type, flags);
      std::array<std::byte, 64> buf{};
      const std::size_t n = encode_command(buf, want);
      ASSERT_EQ(n, command_size(type));

      HeapBytes exact({buf.data(), n});
      CommandDecoder dec(exact.view(), 0);
      Command got;
      Drop why = Drop::count_;
      ASSERT_TRUE(dec.next(got, why)) << drop_name(why);
      tern::test::expect_same_fields(want, got);
      EXPECT_TRUE(got.payload.empty());
      EXPECT_TRUE(dec.at_end());
      EXPECT_FALSE(dec.next(got, why));
    }
  }
}

TEST(WireCommand, SizesMatchEnetTable) {
  // ENet's commandSizes[] (protocol.c), which libenet also uses to reject short commands.
  const std::array<std::size_t, 13> enet = {0, 8, 48, 44, 8, 4, 6, 8, 24, 8, 12, 16, 24};
  for (std::size_t i = 0; i < enet.size(); ++i) {
    EXPECT_EQ(command_size(static_cast<Cmd>(i)), enet[i]) << i;
  }
  // Tern's extensions take the last three numbers a 4-bit field has (WIRE.md, "Extensions").
  EXPECT_EQ(command_size(Cmd::tern_hello), kHelloSize);
  EXPECT_EQ(command_size(Cmd::ack_range), kAckRangeSize);
  EXPECT_EQ(command_size(Cmd::tern_ext), kTernExtSize);
  EXPECT_EQ(command_size(static_cast<Cmd>(16)), 0u);
}

TEST(WireCommand, ExtensionCommandsRoundTrip) {
  for (Cmd type : tern::test::kExtensionCommands) {
    SCOPED_TRACE(name_of(type));
    // A data length the fixed-size extensions do not read; tern_ext's payload is tested apart.
    const Command want = sample_command(type, 0, 3, type == Cmd::tern_ext ? 0 : 0x4142);
    std::array<std::byte, 64> buf{};
    ASSERT_EQ(encode_command(buf, want), command_size(type));
    EXPECT_EQ(encode_command(std::span<std::byte>(buf.data(), command_size(type) - 1), want), 0u);
    HeapBytes exact({buf.data(), command_size(type)});
    CommandDecoder dec(exact.view(), 0);
    Command got;
    Drop why = Drop::count_;
    ASSERT_TRUE(dec.next(got, why)) << drop_name(why);
    EXPECT_EQ(got.reliable_seq, want.reliable_seq);
    tern::test::expect_same_fields(want, got);
    EXPECT_FALSE(dec.next(got, why));
    EXPECT_TRUE(dec.at_end());
  }
}

TEST(WireCommand, AckRangeLayout) {
  // command 14, channel, base sequence, sent time, bitfield: all big-endian, 10 bytes.
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::ack_range);
  c.channel_id = 3;
  c.reliable_seq = 0x0102;
  c.ack_range.received_sent_time = 0x0304;
  c.ack_range.bits = 0x05060708;
  std::array<std::byte, 10> buf{};
  ASSERT_EQ(encode_command(buf, c), 10u);
  const std::array<std::uint8_t, 10> want = {14, 3, 1, 2, 3, 4, 5, 6, 7, 8};
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(static_cast<std::uint8_t>(buf[i]), want[i]) << "byte " << i;
}

TEST(WireCommand, TernExtLayoutAndPayload) {
  // command 15, channel, reliable seq, kind, flags, data length, then the kind's bytes.
  std::array<std::byte, 11> buf{};
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::tern_ext);
  c.channel_id = 0xFF;
  c.reliable_seq = 0x0102;
  c.ext.kind = static_cast<std::uint8_t>(TernExtKind::mtu_probe);
  c.ext.flags = 0;
  c.ext.data_length = 3;
  ASSERT_EQ(encode_command(buf, c), kTernExtSize);
  buf[8] = std::byte{0xA};
  buf[9] = std::byte{0xB};
  buf[10] = std::byte{0xC};
  const std::array<std::uint8_t, 8> want = {15, 0xFF, 1, 2, 3, 0, 0, 3};
  for (std::size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(static_cast<std::uint8_t>(buf[i]), want[i]) << "byte " << i;
  CommandDecoder dec(buf, 0);
  Command got;
  Drop why = Drop::count_;
  ASSERT_TRUE(dec.next(got, why)) << drop_name(why);
  ASSERT_EQ(got.payload.size(), 3u);
  EXPECT_EQ(got.payload[2], std::byte{0xC});
  EXPECT_TRUE(dec.at_end());
  // A declared length past the datagram ends it.
  CommandDecoder short_dec(std::span<const std::byte>(buf.data(), 10), 0);
  EXPECT_FALSE(short_dec.next(got, why));
  EXPECT_EQ(why, Drop::payload_past_datagram);
}

TEST(WireCommand, BigEndianFieldOrder) {
  // Spot-check the byte layout by hand, independent of libenet: a fragment command.
  const Command c = sample_command(Cmd::send_fragment, kFlagAcknowledge, 0, 0x0102);
  std::array<std::byte, 24> buf{};
  ASSERT_EQ(encode_command(buf, c), 24u);
  const std::array<std::uint8_t, 24> want = {
      0x88, 0x5A, 0xBE, 0x01,                          // command|ack, channel, reliable seq
      0x24, 0x68, 0x01, 0x02,                          // start seq, data length
      0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38,  // fragment count, number
      0x39, 0x3A, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F, 0x40,  // total length, offset
  };
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(static_cast<std::uint8_t>(buf[i]), want[i]) << "byte " << i;
  }
}

TEST(WireCommand, EncodeRefusesShortBufferAndUnknownCommands) {
  for (Cmd type : kAllCommands) {
    const Command c = sample_command(type, tern::test::enet_flags(type));
    std::array<std::byte, 64> buf{};
    const std::size_t need = command_size(type);
    EXPECT_EQ(encode_command(std::span<std::byte>(buf.data(), need - 1), c), 0u) << name_of(type);
    EXPECT_EQ(encode_command(std::span<std::byte>(buf.data(), need), c), need) << name_of(type);
  }
  for (std::uint8_t number : {0}) {
    Command c;
    c.command = number;
    std::array<std::byte, 64> buf{};
    EXPECT_EQ(encode_command(buf, c), 0u) << int(number);
  }
}

TEST(WireCommand, PayloadsFollowTheirCommands) {
  Header h;
  h.peer_id = 7;
  h.has_sent_time = true;
  h.sent_time = 0x0102;
  DatagramBuilder b(h, false);
  b.add(sample_command(Cmd::send_reliable, kFlagAcknowledge, 1, 5));
  b.add(sample_command(Cmd::acknowledge, 0, 2));
  b.add(sample_command(Cmd::send_unreliable, 0, 3, 1));
  b.add(sample_command(Cmd::send_unsequenced, kFlagUnsequenced, 4, 0));
  b.add(sample_command(Cmd::send_fragment, kFlagAcknowledge, 5, 300));
  b.add(sample_command(Cmd::send_unreliable_fragment, 0, 6, 17));

  HeapBytes dg(b.bytes());
  DecodedHeader dh;
  Drop why = Drop::count_;
  ASSERT_TRUE(decode_header(dg.view(), false, dh, why));
  bool clean = false;
  const auto got = decode_all(dg.view(), dh.size, clean, why);
  ASSERT_TRUE(clean) << drop_name(why);
  ASSERT_EQ(got.size(), b.commands().size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    tern::test::expect_same_fields(b.commands()[i], got[i]);
    const Span3& s = b.spans()[i];
    ASSERT_EQ(got[i].payload.size(), s.end - s.fixed_end);
    if (!got[i].payload.empty()) {
      // The payload is a view into the datagram, not a copy.
      EXPECT_EQ(got[i].payload.data(), dg.view().data() + s.fixed_end);
    }
  }
}

// ---- header -----------------------------------------------------------------------------

TEST(WireHeader, WithoutSentTime) {
  Header h;
  h.peer_id = 0x123;
  h.session = 1;
  std::array<std::byte, 8> buf{};
  ASSERT_EQ(encode_header(buf, h, false), 2u);
  EXPECT_EQ(static_cast<std::uint8_t>(buf[0]), 0x11);  // session 1 at bits 12..13
  EXPECT_EQ(static_cast<std::uint8_t>(buf[1]), 0x23);

  HeapBytes dg({buf.data(), 2});
  DecodedHeader dh;
  Drop why = Drop::count_;
  ASSERT_TRUE(decode_header(dg.view(), false, dh, why));
  EXPECT_EQ(dh.size, 2u);
  EXPECT_EQ(dh.header.peer_id, 0x123);
  EXPECT_EQ(dh.header.session, 1);
  EXPECT_FALSE(dh.header.has_sent_time);
  EXPECT_FALSE(dh.header.compressed);
}

TEST(WireHeader, WithSentTime) {
  Header h;
  h.peer_id = 0xABC;
  h.session = 2;
  h.has_sent_time = true;
  h.sent_time = 0xFEDC;
  std::array<std::byte, 8> buf{};
  ASSERT_EQ(encode_header(buf, h, false), 4u);
  const std::array<std::uint8_t, 4> want = {0xAA, 0xBC, 0xFE, 0xDC};  // 0x8000|0x2000|0xABC
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(static_cast<std::uint8_t>(buf[i]), want[i]);

  HeapBytes dg({buf.data(), 4});
  DecodedHeader dh;
  Drop why = Drop::count_;
  ASSERT_TRUE(decode_header(dg.view(), false, dh, why));
  EXPECT_EQ(dh.size, 4u);
  EXPECT_EQ(dh.header.peer_id, 0xABC);
  EXPECT_EQ(dh.header.session, 2);
  EXPECT_TRUE(dh.header.has_sent_time);
  EXPECT_EQ(dh.header.sent_time, 0xFEDC);
}

TEST(WireHeader, EverySessionValueRoundTrips) {
  for (std::uint8_t session = 0; session < 4; ++session) {
    for (bool sent : {false, true}) {
      Header h;
      h.peer_id = 0x7FE;
      h.session = session;
      h.has_sent_time = sent;
      h.sent_time = 99;
      std::array<std::byte, 8> buf{};
      const std::size_t n = encode_header(buf, h, false);
      HeapBytes dg({buf.data(), n});
      DecodedHeader dh;
      Drop why = Drop::count_;
      ASSERT_TRUE(decode_header(dg.view(), false, dh, why));
      EXPECT_EQ(dh.header.session, session);
      EXPECT_EQ(dh.header.peer_id, 0x7FE);
      EXPECT_EQ(dh.header.has_sent_time, sent);
    }
  }
}

TEST(WireHeader, UnassignedPeerIdCarriesNoSession) {
  // ENet only ORs the session in when the peer ID is a real one (< 0xFFF): a CONNECT goes out
  // with 0xFFF and session bits clear.
  Header h;
  h.peer_id = kMaxPeerId;
  h.session = 3;
  h.has_sent_time = true;
  std::array<std::byte, 8> buf{};
  ASSERT_EQ(encode_header(buf, h, false), 4u);
  EXPECT_EQ(static_cast<std::uint8_t>(buf[0]), 0x8F);
  EXPECT_EQ(static_cast<std::uint8_t>(buf[1]), 0xFF);
}

TEST(WireHeader, ChecksumField) {
  for (bool sent : {false, true}) {
    SCOPED_TRACE(sent);
    Header h;
    h.peer_id = 0x042;
    h.session = 3;
    h.has_sent_time = sent;
    h.sent_time = 0x1122;
    std::array<std::byte, 16> buf;
    buf.fill(std::byte{0xEE});
    const std::size_t n = encode_header(buf, h, true);
    ASSERT_EQ(n, header_size(sent, true));
    ASSERT_EQ(n, sent ? 8u : 6u);
    const std::size_t field = sent ? 4 : 2;
    for (std::size_t i = field; i < field + 4; ++i) EXPECT_EQ(buf[i], std::byte{0}) << i;

    // A transmitted checksum is read big-endian from the field.
    buf[field] = std::byte{0xA1};
    buf[field + 1] = std::byte{0xB2};
    buf[field + 2] = std::byte{0xC3};
    buf[field + 3] = std::byte{0xD4};
    HeapBytes dg({buf.data(), n});
    DecodedHeader dh;
    Drop why = Drop::count_;
    ASSERT_TRUE(decode_header(dg.view(), true, dh, why));
    EXPECT_EQ(dh.size, n);
    EXPECT_EQ(dh.checksum_offset, field);
    EXPECT_EQ(dh.checksum, 0xA1B2C3D4u);
    EXPECT_EQ(dh.header.peer_id, 0x042);
    EXPECT_EQ(dh.header.session, 3);

    // Without checksum mode the same bytes are a shorter header (the field is not signalled).
    ASSERT_TRUE(decode_header(dg.view(), false, dh, why));
    EXPECT_EQ(dh.size, field);
  }
}

TEST(WireHeader, EncodeRefusesShortBuffer) {
  Header h;
  h.has_sent_time = true;
  std::array<std::byte, 8> buf{};
  EXPECT_EQ(encode_header(std::span<std::byte>(buf.data(), 3), h, false), 0u);
  EXPECT_EQ(encode_header(std::span<std::byte>(buf.data(), 7), h, true), 0u);
  EXPECT_EQ(encode_header(std::span<std::byte>(buf.data(), 8), h, true), 8u);
}

// ---- malformed input --------------------------------------------------------------------

// What decoding a prefix of `len` bytes must produce, predicted from the builder's spans.
struct Expected {
  bool header_ok;
  std::size_t commands;  // decoded before the end or the drop
  bool clean;            // ended exactly at a command boundary
  Drop why;
};

Expected predict(const DatagramBuilder& b, std::size_t len) {
  if (len < b.header_end()) return {false, 0, false, Drop::truncated_header};
  if (len == b.header_end()) return {true, 0, true, Drop::count_};
  const auto& spans = b.spans();
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span3& s = spans[i];
    if (len == s.end) return {true, i + 1, true, Drop::count_};
    if (len < s.end) {
      return {true, i, false,
              len < s.fixed_end ? Drop::truncated_command : Drop::payload_past_datagram};
    }
  }
  ADD_FAILURE() << "prefix longer than the datagram";
  return {};
}

void check_every_prefix(const DatagramBuilder& b, bool checksum) {
  const auto full = b.bytes();
  for (std::size_t len = 0; len <= full.size(); ++len) {
    SCOPED_TRACE("prefix length " + std::to_string(len));
    const Expected want = predict(b, len);
    HeapBytes dg(full.first(len));
    DecodedHeader dh;
    Drop why = Drop::count_;
    const bool ok = decode_header(dg.view(), checksum, dh, why);
    ASSERT_EQ(ok, want.header_ok);
    if (!ok) {
      EXPECT_EQ(why, want.why) << drop_name(why);
      continue;
    }
    ASSERT_EQ(dh.size, b.header_end());
    why = Drop::count_;
    bool clean = false;
    const auto got = decode_all(dg.view(), dh.size, clean, why);
    EXPECT_EQ(got.size(), want.commands);
    EXPECT_EQ(clean, want.clean);
    if (!want.clean) {
      EXPECT_EQ(why, want.why) << "got " << drop_name(why);
    }
    for (std::size_t i = 0; i < got.size() && i < b.commands().size(); ++i) {
      tern::test::expect_same_fields(b.commands()[i], got[i]);
    }
  }
}

DatagramBuilder mixed_datagram(bool sent_time, bool checksum) {
  Header h;
  h.peer_id = 0x321;
  h.session = 1;
  h.has_sent_time = sent_time;
  h.sent_time = 4242;
  DatagramBuilder b(h, checksum);
  b.add(sample_command(Cmd::acknowledge, 0, 1));
  b.add(sample_command(Cmd::send_reliable, kFlagAcknowledge, 2, 5));
  b.add(sample_command(Cmd::ping, kFlagAcknowledge, 3));
  b.add(sample_command(Cmd::send_fragment, kFlagAcknowledge, 4, 9));
  b.add(sample_command(Cmd::send_unsequenced, kFlagUnsequenced, 5, 0));  // no payload
  b.add(sample_command(Cmd::connect, kFlagAcknowledge, 6));
  b.add(sample_command(Cmd::send_unreliable, 0, 7, 3));
  b.add(sample_command(Cmd::verify_connect, kFlagAcknowledge, 8));
  b.add(sample_command(Cmd::disconnect, kFlagAcknowledge, 9));
  b.add(sample_command(Cmd::bandwidth_limit, kFlagAcknowledge, 10));
  b.add(sample_command(Cmd::throttle_configure, kFlagAcknowledge, 11));
  b.add(sample_command(Cmd::send_unreliable_fragment, 0, 12, 2));
  return b;
}

TEST(WireMalformed, EveryTruncationPointHasTheRightDrop) {
  for (bool sent : {false, true}) {
    for (bool checksum : {false, true}) {
      SCOPED_TRACE(std::string("sent_time=") + (sent ? "1" : "0") +
                   " checksum=" + (checksum ? "1" : "0"));
      const DatagramBuilder b = mixed_datagram(sent, checksum);
      check_every_prefix(b, checksum);
    }
  }
}

TEST(WireMalformed, UnknownCommandNumbers) {
  // 0 is the only number a 4-bit command field leaves unknown (13..15 are Tern's).
  for (std::uint8_t number : {0}) {
    for (std::uint8_t flags : {std::uint8_t{0}, kFlagAcknowledge, kFlagUnsequenced}) {
      SCOPED_TRACE(int(number | flags));
      Header h;
      h.peer_id = 1;
      DatagramBuilder b(h, false);
      b.add(sample_command(Cmd::ping, kFlagAcknowledge, 0));
      std::vector<std::byte> bytes(b.bytes().begin(), b.bytes().end());
      // An unknown command followed by plenty of bytes: size is not the reason it stops.
      bytes.push_back(static_cast<std::byte>(number | flags));
      bytes.insert(bytes.end(), 60, std::byte{0});
      HeapBytes dg(bytes);
      DecodedHeader dh;
      Drop why = Drop::count_;
      ASSERT_TRUE(decode_header(dg.view(), false, dh, why));
      bool clean = true;
      const auto got = decode_all(dg.view(), dh.size, clean, why);
      EXPECT_EQ(got.size(), 1u);  // the ping before it still decodes, as in ENet
      EXPECT_FALSE(clean);
      EXPECT_EQ(why, Drop::unknown_command) << drop_name(why);
    }
  }
}

TEST(WireMalformed, UnknownCommandInShortTail) {
  // Fewer bytes than a command header: truncation is reported before the number is looked at.
  const std::array<std::byte, 5> bytes = {std::byte{0x00}, std::byte{0x01}, std::byte{13},
                                          std::byte{0}, std::byte{0}};
  HeapBytes dg(bytes);
  CommandDecoder dec(dg.view(), 2);
  Command c;
  Drop why = Drop::count_;
  EXPECT_FALSE(dec.next(c, why));
  EXPECT_EQ(why, Drop::truncated_command);
}

TEST(WireMalformed, CommandHeaderAloneIsNotACleanEnd) {
  // The contract: a malformed command makes next() return false with `why` set and at_end()
  // false; only a clean end has at_end() true. Callers count the drop by asking at_end(), so
  // a datagram ending right after a 4-byte command header must not look clean.
  const std::array<std::byte, 6> reliable_header_only = {
      std::byte{0x00}, std::byte{0x01},                                    // peer 1
      std::byte{0x86}, std::byte{0x00}, std::byte{0x00}, std::byte{0x01},  // send_reliable|ack
  };
  const std::array<std::byte, 6> unknown_header_only = {
      std::byte{0x00}, std::byte{0x01}, std::byte{0x0D},
      std::byte{0x00}, std::byte{0x00}, std::byte{0x01},
  };
  for (const auto& bytes : {reliable_header_only, unknown_header_only}) {
    HeapBytes dg(bytes);
    CommandDecoder dec(dg.view(), 2);
    Command c;
    Drop why = Drop::count_;
    EXPECT_FALSE(dec.next(c, why));
    EXPECT_NE(why, Drop::count_);
    EXPECT_FALSE(dec.at_end()) << "decoder reports a clean end after " << drop_name(why);
  }
}

TEST(WireMalformed, OversizeDatagram) {
  std::vector<std::byte> bytes(kMaxMtu + 1, std::byte{0});
  bytes[0] = std::byte{0x80};  // a plausible header with sent time
  for (bool checksum : {false, true}) {
    HeapBytes dg(bytes);
    DecodedHeader dh;
    Drop why = Drop::count_;
    EXPECT_FALSE(decode_header(dg.view(), checksum, dh, why));
    EXPECT_EQ(why, Drop::oversize_datagram);
  }
  // Exactly the maximum MTU is still a datagram.
  bytes.pop_back();
  HeapBytes dg(bytes);
  DecodedHeader dh;
  Drop why = Drop::count_;
  EXPECT_TRUE(decode_header(dg.view(), true, dh, why)) << drop_name(why);
}

TEST(WireMalformed, CompressedFlag) {
  for (bool sent : {false, true}) {
    for (bool checksum : {false, true}) {
      Header h;
      h.peer_id = 5;
      h.compressed = true;
      h.has_sent_time = sent;
      DatagramBuilder b(h, checksum);
      b.add(sample_command(Cmd::ping, kFlagAcknowledge, 0));
      EXPECT_NE(static_cast<std::uint8_t>(b.bytes()[0]) & 0x40, 0);
      HeapBytes dg(b.bytes());
      DecodedHeader dh;
      Drop why = Drop::count_;
      EXPECT_FALSE(decode_header(dg.view(), checksum, dh, why));
      EXPECT_EQ(why, Drop::compressed) << drop_name(why);
    }
  }
}

TEST(WireMalformed, DataLengthBeyondDatagram) {
  // A send command whose declared length exceeds the rest by one byte, at every payload size.
  for (std::uint16_t len : {1, 2, 100, 1395, 65535}) {
    Header h;
    h.peer_id = 2;
    DatagramBuilder b(h, false);
    b.add(sample_command(Cmd::send_unreliable, 0, 0, len));
    std::vector<std::byte> bytes(b.bytes().begin(), b.bytes().end());
    ASSERT_FALSE(bytes.empty()) << len;
    if (bytes.size() > kMaxMtu)
      bytes.resize(kMaxMtu);
    else
      bytes.pop_back();
    HeapBytes dg(bytes);
    CommandDecoder dec(dg.view(), 2);
    Command c;
    Drop why = Drop::count_;
    EXPECT_FALSE(dec.next(c, why)) << len;
    EXPECT_EQ(why, Drop::payload_past_datagram) << len;
  }
}

TEST(WireSeq, WindowOfSequence) {
  EXPECT_EQ(seq_window(0), 0);
  EXPECT_EQ(seq_window(4095), 0);
  EXPECT_EQ(seq_window(4096), 1);
  EXPECT_EQ(seq_window(65535), 15);
}

TEST(WireNames, EveryDropHasANameAndText) {
  for (std::size_t i = 0; i < kDropCount; ++i) {
    const auto d = static_cast<Drop>(i);
    EXPECT_STRNE(drop_name(d), "unknown") << i;
    EXPECT_STRNE(drop_description(d), "unknown") << i;
  }
  for (Cmd c : kAllCommands) EXPECT_STRNE(cmd_name(c), "unknown");
}

}  // namespace
