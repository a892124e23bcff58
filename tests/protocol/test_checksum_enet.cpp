// Tern's CRC32 and datagram checksum against libenet's enet_crc32 and its checksum procedure
// (enet_protocol_send_outgoing_commands / enet_protocol_receive_incoming_commands).
#include "support.hpp"
#include "wire.hpp"

#include <arpa/inet.h>
#include <enet/enet.h>
#include <enet/protocol.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

namespace {

using namespace tern::proto;

std::uint32_t enet_crc_of(std::vector<std::byte>& data, const std::vector<std::size_t>& cuts) {
  // libenet checksums a scatter list of buffers; split the data the same way.
  std::vector<ENetBuffer> buffers;
  std::size_t at = 0;
  for (std::size_t cut : cuts) {
    ENetBuffer b;
    b.data = data.data() + at;
    b.dataLength = cut - at;
    buffers.push_back(b);
    at = cut;
  }
  ENetBuffer last;
  last.data = data.data() + at;
  last.dataLength = data.size() - at;
  buffers.push_back(last);
  return enet_crc32(buffers.data(), buffers.size());
}

TEST(Crc32Enet, EqualsEnetCrc32OnRandomBuffers) {
  std::mt19937_64 rng(tern::test::test_seed(0xE7E7));
  std::vector<std::size_t> sizes = {0,   1,   2,   3,    4,    5,    7,    8,   9,
                                    15,  16,  17,  31,   32,   33,   63,   64,  65,
                                    255, 256, 576, 1000, 1399, 1400, 4095, 4096};
  for (int i = 0; i < 300; ++i) sizes.push_back(rng() % 4097);
  for (std::size_t n : sizes) {
    auto data = tern::test::random_bytes(rng, n);
    // One buffer, and up to three random cut points (as libenet's header + commands + data).
    std::vector<std::size_t> cuts;
    const std::size_t pieces = n == 0 ? 0 : rng() % 4;
    for (std::size_t k = 0; k < pieces; ++k) cuts.push_back(rng() % (n + 1));
    std::sort(cuts.begin(), cuts.end());
    const std::uint32_t ours = crc32(data);
    // enet_crc32 returns ENET_HOST_TO_NET_32(~crc): the value to store in memory order.
    EXPECT_EQ(enet_crc_of(data, {}), htonl(ours)) << "size " << n;
    EXPECT_EQ(enet_crc_of(data, cuts), htonl(ours)) << "size " << n << " pieces " << pieces;
  }
}

// A datagram laid out as libenet sends it with host->checksum = enet_crc32: header (with sent
// time), the 4-byte checksum field, then commands.
struct EnetDatagram {
  std::vector<std::byte> bytes;
  std::size_t field = 0;
};

EnetDatagram enet_style_datagram(std::uint16_t peer_id, std::uint8_t session,
                                 std::uint32_t enet_connect_id, std::mt19937_64& rng) {
  EnetDatagram d;
  ENetProtocolHeader eh;
  eh.peerID =
      htons(static_cast<std::uint16_t>(peer_id | (session << ENET_PROTOCOL_HEADER_SESSION_SHIFT) |
                                       ENET_PROTOCOL_HEADER_FLAG_SENT_TIME));
  eh.sentTime = htons(static_cast<std::uint16_t>(rng()));
  d.field = sizeof eh;

  // A CONNECT carrying the connect ID exactly as libenet writes it (unswapped), then noise.
  ENetProtocol cmd;
  std::memset(&cmd, 0, sizeof cmd);
  cmd.header.command = static_cast<enet_uint8>(ENET_PROTOCOL_COMMAND_CONNECT) |
                       static_cast<enet_uint8>(ENET_PROTOCOL_COMMAND_FLAG_ACKNOWLEDGE);
  cmd.header.channelID = 0xFF;
  cmd.header.reliableSequenceNumber = htons(1);
  cmd.connect.mtu = htonl(1400);
  cmd.connect.windowSize = htonl(65536);
  cmd.connect.channelCount = htonl(2);
  cmd.connect.connectID = enet_connect_id;
  const auto tail = tern::test::random_bytes(rng, rng() % 200);

  const std::size_t command_at = d.field + 4;
  d.bytes.assign(command_at + sizeof(ENetProtocolConnect) + tail.size(), std::byte{0});
  std::memcpy(d.bytes.data(), &eh, sizeof eh);
  std::memcpy(d.bytes.data() + command_at, &cmd, sizeof(ENetProtocolConnect));
  if (!tail.empty()) {
    std::memcpy(d.bytes.data() + command_at + sizeof(ENetProtocolConnect), tail.data(),
                tail.size());
  }
  return d;
}

// libenet's sender: *checksum = connectID (or 0 with no peer ID); *checksum = enet_crc32(all).
void enet_write_checksum(EnetDatagram& d, std::uint32_t enet_seed) {
  std::memcpy(d.bytes.data() + d.field, &enet_seed, 4);
  ENetBuffer b;
  b.data = d.bytes.data();
  b.dataLength = d.bytes.size();
  const std::uint32_t crc = enet_crc32(&b, 1);
  std::memcpy(d.bytes.data() + d.field, &crc, 4);
}

TEST(ChecksumEnet, SeededChecksumEqualsLibenet) {
  std::mt19937_64 rng(tern::test::test_seed(0xC0DE1D));
  for (int round = 0; round < 100; ++round) {
    // libenet's connectID is a host-order integer copied to the wire unswapped.
    const std::uint32_t enet_connect_id = round == 0 ? 0 : static_cast<std::uint32_t>(rng());
    EnetDatagram theirs =
        enet_style_datagram(static_cast<std::uint16_t>(rng() % kMaxPeerId),
                            static_cast<std::uint8_t>(rng() & 3), enet_connect_id, rng);

    // Tern learns the connect ID by decoding the CONNECT: that value is its checksum seed.
    tern::test::HeapBytes unsigned_copy(theirs.bytes);
    DecodedHeader dh;
    Drop why = Drop::count_;
    ASSERT_TRUE(decode_header(unsigned_copy.view(), true, dh, why)) << drop_name(why);
    ASSERT_EQ(dh.checksum_offset, theirs.field);
    CommandDecoder dec(unsigned_copy.view(), dh.size);
    Command connect;
    ASSERT_TRUE(dec.next(connect, why)) << drop_name(why);
    ASSERT_EQ(connect.type(), Cmd::connect);
    const std::uint32_t seed = connect.connect.connect_id;

    auto ours = theirs.bytes;
    enet_write_checksum(theirs, enet_connect_id);
    write_checksum(ours, dh.checksum_offset, seed);
    ASSERT_EQ(ours.size(), theirs.bytes.size());
    EXPECT_EQ(std::memcmp(ours.data(), theirs.bytes.data(), ours.size()), 0) << "round " << round;

    // Tern accepts what libenet signed, and refuses it under another seed.
    tern::test::HeapBytes signed_copy(theirs.bytes);
    ASSERT_TRUE(decode_header(signed_copy.view(), true, dh, why));
    EXPECT_TRUE(verify_checksum(signed_copy.view(), dh, seed));
    EXPECT_FALSE(verify_checksum(signed_copy.view(), dh, seed + 1));
  }
}

TEST(ChecksumEnet, UnassignedPeerUsesZeroSeed) {
  // A CONNECT goes out before the peer has an ID; libenet then seeds the field with 0.
  std::mt19937_64 rng(tern::test::test_seed(0x0));
  EnetDatagram theirs = enet_style_datagram(kMaxPeerId, 0, 0xDEADBEEF, rng);
  auto ours = theirs.bytes;
  enet_write_checksum(theirs, 0);
  write_checksum(ours, theirs.field, 0);
  EXPECT_EQ(std::memcmp(ours.data(), theirs.bytes.data(), ours.size()), 0);
}

}  // namespace
