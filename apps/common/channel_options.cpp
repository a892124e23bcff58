#include "common/channel_options.hpp"

#include "common/cli.hpp"

#include <cstdint>

namespace tern::app {

const char* const kChannelSwitchWords =
    "no-fast-retransmit, no-nodelay, no-redundancy, no-congestion-control, no-express, "
    "no-congestion-window, no-delivery-modes, high, medium, low";

namespace {

// Splits off the text before the next comma (all of it when there is none).
std::string_view next_item(std::string_view& text) {
  const auto comma = text.find(',');
  const std::string_view item = text.substr(0, comma);
  text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
  return item;
}

bool parse_channels(std::string_view text, ChannelMask& out, std::string& error) {
  while (!text.empty()) {
    const std::string_view item = next_item(text);
    const auto dash = item.find('-');
    const auto first = parse_uint(item.substr(0, dash), 0, 254);
    const auto last =
        dash == std::string_view::npos ? first : parse_uint(item.substr(dash + 1), 0, 254);
    if (!first || !last || *last < *first) {
      error = "channel '" + std::string(item) + "': want an ID or a range in 0..254";
      return false;
    }
    for (std::uint64_t c = *first; c <= *last; ++c) out[c / 64] |= std::uint64_t{1} << (c % 64);
  }
  return true;
}

bool apply_switch(std::string_view word, ChannelOptions& o) {
  if (word == "no-fast-retransmit") {
    o.fast_retransmit = false;
  } else if (word == "no-nodelay") {
    o.nodelay = false;
  } else if (word == "no-redundancy") {
    o.redundancy = false;
  } else if (word == "no-congestion-control") {
    o.congestion_control = false;
  } else if (word == "no-express") {
    o.cc_express = false;
  } else if (word == "no-congestion-window") {
    o.congestion_window = false;
  } else if (word == "no-delivery-modes") {
    o.delivery_modes = false;
  } else if (word == "high") {
    o.priority = Priority::high;
  } else if (word == "medium") {
    o.priority = Priority::medium;
  } else if (word == "low") {
    o.priority = Priority::low;
  } else {
    return false;
  }
  return true;
}

}  // namespace

bool parse_channel_rule(std::string_view text, ChannelRule& out, std::string& error) {
  out = ChannelRule{};
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    error = "'" + std::string(text) + "': want CHANNELS=SWITCHES (e.g. 1,3-5=no-fast-retransmit)";
    return false;
  }
  if (!parse_channels(text.substr(0, eq), out.channels, error)) return false;
  std::string_view words = text.substr(eq + 1);
  if (words.empty()) {
    error = "'" + std::string(text) + "': no switches after '='";
    return false;
  }
  while (!words.empty()) {
    const std::string_view word = next_item(words);
    if (!apply_switch(word, out.options)) {
      error = "unknown switch '" + std::string(word) + "' (known: " + kChannelSwitchWords + ")";
      return false;
    }
  }
  return true;
}

}  // namespace tern::app
