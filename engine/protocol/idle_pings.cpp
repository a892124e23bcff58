// The protocol core, extension "idle pings" (HostConfig::idle_ping_intervals, 4 by default;
// WIRE.md, "Extensions", feature bit 5): between Tern peers the connecting side's keep-alive
// ping waits several ping intervals of silence instead of one. Keep-alive pings are what an
// idle connection costs (a server with thousands of idle clients wakes for each one and
// answers it), and a connection with traffic hears acknowledgements and does not ping at
// all, so the longer wait costs the client's idle RTT estimate some freshness and up to that
// many intervals more before a dead server's timeout starts counting. The accepting side
// keeps its own pings (ping_after), so its RTT estimate and its view of a dead client are as
// before. The timeout rules themselves (timeout_minimum, timeout_limit, timeout_maximum) are
// ENet's, counted from the ping.
// Negotiated because a plain ENet peer pings every interval and expects nothing else; with
// one, both sides keep ENet's interval. Part of host_core.cpp's translation unit (see
// README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::idle_pings_offered() const {
  return config.idle_ping_intervals > 1 ? kFeatureIdlePings : 0;
}

inline std::uint32_t HostCore::Impl::idle_pings_agreed(const Peer& p) const {
  return p.idle_pings ? kFeatureIdlePings : 0;
}

inline void HostCore::Impl::idle_pings_on_agreed(Peer& p, std::uint32_t agreed) {
  p.idle_pings = (agreed & local_features() & kFeatureIdlePings) != 0;
}

// The silence the connecting side's keep-alive ping waits for (ping_after). ENet's interval
// until the first acknowledgement arrives: the handshake gives the client no RTT sample, and
// its first ping, due at once, is what replaces the initial 500 ms guess.
inline std::uint32_t HostCore::Impl::keepalive_interval(const Peer& p) const {
  const std::uint32_t interval = ping_interval(p);
  return p.idle_pings && p.last_receive_time != 0 ? interval * config.idle_ping_intervals
                                                  : interval;
}

}  // namespace tern::proto
