// The protocol core, extension "congestion control" (HostConfig::congestion_control, on by
// default, feature bit 4; WIRE.md, "Extensions"). A BBR-like model, sender side: nothing new
// on the wire but the hello's bit, which says the other side takes windows beyond ENet's
// 64 KiB (its receive caps are sized for them). Its state is PeerExtra::cc.
//
// Why a model of the path rather than a loss-driven window: Tern's users run lossy links
// (Wi-Fi, mobile) where a random 1% loss says nothing about congestion, and a CUBIC-like
// window that halves on each loss would hold a transfer far below the path's rate (and below
// ENet's fixed window). BBR's two estimates come from what the core already has: each
// reliable command knows its send time, acknowledgements give RTT samples, and the bytes
// acknowledged per round trip give delivery rates.
//
// - Bottleneck bandwidth: the max, over the last 10 rounds, of bytes acknowledged per round
//   (a round lasts one min RTT, at least 4 ms given the core's millisecond clock). A round in
//   which the sender ran out of bulk to send (application-limited) only counts if it raises
//   the estimate.
// - Min RTT: the least RTT sample, renewed after 10 s (no ProbeRTT phase: a Tern connection
//   rarely keeps a queue for 10 s, and its game traffic would pay for the drain).
// - Startup paces at 2.89x the estimate until three rounds bring less than 25% more; drain
//   at 1/2.89 until what is in flight fits the BDP; then probe_bw cycles 1.25, 0.75, 1 x6.
// - The window is twice the BDP (2.89x in startup), at least 4 MTUs, at most cc_max_window,
//   and never above the stall window (congestion_window.cpp) after a timeout.
//
// Pacing runs on the timer wheel: a bulk command goes only while the pacer's clock is at most
// 1 ms ahead (the wheel's resolution); otherwise the peer's timer is set for when it will be
// and the peer's other traffic flows meanwhile. Small reliable messages (cc_express_bytes,
// whole, on a channel with no bulk waiting) are queued ahead of bulk and pass both the pacer
// and the window: game traffic never waits behind a transfer.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

namespace {
constexpr double kStartupGain = 2.885;  // 2/ln 2: doubles the delivery rate each round
constexpr std::array<double, 8> kProbeGains = {1.25, 0.75, 1, 1, 1, 1, 1, 1};
constexpr std::uint64_t kPaceSlackUs = 1000;  // the timer wheel's tick
constexpr std::uint32_t kMinRoundMs = 4;
constexpr std::uint32_t kInitialWindowMtus = 10;
constexpr std::uint64_t kMinRttLifetimeMs = 10000;
constexpr std::uint64_t kNoRound = ~std::uint64_t{0};
}  // namespace

inline bool HostCore::Impl::cc_on(const Peer& p) { return p.congestion_control; }

// Whether the channel's reliable messages are under the model (HostConfig::channels): a
// channel with the switch off sends as to a peer that did not agree.
inline bool HostCore::Impl::cc_channel(const Peer& p, std::uint8_t channel_id) const {
  return cc_on(p) && !channel_off(config.channels.no_congestion_control, channel_id);
}

// The model, once the first bulk message started it (null before, and where not agreed).
inline CongestionState* HostCore::Impl::cc_model(const Peer& p) {
  return p.congestion_control && p.extra != nullptr && p.extra->cc.on ? &p.extra->cc : nullptr;
}

// Taken with the first bulk message: a PeerExtra from its pool, once per connection.
inline CongestionState& HostCore::Impl::cc_start(Peer& p) {
  CongestionState& s = extra(p).cc;
  if (!s.on) {
    s = CongestionState{};
    s.on = true;
    s.round_start_ms = kNoRound;
  }
  return s;
}

inline std::uint32_t HostCore::Impl::cc_offered() const {
  return config.congestion_control ? kFeatureCongestion : 0;
}

inline std::uint32_t HostCore::Impl::cc_agreed(const Peer& p) const {
  return cc_on(p) ? kFeatureCongestion : 0;
}

// Both sides must want it: each side's window is the other's receive buffer.
inline void HostCore::Impl::cc_on_agreed(Peer& p, std::uint32_t agreed) {
  p.congestion_control = config.congestion_control && (agreed & kFeatureCongestion) != 0;
}

inline void HostCore::Impl::cc_on_rtt(Peer& p, std::uint32_t rtt) {
  CongestionState* m = cc_model(p);
  if (m == nullptr) return;
  CongestionState& s = *m;
  if (s.min_rtt_ms == 0 || rtt <= s.min_rtt_ms || now_ms - s.min_rtt_stamp_ms > kMinRttLifetimeMs) {
    s.min_rtt_ms = rtt;
    s.min_rtt_stamp_ms = now_ms;
  }
}

inline void HostCore::Impl::cc_on_acked(Peer& p, const OutCmd& c) {
  if (CongestionState* s = cc_model(p); s != nullptr && c.has_payload()) {
    s->delivered += c.fragment_length;
  }
}

// Once per datagram of acks: close the round if it lasted a min RTT, take its delivery rate
// into the bandwidth filter, move the phase.
inline void HostCore::Impl::cc_after_acks(Peer& p) {
  CongestionState* m = cc_model(p);
  if (m == nullptr) return;
  CongestionState& s = *m;
  if (s.round_start_ms == kNoRound) {
    s.round_start_ms = now_ms;
    s.round_delivered = s.delivered;
    return;
  }
  const std::uint64_t elapsed = now_ms - s.round_start_ms;
  if (elapsed < std::max(s.min_rtt_ms, kMinRoundMs)) return;
  const std::uint64_t bytes = s.delivered - s.round_delivered;
  const bool app_limited = s.round_app_limited;
  s.round_start_ms = now_ms;
  s.round_delivered = s.delivered;
  s.round_app_limited = false;
  if (bytes == 0) return;  // idle: nothing learned, the estimates stand
  const auto rate = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(bytes * 1000 / elapsed, std::numeric_limits<std::uint32_t>::max()));
  if (!app_limited || rate > s.bandwidth) {
    s.round_slot = static_cast<std::uint8_t>((s.round_slot + 1) % kCcBandwidthRounds);
    s.bandwidth_rounds[s.round_slot] = rate;
    s.bandwidth = *std::max_element(s.bandwidth_rounds.begin(), s.bandwidth_rounds.end());
  }
  if (s.phase == CongestionState::startup && !app_limited) {
    if (s.bandwidth >= s.full_bw + s.full_bw / 4) {
      s.full_bw = s.bandwidth;
      s.full_bw_rounds = 0;
    } else if (++s.full_bw_rounds >= 3) {
      s.phase = CongestionState::drain;
    }
  }
  cc_update_model(p);
}

inline void HostCore::Impl::cc_update_model(Peer& p) {
  CongestionState& s = *cc_model(p);
  const std::uint32_t mtu = p.mtu;
  if (s.bandwidth == 0 || s.min_rtt_ms == 0) {
    // No estimate yet: ten MTUs (TCP's initial window, RFC 6928) paced over the RTT the
    // handshake measured. ENet's 64 KiB at once would queue a quarter second at a slow
    // bottleneck, in front of the game traffic sharing it; startup doubles from here.
    s.cwnd = kInitialWindowMtus * mtu;
    s.pacing_rate = static_cast<std::uint32_t>(kStartupGain * s.cwnd * 1000 /
                                               std::max<std::uint32_t>(p.rtt, 1));
    return;
  }
  const std::uint64_t bdp = std::uint64_t{s.bandwidth} * s.min_rtt_ms / 1000;
  const std::uint64_t in_transit =
      (p.queues != nullptr ? p.queues->reliable_data_in_transit : 0) + s.block_in_flight;
  if (s.phase == CongestionState::drain && in_transit <= bdp) {
    s.phase = CongestionState::probe_bw;
    s.cycle = 2;  // a cruising gain: the probe comes after a full cycle's worth of samples
    s.cycle_start_ms = now_ms;
  }
  if (s.phase == CongestionState::probe_bw && now_ms - s.cycle_start_ms >= s.min_rtt_ms) {
    s.cycle = static_cast<std::uint8_t>((s.cycle + 1) % kProbeGains.size());
    s.cycle_start_ms = now_ms;
  }
  double pacing_gain = kProbeGains[s.cycle];
  double cwnd_gain = 2;
  if (s.phase == CongestionState::startup) {
    pacing_gain = cwnd_gain = kStartupGain;
  } else if (s.phase == CongestionState::drain) {
    pacing_gain = 1 / kStartupGain;
    cwnd_gain = kStartupGain;
  }
  const double window = cwnd_gain * static_cast<double>(bdp);
  s.cwnd = static_cast<std::uint32_t>(
      std::clamp(window, 4.0 * mtu, static_cast<double>(std::max(config.cc_max_window, 4 * mtu))));
  s.pacing_rate = static_cast<std::uint32_t>(
      std::clamp(pacing_gain * s.bandwidth, 1000.0, static_cast<double>(UINT32_MAX)));
}

// The model, started, with a first estimate: taken by the first bulk message or large block.
inline CongestionState& HostCore::Impl::cc_ready(Peer& p) {
  CongestionState& s = cc_start(p);
  if (s.pacing_rate == 0) {
    // The RTT samples before bulk started: the handshake's and the pings'.
    s.min_rtt_ms = p.lowest_rtt;
    s.min_rtt_stamp_ms = now_ms;
    cc_update_model(p);
  }
  return s;
}

// May a bulk command of `c` go now? Counts what held it back; a paced peer's timer wakes it.
inline bool HostCore::Impl::cc_allows(Peer& p, const PeerQueues& q, const OutCmd& c) {
  CongestionState& s = cc_ready(p);
  const std::uint32_t window = std::min(s.cwnd, congestion_window_limit(q, c.channel_id));
  if (q.reliable_data_in_transit + c.fragment_length > std::max<std::uint32_t>(window, p.mtu)) {
    ++counters.cwnd_limited;
    return false;
  }
  if (s.pace_next_us > now_us + kPaceSlackUs) {
    s.pace_waiting = true;
    ++counters.pacer_waits;
    return false;
  }
  return true;
}

inline void HostCore::Impl::cc_paced_sent(Peer& p, const OutCmd& c) {
  CongestionState& s = *cc_model(p);  // cc_allows started it
  const std::uint64_t cost =
      std::uint64_t{static_cast<std::uint32_t>(c.wire_size())} * 1'000'000 / s.pacing_rate;
  s.pace_next_us = std::max(s.pace_next_us, now_us) + cost;
}

// When the pacer lets a waiting peer's bulk go again (kNever: nothing waits).
inline std::uint64_t HostCore::Impl::cc_wake_ms(const Peer& p) const {
  const CongestionState* s = cc_model(p);
  if (s == nullptr || !s->pace_waiting || p.outgoing_reliable_empty()) return kNever;
  const std::uint64_t at = s->pace_next_us - kPaceSlackUs;
  return std::max<std::uint64_t>((at + 999) / 1000, now_ms + 1);
}

// Where a small reliable message queues: ahead of bulk, behind the express ones before it.
inline bool HostCore::Impl::cc_express(const Peer& p, const Command& cmd, const Channel& ch,
                                       std::uint16_t length) const {
  return cc_channel(p, cmd.channel_id) && cmd.type() == Cmd::send_reliable &&
         length <= config.cc_express_bytes && ch.bulk_unsent == 0 &&
         !channel_off(config.channels.no_express, cmd.channel_id);
}

}  // namespace tern::proto
