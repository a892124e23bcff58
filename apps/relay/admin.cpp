#include "admin.hpp"

#include "json.hpp"

#include <charconv>
#include <sstream>

namespace tern::relay {

namespace {

constexpr const char* kResultNames[] = {
#define TERN_ADMIN_NAME(name, help) #name,
    TERN_ADMIN_RESULTS(TERN_ADMIN_NAME)
#undef TERN_ADMIN_NAME
};

constexpr std::size_t kDefaultPeerLimit = 1000;
constexpr std::uint32_t kDefaultBanSeconds = 3600;

std::string error_json(std::string_view why) { return JsonObject().add("error", why).str(); }

// Every byte compared whatever the first difference, so the time taken says nothing about how
// much of a guess was right.
bool same_secret(std::string_view a, std::string_view b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  const std::size_t n = std::max(a.size(), b.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff |= static_cast<unsigned>(x ^ y);
  }
  return diff == 0;
}

bool parse_number(const std::string& text, std::uint64_t min, std::uint64_t max,
                  std::uint64_t& out) {
  std::uint64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size() || v < min || v > max) {
    return false;
  }
  out = v;
  return true;
}

std::string room_json(const RoomTraffic& r) {
  return JsonObject()
      .add("room", r.room)
      .add("members", r.members)
      .add("messages_in", r.messages_in)
      .add("bytes_in", r.bytes_in)
      .add("copies_out", r.copies_out)
      .add("bytes_out", r.bytes_out)
      .str();
}

std::string peer_json(const PeerTraffic& p) {
  return JsonObject()
      .add("peer", p.address.to_string())
      .add("room", p.room)
      .add("shard", p.shard)
      .add("messages_in", p.messages_in)
      .add("bytes_in", p.bytes_in)
      .add("rtt_ms", p.rtt_ms)
      .add("backlog_bytes", p.backlog)
      .add("held", p.held)
      .str();
}

}  // namespace

HttpResponse OpsEndpoint::handle(const HttpRequest& request) {
  if (request.path == "/metrics") {
    if (request.method != "GET") {
      return HttpResponse{405, "text/plain; charset=utf-8", "use GET\n", "Allow: GET\r\n"};
    }
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = relay_.metrics_text() +
             relay_.traffic_metrics_text(config_.top_rooms, config_.top_talkers) + metrics_text();
    return r;
  }
  if (request.path == "/admin" || request.path.starts_with("/admin/")) return admin(request);
  return HttpResponse{404, "text/plain; charset=utf-8", "not found\n", ""};
}

HttpResponse OpsEndpoint::answer(Result result, int status, std::string json) {
  counts_[static_cast<std::size_t>(result)].fetch_add(1, std::memory_order_relaxed);
  HttpResponse r;
  r.status = status;
  r.content_type = "application/json";
  r.body = std::move(json) + "\n";
  if (status == 401) r.headers = "WWW-Authenticate: Bearer realm=\"tern-relay\"\r\n";
  if (status == 405) r.headers = "Allow: POST\r\n";
  return r;
}

bool OpsEndpoint::authorized(const HttpRequest& request) const {
  constexpr std::string_view kScheme = "Bearer ";
  const std::string_view header = request.authorization;
  if (!header.starts_with(kScheme)) return false;
  return same_secret(header.substr(kScheme.size()), config_.admin_token);
}

HttpResponse OpsEndpoint::admin(const HttpRequest& request) {
  if (config_.admin_token.empty()) {
    return answer(Result::disabled, 404,
                  error_json("the admin endpoint is off: no admin.token configured"));
  }
  if (!authorized(request)) {
    return answer(Result::unauthorized, 401,
                  error_json("missing or wrong token (Authorization: Bearer TOKEN)"));
  }
  const std::string& path = request.path;
  const bool get = request.method == "GET";
  const bool post = request.method == "POST";
  bool complete = true;
  auto done = [&](JsonObject body) {
    body.add("complete", complete);
    return complete ? answer(Result::ok, 200, body.str())
                    : answer(Result::incomplete, 503, body.str());
  };
  auto need = [&](bool method_ok, const char* method) -> std::optional<HttpResponse> {
    if (method_ok) return std::nullopt;
    HttpResponse r =
        answer(Result::bad_request, 405, error_json(std::string("use ") + method + " " + path));
    r.headers = std::string("Allow: ") + method + "\r\n";
    return r;
  };

  if (path == "/admin/rooms") {
    if (auto r = need(get, "GET")) return *r;
    JsonArray rooms;
    for (const RoomTraffic& room : relay_.room_list(complete)) rooms.push(room_json(room));
    return done(JsonObject().raw("rooms", rooms.str()));
  }

  if (path == "/admin/peers") {
    if (auto r = need(get, "GET")) return *r;
    std::optional<std::uint32_t> room;
    std::uint64_t limit = kDefaultPeerLimit;
    if (const std::string* v = request.param("room")) {
      std::uint64_t n = 0;
      if (!parse_number(*v, 0, UINT32_MAX, n)) {
        return answer(Result::bad_request, 400, error_json("room: must be 0..4294967295"));
      }
      room = static_cast<std::uint32_t>(n);
    }
    if (const std::string* v = request.param("limit")) {
      if (!parse_number(*v, 1, 1'000'000, limit)) {
        return answer(Result::bad_request, 400, error_json("limit: must be 1..1000000"));
      }
    }
    JsonArray peers;
    for (const PeerTraffic& p : relay_.peer_list(room, limit, complete)) peers.push(peer_json(p));
    return done(JsonObject().raw("peers", peers.str()));
  }

  if (path == "/admin/kick") {
    if (auto r = need(post, "POST")) return *r;
    const std::string* text = request.param("peer");
    const auto peer = text != nullptr ? Endpoint::parse(*text) : std::nullopt;
    if (!peer || peer->port == 0) {
      return answer(Result::bad_request, 400, error_json("peer: must be ADDRESS:PORT"));
    }
    const std::string* reason = request.param("reason");
    const std::size_t kicked = relay_.kick(*peer, complete);
    JsonObject fields;
    fields.add("peer", peer->to_string()).add("kicked", kicked);
    if (reason != nullptr) fields.add("reason", *reason);
    log_.write(stderr, LogLevel::info, "admin_kick",
               "tern-relay: admin kick peer=" + peer->to_string() +
                   " kicked=" + std::to_string(kicked) +
                   (reason != nullptr ? " reason=" + json_quote(*reason) : std::string()),
               fields);
    if (kicked == 0 && complete) {
      return answer(Result::not_found, 404,
                    error_json("no client connected from " + peer->to_string()));
    }
    return done(JsonObject().add("peer", peer->to_string()).add("kicked", kicked));
  }

  if (path == "/admin/ban") {
    if (auto r = need(post, "POST")) return *r;
    const std::string* text = request.param("address");
    std::string why = "missing";
    const auto target = text != nullptr ? parse_ban_target(*text, why) : std::nullopt;
    if (!target) {
      return answer(Result::bad_request, 400,
                    error_json("address: must be an IPv4 or IPv6 address or ADDRESS/BITS, "
                               "without a port (" +
                               why + ")"));
    }
    std::uint64_t seconds = kDefaultBanSeconds;
    if (const std::string* v = request.param("seconds")) {
      if (!parse_number(*v, 1, kMaxBanSeconds, seconds)) {
        return answer(Result::bad_request, 400,
                      error_json("seconds: must be 1.." + std::to_string(kMaxBanSeconds)));
      }
    }
    const std::size_t kicked = relay_.ban(*target, static_cast<std::uint32_t>(seconds), complete);
    const std::string host = ban_target_text(*target);
    log_.write(stderr, LogLevel::info, "admin_ban",
               "tern-relay: admin ban address=" + host + " seconds=" + std::to_string(seconds) +
                   " kicked=" + std::to_string(kicked),
               JsonObject().add("address", host).add("seconds", seconds).add("kicked", kicked));
    return done(JsonObject().add("address", host).add("seconds", seconds).add("kicked", kicked));
  }

  if (path == "/admin/unban") {
    if (auto r = need(post, "POST")) return *r;
    const std::string* text = request.param("address");
    std::string why = "missing";
    const auto target = text != nullptr ? parse_ban_target(*text, why) : std::nullopt;
    if (!target) {
      return answer(Result::bad_request, 400,
                    error_json("address: must be an IPv4 or IPv6 address or ADDRESS/BITS, "
                               "without a port (" +
                               why + ")"));
    }
    const bool was = relay_.unban(*target, complete);
    const std::string host = ban_target_text(*target);
    log_.write(stderr, LogLevel::info, "admin_unban",
               "tern-relay: admin unban address=" + host + " was_banned=" + (was ? "yes" : "no"),
               JsonObject().add("address", host).add("was_banned", was));
    return done(JsonObject().add("address", host).add("was_banned", was));
  }

  if (path == "/admin/bans") {
    if (auto r = need(get, "GET")) return *r;
    JsonArray bans;
    for (const BanInfo& b : relay_.bans(complete)) {
      bans.push(JsonObject()
                    .add("address", ban_target_text(b.target))
                    .add("remaining_ms", b.remaining_ms)
                    .add("until_removed", b.until_removed)
                    .str());
    }
    return done(JsonObject().raw("bans", bans.str()));
  }

  return answer(Result::not_found, 404, error_json("no such admin path: " + path));
}

std::string OpsEndpoint::metrics_text() const {
  std::ostringstream o;
  o << "# HELP tern_relay_admin_requests_total Requests to /admin/*, by result.\n"
       "# TYPE tern_relay_admin_requests_total counter\n";
  for (std::size_t i = 0; i < counts_.size(); ++i) {
    o << "tern_relay_admin_requests_total{result=\"" << kResultNames[i] << "\"} "
      << counts_[i].load(std::memory_order_relaxed) << '\n';
  }
  o << "# HELP tern_relay_admin_enabled 1 when an admin token is configured.\n"
       "# TYPE tern_relay_admin_enabled gauge\n"
       "tern_relay_admin_enabled "
    << (config_.admin_token.empty() ? 0 : 1) << '\n';
  return o.str();
}

}  // namespace tern::relay
