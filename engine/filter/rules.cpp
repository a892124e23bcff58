// The rules file parser: `ID  SCOPE  ACTION  /PATTERN/FLAGS` per line (README.md).
#include "filter.hpp"

#include <hs/hs.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace tern::filter {

std::string_view to_string(Scope scope) {
  switch (scope) {
    case Scope::datagram: return "datagram";
    case Scope::message: return "message";
  }
  return "?";
}

std::string_view to_string(Action action) {
  switch (action) {
    case Action::drop: return "drop";
    case Action::count: return "count";
    case Action::ban: return "ban";
    case Action::limit: return "limit";
  }
  return "?";
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

// Splits off the next whitespace-delimited field.
std::string_view next_field(std::string_view& rest) {
  rest = trim_left(rest);
  std::size_t n = 0;
  while (n < rest.size() && !is_space(rest[n])) ++n;
  const std::string_view field = rest.substr(0, n);
  rest.remove_prefix(n);
  return field;
}

// A decimal unsigned 32-bit number, digits only.
bool parse_u32(std::string_view s, std::uint32_t& out) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  const auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc{} && ptr == s.data() + s.size();
}

// The ACTION field: drop, count, ban:SECONDS or limit:N/s; on failure returns the reason.
std::string parse_action(std::string_view action, Rule& rule) {
  if (action == "drop") {
    rule.action = Action::drop;
  } else if (action == "count") {
    rule.action = Action::count;
  } else if (action.starts_with("ban:")) {
    rule.action = Action::ban;
    if (!parse_u32(action.substr(4), rule.ban_seconds) || rule.ban_seconds == 0) {
      return "bad ban duration '" + std::string(action) + "' (ban:SECONDS, SECONDS > 0)";
    }
  } else if (action.starts_with("limit:")) {
    rule.action = Action::limit;
    std::string_view spec = action.substr(6);
    if (!spec.ends_with("/s") || !parse_u32(spec.substr(0, spec.size() - 2), rule.limit_per_s) ||
        rule.limit_per_s == 0) {
      return "bad rate limit '" + std::string(action) + "' (limit:N/s, N > 0)";
    }
  } else {
    return "unknown action '" + std::string(action) + "' (drop, count, ban:SECONDS, limit:N/s)";
  }
  return {};
}

// `/PATTERN/FLAGS` and what may follow it (a comment); on failure returns the reason.
std::string parse_pattern(std::string_view rest, Rule& rule) {
  if (rest.front() != '/') return "pattern must start with '/'";
  rest.remove_prefix(1);
  rule.pattern.clear();
  bool closed = false;
  while (!rest.empty()) {
    const char c = rest.front();
    if (c == '/') {
      rest.remove_prefix(1);
      closed = true;
      break;
    }
    if (c == '\\' && rest.size() >= 2) {
      if (rest[1] == '/') {
        rule.pattern += '/';
      } else {
        rule.pattern += rest.substr(0, 2);  // every other escape is Hyperscan's
      }
      rest.remove_prefix(2);
      continue;
    }
    if (c == '\0') return "pattern contains a NUL byte (write \\x00)";
    rule.pattern += c;
    rest.remove_prefix(1);
  }
  if (!closed) return "unterminated pattern (missing closing '/')";
  if (rule.pattern.empty()) return "empty pattern";

  rule.hs_flags = 0;
  while (!rest.empty() && !is_space(rest.front()) && rest.front() != '#') {
    switch (rest.front()) {
      case 'i': rule.hs_flags |= HS_FLAG_CASELESS; break;
      case 's': rule.hs_flags |= HS_FLAG_DOTALL; break;
      case 'm': rule.hs_flags |= HS_FLAG_MULTILINE; break;
      case 'H': rule.hs_flags |= HS_FLAG_SINGLEMATCH; break;
      default: return "unknown flag '" + std::string(1, rest.front()) + "' (i, s, m, H)";
    }
    rest.remove_prefix(1);
  }
  rest = trim_left(rest);
  if (!rest.empty() && rest.front() != '#') {
    return "unexpected text after the pattern: '" + std::string(rest) + "'";
  }
  return {};
}

// Parses one non-comment line into `rule`; on failure returns the reason.
std::string parse_line(std::string_view line, Rule& rule) {
  std::string_view rest = line;
  const std::string_view id = next_field(rest);
  const std::string_view scope = next_field(rest);
  const std::string_view action = next_field(rest);
  rest = trim_left(rest);
  if (scope.empty() || action.empty() || rest.empty()) {
    return "expected `ID SCOPE ACTION /PATTERN/FLAGS`";
  }

  if (!parse_u32(id, rule.id)) return "bad rule id '" + std::string(id) + "' (unsigned integer)";

  if (scope == "datagram") {
    rule.scope = Scope::datagram;
  } else if (scope == "message") {
    rule.scope = Scope::message;
  } else {
    return "unknown scope '" + std::string(scope) + "' (datagram, message)";
  }
  if (std::string reason = parse_action(action, rule); !reason.empty()) return reason;
  return parse_pattern(rest, rule);
}

}  // namespace

bool parse_rules(std::string_view text, const std::string& file_name, std::vector<Rule>& rules,
                 std::string& error) {
  std::vector<Rule> parsed;
  std::map<std::uint32_t, unsigned> lines_by_id;
  for (const Rule& r : rules) lines_by_id.emplace(r.id, r.line);
  unsigned line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const std::size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text.remove_prefix(eol == std::string_view::npos ? text.size() : eol + 1);

    const std::string_view content = trim_left(line);
    if (content.empty() || content.front() == '#') continue;
    Rule rule;
    rule.line = line_number;
    std::string reason = parse_line(content, rule);
    if (reason.empty()) {
      const auto [it, inserted] = lines_by_id.emplace(rule.id, line_number);
      if (!inserted) {
        reason = "duplicate rule id " + std::to_string(rule.id) +
                 (it->second != 0 ? " (first on line " + std::to_string(it->second) + ")" : "");
      }
    }
    if (!reason.empty()) {
      error = file_name + ":" + std::to_string(line_number) + ": " + reason;
      return false;
    }
    parsed.push_back(std::move(rule));
  }
  rules.insert(rules.end(), std::make_move_iterator(parsed.begin()),
               std::make_move_iterator(parsed.end()));
  return true;
}

bool load_rules_file(const std::string& path, std::vector<Rule>& rules, std::string& error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot read: " + std::strerror(errno);
    return false;
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    error = path + ": read error";
    return false;
  }
  return parse_rules(text.str(), path, rules, error);
}

}  // namespace tern::filter
