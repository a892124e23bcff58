#include "metrics.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tern::relay {

namespace {

socklen_t to_sockaddr(const Endpoint& e, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (e.is_v4()) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(e.port);
    a->sin_addr.s_addr = htonl(e.v4_host_order());
    return sizeof *a;
  }
  auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
  a->sin6_family = AF_INET6;
  a->sin6_port = htons(e.port);
  std::memcpy(&a->sin6_addr, e.addr.data(), 16);
  return sizeof *a;
}

void write_all(int fd, const std::string& s) {
  std::size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<std::size_t>(n);
  }
}

}  // namespace

MetricsServer::~MetricsServer() { stop(); }

bool MetricsServer::start(const Endpoint& bind, std::function<std::string()> render,
                          std::string& error) {
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(bind, ss);
  fd_ = ::socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    error = std::string("metrics socket: ") + std::strerror(errno);
    return false;
  }
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0 || ::listen(fd_, 16) != 0) {
    error = "metrics " + bind.to_string() + ": " + std::strerror(errno);
    ::close(fd_);
    fd_ = -1;
    return false;
  }
  sockaddr_storage got;
  socklen_t got_len = sizeof got;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&got), &got_len);
  local_ = bind;
  local_.port = ntohs(got.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                               : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
  render_ = std::move(render);
  thread_ = std::thread([this] { serve(); });
  return true;
}

void MetricsServer::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void MetricsServer::serve() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // One request per connection; a slow client gets 1 s to send its request line.
    timeval tv{1, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[2048];
    std::size_t have = 0;
    while (have < sizeof buf - 1) {
      const ssize_t n = ::recv(c, buf + have, sizeof buf - 1 - have, 0);
      if (n <= 0) break;
      have += static_cast<std::size_t>(n);
      buf[have] = '\0';
      if (std::strstr(buf, "\r\n\r\n") != nullptr || std::strstr(buf, "\n\n") != nullptr) break;
    }
    buf[have] = '\0';
    const bool metrics =
        std::strncmp(buf, "GET /metrics ", 13) == 0 || std::strncmp(buf, "GET /metrics?", 13) == 0;
    if (metrics) {
      const std::string body = render_();
      write_all(c,
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                    std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    } else {
      write_all(
          c,
          "HTTP/1.0 404 Not Found\r\nContent-Length: 10\r\nConnection: close\r\n\r\nnot found\n");
    }
    ::close(c);
  }
}

}  // namespace tern::relay
