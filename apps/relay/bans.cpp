#include "bans.hpp"

#include <charconv>
#include <fstream>

namespace tern::relay {

namespace {

bool parse_uint(std::string_view text, std::uint64_t max, std::uint64_t& out) {
  std::uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || r.ec != std::errc() || r.ptr != text.data() + text.size() || v > max) {
    return false;
  }
  out = v;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

Endpoint masked(Endpoint e, unsigned bits) {
  e.port = 0;
  for (unsigned i = 0; i < 16; ++i) {
    const unsigned keep = bits > i * 8 ? std::min(8u, bits - i * 8) : 0;
    e.addr[i] &= static_cast<std::uint8_t>(0xff00u >> keep);
  }
  return e;
}

}  // namespace

std::optional<BanTarget> parse_ban_target(std::string_view text, std::string& error) {
  text = trim(text);
  std::string_view host = text;
  std::optional<std::uint64_t> length;
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    host = text.substr(0, slash);
    std::uint64_t n = 0;
    if (!parse_uint(text.substr(slash + 1), 128, n)) {
      error = "prefix length: must be a number (IPv4 0..32, IPv6 0..128)";
      return std::nullopt;
    }
    length = n;
  }
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const bool v6 = host.find(':') != std::string_view::npos;
  const std::string with_port = v6 ? "[" + std::string(host) + "]:0" : std::string(host) + ":0";
  const auto e = host.empty() ? std::nullopt : Endpoint::parse(with_port);
  if (!e) {
    error = "not an IPv4 or IPv6 address: \"" + std::string(host) + "\"";
    return std::nullopt;
  }
  BanTarget t;
  if (length) {
    if (e->is_v4() && *length > 32) {
      error = "prefix length: IPv4 allows 0..32";
      return std::nullopt;
    }
    t.prefix_bits = static_cast<unsigned>(e->is_v4() ? 96 + *length : *length);
  } else if (e->is_unspecified()) {
    error = "the unspecified address is no client's";
    return std::nullopt;
  }
  t.address = masked(*e, t.prefix_bits);
  return t;
}

std::string ban_target_text(const BanTarget& t) {
  std::string s = t.address.to_string();
  s.resize(s.rfind(':'));  // drop ":0"
  if (s.size() > 2 && s.front() == '[') s = s.substr(1, s.size() - 2);
  if (t.prefix_bits < 128) {
    s += "/" + std::to_string(t.address.is_v4() ? t.prefix_bits - 96 : t.prefix_bits);
  }
  return s;
}

bool covers(const BanTarget& t, const Endpoint& address) {
  return masked(address, t.prefix_bits).addr == t.address.addr;
}

bool read_bans_file(const std::string& path, std::vector<BanLine>& out, std::string& error) {
  std::ifstream in(path);
  if (!in) {
    error = path + ": cannot be read";
    return false;
  }
  std::vector<BanLine> lines;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    std::string_view rest(line);
    if (const auto hash = rest.find('#'); hash != std::string_view::npos) {
      rest = rest.substr(0, hash);
    }
    rest = trim(rest);
    if (rest.empty()) continue;
    const auto where = [&] { return path + ":" + std::to_string(number) + ": "; };
    const auto space = rest.find_first_of(" \t");
    std::string why;
    const auto target = parse_ban_target(rest.substr(0, space), why);
    if (!target) {
      error = where() + why;
      return false;
    }
    BanLine b{*target, 0};
    if (space != std::string_view::npos) {
      std::uint64_t seconds = 0;
      const std::string_view s = trim(rest.substr(space));
      if (!parse_uint(s, kMaxBanSeconds, seconds) || seconds == 0) {
        error = where() + "seconds: must be 1.." + std::to_string(kMaxBanSeconds) +
                " (or left out: until the line is removed), not \"" + std::string(s) + "\"";
        return false;
      }
      b.seconds = static_cast<std::uint32_t>(seconds);
    }
    if (lines.size() == kMaxBansFileLines) {
      error = where() + "more than " + std::to_string(kMaxBansFileLines) +
              " bans (use prefixes: one line covers a whole network)";
      return false;
    }
    lines.push_back(b);
  }
  if (in.bad()) {
    error = path + ": read error";
    return false;
  }
  out = std::move(lines);
  return true;
}

}  // namespace tern::relay
