#include "metrics.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
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

const char* status_text(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 503: return "Service Unavailable";
    default: return "Error";
  }
}

bool equal_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

// The value of header `name` in `head` (the lines after the request line), or empty.
std::string_view header(std::string_view head, std::string_view name) {
  std::size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const std::size_t next = head.find("\r\n", at + 2);
    const std::string_view line =
        head.substr(at + 2, next == std::string_view::npos ? head.npos : next - at - 2);
    const std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && equal_nocase(trim(line.substr(0, colon)), name)) {
      return trim(line.substr(colon + 1));
    }
    at = next;
  }
  return {};
}

std::size_t content_length(std::string_view head) {
  const std::string_view v = header(head, "Content-Length");
  std::size_t n = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  return r.ec == std::errc() ? n : 0;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 &&
               hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void parse_params(std::string_view text, std::vector<std::pair<std::string, std::string>>& out) {
  while (!text.empty()) {
    const std::size_t amp = text.find('&');
    const std::string_view pair = text.substr(0, amp);
    if (!pair.empty()) {
      const std::size_t eq = pair.find('=');
      out.emplace_back(
          percent_decode(pair.substr(0, eq)),
          eq == std::string_view::npos ? std::string() : percent_decode(pair.substr(eq + 1)));
    }
    if (amp == std::string_view::npos) break;
    text.remove_prefix(amp + 1);
  }
}

}  // namespace

HttpRequest parse_http_request(std::string_view text) {
  HttpRequest r;
  const std::size_t head_end = text.find("\r\n\r\n");
  const std::size_t line_end = text.find("\r\n");
  if (head_end == std::string_view::npos || line_end == std::string_view::npos) {
    r.malformed = true;
    return r;
  }
  const std::string_view line = text.substr(0, line_end);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0) {
    r.malformed = true;
    return r;
  }
  r.method = std::string(line.substr(0, sp1));
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::size_t q = target.find('?');
  r.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) parse_params(target.substr(q + 1), r.params);
  const std::string_view head = text.substr(0, head_end);
  r.authorization = std::string(header(head, "Authorization"));
  const std::size_t length = content_length(head);
  const std::string_view body = text.substr(head_end + 4);
  if (body.size() < length) {
    r.malformed = true;  // cut short, or past the size limit
    return r;
  }
  if (length != 0 &&
      header(head, "Content-Type").starts_with("application/x-www-form-urlencoded")) {
    parse_params(body.substr(0, length), r.params);
  }
  return r;
}

MetricsServer::~MetricsServer() { stop(); }

bool MetricsServer::start(const Endpoint& bind, HttpHandler handler, std::string& error) {
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
  handler_ = std::move(handler);
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
  // The head is small (a request line and a few headers); a body is only a form of a few
  // parameters. Past these sizes the request is refused, not read on.
  constexpr std::size_t kMaxHead = 4096;
  constexpr std::size_t kMaxBody = 4096;
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // One request per connection; a slow client gets 1 s per read.
    timeval tv{1, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string text;
    std::size_t want = 0;  // head plus announced body, once the head is in
    char buf[2048];
    while (text.size() < kMaxHead + kMaxBody) {
      if (want == 0) {
        const std::size_t end = text.find("\r\n\r\n");
        if (end != std::string::npos) {
          want = end + 4 + std::min(content_length(text.substr(0, end)), kMaxBody + 1);
        } else if (text.size() > kMaxHead) {
          break;
        }
      }
      if (want != 0 && text.size() >= want) break;
      const ssize_t n = ::recv(c, buf, sizeof buf, 0);
      if (n <= 0) break;
      text.append(buf, static_cast<std::size_t>(n));
    }
    HttpRequest request = parse_http_request(text);
    HttpResponse response;
    if (request.malformed) {
      response.status = 400;
      response.body = "bad request\n";
    } else {
      response = handler_(request);
    }
    write_all(c, "HTTP/1.0 " + std::to_string(response.status) + ' ' +
                     status_text(response.status) + "\r\nContent-Type: " + response.content_type +
                     "\r\nContent-Length: " + std::to_string(response.body.size()) +
                     "\r\nConnection: close\r\n" + response.headers + "\r\n" + response.body);
    ::close(c);
  }
}

}  // namespace tern::relay
