// The per-channel switches (tern::ChannelRule, README "HostOptions") on an app's command line
// and in tern-relay's config: one rule as "CHANNELS=SWITCHES", e.g. "1,3-5=no-fast-retransmit,low".
//
//   CHANNELS  channel IDs (0..254) and ranges, comma separated
//   SWITCHES  comma separated, each turning off one extension on those channels:
//             no-fast-retransmit, no-nodelay, no-redundancy, no-congestion-control, no-express,
//             no-congestion-window, no-delivery-modes; or a default level: high, medium, low
//
// Rules apply in order: a channel named by several takes the last one's switches.
#pragma once

#include <tern/types.hpp>

#include <string>
#include <string_view>

namespace tern::app {

// One rule; false with a one-line reason (naming the bad part) on anything else.
bool parse_channel_rule(std::string_view text, ChannelRule& out, std::string& error);

// The switch words, for usage texts.
extern const char* const kChannelSwitchWords;

}  // namespace tern::app
