#include "common/cli.hpp"

#include <algorithm>
#include <charconv>

namespace tern::app {

bool CommandLine::parse(int argc, const char* const* argv, std::span<const FlagSpec> specs,
                        std::string& error) {
  given_.clear();
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.size() < 3 || arg.substr(0, 2) != "--") {
      error = "unexpected argument '" + std::string(arg) + "'";
      return false;
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string_view> inline_value;
    if (const auto eq = name.find('='); eq != std::string_view::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const auto spec =
        std::find_if(specs.begin(), specs.end(), [&](const FlagSpec& s) { return s.name == name; });
    if (spec == specs.end()) {
      error = "unknown flag --" + std::string(name);
      return false;
    }
    if (!spec->takes_value) {
      if (inline_value) {
        error = "--" + std::string(name) + " takes no value";
        return false;
      }
      given_.push_back({spec->name, {}});
      continue;
    }
    if (inline_value) {
      given_.push_back({spec->name, *inline_value});
      continue;
    }
    if (i + 1 >= argc) {
      error = "--" + std::string(name) + " needs a value";
      return false;
    }
    given_.push_back({spec->name, argv[++i]});
  }
  return true;
}

std::size_t CommandLine::count(std::string_view name) const {
  return static_cast<std::size_t>(
      std::count_if(given_.begin(), given_.end(), [&](const Given& g) { return g.name == name; }));
}

std::optional<std::string_view> CommandLine::value(std::string_view name) const {
  for (auto it = given_.rbegin(); it != given_.rend(); ++it) {
    if (it->name == name) return it->value;
  }
  return std::nullopt;
}

std::vector<std::string_view> CommandLine::names() const {
  std::vector<std::string_view> out;
  out.reserve(given_.size());
  for (const auto& g : given_) out.push_back(g.name);
  return out;
}

std::optional<std::uint64_t> parse_uint(std::string_view text, std::uint64_t min,
                                        std::uint64_t max) {
  std::uint64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < min || v > max) return std::nullopt;
  return v;
}

}  // namespace tern::app
