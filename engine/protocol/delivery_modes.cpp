// The protocol core, extension "delivery modes" (HostConfig::delivery_modes, on by default;
// WIRE.md, "Extensions"): Delivery::reliable_unordered and reliable_sequenced between Tern
// peers. Negotiated with kFeatureDeliveryModes in the hello; the sender marks a reliable
// command's mode with kFlagTernUnordered or kFlagTernSequenced, and the receive path
// (receive.cpp, reassembly.cpp) delivers such a message on arrival and keeps a placeholder
// for its sequence number. To any other peer the modes go as plain reliable.
// Part of host_core.cpp's translation unit (see README.md).
#include "core_impl.hpp"

namespace tern::proto {

inline std::uint32_t HostCore::Impl::delivery_modes_offered() const {
  return config.delivery_modes ? kFeatureDeliveryModes : 0;
}

inline std::uint32_t HostCore::Impl::delivery_modes_agreed(const Peer& p) const {
  return p.delivery_modes ? kFeatureDeliveryModes : 0;
}

inline void HostCore::Impl::delivery_modes_on_agreed(Peer& p, std::uint32_t agreed) {
  p.delivery_modes = (agreed & kFeatureDeliveryModes) != 0;
}

// A channel whose switch is off (HostConfig::channels) sends the modes as plain reliable,
// as to a peer that did not agree; what the peer marks on it is still honoured.
inline std::uint8_t HostCore::Impl::delivery_flags(const Peer& p, Delivery delivery,
                                                   std::uint8_t channel_id) const {
  if (!p.delivery_modes || channel_off(config.channels.no_delivery_modes, channel_id)) return 0;
  if (delivery == Delivery::reliable_unordered) return kFlagTernUnordered;
  if (delivery == Delivery::reliable_sequenced) return kFlagTernSequenced;
  return 0;
}

}  // namespace tern::proto
