// Extension: path MTU discovery (feature bit 7; WIRE.md, "Path MTU discovery"). Each side
// probes its own direction: a datagram padded to the size under test (TERN_EXT mtu_probe),
// which the other side acknowledges with its size (mtu_probe_ack). The negotiated MTU is
// probed first; then a binary search between the largest size acknowledged (ENet's minimum,
// 576, when even the negotiated one is lost) and HostConfig::pmtu_max sets the connection's
// MTU (datagram and fragment size) to each size acknowledged. Once the search is over the
// current size is probed again every 5 s, and at once after a retransmission timeout; lost
// twice (the path shrank), the connection goes back to 576 and searches again below it.
// Part of host_core.cpp's translation unit.
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::pmtu_offered() const { return config.pmtu ? kFeaturePmtu : 0; }

inline std::uint32_t HostCore::Impl::pmtu_agreed(const Peer& p) const {
  return p.pmtu ? kFeaturePmtu : 0;
}

// Both sides must run it: each answers the other's probes.
inline void HostCore::Impl::pmtu_on_agreed(Peer& p, std::uint32_t agreed) {
  p.pmtu = config.pmtu && (agreed & kFeaturePmtu) != 0;
  if (!p.pmtu) return;
  PeerExtra& x = extra(p);
  x.pmtu_base = p.mtu;
  x.pmtu_lo = static_cast<std::uint16_t>(kMinMtu);
  x.pmtu_hi = std::max(pmtu_ceiling(), p.mtu);
  x.pmtu_first = p.mtu;  // the negotiated size is not known to pass until a probe of it does
  x.pmtu_probe = 0;
  x.pmtu_tries = 0;
  x.pmtu_send = false;
  x.pmtu_recheck = false;
  x.pmtu_due_ms = now_ms + kPmtuStartMs;
}

inline std::uint16_t HostCore::Impl::pmtu_ceiling() const {
  return static_cast<std::uint16_t>(std::clamp(config.pmtu_max, config.mtu, kMaxMtu));
}

// The path stopped carrying the current size: back to ENet's minimum, and a new search below
// the size that failed.
inline void HostCore::Impl::pmtu_restart(Peer& p, PeerExtra& x, std::uint16_t hi) {
  x.pmtu_lo = static_cast<std::uint16_t>(kMinMtu);
  x.pmtu_hi = std::max<std::uint16_t>(hi, x.pmtu_lo);
  x.pmtu_first = 0;
  x.pmtu_probe = 0;
  x.pmtu_tries = 0;
  x.pmtu_send = false;
  x.pmtu_recheck = false;
  x.pmtu_due_ms = now_ms + 1;
  p.mtu = x.pmtu_lo;
  ++counters.pmtu_lowered;
}

// The next size to try, or 0 once the interval is narrower than a step.
inline std::uint16_t HostCore::Impl::pmtu_next_size(const PeerExtra& x) {
  if (x.pmtu_hi - x.pmtu_lo < kPmtuStep) return 0;
  return static_cast<std::uint16_t>((std::uint32_t{x.pmtu_lo} + x.pmtu_hi + 1) / 2);
}

// How long a probe has to come back: a round trip with margin, as a retransmission would.
inline std::uint32_t HostCore::Impl::pmtu_probe_timeout(const Peer& p) const {
  return std::clamp<std::uint32_t>(2 * (std::uint32_t{p.rtt} + 4 * std::uint32_t{p.rtt_variance}),
                                   kPmtuMinTimeoutMs, kPmtuMaxTimeoutMs);
}

inline std::uint64_t HostCore::Impl::pmtu_deadline(const Peer& p) const {
  if (!p.pmtu || p.extra == nullptr) return kNever;
  const PeerExtra& x = *p.extra;
  if (x.pmtu_ack_owed != 0 || x.pmtu_send) return now_ms;
  return x.pmtu_due_ms != 0 ? x.pmtu_due_ms : kNever;
}

// The peer's timers ran: a probe's time is up (resend it, or take its size as too large), or
// the next probe is due.
inline void HostCore::Impl::pmtu_timers(Peer& p) {
  if (!p.pmtu || p.extra == nullptr) return;
  PeerExtra& x = *p.extra;
  if (x.pmtu_due_ms == 0 || now_ms < x.pmtu_due_ms) return;
  if (!p.connected_like()) {
    x.pmtu_due_ms = now_ms + kPmtuStartMs;
    return;
  }
  if (x.pmtu_probe != 0 && x.pmtu_recheck) {
    ++counters.pmtu_probes_lost;
    if (++x.pmtu_tries >= kPmtuTries) {
      pmtu_restart(p, x, static_cast<std::uint16_t>(p.mtu - 1));  // the path shrank
      return;
    }
  } else if (x.pmtu_probe != 0) {
    ++counters.pmtu_probes_lost;
    if (++x.pmtu_tries >= kPmtuTries) {
      // Lost every time: the path does not carry it (a random loss rarely strikes twice).
      x.pmtu_hi = static_cast<std::uint16_t>(x.pmtu_probe - 1);
      if (x.pmtu_probe == x.pmtu_first) {
        // Not even the negotiated size: down to what any path carries, and up from there.
        x.pmtu_first = 0;
        p.mtu = x.pmtu_lo;
        ++counters.pmtu_lowered;
      }
      x.pmtu_tries = 0;
      x.pmtu_probe = 0;
    }
  }
  if (x.pmtu_probe == 0) x.pmtu_probe = x.pmtu_first != 0 ? x.pmtu_first : pmtu_next_size(x);
  if (x.pmtu_probe == 0 && p.mtu > kMinMtu) {
    // The search is over: from now on, check now and then that the size still passes.
    x.pmtu_recheck = true;
    x.pmtu_probe = p.mtu;
  }
  if (x.pmtu_probe == 0) {
    x.pmtu_due_ms = 0;
    return;
  }
  x.pmtu_send = true;
  x.pmtu_due_ms = now_ms + pmtu_probe_timeout(p);
  mark_dirty(p);
}

// A probe's or probe ack's size (its first two bytes); false (why in `arrival`) when the
// extension was not agreed or the size is missing.
inline bool HostCore::Impl::pmtu_size_of(const Peer& p, const Command& cmd, Arrival& arrival,
                                         std::uint16_t& size) {
  if (!p.pmtu) {
    arrival.why = Drop::extension_not_agreed;
    return false;
  }
  if (cmd.payload.size() < 2) {
    arrival.why = Drop::bad_pmtu;
    return false;
  }
  size =
      static_cast<std::uint16_t>((std::uint16_t(static_cast<std::uint8_t>(cmd.payload[0])) << 8) |
                                 static_cast<std::uint8_t>(cmd.payload[1]));
  return true;
}

// A probe from the peer (its size in the first two bytes, padding after): acknowledge it
// with that size in a datagram of our own at the next flush.
inline Handled HostCore::Impl::handle_mtu_probe(Peer& p, const Command& cmd, Arrival& arrival) {
  std::uint16_t size = 0;
  if (!pmtu_size_of(p, cmd, arrival, size)) return Handled::stop;
  // The probe's datagram holds at least its own command, and no datagram is larger than this.
  if (size < kTernExtSize + cmd.payload.size() || size > kMaxMtu) {
    arrival.why = Drop::bad_pmtu;
    return Handled::stop;
  }
  extra(p).pmtu_ack_owed = size;
  ++counters.pmtu_probes_answered;
  mark_dirty(p);
  return Handled::ok;
}

// Our probe of that size arrived: the path carries it. Anything else (a late ack of an older
// probe, a forged size) changes nothing.
inline Handled HostCore::Impl::handle_mtu_probe_ack(Peer& p, const Command& cmd, Arrival& arrival) {
  std::uint16_t size = 0;
  if (!pmtu_size_of(p, cmd, arrival, size)) return Handled::stop;
  PeerExtra& x = extra(p);
  if (x.pmtu_probe == 0 || size != x.pmtu_probe) return Handled::ok;
  if (x.pmtu_recheck) {
    x.pmtu_probe = 0;
    x.pmtu_tries = 0;
    x.pmtu_due_ms = now_ms + kPmtuRecheckMs;
    schedule(p);
    return Handled::ok;
  }
  if (size != p.mtu) ++counters.pmtu_raised;
  x.pmtu_lo = size;
  x.pmtu_first = 0;
  x.pmtu_probe = 0;
  x.pmtu_tries = 0;
  p.mtu = size;
  x.pmtu_due_ms = now_ms + (pmtu_next_size(x) != 0 ? 1 : kPmtuRecheckMs);
  schedule(p);
  return Handled::ok;
}

// A retransmission timeout: if the search is over and the connection sends above ENet's
// minimum, check at once that the path still carries that size (a shrunken path loses every
// full datagram, small ones still pass).
inline void HostCore::Impl::pmtu_after_timeouts(Peer& p) {
  if (!p.pmtu || p.extra == nullptr) return;
  PeerExtra& x = *p.extra;
  if (x.pmtu_probe != 0 || x.pmtu_send || p.mtu <= kMinMtu || !x.pmtu_recheck) return;
  if (x.pmtu_due_ms > now_ms) {
    x.pmtu_due_ms = now_ms;
    schedule(p);
  }
}

// The probe and the acknowledgement owed, each a datagram of its own (no sent time, so no
// acknowledgement through ENet's rules). Returns how many were written into `out`.
inline std::size_t HostCore::Impl::pmtu_datagrams(Peer& p, std::span<OutDatagram> out) {
  if (!p.pmtu || p.extra == nullptr || !p.connected_like()) return 0;
  PeerExtra& x = *p.extra;
  std::size_t n = 0;
  if (x.pmtu_ack_owed != 0 && n < out.size()) {
    const std::byte size[2] = {static_cast<std::byte>(x.pmtu_ack_owed >> 8),
                               static_cast<std::byte>(x.pmtu_ack_owed)};
    pmtu_datagram(p, out[n++], TernExtKind::mtu_probe_ack, size, 0);
    x.pmtu_ack_owed = 0;
  }
  if (x.pmtu_send && n < out.size()) {
    const std::byte size[2] = {static_cast<std::byte>(x.pmtu_probe >> 8),
                               static_cast<std::byte>(x.pmtu_probe)};
    pmtu_datagram(p, out[n++], TernExtKind::mtu_probe, size, x.pmtu_probe);
    x.pmtu_send = false;
    ++counters.pmtu_probes_sent;
  }
  return n;
}

// One datagram for the peer: header, one TERN_EXT with `data`, zeros up to `total` bytes.
inline void HostCore::Impl::pmtu_datagram(Peer& p, OutDatagram& dg, TernExtKind kind,
                                          std::span<const std::byte> data, std::size_t total) {
  Header h;
  h.peer_id = p.outgoing_peer_id;
  h.session = p.outgoing_session;
  const std::size_t hsize = header_size(false, config.checksum);
  std::size_t pos = encode_header(dg.bytes, h, config.checksum);
  const std::size_t fixed = hsize + kTernExtSize + data.size();
  const std::size_t padding = total > fixed ? total - fixed : 0;
  Command cmd;
  cmd.command = static_cast<std::uint8_t>(Cmd::tern_ext);
  cmd.channel_id = kSystemChannel;
  cmd.ext.kind = static_cast<std::uint8_t>(kind);
  cmd.ext.data_length = static_cast<std::uint16_t>(data.size() + padding);
  pos += encode_command(std::span<std::byte>(dg.bytes).subspan(pos), cmd);
  std::memcpy(dg.bytes.data() + pos, data.data(), data.size());
  pos += data.size();
  std::memset(dg.bytes.data() + pos, 0, padding);
  pos += padding;
  if (config.checksum) {
    write_checksum(std::span<std::byte>(dg.bytes.data(), pos), hsize - 4, p.connect_id);
  }
  dg.to = p.address;
  dg.offset = 0;
  dg.size = static_cast<std::uint32_t>(pos);
  count(p, kDatagramsSent, 1);
  count(p, kBytesSent, pos);
  ++counters.datagrams_out;
  counters.bytes_out += pos;
}

}  // namespace tern::proto
