// The protocol core: RTT samples, packet loss, ENet's packet throttle and bandwidth limits.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// enet_peer_throttle
inline void HostCore::Impl::throttle(Peer& p, std::uint32_t rtt) {
  const std::uint32_t current = p.packet_throttle;
  const std::uint32_t limit = p.packet_throttle_limit;
  std::uint32_t next = current;
  if (p.last_rtt <= p.last_rtt_variance) {
    next = limit;
  } else if (rtt <= p.last_rtt) {
    next = std::min(current + throttle_acceleration(p), limit);
  } else if (rtt > std::uint32_t{p.last_rtt} + 2 * std::uint32_t{p.last_rtt_variance}) {
    const std::uint32_t deceleration = throttle_deceleration(p);
    next = current > deceleration ? current - deceleration : 0;
  }
  p.packet_throttle = static_cast<std::uint8_t>(next);  // never above the limit (<= 32)
}

// Folds an acknowledgement's echoed send time into the RTT estimate and the throttle, as
// ENet does for every acknowledgement. False when the time cannot be ours.
inline bool HostCore::Impl::take_rtt_sample(Peer& p, std::uint16_t received_sent_time) {
  // Rebuild the full send time from its low 16 bits, as ENet does.
  const std::int64_t now = static_cast<std::int64_t>(now_ms);
  std::int64_t sent = (now & ~std::int64_t{0xFFFF}) | received_sent_time;
  if ((sent & 0x8000) > (now & 0x8000)) sent -= 0x10000;
  if (sent > now || sent < 0) return false;
  // At most 65,535 (see above), so every RTT field fits 16 bits.
  const std::uint32_t rtt = std::max<std::uint32_t>(static_cast<std::uint32_t>(now - sent), 1);
  cc_on_rtt(p, rtt);
  std::uint32_t smoothed = p.rtt;
  std::uint32_t variance = p.rtt_variance;
  if (p.last_receive_time > 0) {
    throttle(p, rtt);
    variance -= variance / 4;
    // ENet truncates diff/8, so a smoothed RTT up to 7 ms below a steady sample never
    // moves and the throttle can sit at 0 for good; rounding lets it converge.
    if (rtt >= smoothed) {
      const std::uint32_t diff = rtt - smoothed;
      variance += diff / 4;
      smoothed += (diff + 4) / 8;
    } else {
      const std::uint32_t diff = smoothed - rtt;
      variance += diff / 4;
      smoothed -= (diff + 4) / 8;
    }
  } else {
    smoothed = rtt;
    variance = (rtt + 1) / 2;
  }
  p.rtt = static_cast<std::uint16_t>(smoothed);
  p.rtt_variance = static_cast<std::uint16_t>(variance);
  p.lowest_rtt = std::min(p.lowest_rtt, p.rtt);
  p.highest_rtt_variance = std::max(p.highest_rtt_variance, p.rtt_variance);
  if (!p.throttle_epoch_set || ms_since(p.packet_throttle_epoch) >= throttle_interval(p)) {
    p.last_rtt = p.lowest_rtt;
    p.last_rtt_variance = std::max<std::uint16_t>(p.highest_rtt_variance, 1);
    p.lowest_rtt = p.rtt;
    p.highest_rtt_variance = p.rtt_variance;
    p.packet_throttle_epoch = epoch_stamp();
    p.throttle_epoch_set = true;
  }
  p.last_receive_time = std::max<std::uint64_t>(now_ms, 1);
  if (p.queues != nullptr) p.queues->earliest_timeout = 0;
  return true;
}

inline void HostCore::Impl::compute_window_from_bandwidth(Peer& p) {
  const std::uint32_t incoming = incoming_bandwidth(p);
  if (incoming == 0 && config.outgoing_bandwidth == 0) {
    p.window_size = kMaxWindowSize;
  } else if (incoming == 0 || config.outgoing_bandwidth == 0) {
    p.window_size =
        (std::max(incoming, config.outgoing_bandwidth) / kWindowSizeScale) * kMinWindowSize;
  } else {
    p.window_size =
        (std::min(incoming, config.outgoing_bandwidth) / kWindowSizeScale) * kMinWindowSize;
  }
  p.window_size = std::clamp(p.window_size, kMinWindowSize, kMaxWindowSize);
}

// Taken from connected peers only (kCommandRules).
inline Handled HostCore::Impl::handle_bandwidth_limit(Peer& p, const Command& cmd) {
  if (incoming_bandwidth(p) != 0) --bandwidth_limited_peers;
  set_bandwidths(p, cmd.bandwidth.incoming_bandwidth, cmd.bandwidth.outgoing_bandwidth);
  if (incoming_bandwidth(p) != 0) ++bandwidth_limited_peers;
  compute_window_from_bandwidth(p);
  return Handled::ok;
}

// Taken from connected peers only (kCommandRules).
inline Handled HostCore::Impl::handle_throttle_configure(Peer& p, const Command& cmd) {
  set_throttle_settings(p, cmd.throttle.interval, cmd.throttle.acceleration,
                        cmd.throttle.deceleration);
  return Handled::ok;
}

inline void HostCore::Impl::update_packet_loss(Peer& p) {
  if (!p.loss_epoch_set) {
    p.packet_loss_epoch = epoch_stamp();
    p.loss_epoch_set = true;
  } else if (ms_since(p.packet_loss_epoch) >= kPacketLossInterval && p.packets_sent > 0) {
    const std::uint32_t loss = static_cast<std::uint32_t>(std::uint64_t{p.packets_lost} *
                                                          kPacketLossScale / p.packets_sent);
    const std::uint32_t diff = loss > p.packet_loss ? loss - p.packet_loss : p.packet_loss - loss;
    p.packet_loss_variance = (p.packet_loss_variance * 3 + diff) / 4;
    p.packet_loss = (p.packet_loss * 7 + loss) / 8;
    p.packet_loss_epoch = epoch_stamp();
    p.packets_sent = 0;
    p.packets_lost = 0;
  }
}

// enet_host_bandwidth_throttle. Scans connected peers once per interval, and only when some
// bandwidth limit is configured: unlimited hosts (the common case) never scan.
inline void HostCore::Impl::bandwidth_throttle() {
  const bool limited = config.outgoing_bandwidth != 0 || bandwidth_limited_peers > 0 ||
                       (recalculate_bandwidth_limits && config.incoming_bandwidth != 0);
  if (!limited) {
    recalculate_bandwidth_limits = false;
    return;
  }
  if (now_ms - bandwidth_throttle_epoch < kBandwidthThrottleInterval) return;
  const std::uint64_t elapsed = now_ms - bandwidth_throttle_epoch;
  bandwidth_throttle_epoch = now_ms;
  if (connected_peers == 0) return;
  std::vector<Peer*>& connected = throttle_scratch;  // reused: the pass runs every second
  connected.clear();
  for (std::uint32_t i = 0; i < slots.size(); ++i) {
    Peer& sp = slots[i];
    if (sp.connected_like()) {
      // The marks mean "set by this pass" (ENet compares epochs with the pass's time stamp).
      sp.incoming_bandwidth_marked = false;
      sp.outgoing_bandwidth_marked = false;
      connected.push_back(&sp);
    }
  }
  throttle_to_bandwidth(connected, elapsed);
  if (recalculate_bandwidth_limits) {
    recalculate_bandwidth_limits = false;
    announce_bandwidth_limits(connected);
  }
}

// The outgoing half: each peer's packet throttle limit, so that what we send fits our outgoing
// bandwidth and each peer's announced incoming bandwidth. Peers over their own bandwidth are
// limited first; the rest share what is left.
inline void HostCore::Impl::throttle_to_bandwidth(const std::vector<Peer*>& connected,
                                                  std::uint64_t elapsed) {
  std::size_t peers_remaining = connected_peers;
  std::uint64_t data_total = ~std::uint64_t{0};
  std::uint64_t bandwidth = ~std::uint64_t{0};
  if (config.outgoing_bandwidth != 0) {
    data_total = 0;
    bandwidth = std::uint64_t{config.outgoing_bandwidth} * elapsed / 1000;
    for (Peer* p : connected) data_total += p->outgoing_data_total;
  }
  bool needs_adjustment = bandwidth_limited_peers > 0;
  std::uint64_t throttle_value = 0;
  while (peers_remaining > 0 && needs_adjustment) {
    needs_adjustment = false;
    throttle_value = data_total <= bandwidth ? kPacketThrottleScale
                                             : bandwidth * kPacketThrottleScale /
                                                   std::max<std::uint64_t>(data_total, 1);
    for (Peer* p : connected) {
      if (incoming_bandwidth(*p) == 0 || p->outgoing_bandwidth_marked) continue;
      const std::uint64_t peer_bandwidth = std::uint64_t{incoming_bandwidth(*p)} * elapsed / 1000;
      if (throttle_value * p->outgoing_data_total / kPacketThrottleScale <= peer_bandwidth)
        continue;
      // Below kPacketThrottleScale: this peer's data exceeds its bandwidth.
      p->packet_throttle_limit =
          static_cast<std::uint8_t>(peer_bandwidth * kPacketThrottleScale /
                                    std::max<std::uint32_t>(p->outgoing_data_total, 1));
      if (p->packet_throttle_limit == 0) p->packet_throttle_limit = 1;
      p->packet_throttle = std::min(p->packet_throttle, p->packet_throttle_limit);
      p->outgoing_bandwidth_marked = true;
      p->outgoing_data_total = 0;
      needs_adjustment = true;
      --peers_remaining;
      bandwidth -= std::min(bandwidth, peer_bandwidth);
      data_total -= std::min(data_total, peer_bandwidth);
    }
  }
  if (peers_remaining > 0) {
    throttle_value = data_total <= bandwidth ? kPacketThrottleScale
                                             : bandwidth * kPacketThrottleScale /
                                                   std::max<std::uint64_t>(data_total, 1);
    for (Peer* p : connected) {
      if (p->outgoing_bandwidth_marked) continue;
      p->packet_throttle_limit = static_cast<std::uint8_t>(throttle_value);  // <= 32
      p->packet_throttle = std::min(p->packet_throttle, p->packet_throttle_limit);
      p->outgoing_data_total = 0;
    }
  }
}

// The incoming half: the limit each peer may send us at (our incoming bandwidth shared out,
// peers that send less than their share keeping theirs), sent to each as BANDWIDTH_LIMIT.
inline void HostCore::Impl::announce_bandwidth_limits(const std::vector<Peer*>& connected) {
  std::size_t peers_remaining = connected_peers;
  std::uint64_t in_bandwidth = config.incoming_bandwidth;
  std::uint64_t bandwidth_limit = 0;
  bool needs_adjustment = true;
  if (in_bandwidth != 0) {
    while (peers_remaining > 0 && needs_adjustment) {
      needs_adjustment = false;
      bandwidth_limit = in_bandwidth / peers_remaining;
      for (Peer* p : connected) {
        if (p->incoming_bandwidth_marked) continue;
        const std::uint32_t out = outgoing_bandwidth(*p);
        if (out > 0 && out >= bandwidth_limit) continue;
        p->incoming_bandwidth_marked = true;
        needs_adjustment = true;
        --peers_remaining;
        in_bandwidth -= std::min<std::uint64_t>(in_bandwidth, out);
      }
    }
  }
  for (Peer* p : connected) {
    Command cmd;
    cmd.command = static_cast<std::uint8_t>(Cmd::bandwidth_limit) | kFlagAcknowledge;
    cmd.bandwidth.outgoing_bandwidth = config.outgoing_bandwidth;
    cmd.bandwidth.incoming_bandwidth = p->incoming_bandwidth_marked
                                           ? outgoing_bandwidth(*p)
                                           : static_cast<std::uint32_t>(bandwidth_limit);
    queue_system(*p, cmd);
  }
}

}  // namespace tern::proto
