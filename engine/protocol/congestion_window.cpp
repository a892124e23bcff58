// The protocol core, extension "congestion window" (HostConfig::congestion_window, on by
// default; sender side, nothing on the wire: no feature bit, no commands). Its state is
// PeerQueues::congestion_window; its hooks: a timeout that looks like a stall, an
// acknowledgement, and the send window the datagram builder asks for.
//
// After a retransmission timeout that looks like a stall, only an MTU of reliable data goes
// out, and every byte acknowledged lets one more go (slow start: the window doubles each round
// trip) until it reaches the largest ENet window, where the limit is lifted. Acks for the
// originals (delayed, not lost) then free the commands waiting for their resend instead of
// sending them twice. No congestion-avoidance phase as in TCP: ENet's throttle already answers
// rising RTTs, and on a lossy game link a window that stays small after every timeout only
// adds delay.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// Only a stall shrinks the window: when something sent as late as what timed out has been
// acknowledged, the path is delivering and the timeout was a loss (an ack lost, or a resend
// lost again), which the window would only slow down.
inline void HostCore::Impl::congestion_window_on_timeouts(const Peer& p, PeerQueues& q,
                                                          std::uint64_t first_sent_ms) {
  if (config.congestion_window && q.newest_acked_sent_ms < first_sent_ms) {
    q.congestion_window = p.mtu;
  }
}

inline void HostCore::Impl::congestion_window_on_acked(PeerQueues& q, const OutCmd& c) {
  if (q.congestion_window == kUnlimitedWindow || !c.has_payload()) return;
  q.congestion_window += c.fragment_length;
  if (q.congestion_window >= kMaxWindowSize) q.congestion_window = kUnlimitedWindow;
}

// A channel with the switch off (HostConfig::channels) is not held to it: its commands still
// count in what is in transit, for the channels that are.
inline std::uint32_t HostCore::Impl::congestion_window_limit(const PeerQueues& q,
                                                             std::uint8_t channel_id) const {
  if (channel_off(config.channels.no_congestion_window, channel_id)) return kUnlimitedWindow;
  return q.congestion_window;
}

}  // namespace tern::proto
