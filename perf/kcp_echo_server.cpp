// tern-kcp-echo: a KCP echo server on tern::Host's KCP personality (the socket driver's
// batched receive and send), for perf/kcp_compare.py. Prints "listening PORT"; runs until
// SIGTERM or SIGINT.
//
//   tern-kcp-echo [--port P] [--sessions N]
#include <tern/host.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {
volatile std::sig_atomic_t g_stop = 0;
}

int main(int argc, char** argv) {
  int port = 0;
  tern::HostOptions options;
  options.personality = tern::Personality::kcp;
  options.peer_limit = 50000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--sessions") == 0 && i + 1 < argc) {
      options.peer_limit = static_cast<std::size_t>(std::atol(argv[++i]));
    } else {
      std::fprintf(stderr, "tern-kcp-echo: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  std::signal(SIGINT, [](int) { g_stop = 1; });
  std::string error;
  auto host = tern::Host::listen(
      options, *tern::Endpoint::parse("127.0.0.1:" + std::to_string(port)), error);
  if (host == nullptr) {
    std::fprintf(stderr, "tern-kcp-echo: %s\n", error.c_str());
    return 1;
  }
  std::printf("listening %d\n", host->local_endpoint().port);
  std::fflush(stdout);
  tern::Event ev;
  std::uint64_t refused = 0;
  while (g_stop == 0) {
    if (!host->service(ev, std::chrono::milliseconds(20))) continue;
    if (ev.type == tern::EventType::receive &&
        host->send(ev.peer, 0, tern::Delivery::reliable, ev.payload()) != tern::SendResult::ok) {
      ++refused;
    }
  }
  const tern::HostStats s = host->stats();
  std::fprintf(
      stderr,
      "tern-kcp-echo: sessions %llu, messages in %llu out %llu, refused %llu, dropped %llu\n",
      (unsigned long long)s.connects, (unsigned long long)s.messages_in,
      (unsigned long long)s.messages_out, (unsigned long long)refused,
      (unsigned long long)s.dropped);
  for (const auto& [name, n] : s.drops_by_reason)
    std::fprintf(stderr, "tern-kcp-echo: drop %s %llu\n", name, (unsigned long long)n);
  return 0;
}
