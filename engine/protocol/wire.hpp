// The ENet 1.3 wire format: protocol header, the 12 commands, and CRC32 (see WIRE.md).
//
// Decoders read through a bounds-checked Reader into plain structs and never touch the input;
// every refusal is a named Drop. All multi-byte fields are big-endian on the wire.
#pragma once

#include "drop.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace tern::proto {

// Constants fixed by ENet 1.3 (enet/protocol.h, enet/enet.h).
inline constexpr std::uint32_t kMinMtu = 576;
inline constexpr std::uint32_t kMaxMtu = 4096;
inline constexpr std::uint32_t kMaxPacketCommands = 32;
inline constexpr std::uint32_t kMinWindowSize = 4096;
inline constexpr std::uint32_t kMaxWindowSize = 65536;
inline constexpr std::uint32_t kMinChannelCount = 1;
inline constexpr std::uint32_t kMaxChannelCount = 255;
inline constexpr std::uint16_t kMaxPeerId = 0xFFF;
inline constexpr std::uint32_t kMaxFragmentCount = 1024 * 1024;
inline constexpr std::uint8_t kSystemChannel = 0xFF;

inline constexpr std::uint8_t kCommandMask = 0x0F;
inline constexpr std::uint8_t kFlagAcknowledge = 1 << 7;
inline constexpr std::uint8_t kFlagUnsequenced = 1 << 6;
// Bits ENet leaves unused (libenet masks the command number with 0x0F and reads no other bit of
// a reliable command), set on SEND_RELIABLE and SEND_FRAGMENT only to a peer that agreed
// kFeatureDeliveryModes: deliver on arrival, or on arrival when newer than any delivered.
inline constexpr std::uint8_t kFlagTernUnordered = 1 << 5;
inline constexpr std::uint8_t kFlagTernSequenced = 1 << 4;
inline constexpr std::uint8_t kFlagTernModes = kFlagTernUnordered | kFlagTernSequenced;
inline constexpr std::uint16_t kHeaderFlagCompressed = 1 << 14;
inline constexpr std::uint16_t kHeaderFlagSentTime = 1 << 15;
inline constexpr std::uint16_t kHeaderFlagMask = kHeaderFlagCompressed | kHeaderFlagSentTime;
inline constexpr std::uint16_t kHeaderSessionMask = 3 << 12;
inline constexpr int kHeaderSessionShift = 12;

inline constexpr std::uint32_t kDefaultMtu = 1400;
inline constexpr std::uint32_t kDefaultRoundTripTime = 500;
inline constexpr std::uint32_t kDefaultPacketThrottle = 32;
inline constexpr std::uint32_t kPacketThrottleScale = 32;
inline constexpr std::uint32_t kPacketThrottleCounter = 7;
inline constexpr std::uint32_t kPacketThrottleAcceleration = 2;
inline constexpr std::uint32_t kPacketThrottleDeceleration = 2;
inline constexpr std::uint32_t kPacketThrottleInterval = 5000;
inline constexpr std::uint32_t kPacketLossScale = 1 << 16;
inline constexpr std::uint32_t kPacketLossInterval = 10000;
inline constexpr std::uint32_t kWindowSizeScale = 64 * 1024;
inline constexpr std::uint32_t kTimeoutLimit = 32;
inline constexpr std::uint32_t kTimeoutMinimum = 5000;
inline constexpr std::uint32_t kTimeoutMaximum = 30000;
inline constexpr std::uint32_t kPingInterval = 500;
inline constexpr std::uint32_t kUnsequencedWindows = 64;
inline constexpr std::uint32_t kUnsequencedWindowSize = 1024;
inline constexpr std::uint32_t kFreeUnsequencedWindows = 32;
inline constexpr std::uint32_t kReliableWindows = 16;
inline constexpr std::uint32_t kReliableWindowSize = 0x1000;
inline constexpr std::uint32_t kFreeReliableWindows = 8;
inline constexpr std::uint32_t kBandwidthThrottleInterval = 1000;
inline constexpr std::uint32_t kDefaultMaxPacketSize = 32 * 1024 * 1024;
inline constexpr std::uint32_t kDefaultMaxWaitingData = 32 * 1024 * 1024;

enum class Cmd : std::uint8_t {
  none = 0,
  acknowledge = 1,
  connect = 2,
  verify_connect = 3,
  disconnect = 4,
  ping = 5,
  send_reliable = 6,
  send_unreliable = 7,
  send_fragment = 8,
  send_unsequenced = 9,
  bandwidth_limit = 10,
  throttle_configure = 11,
  send_unreliable_fragment = 12,
  // ENet's commands end here: libenet stops parsing a datagram at a higher number. Tern's
  // extensions (WIRE.md, "Extensions") use numbers ENet does not: a hello offered last in a
  // handshake datagram (a plain ENet peer reads no further), and ack ranges, sent only to a
  // peer whose hello agreed to them.
  tern_hello = 13,
  ack_range = 14,
  // The last number a 4-bit command field has: one command with a kind byte carries every
  // later extension (TernExtKind), so they never compete for numbers.
  tern_ext = 15,
};

// Kinds of tern_ext, each owned by one extension (WIRE.md, "Extension command").
enum class TernExtKind : std::uint8_t {
  none = 0,
  block_slice = 1,       // large blocks: one slice of a block
  block_ack = 2,         // large blocks: the receiver's slice-ack bitfield
  mtu_probe = 3,         // path MTU discovery: a padded probe
  mtu_probe_ack = 4,     // path MTU discovery: the probe's size, acknowledged
  discover_ping = 5,     // unconnected: server discovery request
  discover_pong = 6,     // unconnected: server discovery answer (never larger than the ping)
  cc_feedback = 7,       // congestion control: delivery-rate feedback
  secure_first = 8,      // secure sessions: kinds 8..15
  secure_token = 8,      // secure sessions: the connect token and salt, with a CONNECT
  secure_challenge = 9,  // secure sessions: the server's challenge, in its sealed VERIFY
  secure_last = 15,
  block_refused = 16,  // large blocks: a block above the receiver's cap, and that cap
};
// TERN_EXT flags of secure_token (the client can seal with AES-256-GCM) and of
// secure_challenge (the session does): WIRE.md, "Secure sessions".
inline constexpr std::uint8_t kSecureFlagAes = 0x01;

const char* cmd_name(Cmd c);

// Fixed size of each command on the wire, header included, payload excluded (0 = invalid).
// The last three are Tern's extensions (tern_hello, ack_range, tern_ext).
inline constexpr std::array<std::uint8_t, 16> kCommandSizes = {0,  8, 48, 44, 8,  4, 6,  8,
                                                               24, 8, 12, 16, 24, 8, 10, 8};
inline constexpr std::size_t kCommandHeaderSize = 4;
inline constexpr std::size_t kFragmentCommandSize = 24;
inline constexpr std::size_t kAcknowledgeSize = 8;
inline constexpr std::size_t kAckRangeSize = 10;
inline constexpr std::size_t kHelloSize = 8;
inline constexpr std::size_t kTernExtSize = 8;
// Discovery (WIRE.md, "Discovery"): a ping's data is a nonce and padding, a pong's the nonce
// and the server's info; flag bit 0 of a pong says the info was cut to fit the ping.
inline constexpr std::size_t kDiscoveryNonceSize = 4;
inline constexpr std::uint8_t kDiscoveryTruncated = 0x01;
// The most info a pong can carry: a kMaxMtu datagram with a checksum, less the command.
inline constexpr std::size_t kMaxDiscoveryInfo = kMaxMtu - 6 - kTernExtSize - kDiscoveryNonceSize;
// tern_hello feature bits.
inline constexpr std::uint32_t kFeatureSelectiveAcks = 1u << 0;
inline constexpr std::uint32_t kFeatureNodelay = 1u << 1;
inline constexpr std::uint32_t kFeatureRedundancy = 1u << 2;
inline constexpr std::uint32_t kFeatureDeliveryModes = 1u << 3;
// Idle pings: keep-alive pings every HostConfig::idle_ping_intervals ping intervals.
inline constexpr std::uint32_t kFeatureIdlePings = 1u << 5;
// Large blocks (TernExtKind::block_slice and block_ack; WIRE.md, "Large blocks").
inline constexpr std::uint32_t kFeatureBlocks = 1u << 6;
// A block_slice's data: block ID (2), slice size (2), total size (4), slice count (4), slice
// index (4), then the slice's bytes. A block_ack's: block ID (2), zero (2), base (4), field
// start (4, past the base), and a 256-bit field (eight 32-bit words) whose bit i says slice
// field start + i arrived.
inline constexpr std::size_t kBlockSliceHeader = 16;
inline constexpr std::size_t kBlockAckData = 44;
// A block_refused's: block ID (2), zero (2), the largest block the receiver takes (4).
inline constexpr std::size_t kBlockRefusedData = 8;
inline constexpr std::uint32_t kBlockAckSpan = 256;
inline constexpr std::uint32_t kFeatureCongestion = 1u << 4;
inline constexpr std::uint32_t kFeaturePmtu = 1u << 7;  // path MTU discovery
// An ack_range acknowledges its base sequence number and, for each set bit i of its bitfield,
// base + 1 + i: 33 consecutive sequence numbers at most.
inline constexpr std::uint32_t kAckRangeSpan = 33;

inline constexpr std::size_t command_size(Cmd c) {
  auto i = static_cast<std::size_t>(c);
  return i < kCommandSizes.size() ? kCommandSizes[i] : 0;
}

struct Header {
  std::uint16_t peer_id = kMaxPeerId;  // 12 bits
  std::uint8_t session = 0;            // 2 bits
  bool compressed = false;
  bool has_sent_time = false;
  std::uint16_t sent_time = 0;
};

// Size of the header as encoded: 2 bytes, +2 with sent time, +4 with a checksum.
inline constexpr std::size_t header_size(bool has_sent_time, bool checksum) {
  return 2 + (has_sent_time ? 2 : 0) + (checksum ? 4 : 0);
}

struct Acknowledge {
  std::uint16_t received_reliable_seq;
  std::uint16_t received_sent_time;
};
struct Connect {
  std::uint16_t outgoing_peer_id;
  std::uint8_t incoming_session;
  std::uint8_t outgoing_session;
  std::uint32_t mtu;
  std::uint32_t window_size;
  std::uint32_t channel_count;
  std::uint32_t incoming_bandwidth;
  std::uint32_t outgoing_bandwidth;
  std::uint32_t throttle_interval;
  std::uint32_t throttle_acceleration;
  std::uint32_t throttle_deceleration;
  std::uint32_t connect_id;  // opaque: compared and echoed, never interpreted
  std::uint32_t data;        // connect only (absent from verify_connect)
};
struct Disconnect {
  std::uint32_t data;
};
struct SendReliable {
  std::uint16_t data_length;
};
struct SendUnreliable {
  std::uint16_t unreliable_seq;
  std::uint16_t data_length;
};
struct SendUnsequenced {
  std::uint16_t unsequenced_group;
  std::uint16_t data_length;
};
struct SendFragment {
  std::uint16_t start_seq;
  std::uint16_t data_length;
  std::uint32_t fragment_count;
  std::uint32_t fragment_number;
  std::uint32_t total_length;
  std::uint32_t fragment_offset;
};
struct BandwidthLimit {
  std::uint32_t incoming_bandwidth;
  std::uint32_t outgoing_bandwidth;
};
struct ThrottleConfigure {
  std::uint32_t interval;
  std::uint32_t acceleration;
  std::uint32_t deceleration;
};
struct TernHello {
  std::uint32_t features;  // kFeature* bits the sender offers (client) or agrees to (server)
};
struct AckRange {  // the base sequence number is the command header's reliable_seq
  std::uint16_t received_sent_time;  // of the newest datagram among those acknowledged
  std::uint32_t bits;
};

struct TernExt {       // data_length bytes of the kind's own format follow
  std::uint8_t kind;   // TernExtKind
  std::uint8_t flags;  // the kind's own; 0 unless its format says otherwise
  std::uint16_t data_length;
};

struct Command {
  std::uint8_t command = 0;  // number | flags, as on the wire
  std::uint8_t channel_id = 0;
  std::uint16_t reliable_seq = 0;
  union {
    Acknowledge ack;
    Connect connect;  // also verify_connect (data unused)
    Disconnect disconnect;
    SendReliable reliable;
    SendUnreliable unreliable;
    SendUnsequenced unsequenced;
    SendFragment fragment;
    BandwidthLimit bandwidth;
    ThrottleConfigure throttle;
    TernHello hello;
    AckRange ack_range;
    TernExt ext;
  };
  // send_* commands: the data_length bytes that follow the command in the datagram.
  std::span<const std::byte> payload;

  Command() : connect{} {}
  Cmd type() const { return static_cast<Cmd>(command & kCommandMask); }
  bool needs_ack() const { return (command & kFlagAcknowledge) != 0; }
  bool unsequenced_flag() const { return (command & kFlagUnsequenced) != 0; }
  // Payload length declared by a send_* command (0 for the others).
  std::uint16_t data_length() const;
};

// Bounds-checked big-endian reader over a datagram.
class Reader {
 public:
  explicit Reader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::size_t remaining() const { return bytes_.size() - pos_; }
  std::size_t position() const { return pos_; }
  // Inline: the codec calls these per field of every command, on the per-packet path.
  bool read_u8(std::uint8_t& v) {
    if (remaining() < 1) return false;
    v = static_cast<std::uint8_t>(bytes_[pos_]);
    pos_ += 1;
    return true;
  }
  bool read_u16(std::uint16_t& v) {
    if (remaining() < 2) return false;
    v = static_cast<std::uint16_t>((std::uint16_t(bytes_[pos_]) << 8) |
                                   std::uint16_t(bytes_[pos_ + 1]));
    pos_ += 2;
    return true;
  }
  bool read_u32(std::uint32_t& v) {
    if (remaining() < 4) return false;
    v = (std::uint32_t(bytes_[pos_]) << 24) | (std::uint32_t(bytes_[pos_ + 1]) << 16) |
        (std::uint32_t(bytes_[pos_ + 2]) << 8) | std::uint32_t(bytes_[pos_ + 3]);
    pos_ += 4;
    return true;
  }
  bool read_bytes(std::size_t n, std::span<const std::byte>& out) {
    if (remaining() < n) return false;
    out = bytes_.subspan(pos_, n);
    pos_ += n;
    return true;
  }
  bool skip(std::size_t n) {
    if (remaining() < n) return false;
    pos_ += n;
    return true;
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t pos_ = 0;
};

// Big-endian writer; the caller sizes the buffer (encode_* check and return 0 on overflow).
class Writer {
 public:
  explicit Writer(std::span<std::byte> bytes) : bytes_(bytes) {}
  std::size_t position() const { return pos_; }
  std::size_t remaining() const { return bytes_.size() - pos_; }
  bool ok() const { return ok_; }
  void u8(std::uint8_t v) {
    if (remaining() < 1) {
      ok_ = false;
      return;
    }
    bytes_[pos_++] = std::byte{v};
  }
  void u16(std::uint16_t v) {
    if (remaining() < 2) {
      ok_ = false;
      return;
    }
    bytes_[pos_] = std::byte(v >> 8);
    bytes_[pos_ + 1] = std::byte(v & 0xff);
    pos_ += 2;
  }
  void u32(std::uint32_t v) {
    if (remaining() < 4) {
      ok_ = false;
      return;
    }
    bytes_[pos_] = std::byte(v >> 24);
    bytes_[pos_ + 1] = std::byte((v >> 16) & 0xff);
    bytes_[pos_ + 2] = std::byte((v >> 8) & 0xff);
    bytes_[pos_ + 3] = std::byte(v & 0xff);
    pos_ += 4;
  }
  void bytes(std::span<const std::byte> b) {
    if (remaining() < b.size()) {
      ok_ = false;
      return;
    }
    if (!b.empty()) std::memcpy(bytes_.data() + pos_, b.data(), b.size());
    pos_ += b.size();
  }

 private:
  std::span<std::byte> bytes_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

struct DecodedHeader {
  Header header;
  std::size_t size = 0;             // bytes consumed (including any checksum field)
  std::size_t checksum_offset = 0;  // where the checksum field sits (if checksum)
  std::uint32_t checksum = 0;       // the transmitted value, as read big-endian
};

// Parses the header. `checksum` says whether the host runs in checksum mode (a 4-byte CRC
// follows the header; ENet does not signal it on the wire).
bool decode_header(std::span<const std::byte> datagram, bool checksum, DecodedHeader& out,
                   Drop& why);

// Iterates the commands after the header. A malformed command ends the datagram (ENet stops
// there too): `next` then returns false with `why` set; a clean end returns false with
// `at_end()` true.
class CommandDecoder {
 public:
  CommandDecoder(std::span<const std::byte> datagram, std::size_t offset)
      : reader_(datagram.subspan(offset)) {}
  bool next(Command& out, Drop& why);
  // True only after a clean end: a malformed command is never mistaken for one, even when it
  // happens to consume the datagram's last byte.
  bool at_end() const { return !failed_ && reader_.remaining() == 0; }

 private:
  bool fail(Drop reason, Drop& why) {
    why = reason;
    failed_ = true;
    return false;
  }
  Reader reader_;
  bool failed_ = false;
};

// Encodes the header (checksum field written as zero when `checksum`); returns bytes written.
std::size_t encode_header(std::span<std::byte> out, const Header& h, bool checksum);
// Encodes the command's fixed part (not its payload); returns bytes written or 0 on overflow.
std::size_t encode_command(std::span<std::byte> out, const Command& c);

// ENet's enet_crc32: reflected CRC-32 (poly 0xEDB88320), init and final xor ~0. The result is
// the value the wire carries big-endian (ENet stores HTONL(~crc) in memory order).
std::uint32_t crc32(std::span<const std::byte> bytes);
std::uint32_t crc32_update(std::uint32_t state, std::span<const std::byte> bytes);

// Computes and writes the checksum of an encoded datagram in place. `seed` is the peer's
// connect ID (0 before one is known); it occupies the checksum field during the computation.
void write_checksum(std::span<std::byte> datagram, std::size_t checksum_offset, std::uint32_t seed);
// Verifies a received datagram's checksum, without modifying it.
bool verify_checksum(std::span<const std::byte> datagram, const DecodedHeader& h,
                     std::uint32_t seed);

// 16-bit sequence comparisons and window arithmetic.
inline std::uint16_t seq_window(std::uint16_t seq) {
  return static_cast<std::uint16_t>(seq / kReliableWindowSize);
}

}  // namespace tern::proto
