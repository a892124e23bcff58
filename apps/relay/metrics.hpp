// A minimal HTTP/1.0 endpoint serving GET /metrics (Prometheus text format) from its own
// thread, so a scrape never touches a shard's poll loop: the text is rendered from the
// counters the shards publish.
#pragma once

#include <tern/endpoint.hpp>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace tern::relay {

class MetricsServer {
 public:
  ~MetricsServer();
  // Binds and starts serving; false with a one-line reason on failure.
  bool start(const Endpoint& bind, std::function<std::string()> render, std::string& error);
  void stop();
  Endpoint local_endpoint() const { return local_; }

 private:
  void serve();

  int fd_ = -1;
  Endpoint local_;
  std::function<std::string()> render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace tern::relay
