// TOML → RelayConfig. Every key is checked for type and range, unknown keys are errors (a
// misspelt limit silently left at its default is worse than a refusal to start), and every
// message names the file, the key and the reason.
#include "config.hpp"

#include "common/channel_options.hpp"

#include <toml++/toml.h>

#include <charconv>
#include <fstream>
#include <sstream>

namespace tern::relay {

namespace {

class Reader {
 public:
  Reader(const std::string& file, std::string& error) : file_(file), error_(error) {}

  bool failed() const { return !error_.empty(); }

  bool fail(const std::string& key, const std::string& why) {
    if (error_.empty()) error_ = file_ + ": " + key + ": " + why;
    return false;
  }

  // Integer key in [min, max]; absent keys leave `out` alone.
  template <class T>
  bool integer(const toml::table& t, const std::string& table, const char* key, T& out,
               std::int64_t min, std::int64_t max) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const std::string name = table + "." + key;
    const auto v = n->value_exact<std::int64_t>();
    if (!v) return fail(name, "must be an integer");
    if (*v < min || *v > max) {
      return fail(name, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    }
    out = static_cast<T>(*v);
    return true;
  }

  bool string(const toml::table& t, const std::string& table, const char* key, std::string& out) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const auto v = n->value_exact<std::string>();
    if (!v) return fail(table + "." + key, "must be a string");
    out = *v;
    return true;
  }

  bool boolean(const toml::table& t, const std::string& table, const char* key, bool& out) {
    const toml::node* n = t.get(key);
    if (n == nullptr) return true;
    const auto v = n->value_exact<bool>();
    if (!v) return fail(table + "." + key, "must be true or false");
    out = *v;
    return true;
  }

  bool endpoint(const toml::table& t, const std::string& table, const char* key, Endpoint& out) {
    std::string text;
    if (t.get(key) == nullptr) return true;
    if (!string(t, table, key, text)) return false;
    const auto e = Endpoint::parse(text);
    if (!e) return fail(table + "." + key, "'" + text + "' is not HOST:PORT");
    out = *e;
    return true;
  }

  // Every key of `t` must be one of `known`.
  bool only(const toml::table& t, const std::string& table,
            std::initializer_list<std::string_view> known) {
    for (const auto& [k, v] : t) {
      bool found = false;
      for (std::string_view name : known) found = found || k.str() == name;
      if (!found) {
        return fail(table.empty() ? std::string(k.str()) : table + "." + std::string(k.str()),
                    "unknown key");
      }
    }
    return true;
  }

  const toml::table* section(const toml::table& root, const char* name) {
    const toml::node* n = root.get(name);
    if (n == nullptr) return nullptr;
    if (!n->is_table()) {
      fail(name, "must be a table ([" + std::string(name) + "])");
      return nullptr;
    }
    return n->as_table();
  }

 private:
  const std::string& file_;
  std::string& error_;
};

// Series per family on /metrics for the busiest rooms and clients: enough to see who is busy,
// few enough that a scrape stays small.
constexpr std::int64_t kMaxTop = 100;

// A token shorter than this is guessable by trying; the endpoint disconnects and bans clients.
constexpr std::size_t kMinTokenLength = 16;

bool check_token(Reader& r, const char* key, const std::string& token) {
  if (token.size() < kMinTokenLength) {
    return r.fail(key, "must be at least " + std::to_string(kMinTokenLength) + " characters");
  }
  for (const char ch : token) {
    const auto c = static_cast<unsigned char>(ch);
    if (c <= 0x20 || c == 0x7f) {
      return r.fail(key,
                    "must not contain spaces or control characters (it is sent in an "
                    "HTTP header)");
    }
  }
  return true;
}

// [admin]: token = "..." or token_file = "path" (relative to the configuration file; the file
// holds the token, trailing newline allowed), never both.
bool read_admin(Reader& r, const toml::table& root, const std::string& path, RelayConfig& c) {
  const toml::table* t = r.section(root, "admin");
  if (t == nullptr) return !r.failed();
  if (!r.only(*t, "admin", {"token", "token_file"})) return false;
  std::string token, file;
  if (!r.string(*t, "admin", "token", token)) return false;
  if (!r.string(*t, "admin", "token_file", file)) return false;
  if (t->get("token") != nullptr && t->get("token_file") != nullptr) {
    return r.fail("admin.token_file", "give token or token_file, not both");
  }
  if (t->get("token_file") != nullptr) {
    if (file.empty()) return r.fail("admin.token_file", "must name a file");
    if (file.front() != '/') {
      const auto slash = path.rfind('/');
      if (slash != std::string::npos) file = path.substr(0, slash + 1) + file;
    }
    std::ifstream in(file);
    if (!in) return r.fail("admin.token_file", "cannot read " + file);
    std::getline(in, token);
    while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
    if (!check_token(r, "admin.token_file", token)) return false;
  } else if (t->get("token") != nullptr && !check_token(r, "admin.token", token)) {
    return false;
  }
  c.admin_token = token;
  return true;
}

bool read_log(Reader& r, const toml::table& root, RelayConfig& c) {
  const toml::table* t = r.section(root, "log");
  if (t == nullptr) return !r.failed();
  if (!r.only(*t, "log", {"format"})) return false;
  std::string format = c.log_format;
  if (!r.string(*t, "log", "format", format)) return false;
  if (format != "text" && format != "json") {
    return r.fail("log.format", "must be \"text\" or \"json\", not \"" + format + "\"");
  }
  c.log_format = format;
  return true;
}

}  // namespace

bool parse_room_range(const std::string& text, RoomRange& out) {
  const auto dash = text.find('-');
  const std::string a = text.substr(0, dash);
  const std::string b = dash == std::string::npos ? a : text.substr(dash + 1);
  auto number = [](const std::string& s, std::uint32_t& v) {
    if (s.empty()) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  RoomRange r;
  if (!number(a, r.first) || !number(b, r.last) || r.first == 0 || r.last < r.first) return false;
  out = r;
  return true;
}

bool load_config_file(const std::string& path, RelayConfig& config, std::string& error) {
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
  Reader r(path, error);
  if (!r.only(root, "",
              {"relay", "limits", "overload", "protocol", "security", "rooms", "metrics",
               "shutdown", "filter", "dpdk", "admin", "log", "kcp", "discovery"})) {
    return false;
  }
  RelayConfig c = config;

  if (const toml::table* t = r.section(root, "relay")) {
    if (!r.only(*t, "relay", {"listen", "shards", "driver", "idle", "pin", "receive_buffer"})) {
      return false;
    }
    if (!r.endpoint(*t, "relay", "listen", c.listen)) return false;
    if (!r.integer(*t, "relay", "shards", c.shards, 0, 256)) return false;
    if (!r.string(*t, "relay", "driver", c.driver)) return false;
    if (c.driver != "socket" && c.driver != "uring" && c.driver != "dpdk") {
      return r.fail("relay.driver",
                    "must be \"socket\", \"uring\" or \"dpdk\", not \"" + c.driver + "\"");
    }
    if (!r.string(*t, "relay", "idle", c.idle)) return false;
    if (c.idle != "wait" && c.idle != "busy") {
      return r.fail("relay.idle", "must be \"wait\" or \"busy\", not \"" + c.idle + "\"");
    }
    if (!r.boolean(*t, "relay", "pin", c.pin)) return false;
    if (!r.integer(*t, "relay", "receive_buffer", c.receive_buffer, 64 << 10, 1 << 30)) {
      return false;
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "limits")) {
    if (!r.only(*t, "limits",
                {"peers", "room_size", "channels", "message_rate", "peer_bandwidth",
                 "incoming_bandwidth", "outgoing_bandwidth", "message_size", "member_backlog"})) {
      return false;
    }
    if (!r.integer(*t, "limits", "peers", c.max_peers, 1, 10'000'000)) return false;
    if (!r.integer(*t, "limits", "room_size", c.max_room_size, 2, 65536)) return false;
    if (!r.integer(*t, "limits", "channels", c.channels, 1, 255)) return false;
    if (!r.integer(*t, "limits", "message_rate", c.max_message_rate, 0, 10'000'000)) return false;
    if (!r.integer(*t, "limits", "peer_bandwidth", c.max_peer_bandwidth, 0, 4'000'000'000)) {
      return false;
    }
    if (!r.integer(*t, "limits", "incoming_bandwidth", c.incoming_bandwidth, 0, 4'000'000'000)) {
      return false;
    }
    if (!r.integer(*t, "limits", "outgoing_bandwidth", c.outgoing_bandwidth, 0, 4'000'000'000)) {
      return false;
    }
    if (!r.integer(*t, "limits", "message_size", c.max_message_size, 1, 32 << 20)) return false;
    if (!r.integer(*t, "limits", "member_backlog", c.member_backlog, 0, std::int64_t{1} << 40)) {
      return false;
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "overload")) {
    if (!r.only(*t, "overload",
                {"hold_backlog", "slow_member_ms", "overflow_limit", "ring_limit"})) {
      return false;
    }
    if (!r.integer(*t, "overload", "hold_backlog", c.hold_backlog, 0, std::int64_t{1} << 40)) {
      return false;
    }
    if (!r.integer(*t, "overload", "slow_member_ms", c.slow_member_ms, 10, 60'000)) return false;
    if (!r.integer(*t, "overload", "overflow_limit", c.overflow_limit, 16, 1 << 24)) return false;
    if (!r.integer(*t, "overload", "ring_limit", c.ring_limit, 0, 1 << 20)) return false;
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "protocol")) {
    if (!r.only(
            *t, "protocol",
            {"checksum", "selective_acks", "ack_delay_ms", "fast_retransmit", "congestion_window",
             "min_rto_ms", "throttle_window", "path_mtu", "channel_options"})) {
      return false;
    }
    if (const toml::node* n = t->get("channel_options")) {
      const toml::array* a = n->as_array();
      if (a == nullptr) {
        return r.fail("protocol.channel_options", "must be an array of \"CHANNELS=SWITCHES\"");
      }
      c.channel_rules.clear();
      for (std::size_t i = 0; i < a->size(); ++i) {
        const auto s = (*a)[i].value_exact<std::string>();
        tern::ChannelRule rule;
        std::string why = "must be a string";
        if (!s || !tern::app::parse_channel_rule(*s, rule, why)) {
          return r.fail("protocol.channel_options[" + std::to_string(i) + "]", why);
        }
        c.channel_rules.push_back(rule);
      }
    }
    if (!r.boolean(*t, "protocol", "checksum", c.checksum)) return false;
    if (!r.boolean(*t, "protocol", "selective_acks", c.selective_acks)) return false;
    if (!r.boolean(*t, "protocol", "path_mtu", c.path_mtu)) return false;
    if (!r.integer(*t, "protocol", "ack_delay_ms", c.ack_delay_ms, 0, 1000)) return false;
    if (!r.boolean(*t, "protocol", "fast_retransmit", c.fast_retransmit)) return false;
    if (!r.boolean(*t, "protocol", "congestion_window", c.congestion_window)) return false;
    if (!r.integer(*t, "protocol", "min_rto_ms", c.min_rto_ms, 0, 1000)) return false;
    if (!r.boolean(*t, "protocol", "throttle_window", c.throttle_window)) return false;
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "security")) {
    if (!r.only(*t, "security",
                {"verify_before_peer", "half_open_capacity", "half_open_timeout_ms",
                 "connect_rate_per_address", "connect_burst_per_address", "connect_rate_per_prefix",
                 "connect_burst_per_prefix", "policy", "key_file", "key_file_old", "public_address",
                 "aes", "bans_file"})) {
      return false;
    }
    if (!r.string(*t, "security", "policy", c.security_policy)) return false;
    if (c.security_policy != "plain" && c.security_policy != "optional" &&
        c.security_policy != "required") {
      return r.fail("security.policy", "must be plain, optional or required");
    }
    for (const char* key : {"key_file", "key_file_old"}) {
      std::string file;
      if (!r.string(*t, "security", key, file)) return false;
      if (t->get(key) == nullptr) continue;
      if (file.empty()) return r.fail(std::string("security.") + key, "must name a file");
      if (file.front() != '/') {
        const auto slash = path.rfind('/');
        if (slash != std::string::npos) file = path.substr(0, slash + 1) + file;
      }
      tern::TokenKey k;
      std::string why;
      if (!tern::load_token_key(file, k, why)) return r.fail(std::string("security.") + key, why);
      c.token_keys.push_back(k);
    }
    if (t->get("key_file_old") != nullptr && t->get("key_file") == nullptr) {
      return r.fail("security.key_file_old", "needs security.key_file (the current key)");
    }
    if (c.security_policy != "plain" && c.token_keys.empty()) {
      return r.fail("security.key_file", "policy " + c.security_policy + " needs a key file");
    }
    std::string address;
    if (!r.string(*t, "security", "public_address", address)) return false;
    if (t->get("public_address") != nullptr) {
      const auto ep = tern::Endpoint::parse(address);
      if (!ep || ep->is_unspecified()) {
        return r.fail("security.public_address", "must be a specific address:port");
      }
      c.public_address = *ep;
    }
    if (!r.boolean(*t, "security", "verify_before_peer", c.verify_before_peer)) return false;
    if (!r.boolean(*t, "security", "aes", c.secure_aes)) return false;
    if (!r.integer(*t, "security", "half_open_capacity", c.half_open_capacity, 8, 1 << 24)) {
      return false;
    }
    if (!r.integer(*t, "security", "half_open_timeout_ms", c.half_open_timeout_ms, 100, 600'000)) {
      return false;
    }
    if (!r.integer(*t, "security", "connect_rate_per_address", c.connect_rate_per_address, 0,
                   1'000'000)) {
      return false;
    }
    if (!r.integer(*t, "security", "connect_burst_per_address", c.connect_burst_per_address, 1,
                   1'000'000)) {
      return false;
    }
    if (!r.integer(*t, "security", "connect_rate_per_prefix", c.connect_rate_per_prefix, 0,
                   1'000'000)) {
      return false;
    }
    if (!r.integer(*t, "security", "connect_burst_per_prefix", c.connect_burst_per_prefix, 1,
                   1'000'000)) {
      return false;
    }
    if (!r.string(*t, "security", "bans_file", c.bans_path)) return false;
    if (!c.bans_path.empty() && c.bans_path.front() != '/') {
      const auto slash = path.rfind('/');
      if (slash != std::string::npos) c.bans_path = path.substr(0, slash + 1) + c.bans_path;
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "discovery")) {
    if (!r.only(*t, "discovery",
                {"enabled", "name", "info", "rate_per_address", "rate_per_prefix"})) {
      return false;
    }
    c.discovery = true;
    if (!r.boolean(*t, "discovery", "enabled", c.discovery) ||
        !r.string(*t, "discovery", "name", c.discovery_name) ||
        !r.string(*t, "discovery", "info", c.discovery_info) ||
        !r.integer(*t, "discovery", "rate_per_address", c.discovery_rate_per_address, 0,
                   1'000'000) ||
        !r.integer(*t, "discovery", "rate_per_prefix", c.discovery_rate_per_prefix, 0, 1'000'000)) {
      return false;
    }
    // What a pong can carry, less room for the player counts.
    if (c.discovery_name.size() + c.discovery_info.size() > 3900) {
      return r.fail("discovery.info", "name and info together must be at most 3900 bytes");
    }
    if (c.discovery_name.find('\n') != std::string::npos) {
      return r.fail("discovery.name", "must be one line");
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "rooms")) {
    if (!r.only(*t, "rooms", {"broadcast"})) return false;
    if (const toml::node* n = t->get("broadcast")) {
      const toml::array* a = n->as_array();
      if (a == nullptr) return r.fail("rooms.broadcast", "must be an array of \"A-B\" strings");
      c.broadcast_rooms.clear();
      for (std::size_t i = 0; i < a->size(); ++i) {
        const auto s = (*a)[i].value_exact<std::string>();
        RoomRange range;
        if (!s || !parse_room_range(*s, range)) {
          return r.fail("rooms.broadcast[" + std::to_string(i) + "]",
                        "must be \"FIRST-LAST\" with 1 <= FIRST <= LAST < 2^32");
        }
        c.broadcast_rooms.push_back(range);
      }
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "metrics")) {
    if (!r.only(*t, "metrics", {"listen", "top_rooms", "top_talkers"})) return false;
    if (!r.integer(*t, "metrics", "top_rooms", c.top_rooms, 0, kMaxTop)) return false;
    if (!r.integer(*t, "metrics", "top_talkers", c.top_talkers, 0, kMaxTop)) return false;
    std::string text;
    if (!r.string(*t, "metrics", "listen", text)) return false;
    if (text.empty()) {
      c.metrics.reset();
    } else {
      const auto e = Endpoint::parse(text);
      if (!e) return r.fail("metrics.listen", "'" + text + "' is not HOST:PORT");
      c.metrics = *e;
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "shutdown")) {
    if (!r.only(*t, "shutdown", {"drain_timeout_ms"})) return false;
    if (!r.integer(*t, "shutdown", "drain_timeout_ms", c.drain_timeout_ms, 0, 600'000)) {
      return false;
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "filter")) {
    if (!r.only(*t, "filter", {"rules"})) return false;
    if (!r.string(*t, "filter", "rules", c.rules_path)) return false;
    // A relative path is relative to the configuration file, not to the working directory.
    if (!c.rules_path.empty() && c.rules_path.front() != '/') {
      const auto slash = path.rfind('/');
      if (slash != std::string::npos) c.rules_path = path.substr(0, slash + 1) + c.rules_path;
    }
  } else if (!error.empty()) {
    return false;
  }

  if (const toml::table* t = r.section(root, "kcp")) {
    c.kcp = true;
    if (!r.only(*t, "kcp",
                {"port", "room_rule", "channel", "nodelay", "interval_ms", "resend", "nc",
                 "send_window", "receive_window", "mtu", "fec", "fec_data_shards",
                 "fec_parity_shards", "idle_timeout_ms"})) {
      return false;
    }
    if (!r.integer(*t, "kcp", "port", c.kcp_port, 0, 65535)) return false;
    if (!r.string(*t, "kcp", "room_rule", c.kcp_room_rule)) return false;
    if (c.kcp_room_rule != "join" && c.kcp_room_rule != "conv") {
      return r.fail("kcp.room_rule",
                    "must be \"join\" or \"conv\", not \"" + c.kcp_room_rule + "\"");
    }
    if (!r.integer(*t, "kcp", "channel", c.kcp_channel, 0, 254)) return false;
    if (!r.integer(*t, "kcp", "nodelay", c.kcp_nodelay, 0, 2)) return false;
    if (!r.integer(*t, "kcp", "interval_ms", c.kcp_interval_ms, 1, 5000)) return false;
    if (!r.integer(*t, "kcp", "resend", c.kcp_resend, 0, 100)) return false;
    if (!r.boolean(*t, "kcp", "nc", c.kcp_nc)) return false;
    if (!r.integer(*t, "kcp", "send_window", c.kcp_send_window, 1, 65535)) return false;
    if (!r.integer(*t, "kcp", "receive_window", c.kcp_receive_window, 2, 65535)) return false;
    if (!r.integer(*t, "kcp", "mtu", c.kcp_mtu, 100, 1500)) return false;
    if (!r.boolean(*t, "kcp", "fec", c.kcp_fec)) return false;
    if (!r.integer(*t, "kcp", "fec_data_shards", c.kcp_fec_data_shards, 1, 16)) return false;
    if (!r.integer(*t, "kcp", "fec_parity_shards", c.kcp_fec_parity_shards, 1, 16)) return false;
    if (!r.integer(*t, "kcp", "idle_timeout_ms", c.kcp_idle_timeout_ms, 1000, 3'600'000)) {
      return false;
    }
  } else if (!error.empty()) {
    return false;
  }

  if (!read_admin(r, root, path, c) || !read_log(r, root, c)) return false;

  // [dpdk]: the DPDK driver's own reader checks it (main.cpp, app::DpdkSession), so the keys
  // are the same as every other app's.
  if (r.section(root, "dpdk") != nullptr) {
    c.dpdk_section = true;
    c.dpdk_file = path;
  } else if (!error.empty()) {
    return false;
  }

  config = c;
  return true;
}

}  // namespace tern::relay
