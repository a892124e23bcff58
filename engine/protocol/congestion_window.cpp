// The protocol core: extension: after a stall, reliable data in transit restarts at one MTU.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

// A retransmission timeout that looks like a stall (see check_timeouts): only an MTU of
// reliable data goes out, and every byte acknowledged lets one more go (slow start: the
// window doubles each round trip) until it reaches the largest ENet window, where the limit
// is lifted. Acks for the originals (delayed, not lost) then free the commands waiting for
// their resend instead of sending them twice. No congestion-avoidance phase as in TCP:
// ENet's throttle already answers rising RTTs, and on a lossy game link a window that
// stays small after every timeout only adds delay.
inline void HostCore::Impl::shrink_congestion_window(const Peer& p, PeerQueues& q) {
  q.congestion_window = p.mtu;
}

inline void HostCore::Impl::grow_congestion_window(PeerQueues& q, std::uint32_t acked) {
  if (q.congestion_window == kUnlimitedWindow) return;
  q.congestion_window += acked;
  if (q.congestion_window >= kMaxWindowSize) q.congestion_window = kUnlimitedWindow;
}

}  // namespace tern::proto
