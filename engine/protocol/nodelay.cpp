// The protocol core, extension "nodelay" (HostConfig::nodelay, off by default; WIRE.md,
// "Extensions"): KCP's answer to latency under loss on the channels it covers. A timed-out
// command's timeout grows x1.5 instead of x2 (retransmit.cpp, backed_off_rto), a command is
// resent once `nodelay_resend` acknowledgements arrived for commands sent after it
// (fast_retransmit.cpp), and the throttle leaves the reliable window alone
// (datagram_builder.cpp). All of that is the sender's own. Negotiated with kFeatureNodelay in
// the hello is only the receiver's part: a connection where either side asked for it has its
// acknowledgements sent at once both ways (never held by ack_delay_ms; Peer::nodelay_agreed).
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::nodelay_offered() const {
  return config.nodelay ? kFeatureNodelay : 0;
}

// A Tern server answers a client's request, and asks for it itself when it runs nodelay.
inline std::uint32_t HostCore::Impl::nodelay_agreed(const Peer& p) const {
  return p.nodelay_agreed || config.nodelay ? kFeatureNodelay : 0;
}

inline void HostCore::Impl::nodelay_on_agreed(Peer& p, std::uint32_t agreed) {
  p.nodelay_agreed = (agreed & kFeatureNodelay) != 0 || config.nodelay;
}

inline bool HostCore::Impl::nodelay_channel(std::uint8_t channel_id) const {
  if (!config.nodelay || channel_off(config.channels.no_nodelay, channel_id)) return false;
  const auto& mask = config.nodelay_channels;
  if ((mask[0] | mask[1] | mask[2] | mask[3]) == 0) return true;
  return ((mask[channel_id / 64] >> (channel_id % 64)) & 1) != 0;
}

inline bool HostCore::Impl::nodelay_resend_rule(std::uint8_t channel_id) const {
  return config.nodelay_resend != 0 && nodelay_channel(channel_id);
}

}  // namespace tern::proto
