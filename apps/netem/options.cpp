#include "options.hpp"

#include "common/cli.hpp"

#include <toml++/toml.h>

#include <array>
#include <charconv>
#include <cmath>
#include <sstream>

namespace tern::netem {

const char* const kUsage =
    "usage: tern-netem --listen HOST:PORT --upstream HOST:PORT [options]\n"
    "       tern-netem --config FILE [options]\n"
    "\n"
    "A UDP impairment proxy: each client source gets its own upstream socket; what the\n"
    "client sends (up) and what the server answers (down) pass through the impairments.\n"
    "\n"
    "  --config FILE        TOML file ([up] and [down] tables; config/netem.toml); flags win\n"
    "  --listen HOST:PORT   where clients send (port 0: any free port, printed)\n"
    "  --upstream HOST:PORT the server behind the proxy\n"
    "  --seed N             PRNG seed (default 1); the same seed replays the same decisions\n"
    "  --max-flows N        client flows at once (default 4096); more are dropped and counted\n"
    "  --idle-timeout T     close a flow silent this long (default 60s)\n"
    "  --pool N             datagram buffers shared by all flows (default 16384)\n"
    "  --slot-bytes B       largest datagram forwarded (default 4096; larger: oversize drop)\n"
    "  --duration S         stop after S seconds (default: at SIGINT/SIGTERM)\n"
    "  --stats-json FILE    counters as JSON, rewritten every second and at exit\n"
    "  --quiet              no progress line on stderr\n"
    "SIGHUP reads the file and flags again and applies their impairments.\n"
    "\n"
    "Impairments, both directions; --up-NAME / --down-NAME for one (applied after these):\n"
    "  --loss P             random loss, '5%' or '0.05'\n"
    "  --ge p,r[,bad[,good]] Gilbert-Elliott loss (exclusive with --loss)\n"
    "  --delay T            fixed delay, '25ms', '1.5s', '300us'\n"
    "  --jitter T           uniform ±T, or the standard deviation with --jitter-dist normal\n"
    "  --jitter-dist D      uniform (default) or normal\n"
    "  --jitter-reorder on|off  let jitter reorder datagrams (default off: order kept)\n"
    "  --dup P              probability a datagram is sent twice\n"
    "  --reorder P          probability a datagram skips the delay (needs --delay)\n"
    "  --rate R             link rate: bytes/s, or '1mbit', '500kbit', '2mbps' (bytes)\n"
    "  --queue N            datagrams a flow may hold per direction (default 1000; tail drop)\n"
    "  --mtu N              drop datagrams larger than N bytes (default 0: no limit)\n"
    "  --help\n";

namespace {

// Buffers for every datagram in flight: beyond this a typo, not a plan.
constexpr std::uint64_t kMaxPoolBytes = std::uint64_t{16} << 30;

constexpr std::array<std::string_view, 11> kImpairmentFlags = {
    "loss", "ge",      "delay", "jitter", "jitter-dist", "jitter-reorder",
    "dup",  "reorder", "rate",  "queue",  "mtu"};

// A decimal number with an optional fraction, no sign, no exponent.
std::optional<double> parse_decimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  for (char c : text) {
    if ((c < '0' || c > '9') && c != '.') return std::nullopt;
  }
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

bool ends_with(std::string_view s, std::string_view suffix, std::string_view& head) {
  if (s.size() < suffix.size() || s.substr(s.size() - suffix.size()) != suffix) return false;
  head = s.substr(0, s.size() - suffix.size());
  return true;
}

// Applies one impairment setting given as text (flags, and string values from the file).
// `why` says what the value should look like when it is refused.
bool apply_text(Impairment& imp, std::string_view key, std::string_view text, std::string& why) {
  if (key == "loss" || key == "dup" || key == "duplicate" || key == "reorder") {
    const auto p = parse_probability(text);
    if (!p) {
      why = "wants a probability ('5%' or '0.05'), got '" + std::string(text) + "'";
      return false;
    }
    (key == "loss" ? imp.loss : key == "reorder" ? imp.reorder : imp.duplicate) = *p;
    return true;
  }
  if (key == "ge") {
    const auto ge = parse_ge(text);
    if (!ge) {
      why = "wants p,r[,loss_bad[,loss_good]] probabilities, got '" + std::string(text) + "'";
      return false;
    }
    imp.ge = *ge;
    return true;
  }
  if (key == "delay" || key == "jitter") {
    const auto d = parse_duration_ns(text);
    if (!d) {
      why =
          "wants a duration with a unit ('25ms', '1.5s', '300us'), got '" + std::string(text) + "'";
      return false;
    }
    (key == "delay" ? imp.delay_ns : imp.jitter_ns) = *d;
    return true;
  }
  if (key == "jitter-dist" || key == "jitter_dist") {
    if (text == "uniform") {
      imp.jitter_dist = JitterDist::uniform;
    } else if (text == "normal") {
      imp.jitter_dist = JitterDist::normal;
    } else {
      why = "wants uniform or normal, got '" + std::string(text) + "'";
      return false;
    }
    return true;
  }
  if (key == "jitter-reorder") {
    const auto b = app::parse_on_off(text);
    if (!b) {
      why = "wants on or off, got '" + std::string(text) + "'";
      return false;
    }
    imp.jitter_reorder = *b;
    return true;
  }
  if (key == "rate") {
    const auto r = parse_rate(text);
    if (!r) {
      why = "wants bytes/s or a rate with a unit ('1mbit', '500kbps'), got '" + std::string(text) +
            "'";
      return false;
    }
    imp.rate = *r;
    return true;
  }
  if (key == "queue" || key == "mtu") {
    const std::uint64_t min = key == "queue" ? 1 : 0;
    const std::uint64_t max = key == "queue" ? 1000000 : 65535;
    const auto n = app::parse_uint(text, min, max);
    if (!n) {
      why = "wants an integer in " + std::to_string(min) + ".." + std::to_string(max) + ", got '" +
            std::string(text) + "'";
      return false;
    }
    (key == "queue" ? imp.queue : imp.mtu) = static_cast<std::uint32_t>(*n);
    return true;
  }
  why = "unknown impairment";
  return false;
}

// ---- the TOML file ------------------------------------------------------------------------

class FileReader {
 public:
  FileReader(const std::string& file, std::string& error) : file_(file), error_(error) {}

  bool fail(const std::string& key, const std::string& why) {
    if (error_.empty()) error_ = file_ + ": " + key + ": " + why;
    return false;
  }

  bool endpoint(const toml::table& t, const char* key, Endpoint& out) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const auto v = n->value_exact<std::string>();
    if (!v) return fail(key, "must be a string \"HOST:PORT\"");
    const auto e = Endpoint::parse(*v);
    if (!e) return fail(key, "'" + *v + "' is not HOST:PORT");
    out = *e;
    return true;
  }

  template <class T>
  bool integer(const toml::table& t, const char* key, T& out, std::int64_t min, std::int64_t max) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const auto v = n->value_exact<std::int64_t>();
    if (!v) return fail(key, "must be an integer");
    if (*v < min || *v > max) {
      return fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    out = static_cast<T>(*v);
    return true;
  }

  // One [up] or [down] table. Strings take the flags' syntax; numbers are fractions for
  // probabilities, milliseconds for durations, bytes/s for the rate.
  bool impairment(const toml::table& t, const std::string& name, Impairment& imp) {
    for (const auto& [k, node] : t) {
      const std::string key(k.str());
      const std::string where = name + "." + key;
      static constexpr std::array<std::string_view, 11> known = {
          "loss",      "ge",      "delay", "jitter", "jitter_dist", "jitter_reorder",
          "duplicate", "reorder", "rate",  "queue",  "mtu"};
      bool found = false;
      for (auto kn : known) found = found || kn == key;
      if (!found) return fail(where, "unknown key");
      std::string why;
      if (key == "jitter_reorder") {
        const auto b = node.value_exact<bool>();
        if (!b) return fail(where, "must be true or false");
        imp.jitter_reorder = *b;
        continue;
      }
      if (const auto s = node.value_exact<std::string>()) {
        if (!apply_text(imp, key, *s, why)) return fail(where, why);
        continue;
      }
      const bool is_number = node.is_integer() || node.is_floating_point();
      if (!is_number || key == "ge" || key == "jitter_dist") {
        return fail(where, key == "ge" || key == "jitter_dist" ? "must be a string"
                                                               : "must be a number or a string");
      }
      const double v = *node.value<double>();
      if (key == "loss" || key == "duplicate" || key == "reorder") {
        if (!(v >= 0.0 && v <= 1.0)) return fail(where, "must be a fraction between 0 and 1");
        (key == "loss" ? imp.loss : key == "reorder" ? imp.reorder : imp.duplicate) = v;
      } else if (key == "delay" || key == "jitter") {
        if (!node.is_integer() || v < 0 || v > 3600000) {
          return fail(where, "must be whole milliseconds 0..3600000 or a string like \"25ms\"");
        }
        (key == "delay" ? imp.delay_ns : imp.jitter_ns) =
            static_cast<std::uint64_t>(v) * 1000000ull;
      } else if (key == "rate") {
        if (!node.is_integer() || v < 0) return fail(where, "must be bytes/s or a string");
        imp.rate = static_cast<std::uint64_t>(*node.value<std::int64_t>());
      } else {  // queue, mtu
        if (!node.is_integer()) return fail(where, "must be an integer");
        if (!apply_text(imp, key, std::to_string(*node.value<std::int64_t>()), why)) {
          return fail(where, why);
        }
      }
    }
    return true;
  }

 private:
  const std::string& file_;
  std::string& error_;
};

bool load_file(const std::string& path, Config& config, std::string& error) {
  toml::table root;
  try {
    root = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << path << ":" << e.source().begin.line << ":" << e.source().begin.column << ": "
        << e.description();
    error = msg.str();
    return false;
  }
  FileReader r(path, error);
  for (const auto& [k, node] : root) {
    const std::string key(k.str());
    static constexpr std::array<std::string_view, 9> known = {"listen",     "upstream",     "seed",
                                                              "max_flows",  "idle_timeout", "pool",
                                                              "slot_bytes", "up",           "down"};
    bool found = false;
    for (auto kn : known) found = found || kn == key;
    if (!found) return r.fail(key, "unknown key");
    if ((key == "up" || key == "down") && !node.is_table()) {
      return r.fail(key, "must be a table ([" + key + "])");
    }
  }
  if (root.get("listen") != nullptr) config.listen_given = true;
  if (!r.endpoint(root, "listen", config.listen) ||
      !r.endpoint(root, "upstream", config.upstream) ||
      !r.integer(root, "seed", config.seed, 0, INT64_MAX) ||
      !r.integer(root, "max_flows", config.max_flows, 1, 1000000) ||
      !r.integer(root, "pool", config.pool, 1, 4000000) ||
      !r.integer(root, "slot_bytes", config.slot_bytes, 64, 65535)) {
    return false;
  }
  if (const toml::node* n = root.get("idle_timeout")) {
    std::optional<std::uint64_t> ns;
    if (const auto s = n->value_exact<std::string>()) ns = parse_duration_ns(*s);
    if (!ns || *ns < 1000000) {
      return r.fail("idle_timeout", "must be a duration of at least 1ms, like \"60s\"");
    }
    config.idle_timeout_ms = *ns / 1000000;
  }
  for (int d = 0; d < 2; ++d) {
    if (const toml::table* t = root[kDirName[d]].as_table()) {
      if (!r.impairment(*t, kDirName[d], config.dir[d])) return false;
    }
  }
  for (int d = 0; d < 2; ++d) {
    const std::string why = check_impairment(config.dir[d], kDirName[d]);
    if (!why.empty()) {
      error = path + ": " + why;
      return false;
    }
  }
  return true;
}

}  // namespace

std::optional<double> parse_probability(std::string_view text) {
  std::string_view head;
  if (ends_with(text, "%", head)) {
    const auto v = parse_decimal(head);
    if (!v || *v > 100.0) return std::nullopt;
    return *v / 100.0;
  }
  const auto v = parse_decimal(text);
  if (!v || *v > 1.0) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> parse_duration_ns(std::string_view text) {
  if (text == "0") return 0;
  struct Unit {
    std::string_view suffix;
    double ns;
  };
  // "ms" and "us" before "s", which they end with.
  static constexpr Unit units[] = {{"ms", 1e6}, {"us", 1e3}, {"ns", 1.0}, {"s", 1e9}};
  for (const Unit& u : units) {
    std::string_view head;
    if (!ends_with(text, u.suffix, head)) continue;
    const auto v = parse_decimal(head);
    if (!v || *v * u.ns > 3600e9) return std::nullopt;
    return static_cast<std::uint64_t>(std::llround(*v * u.ns));
  }
  return std::nullopt;
}

std::optional<std::uint64_t> parse_rate(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double bytes;  // bytes per second per unit
  };
  // Longest suffixes first: "kbps" ends with "bps", "kbit" with "bit".
  static constexpr Unit units[] = {{"kbit", 125.0}, {"mbit", 125e3}, {"gbit", 125e6}, {"kbps", 1e3},
                                   {"mbps", 1e6},   {"gbps", 1e9},   {"bit", 0.125},  {"bps", 1.0}};
  double v = 0;
  bool matched = false;
  for (const Unit& u : units) {
    std::string_view head;
    if (!ends_with(text, u.suffix, head)) continue;
    const auto n = parse_decimal(head);
    if (!n) return std::nullopt;
    v = *n * u.bytes;
    matched = true;
    break;
  }
  if (!matched) {
    const auto n = app::parse_uint(text, 0, UINT64_MAX);
    if (!n) return std::nullopt;
    return n;
  }
  if (v > 1e13) return std::nullopt;
  const auto bytes = static_cast<std::uint64_t>(std::llround(v));
  // A rate that rounds to nothing would mean "unlimited", the opposite of what was asked.
  if (bytes == 0 && v > 0) return std::nullopt;
  return bytes;
}

std::optional<GilbertElliott> parse_ge(std::string_view text) {
  double v[4] = {0, 0, 1.0, 0.0};
  int n = 0;
  while (n < 4) {
    const auto comma = text.find(',');
    const auto p = parse_probability(text.substr(0, comma));
    if (!p) return std::nullopt;
    v[n++] = *p;
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
    if (n == 4) return std::nullopt;
  }
  if (n < 2) return std::nullopt;
  GilbertElliott ge;
  ge.on = true;
  ge.p = v[0];
  ge.r = v[1];
  ge.loss_bad = v[2];
  ge.loss_good = v[3];
  return ge;
}

std::string check_impairment(const Impairment& imp, const std::string& where) {
  if (imp.ge.on && imp.loss > 0) return where + ".ge: exclusive with " + where + ".loss";
  if (imp.reorder > 0 && imp.delay_ns == 0) {
    return where + ".reorder: needs a delay (reordered datagrams skip it to overtake the rest)";
  }
  return "";
}

ParseResult parse_config(int argc, const char* const* argv, Config& config, std::string& error) {
  std::vector<app::FlagSpec> specs = {{"help", false}, {"quiet", false}};
  for (std::string_view f : {"config", "listen", "upstream", "seed", "max-flows", "idle-timeout",
                             "pool", "slot-bytes", "duration", "stats-json"}) {
    specs.push_back({f, true});
  }
  // The per-direction names must outlive the specs that view them.
  static const std::vector<std::string> dir_flags = [] {
    std::vector<std::string> v;
    for (std::string_view f : kImpairmentFlags) {
      v.push_back("up-" + std::string(f));
      v.push_back("down-" + std::string(f));
    }
    return v;
  }();
  for (std::string_view f : kImpairmentFlags) specs.push_back({f, true});
  for (const std::string& f : dir_flags) specs.push_back({f, true});

  app::CommandLine cl;
  if (!cl.parse(argc, argv, specs, error)) return ParseResult::usage;
  if (cl.has("help")) {
    config.help = true;
    return ParseResult::ok;
  }
  if (const auto path = cl.value("config")) {
    if (!load_file(std::string(*path), config, error)) return ParseResult::config;
  }
  config.quiet = cl.has("quiet");
  for (const char* key : {"listen", "upstream"}) {
    if (const auto v = cl.value(key)) {
      const auto e = Endpoint::parse(*v);
      if (!e) {
        error = "--" + std::string(key) + " wants HOST:PORT, got '" + std::string(*v) + "'";
        return ParseResult::usage;
      }
      (std::string_view(key) == "listen" ? config.listen : config.upstream) = *e;
      if (std::string_view(key) == "listen") config.listen_given = true;
    }
  }
  if (!app::read_uint(cl, "seed", 0, UINT64_MAX, config.seed, error) ||
      !app::read_uint(cl, "max-flows", 1, 1000000, config.max_flows, error) ||
      !app::read_uint(cl, "pool", 1, 4000000, config.pool, error) ||
      !app::read_uint(cl, "slot-bytes", 64, 65535, config.slot_bytes, error) ||
      !app::read_seconds(cl, "duration", 1, 1000ull * 86400 * 365, config.duration_ms, error)) {
    return ParseResult::usage;
  }
  if (const auto v = cl.value("idle-timeout")) {
    const auto ns = parse_duration_ns(*v);
    if (!ns || *ns < 1000000) {
      error = "--idle-timeout wants a duration of at least 1ms, got '" + std::string(*v) + "'";
      return ParseResult::usage;
    }
    config.idle_timeout_ms = *ns / 1000000;
  }
  if (const auto v = cl.value("stats-json")) config.stats_json = std::string(*v);

  // Both directions first, then the per-direction flags, so the more specific one wins.
  for (const std::string prefix : {"", "up-", "down-"}) {
    for (std::string_view f : kImpairmentFlags) {
      const std::string flag = prefix + std::string(f);
      const auto v = cl.value(flag);
      if (!v) continue;
      for (int d = 0; d < 2; ++d) {
        if (!prefix.empty() && prefix != std::string(kDirName[d]) + "-") continue;
        std::string why;
        if (!apply_text(config.dir[d], f, *v, why)) {
          error = "--" + flag + " " + why;
          return ParseResult::usage;
        }
      }
    }
  }
  for (int d = 0; d < 2; ++d) {
    const std::string why = check_impairment(config.dir[d], kDirName[d]);
    if (!why.empty()) {
      error = why;
      return ParseResult::usage;
    }
  }
  if (std::uint64_t{config.pool} * config.slot_bytes > kMaxPoolBytes) {
    error = "pool * slot_bytes must be at most 16 GiB, got " +
            std::to_string(std::uint64_t{config.pool} * config.slot_bytes) + " bytes";
    return ParseResult::usage;
  }
  if (!config.listen_given) {
    error = "--listen is required";
    return ParseResult::usage;
  }
  if (config.upstream.port == 0) {
    error = "--upstream (or upstream in the file) is required, with a port";
    return ParseResult::usage;
  }
  return ParseResult::ok;
}

}  // namespace tern::netem
