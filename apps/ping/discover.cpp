// tern-ping --discover: one discovery ping (WIRE.md, "Discovery") to a server or a broadcast
// address, and one line per answer: address, RTT and the server's info.
#include "runtime.hpp"

#include <tern/host.hpp>

#include <chrono>
#include <cstdio>
#include <string>

namespace tern::ping {

namespace {

// The info as one line: printable ASCII as it is, everything else (newlines included) as \xNN.
std::string printable(std::span<const std::byte> bytes) {
  std::string out;
  for (std::byte b : bytes) {
    const auto c = static_cast<unsigned char>(b);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}

}  // namespace

int run_discover(const DiscoverConfig& config) {
  std::string error;
  tern::HostOptions options;
  options.peer_limit = 1;
  const char* bind = config.target.is_v4() ? "0.0.0.0:0" : "[::]:0";
  auto host = tern::Host::listen(options, *tern::Endpoint::parse(bind), error);
  if (host == nullptr) {
    std::fprintf(stderr, "tern-ping: %s\n", error.c_str());
    return kExitFailure;
  }
  if (host->discover(config.target, config.size) == 0) {
    std::fprintf(stderr, "tern-ping: cannot queue the discovery ping\n");
    return kExitFailure;
  }
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(config.timeout_ms);
  std::size_t found = 0;
  for (auto now = std::chrono::steady_clock::now(); now < end;
       now = std::chrono::steady_clock::now()) {
    tern::Event ev;
    host->service(ev, std::chrono::duration_cast<std::chrono::microseconds>(end - now));
    tern::DiscoveryAnswer a;
    while (host->poll_discovery(a)) {
      ++found;
      std::printf("server %s rtt_ms=%.3f%s info=%s\n", a.from.to_string().c_str(),
                  static_cast<double>(a.rtt_us) / 1000.0, a.truncated ? " truncated" : "",
                  printable(a.info.bytes()).c_str());
      std::fflush(stdout);
    }
  }
  const tern::HostStats s = host->stats();
  if (s.bytes_out == 0) {
    std::fprintf(stderr, "tern-ping: the discovery ping to %s was not sent\n",
                 config.target.to_string().c_str());
    return kExitFailure;
  }
  std::printf("discovered %zu\n", found);
  return found != 0 ? kExitOk : kExitFailure;
}

}  // namespace tern::ping
