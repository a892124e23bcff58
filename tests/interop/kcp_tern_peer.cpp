// Tern's side of the kcp-go interop tests: a KcpCore on a real UDP socket on loopback.
//
//   kcp_tern_peer --serve [--port P] [--loss F] [--send-fec] [--session-limit N]
//                                                     echo server; prints "listening P"
//   kcp_tern_peer --connect PORT [--count N] [--loss F] [--send-fec]
//
// The server echoes each message back on its session, except "BIG n", answered with one
// n-byte message (fragmented by the core). The client sends N messages to a kcp-go echo
// server and checks the echoed byte stream (kcp-go re-splits what it echoes at its MSS).
// --loss drops that fraction of datagrams each way, from a fixed seed.
#include "kcp/kcp_core.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto::kcp;

volatile sig_atomic_t g_stop = 0;

std::uint64_t now_us() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

std::vector<std::byte> payload(std::uint32_t i, std::size_t n) {
  std::vector<std::byte> b(n);
  for (std::size_t j = 0; j < n; ++j) b[j] = std::byte((i * 131 + j * 7) & 0xff);
  if (n >= 4) std::memcpy(b.data(), &i, 4);
  return b;
}

struct Socket {
  int fd = -1;
  std::mt19937_64 rng{0x6b6370};
  double loss = 0;
  std::uint64_t lost = 0;

  bool dropped() { return loss > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < loss; }
  void send(const KcpDatagram& d) {
    if (dropped()) {
      ++lost;
      return;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(d.to.v4_host_order());
    sa.sin_port = htons(d.to.port);
    const auto v = d.view();
    (void)::sendto(fd, v.data(), v.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  }
};

template <class OnEvent, class Done>
int run(KcpCore& core, Socket& sock, OnEvent&& on_event, Done&& done, std::uint64_t limit_us) {
  std::vector<KcpDatagram> batch(32);
  std::vector<std::byte> buf(65536);
  const std::uint64_t start = now_us();
  while (g_stop == 0 && !done()) {
    if (now_us() - start > limit_us) return 2;
    const std::uint64_t deadline = core.next_deadline_us();
    const std::uint64_t t = now_us();
    int timeout_ms = 5;
    if (deadline <= t)
      timeout_ms = 0;
    else if (deadline - t < 5000)
      timeout_ms = static_cast<int>((deadline - t) / 1000);
    pollfd p{sock.fd, POLLIN, 0};
    ::poll(&p, 1, timeout_ms);
    for (int i = 0; i < 256; ++i) {
      sockaddr_in sa{};
      socklen_t sl = sizeof sa;
      const ssize_t n = ::recvfrom(sock.fd, buf.data(), buf.size(), MSG_DONTWAIT,
                                   reinterpret_cast<sockaddr*>(&sa), &sl);
      if (n < 0) break;
      if (sock.dropped()) {
        ++sock.lost;
        continue;
      }
      core.on_datagram(now_us(), Endpoint::v4(ntohl(sa.sin_addr.s_addr), ntohs(sa.sin_port)),
                       std::span<const std::byte>(buf.data(), static_cast<std::size_t>(n)));
    }
    Event ev;
    while (core.poll_event(ev)) on_event(ev);
    for (;;) {
      const std::size_t n = core.flush(now_us(), batch);
      for (std::size_t i = 0; i < n; ++i) sock.send(batch[i]);
      if (n < batch.size()) break;
    }
  }
  return 0;
}

void print_drops(const char* who, const KcpCore& core, const Socket& sock) {
  const auto& c = core.counters();
  std::fprintf(stderr,
               "%s: sessions %llu, messages in %llu out %llu, retransmits %llu fast %llu, "
               "datagrams lost by --loss %llu, dead links %llu, idle timeouts %llu, "
               "fec parity %llu recovered %llu, drops %llu\n",
               who, (unsigned long long)c.sessions_opened, (unsigned long long)c.messages_in,
               (unsigned long long)c.messages_out, (unsigned long long)c.retransmits,
               (unsigned long long)c.fast_retransmits, (unsigned long long)sock.lost,
               (unsigned long long)c.dead_links, (unsigned long long)c.idle_timeouts,
               (unsigned long long)c.fec_parity_in, (unsigned long long)c.fec_recovered,
               (unsigned long long)c.drops.total());
  for (std::size_t i = 0; i < base::kDropReasons<KcpDrop>; ++i) {
    const auto d = static_cast<KcpDrop>(i);
    if (c.drops[d] != 0)
      std::fprintf(stderr, "  drop %s %llu\n", base::drop_name(d), (unsigned long long)c.drops[d]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool serve = false;
  int port = 0;
  int connect_port = 0;
  long count = 10000;
  double loss = 0;
  KcpConfig cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kcp_tern_peer: %s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--serve")
      serve = true;
    else if (a == "--port")
      port = std::atoi(next());
    else if (a == "--connect")
      connect_port = std::atoi(next());
    else if (a == "--count")
      count = std::atol(next());
    else if (a == "--loss")
      loss = std::atof(next());
    else if (a == "--send-fec")
      cfg.send_fec = true;
    else if (a == "--session-limit")
      cfg.session_limit = static_cast<std::size_t>(std::atol(next()));
    else {
      std::fprintf(stderr, "kcp_tern_peer: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  signal(SIGTERM, [](int) { g_stop = 1; });
  signal(SIGINT, [](int) { g_stop = 1; });

  Socket sock;
  sock.loss = loss;
  sock.fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<std::uint16_t>(serve ? port : 0));
  if (sock.fd < 0 || ::bind(sock.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    std::perror("kcp_tern_peer: bind");
    return 2;
  }
  const int big = 1 << 22;
  ::setsockopt(sock.fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  ::setsockopt(sock.fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);

  // kcp-go's receivers take a message of at most their rcv_wnd - 1 fragments; the clients in
  // these tests use 128.
  cfg.interval_ms = 10;
  // The client may write its whole run before it reads (kcp-go acknowledges what it has not
  // read yet): the echo server queues up to that much instead of refusing.
  cfg.max_queued_segments = 1u << 16;
  KcpCore core(cfg);

  if (serve) {
    socklen_t sl = sizeof sa;
    ::getsockname(sock.fd, reinterpret_cast<sockaddr*>(&sa), &sl);
    std::printf("listening %d\n", ntohs(sa.sin_port));
    std::fflush(stdout);
    std::uint64_t refused = 0;
    run(
        core, sock,
        [&](Event& ev) {
          if (ev.type != EventType::receive) return;
          const auto p = ev.payload();
          const std::string_view text(reinterpret_cast<const char*>(p.data()), p.size());
          SendResult r;
          if (text.size() < 16 && text.substr(0, 4) == "BIG ") {
            const auto n =
                static_cast<std::uint32_t>(std::atoi(std::string(text.substr(4)).c_str()));
            r = core.send(ev.peer, payload(n, n));
          } else {
            r = core.send(ev.peer, p);
          }
          if (r != SendResult::ok) ++refused;
        },
        [] { return false; }, std::uint64_t{600} * 1'000'000);
    print_drops("kcp_tern_peer server", core, sock);
    if (refused != 0)
      std::fprintf(stderr, "kcp_tern_peer: %llu echoes refused\n", (unsigned long long)refused);
    return refused == 0 ? 0 : 1;
  }

  if (connect_port == 0) {
    std::fprintf(stderr, "kcp_tern_peer: need --serve or --connect PORT\n");
    return 2;
  }
  const PeerHandle s = core.connect(
      now_us(), Endpoint::v4(0x7f000001, static_cast<std::uint16_t>(connect_port)), 0x7465726e);
  std::vector<std::byte> want, got;
  long next = 0;
  bool connected = false;
  auto size = [](long i) -> std::size_t {
    // Every 50th message is above the MSS and leaves fragmented.
    return i % 50 == 49 ? 5000 : 8 + static_cast<std::size_t>(i * 37) % 300;
  };
  int rc = run(
      core, sock,
      [&](Event& ev) {
        if (ev.type == EventType::connect) connected = true;
        if (ev.type == EventType::disconnect) g_stop = 1;
        if (ev.type != EventType::receive) return;
        const auto p = ev.payload();
        got.insert(got.end(), p.begin(), p.end());
      },
      [&] {
        KcpSessionStats st;
        while (next < count && core.session_stats(s, st) && st.queued < 64) {
          auto m = payload(static_cast<std::uint32_t>(next), size(next));
          if (core.send(s, m) != SendResult::ok) break;
          want.insert(want.end(), m.begin(), m.end());
          ++next;
        }
        return next == count && got.size() >= want.size();
      },
      std::uint64_t{90} * 1'000'000);
  print_drops("kcp_tern_peer client", core, sock);
  if (rc != 0 || !connected || got != want) {
    std::fprintf(stderr,
                 "kcp_tern_peer: FAIL sent %ld messages (%zu bytes), echoed %zu bytes, %s\n", next,
                 want.size(), got.size(), got == want ? "equal" : "differ");
    return 1;
  }
  std::printf("ok count=%ld bytes=%zu\n", count, want.size());
  return 0;
}
