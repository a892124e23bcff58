// Extension: offline discovery (WIRE.md, "Discovery"). A datagram with no peer ID whose first
// command is a TERN_EXT discover_ping is answered, without any connection, by a discover_pong
// carrying the application's server info, never larger than the ping; a client's pings are
// matched to their pongs by nonce. No handshake state is touched.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

#include <cstring>

namespace tern::proto {

// A datagram without a peer ID whose first command is a TERN_EXT: the only unconnected
// commands besides CONNECT. Peeked at so a CONNECT's path pays one compare.
inline bool HostCore::Impl::is_unconnected_ext(std::span<const std::byte> bytes,
                                               const DecodedHeader& dh) {
  return dh.size < bytes.size() && (static_cast<std::uint8_t>(bytes[dh.size]) & kCommandMask) ==
                                       static_cast<std::uint8_t>(Cmd::tern_ext);
}

inline void HostCore::Impl::unconnected_datagram(std::uint64_t now_us, const Endpoint& from,
                                                 const DecodedHeader& dh,
                                                 std::span<const std::byte> bytes) {
  CommandDecoder decoder(bytes, dh.size);
  Command cmd;
  if (!first_stranger_command(bytes, dh, decoder, cmd)) return;
  switch (static_cast<TernExtKind>(cmd.ext.kind)) {
    case TernExtKind::discover_ping: discovery_on_ping(from, cmd, bytes.size()); return;
    case TernExtKind::discover_pong: discovery_on_pong(now_us, from, cmd); return;
    default: counters.drops.add(Drop::unknown_ext_kind); return;
  }
}

// Refused (off, banned, over a rate, malformed, no room to queue the answer): counted, and
// nothing is sent. Answered: queued for the next flush with the room the ping paid for.
inline void HostCore::Impl::discovery_on_ping(const Endpoint& from, const Command& cmd,
                                              std::size_t ping_bytes) {
  ++counters.discovery_pings_in;
  counters.discovery_bytes_in += ping_bytes;
  Drop why = Drop::count_;
  if (!config.discovery) {
    why = Drop::discovery_off;
  } else if (cmd.payload.size() < kDiscoveryNonceSize) {
    why = Drop::bad_discovery;
  } else if (guard.has_bans() && guard.banned(SourceGuard::address_of(from),
                                              source_hash(SourceGuard::address_of(from)), now_ms)) {
    why = Drop::banned;
  } else if (!discovery_rate_pass(from)) {
    why = Drop::rate_limited;
    ++counters.discovery_rate_limited;
  } else if (discovery_out.size() >= discovery_queue_capacity()) {
    ++counters.replies_dropped;
    why = Drop::discovery_queue_full;
  }
  if (why != Drop::count_) {
    ++counters.discovery_refused;
    counters.drops.add(why);
    return;
  }
  if (discovery_out.capacity() == 0) discovery_out.reserve(discovery_queue_capacity());
  // The answer's header is never longer than the ping's (same checksum mode, no sent time),
  // so info of the ping's own padding keeps the pong within the ping's size.
  DiscoveryOut out;
  out.to = from;
  out.nonce = read_nonce(cmd.payload);
  out.room = static_cast<std::uint16_t>(cmd.payload.size() - kDiscoveryNonceSize);
  out.kind = TernExtKind::discover_pong;
  discovery_out.push_back(out);
}

// Per address (any port) and per prefix, in the source guard's buckets under keys of their
// own (ports 2 and 3; a handshake's are 0 and 1), so pings never spend a CONNECT's tokens.
inline bool HostCore::Impl::discovery_rate_pass(const Endpoint& from) {
  if (config.discovery_rate_per_address > 0) {
    Endpoint a = SourceGuard::address_of(from);
    a.port = 2;
    if (!guard.take(a, source_hash(a), now_ms, config.discovery_rate_per_address,
                    config.discovery_burst_per_address, config.source_table_capacity)) {
      return false;
    }
  }
  if (config.discovery_rate_per_prefix > 0) {
    Endpoint p = SourceGuard::prefix_of(from);
    p.port = 3;
    if (!guard.take(p, source_hash(p), now_ms, config.discovery_rate_per_prefix,
                    config.discovery_burst_per_prefix, config.source_table_capacity)) {
      return false;
    }
  }
  return true;
}

// A pong is taken only for a ping of ours still waiting (its nonce), so nobody can make us
// queue answers we did not ask for; a broadcast ping takes up to kMaxAnswersPerPing.
inline void HostCore::Impl::discovery_on_pong(std::uint64_t now_us, const Endpoint& from,
                                              const Command& cmd) {
  if (cmd.payload.size() < kDiscoveryNonceSize) {
    counters.drops.add(Drop::bad_discovery);
    return;
  }
  const std::uint32_t nonce = read_nonce(cmd.payload);
  DiscoveryPing* ping = nullptr;
  for (DiscoveryPing& p : discovery_pings) {
    if (p.nonce == nonce && nonce != 0) ping = &p;
  }
  if (ping == nullptr || now_us - ping->sent_us > config.discovery_timeout_ms * 1000ull ||
      ping->answers >= kMaxAnswersPerPing || discovery_answers.size() >= kMaxDiscoveryAnswers) {
    counters.drops.add(Drop::bad_discovery);
    return;
  }
  ++ping->answers;
  ++counters.discovery_answers;
  DiscoveryAnswer a;
  a.from = from;
  a.rtt_us = static_cast<std::uint32_t>(std::min<std::uint64_t>(now_us - ping->sent_us, ~0u));
  a.nonce = nonce;
  a.truncated = (cmd.ext.flags & kDiscoveryTruncated) != 0;
  a.info = Packet::copy_of(cmd.payload.subspan(kDiscoveryNonceSize));
  discovery_answers.push_back(std::move(a));
}

inline std::uint32_t HostCore::Impl::discover(std::uint64_t now_us, const Endpoint& to,
                                              std::size_t info_room) {
  if (discovery_out.size() >= discovery_queue_capacity()) return 0;
  if (discovery_out.capacity() == 0) discovery_out.reserve(discovery_queue_capacity());
  const std::size_t most =
      config.mtu - header_size(false, config.checksum) - kTernExtSize - kDiscoveryNonceSize;
  std::uint32_t nonce = 0;
  while (nonce == 0) nonce = random_u32();
  // The slot of the oldest ping: its answers have had the longest to come.
  DiscoveryPing* slot = &discovery_pings[0];
  for (DiscoveryPing& p : discovery_pings) {
    if (p.sent_us < slot->sent_us) slot = &p;
  }
  *slot = DiscoveryPing{nonce, std::max<std::uint64_t>(now_us, 1), 0};
  DiscoveryOut out;
  out.to = to;
  out.nonce = nonce;
  out.room = static_cast<std::uint16_t>(std::min(info_room, most));
  out.kind = TernExtKind::discover_ping;
  discovery_out.push_back(out);
  ++counters.discovery_pings_out;
  return nonce;
}

inline void HostCore::Impl::set_discovery_info(std::span<const std::byte> info) {
  if (discovery_info.capacity() < kMaxDiscoveryInfo) discovery_info.reserve(kMaxDiscoveryInfo);
  const std::size_t n = std::min(info.size(), kMaxDiscoveryInfo);
  discovery_info.assign(info.begin(), info.begin() + static_cast<std::ptrdiff_t>(n));
}

inline bool HostCore::Impl::poll_discovery(DiscoveryAnswer& out) {
  if (discovery_answer_head == discovery_answers.size()) return false;
  out = std::move(discovery_answers[discovery_answer_head++]);
  if (discovery_answer_head == discovery_answers.size()) {
    discovery_answers.clear();
    discovery_answer_head = 0;
  }
  return true;
}

// The queued pings and pongs, one datagram each: a ping padded with zeros to ask for `room`
// info bytes back, a pong with as much of the info as its ping paid for.
inline std::size_t HostCore::Impl::flush_discovery(std::span<OutDatagram> out) {
  std::size_t n = 0;
  while (!discovery_out.empty() && n < out.size()) {
    const DiscoveryOut& d = discovery_out.back();
    OutDatagram& dg = out[n];
    dg.to = d.to;
    dg.offset = 0;
    Header h;
    h.peer_id = kMaxPeerId;
    std::size_t pos = encode_header(dg.bytes, h, config.checksum);
    std::size_t data = d.room;
    std::uint8_t flags = 0;
    if (d.kind == TernExtKind::discover_pong) {
      data = std::min(discovery_info.size(), data);
      if (data < discovery_info.size()) {
        flags |= kDiscoveryTruncated;
        ++counters.discovery_truncated;
      }
    }
    Command cmd;
    cmd.command = static_cast<std::uint8_t>(Cmd::tern_ext);
    cmd.channel_id = kSystemChannel;
    cmd.ext.kind = static_cast<std::uint8_t>(d.kind);
    cmd.ext.flags = flags;
    cmd.ext.data_length = static_cast<std::uint16_t>(kDiscoveryNonceSize + data);
    pos += encode_command(std::span<std::byte>(dg.bytes).subspan(pos), cmd);
    for (int shift = 24; shift >= 0; shift -= 8) {
      dg.bytes[pos++] = static_cast<std::byte>(d.nonce >> shift);
    }
    if (d.kind == TernExtKind::discover_pong) {
      std::memcpy(dg.bytes.data() + pos, discovery_info.data(), data);
      ++counters.discovery_pongs_out;
    } else {
      std::memset(dg.bytes.data() + pos, 0, data);
    }
    pos += data;
    dg.size = static_cast<std::uint32_t>(pos);
    if (config.checksum) write_checksum(std::span<std::byte>(dg.bytes.data(), pos), 2, 0);
    if (d.kind == TernExtKind::discover_pong) counters.discovery_bytes_out += pos;
    ++counters.datagrams_out;
    counters.bytes_out += pos;
    discovery_out.pop_back();
    ++n;
  }
  return n;
}

inline std::uint32_t HostCore::Impl::read_nonce(std::span<const std::byte> payload) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < kDiscoveryNonceSize; ++i) {
    v = (v << 8) | static_cast<std::uint8_t>(payload[i]);
  }
  return v;
}

}  // namespace tern::proto
