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

std::vector<std::string_view> CommandLine::values(std::string_view name) const {
  std::vector<std::string_view> out;
  for (const auto& g : given_) {
    if (g.name == name) out.push_back(g.value);
  }
  return out;
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

bool read_uint(const CommandLine& cl, std::string_view name, std::uint64_t min, std::uint64_t max,
               std::uint64_t& out, std::string& error) {
  const auto text = cl.value(name);
  if (!text) return true;
  const auto v = parse_uint(*text, min, max);
  if (!v) {
    error = "--" + std::string(name) + " wants an integer in " + std::to_string(min) + ".." +
            std::to_string(max) + ", got '" + std::string(*text) + "'";
    return false;
  }
  out = *v;
  return true;
}

std::optional<bool> parse_on_off(std::string_view text) {
  if (text == "on") return true;
  if (text == "off") return false;
  return std::nullopt;
}

bool read_on_off(const CommandLine& cl, std::string_view name, bool& out, std::string& error) {
  const auto text = cl.value(name);
  if (!text) return true;
  const auto v = parse_on_off(*text);
  if (!v) {
    error = "--" + std::string(name) + " wants on or off, got '" + std::string(*text) + "'";
    return false;
  }
  out = *v;
  return true;
}

// "--name S" as seconds with at most three decimals ("2", "0.5", "1.250") into milliseconds.
std::optional<std::uint64_t> parse_seconds_ms(std::string_view t, std::uint64_t min_ms,
                                              std::uint64_t max_ms) {
  const auto dot = t.find('.');
  const std::string_view whole = t.substr(0, dot);
  const std::string_view frac =
      dot == std::string_view::npos ? std::string_view{} : t.substr(dot + 1);
  const auto w = parse_uint(whole, 0, max_ms / 1000);
  bool ok = w.has_value() && (dot == std::string_view::npos || (!frac.empty() && frac.size() <= 3));
  std::uint64_t ms = ok ? *w * 1000 : 0;
  if (ok && !frac.empty()) {
    const auto f = parse_uint(frac, 0, 999);
    ok = f.has_value();
    std::uint64_t f_ms = ok ? *f : 0;
    for (std::size_t i = frac.size(); i < 3; ++i) f_ms *= 10;
    ms += f_ms;
  }
  if (!ok || ms < min_ms || ms > max_ms) return std::nullopt;
  return ms;
}

bool read_seconds(const CommandLine& cl, std::string_view name, std::uint64_t min_ms,
                  std::uint64_t max_ms, std::uint64_t& out_ms, std::string& error) {
  const auto text = cl.value(name);
  if (!text) return true;
  const auto ms = parse_seconds_ms(*text, min_ms, max_ms);
  if (!ms) {
    error = "--" + std::string(name) + " wants seconds (up to 3 decimals) in " +
            std::to_string(min_ms / 1000.0).substr(0, 5) + ".." + std::to_string(max_ms / 1000) +
            ", got '" + std::string(*text) + "'";
    return false;
  }
  out_ms = *ms;
  return true;
}

}  // namespace tern::app
