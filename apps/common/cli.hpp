// Command-line helpers shared by the apps: a table-driven long-flag parser and number parsing.
//
// Every app takes GNU-style long flags ("--count 5" or "--count=5") and nothing positional, so
// one small parser covers them; what a flag means and which combinations are legal stay in
// the app.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tern::app {

struct FlagSpec {
  std::string_view name;  // without the leading "--"
  bool takes_value = false;
};

class CommandLine {
 public:
  // Parses argv[1..argc). False with a one-line reason on an unknown flag, a missing or
  // unexpected value, or a positional argument.
  bool parse(int argc, const char* const* argv, std::span<const FlagSpec> specs,
             std::string& error);

  bool has(std::string_view name) const { return count(name) != 0; }
  std::size_t count(std::string_view name) const;
  // The value of the last occurrence (later flags override earlier ones, as in most tools).
  std::optional<std::string_view> value(std::string_view name) const;
  // The values of every occurrence, in order (a flag that may be repeated).
  std::vector<std::string_view> values(std::string_view name) const;
  // Names in the order they were given, repeats included.
  std::vector<std::string_view> names() const;

 private:
  struct Given {
    std::string_view name;
    std::string_view value;
  };
  std::vector<Given> given_;
};

// Decimal unsigned integer in [min, max]; nullopt on anything else (signs, spaces, overflow).
std::optional<std::uint64_t> parse_uint(std::string_view text, std::uint64_t min,
                                        std::uint64_t max);

// "--name N" into `out` when given: false with "--name wants an integer in MIN..MAX, got 'X'".
// An absent flag leaves `out` alone and succeeds.
bool read_uint(const CommandLine& cl, std::string_view name, std::uint64_t min, std::uint64_t max,
               std::uint64_t& out, std::string& error);
template <class T>
bool read_uint(const CommandLine& cl, std::string_view name, std::uint64_t min, std::uint64_t max,
               T& out, std::string& error) {
  std::uint64_t v = out;
  if (!read_uint(cl, name, min, max, v, error)) return false;
  out = static_cast<T>(v);
  return true;
}

// "on" or "off"; nullopt on anything else.
std::optional<bool> parse_on_off(std::string_view text);

// "--name on|off" into `out` when given: false with "--name wants on or off, got 'X'". An
// absent flag leaves `out` alone and succeeds.
bool read_on_off(const CommandLine& cl, std::string_view name, bool& out, std::string& error);

// Seconds with at most three decimals ("2", "0.5", "1.250") as milliseconds within
// [min_ms, max_ms]; nullopt on anything else.
std::optional<std::uint64_t> parse_seconds_ms(std::string_view text, std::uint64_t min_ms,
                                              std::uint64_t max_ms);

// "--name S" as seconds with at most three decimals ("2", "0.5", "1.250") into milliseconds,
// within [min_ms, max_ms]; an absent flag leaves `out_ms` alone and succeeds.
bool read_seconds(const CommandLine& cl, std::string_view name, std::uint64_t min_ms,
                  std::uint64_t max_ms, std::uint64_t& out_ms, std::string& error);

}  // namespace tern::app
