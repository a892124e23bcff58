// What the metrics port answers: GET /metrics (the relay's counters, then the busiest rooms and
// clients, then this endpoint's own request counts) and, with an admin token configured, the
// admin endpoint:
//
//   GET  /admin/rooms                       every room: members and traffic
//   GET  /admin/peers[?room=R][&limit=N]    connected clients (all, or one room's)
//   POST /admin/kick?peer=ADDR:PORT         disconnects one client (data 4)
//   POST /admin/ban?address=ADDR[&seconds=S]   disconnects the address's clients (data 5) and
//                                           refuses its connects for S seconds (default 3600)
//   POST /admin/unban?address=ADDR
//   GET  /admin/bans
//
// Parameters come in the query string or a form body; answers are JSON. Every admin request
// needs "Authorization: Bearer TOKEN" with admin.token; without a configured token the admin
// paths answer 404. Each request is counted by result (tern_relay_admin_requests_total).
#pragma once

#include "config.hpp"
#include "log.hpp"
#include "metrics.hpp"
#include "relay.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace tern::relay {

#define TERN_ADMIN_RESULTS(X)                                           \
  X(ok, "answered")                                                     \
  X(unauthorized, "missing or wrong bearer token (401)")                \
  X(disabled, "admin path with no admin.token configured (404)")        \
  X(bad_request, "missing or malformed parameter, or the wrong method") \
  X(not_found, "unknown admin path, or no such client")                 \
  X(incomplete, "a shard did not answer in time (the answer lacks its part)")

class OpsEndpoint {
 public:
  enum class Result : std::uint8_t {
#define TERN_ADMIN_ENUM(name, help) name,
    TERN_ADMIN_RESULTS(TERN_ADMIN_ENUM)
#undef TERN_ADMIN_ENUM
        count_
  };

  OpsEndpoint(Relay& relay, const RelayConfig& config, const Log& log)
      : relay_(relay), config_(config), log_(log) {}

  // The metrics server's handler (its thread).
  HttpResponse handle(const HttpRequest& request);

 private:
  HttpResponse admin(const HttpRequest& request);
  bool authorized(const HttpRequest& request) const;
  std::string metrics_text() const;
  HttpResponse answer(Result result, int status, std::string json);

  Relay& relay_;
  const RelayConfig& config_;
  const Log& log_;
  std::array<std::atomic<std::uint64_t>, static_cast<std::size_t>(Result::count_)> counts_{};
};

}  // namespace tern::relay
