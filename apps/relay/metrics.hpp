// A minimal HTTP/1.0 server on the metrics port, from its own thread, so a scrape or an admin
// request never runs in a shard's poll loop: GET /metrics is rendered from the counters the
// shards publish, and what needs shard state asks the shards with posted tasks (Relay's
// operations). One request per connection, one connection at a time.
#pragma once

#include <tern/endpoint.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace tern::relay {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query
  // The query string's and a form body's (application/x-www-form-urlencoded) parameters,
  // percent-decoded, in order.
  std::vector<std::pair<std::string, std::string>> params;
  std::string authorization;  // the Authorization header's value, if any
  bool malformed = false;     // no request line, or a body past the size limit

  const std::string* param(std::string_view name) const {
    for (const auto& [k, v] : params) {
      if (k == name) return &v;
    }
    return nullptr;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::string headers;  // extra header lines, each ending in \r\n
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// Parses one request (head, and the body the head announces) from `text`.
HttpRequest parse_http_request(std::string_view text);

class MetricsServer {
 public:
  ~MetricsServer();
  // Binds and starts serving; false with a one-line reason on failure.
  bool start(const Endpoint& bind, HttpHandler handler, std::string& error);
  void stop();
  Endpoint local_endpoint() const { return local_; }

 private:
  void serve();

  int fd_ = -1;
  Endpoint local_;
  HttpHandler handler_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tern::relay
