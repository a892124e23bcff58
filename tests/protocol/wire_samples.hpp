// One sample of each of the 12 ENet commands and the 2 Tern extensions, with field values whose
// bytes all differ, so a swapped, shifted or dropped byte shows up in a comparison.
#pragma once

#include "wire.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>

namespace tern::test {

// ENet's twelve commands (the ones libenet can be compared with).
inline constexpr std::array<proto::Cmd, 12> kAllCommands = {
    proto::Cmd::acknowledge,
    proto::Cmd::connect,
    proto::Cmd::verify_connect,
    proto::Cmd::disconnect,
    proto::Cmd::ping,
    proto::Cmd::send_reliable,
    proto::Cmd::send_unreliable,
    proto::Cmd::send_fragment,
    proto::Cmd::send_unsequenced,
    proto::Cmd::bandwidth_limit,
    proto::Cmd::throttle_configure,
    proto::Cmd::send_unreliable_fragment,
};
// Tern's extension commands.
inline constexpr std::array<proto::Cmd, 3> kExtensionCommands = {
    proto::Cmd::tern_hello, proto::Cmd::ack_range, proto::Cmd::tern_ext};

// The flags ENet itself puts on each command; the codec must carry any flags, but these are
// the combinations a real peer sends.
inline std::uint8_t enet_flags(proto::Cmd c) {
  using proto::Cmd;
  switch (c) {
    case Cmd::send_unsequenced: return proto::kFlagUnsequenced;
    case Cmd::acknowledge:
    case Cmd::send_unreliable:
    case Cmd::send_unreliable_fragment: return 0;
    default: return proto::kFlagAcknowledge;
  }
}

// `salt` varies the values so several samples of one command in a datagram stay distinct.
// send_* commands declare `data_length` payload bytes; the caller appends them.
inline proto::Command sample_command(proto::Cmd type, std::uint8_t flags, std::uint8_t salt = 0,
                                     std::uint16_t data_length = 0) {
  using proto::Cmd;
  proto::Command c;
  c.command = static_cast<std::uint8_t>(static_cast<std::uint8_t>(type) | flags);
  c.channel_id = static_cast<std::uint8_t>(0x5A ^ salt);
  c.reliable_seq = static_cast<std::uint16_t>(0xBE01 + salt);
  const std::uint32_t s = salt;
  switch (type) {
    case Cmd::acknowledge:
      c.ack.received_reliable_seq = static_cast<std::uint16_t>(0x1234 + s);
      c.ack.received_sent_time = static_cast<std::uint16_t>(0x5678 + s);
      break;
    case Cmd::connect:
    case Cmd::verify_connect:
      c.connect.outgoing_peer_id = static_cast<std::uint16_t>(0x0ABC + s);
      c.connect.incoming_session = static_cast<std::uint8_t>(0xD1 + s);
      c.connect.outgoing_session = static_cast<std::uint8_t>(0xE2 + s);
      c.connect.mtu = 0x01020304u + s;
      c.connect.window_size = 0x05060708u + s;
      c.connect.channel_count = 0x090A0B0Cu + s;
      c.connect.incoming_bandwidth = 0x0D0E0F10u + s;
      c.connect.outgoing_bandwidth = 0x11121314u + s;
      c.connect.throttle_interval = 0x15161718u + s;
      c.connect.throttle_acceleration = 0x191A1B1Cu + s;
      c.connect.throttle_deceleration = 0x1D1E1F20u + s;
      c.connect.connect_id = 0x21222324u + s;
      // verify_connect has no data field: the decoder reports 0, so the sample does too.
      c.connect.data = type == Cmd::connect ? 0x25262728u + s : 0;
      break;
    case Cmd::disconnect: c.disconnect.data = 0xCAFEF00Du + s; break;
    case Cmd::ping: break;
    case Cmd::send_reliable: c.reliable.data_length = data_length; break;
    case Cmd::send_unreliable:
      c.unreliable.unreliable_seq = static_cast<std::uint16_t>(0x4321 + s);
      c.unreliable.data_length = data_length;
      break;
    case Cmd::send_unsequenced:
      c.unsequenced.unsequenced_group = static_cast<std::uint16_t>(0x8765 + s);
      c.unsequenced.data_length = data_length;
      break;
    case Cmd::send_fragment:
    case Cmd::send_unreliable_fragment:
      c.fragment.start_seq = static_cast<std::uint16_t>(0x2468 + s);
      c.fragment.data_length = data_length;
      c.fragment.fragment_count = 0x31323334u + s;
      c.fragment.fragment_number = 0x35363738u + s;
      c.fragment.total_length = 0x393A3B3Cu + s;
      c.fragment.fragment_offset = 0x3D3E3F40u + s;
      break;
    case Cmd::bandwidth_limit:
      c.bandwidth.incoming_bandwidth = 0x41424344u + s;
      c.bandwidth.outgoing_bandwidth = 0x45464748u + s;
      break;
    case Cmd::throttle_configure:
      c.throttle.interval = 0x494A4B4Cu + s;
      c.throttle.acceleration = 0x4D4E4F50u + s;
      c.throttle.deceleration = 0x51525354u + s;
      break;
    case Cmd::tern_hello: c.hello.features = 0x55565758u + s; break;
    case Cmd::ack_range:
      c.ack_range.received_sent_time = static_cast<std::uint16_t>(0x595A + s);
      c.ack_range.bits = 0x5B5C5D5Eu + s;
      break;
    case Cmd::tern_ext:
      c.ext.kind = static_cast<std::uint8_t>(0x5F + s);
      c.ext.flags = static_cast<std::uint8_t>(0x60 + s);
      c.ext.data_length = data_length;
      break;
    case Cmd::none: break;
  }
  return c;
}

// Field-by-field equality of two commands of the same type (payload spans excluded).
inline void expect_same_fields(const proto::Command& want, const proto::Command& got) {
  using proto::Cmd;
  EXPECT_EQ(want.command, got.command);
  EXPECT_EQ(want.channel_id, got.channel_id);
  EXPECT_EQ(want.reliable_seq, got.reliable_seq);
  ASSERT_EQ(want.type(), got.type());
  switch (want.type()) {
    case Cmd::acknowledge:
      EXPECT_EQ(want.ack.received_reliable_seq, got.ack.received_reliable_seq);
      EXPECT_EQ(want.ack.received_sent_time, got.ack.received_sent_time);
      break;
    case Cmd::connect:
    case Cmd::verify_connect:
      EXPECT_EQ(want.connect.outgoing_peer_id, got.connect.outgoing_peer_id);
      EXPECT_EQ(want.connect.incoming_session, got.connect.incoming_session);
      EXPECT_EQ(want.connect.outgoing_session, got.connect.outgoing_session);
      EXPECT_EQ(want.connect.mtu, got.connect.mtu);
      EXPECT_EQ(want.connect.window_size, got.connect.window_size);
      EXPECT_EQ(want.connect.channel_count, got.connect.channel_count);
      EXPECT_EQ(want.connect.incoming_bandwidth, got.connect.incoming_bandwidth);
      EXPECT_EQ(want.connect.outgoing_bandwidth, got.connect.outgoing_bandwidth);
      EXPECT_EQ(want.connect.throttle_interval, got.connect.throttle_interval);
      EXPECT_EQ(want.connect.throttle_acceleration, got.connect.throttle_acceleration);
      EXPECT_EQ(want.connect.throttle_deceleration, got.connect.throttle_deceleration);
      EXPECT_EQ(want.connect.connect_id, got.connect.connect_id);
      EXPECT_EQ(want.connect.data, got.connect.data);
      break;
    case Cmd::disconnect: EXPECT_EQ(want.disconnect.data, got.disconnect.data); break;
    case Cmd::ping: break;
    case Cmd::send_reliable: EXPECT_EQ(want.reliable.data_length, got.reliable.data_length); break;
    case Cmd::send_unreliable:
      EXPECT_EQ(want.unreliable.unreliable_seq, got.unreliable.unreliable_seq);
      EXPECT_EQ(want.unreliable.data_length, got.unreliable.data_length);
      break;
    case Cmd::send_unsequenced:
      EXPECT_EQ(want.unsequenced.unsequenced_group, got.unsequenced.unsequenced_group);
      EXPECT_EQ(want.unsequenced.data_length, got.unsequenced.data_length);
      break;
    case Cmd::send_fragment:
    case Cmd::send_unreliable_fragment:
      EXPECT_EQ(want.fragment.start_seq, got.fragment.start_seq);
      EXPECT_EQ(want.fragment.data_length, got.fragment.data_length);
      EXPECT_EQ(want.fragment.fragment_count, got.fragment.fragment_count);
      EXPECT_EQ(want.fragment.fragment_number, got.fragment.fragment_number);
      EXPECT_EQ(want.fragment.total_length, got.fragment.total_length);
      EXPECT_EQ(want.fragment.fragment_offset, got.fragment.fragment_offset);
      break;
    case Cmd::bandwidth_limit:
      EXPECT_EQ(want.bandwidth.incoming_bandwidth, got.bandwidth.incoming_bandwidth);
      EXPECT_EQ(want.bandwidth.outgoing_bandwidth, got.bandwidth.outgoing_bandwidth);
      break;
    case Cmd::throttle_configure:
      EXPECT_EQ(want.throttle.interval, got.throttle.interval);
      EXPECT_EQ(want.throttle.acceleration, got.throttle.acceleration);
      EXPECT_EQ(want.throttle.deceleration, got.throttle.deceleration);
      break;
    case Cmd::tern_hello: EXPECT_EQ(want.hello.features, got.hello.features); break;
    case Cmd::ack_range:
      EXPECT_EQ(want.ack_range.received_sent_time, got.ack_range.received_sent_time);
      EXPECT_EQ(want.ack_range.bits, got.ack_range.bits);
      break;
    case Cmd::tern_ext:
      EXPECT_EQ(want.ext.kind, got.ext.kind);
      EXPECT_EQ(want.ext.flags, got.ext.flags);
      EXPECT_EQ(want.ext.data_length, got.ext.data_length);
      break;
    case Cmd::none: ADD_FAILURE() << "not a command"; break;
  }
}

}  // namespace tern::test
