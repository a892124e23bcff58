// tern-netem's configuration: a TOML file (--config) and flags, flags winning.
#pragma once

#include "impair.hpp"

#include <tern/endpoint.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tern::netem {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

extern const char* const kUsage;

inline constexpr int kUp = 0;    // client → upstream server
inline constexpr int kDown = 1;  // upstream server → client
inline constexpr const char* kDirName[2] = {"up", "down"};

struct Config {
  bool help = false;
  Endpoint listen;
  bool listen_given = false;
  Endpoint upstream;
  Impairment dir[2];
  std::uint64_t seed = 1;
  std::uint32_t max_flows = 4096;
  std::uint64_t idle_timeout_ms = 60000;  // a flow silent both ways this long is closed
  std::uint32_t pool = 16384;             // datagram buffers shared by every flow
  std::uint32_t slot_bytes = 4096;        // largest datagram the proxy forwards
  std::uint64_t duration_ms = 0;          // 0: until SIGINT/SIGTERM
  std::string stats_json;
  bool quiet = false;  // no progress line
};

// The value syntaxes shared by flags and the file; nullopt when malformed or out of range.
// Probability: "5%" or a fraction "0.05".
std::optional<double> parse_probability(std::string_view text);
// Duration: a number with a unit, "25ms", "1.5s", "250us", "0".
std::optional<std::uint64_t> parse_duration_ns(std::string_view text);
// Rate: bytes per second, or with a unit: bit/kbit/mbit/gbit (bits/s), bps/kbps/mbps/gbps
// (bytes/s), powers of 1000.
std::optional<std::uint64_t> parse_rate(std::string_view text);
// Gilbert-Elliott: "p,r[,loss_bad[,loss_good]]", each a probability.
std::optional<GilbertElliott> parse_ge(std::string_view text);

enum class ParseResult { ok, usage, config };

// Reads --config first (when given), then the flags over it. `usage`: a bad command line
// (print kUsage, exit 2); `config`: a bad file, `error` names the file, the key and the reason.
ParseResult parse_config(int argc, const char* const* argv, Config& config, std::string& error);

// Contradictions the value parsers cannot see on their own ("" when consistent); `where`
// prefixes the direction's name ("up", "file.toml: up").
std::string check_impairment(const Impairment& imp, const std::string& where);

}  // namespace tern::netem
