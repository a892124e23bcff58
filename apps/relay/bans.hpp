// tern-relay's bans, in one list: the engine's host-level ban list on every shard
// (proto::HostCore::ban), which refuses a banned source before the handshake. Three things feed
// it: POST /admin/ban, the payload filter's `ban:` action, and the bans file
// ([security] bans_file, reloaded on SIGHUP). This file holds what they share: the target
// syntax ("ADDRESS" or "ADDRESS/BITS") and the bans file's reader.
#pragma once

#include <tern/endpoint.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tern::relay {

// An address or a prefix. Bits count the 128-bit form (IPv4 mapped into ::ffff:0:0/96), so an
// IPv4 /24 is 120; 128 is one address.
struct BanTarget {
  Endpoint address;  // port 0, bits past prefix_bits zeroed
  unsigned prefix_bits = 128;
  bool operator==(const BanTarget&) const = default;
};

// "1.2.3.4", "::1", "[::1]", "10.0.0.0/8", "2001:db8::/32" (prefix lengths as written: IPv4
// 0..32, IPv6 0..128). Not the unspecified address alone. nullopt with `error` saying why.
std::optional<BanTarget> parse_ban_target(std::string_view text, std::string& error);
// The same syntax back: "1.2.3.4", "10.0.0.0/8", "2001:db8::/32".
std::string ban_target_text(const BanTarget& t);
// Whether the target covers `address` (any port).
bool covers(const BanTarget& t, const Endpoint& address);

// One line of a bans file: the target, and its length in seconds (0: until the line goes).
struct BanLine {
  BanTarget target;
  std::uint32_t seconds = 0;
};
inline constexpr std::uint32_t kMaxBanSeconds = 30 * 24 * 3600;
// A quarter of the engine's ban table (HostConfig::ban_capacity, 16,384 per shard): room for
// the admin endpoint's and the filter's bans beside the file's, none displaced.
inline constexpr std::size_t kMaxBansFileLines = 4096;

// Reads a bans file: one "TARGET [SECONDS]" a line; '#' starts a comment; blank lines are
// skipped; at most kMaxBansFileLines bans. False with "FILE:LINE: reason" (or "FILE: reason"
// when it cannot be read).
bool read_bans_file(const std::string& path, std::vector<BanLine>& out, std::string& error);

}  // namespace tern::relay
