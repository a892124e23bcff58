// tern-idle-memory: what one idle connected peer costs a server HostCore, in heap bytes.
//
//   tern-idle-memory [--peers N] [--channels C] [--wave W]
//
// Connects N client connections to one server HostCore entirely in memory: ceil(N/4000) client
// HostCores, each from its own source endpoint and holding up to 4000 connections to the server
// (one client socket may hold many connections, as ENet allows). Datagrams are handed between
// the cores with flush()/on_datagram() on a fake clock that advances 2 ms per round; W new
// connections start per round (default 2000), so the server's command pools only ever hold a
// few thousand handshakes at once. Once every connection is connected on both sides, a few more
// rounds let the handshake acknowledgements settle, and all events are drained throughout.
//
// The server's memory is then measured as the drop in glibc's heap use (mallinfo2: uordblks,
// the bytes of allocated chunks including their headers, plus hblkhd, mmapped chunks) when the
// server HostCore is destroyed: everything it holds for N idle peers (peers, channels, address
// table, pools, timer wheel, event ring). Prints
//
//   idle_memory peers=N channels=C server_bytes=X bytes_per_peer=Y sizeof_peer=Z
//   connect_ms=T rounds=R
#include "host_core.hpp"

#include <malloc.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace {

using tern::Endpoint;
using tern::Event;
using tern::EventType;
using tern::proto::HostConfig;
using tern::proto::HostCore;
using tern::proto::OutDatagram;

constexpr std::size_t kPerClient = 4000;
constexpr std::uint64_t kRoundUs = 2000;
constexpr std::uint32_t kClientBase = 0x0A010000;  // 10.1.0.0: client i is 10.1.0.0 + i

std::size_t heap_in_use() {
  const struct mallinfo2 mi = mallinfo2();
  return mi.uordblks + mi.hblkhd;
}

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: tern-idle-memory [--peers N] [--channels C] [--wave W]\n");
  std::exit(2);
}

std::size_t number(const char* text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0) usage();
  return static_cast<std::size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t peers = 100000;
  std::size_t channels = 1;
  std::size_t wave = 2000;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (i + 1 >= argc) usage();
    if (arg == "--peers") {
      peers = number(argv[++i]);
    } else if (arg == "--channels") {
      channels = number(argv[++i]);
    } else if (arg == "--wave") {
      wave = number(argv[++i]);
    } else {
      usage();
    }
  }
  if (channels > 255) usage();

  const Endpoint server_address = Endpoint::v4(0x0A000001, 7777);  // 10.0.0.1:7777
  const std::size_t client_count = (peers + kPerClient - 1) / kPerClient;

  std::vector<std::unique_ptr<HostCore>> clients;
  std::vector<Endpoint> client_address;
  for (std::size_t i = 0; i < client_count; ++i) {
    HostConfig cfg;
    cfg.peer_limit = kPerClient;
    cfg.random_seed = 0x1234567 + i;
    clients.push_back(std::make_unique<HostCore>(cfg));
    client_address.push_back(Endpoint::v4(kClientBase + static_cast<std::uint32_t>(i),
                                          static_cast<std::uint16_t>(40000)));
  }
  HostConfig server_cfg;
  server_cfg.peer_limit = peers;
  auto server = std::make_unique<HostCore>(server_cfg);

  std::vector<OutDatagram> batch(64);
  std::size_t server_connected = 0;
  std::size_t client_connected = 0;
  std::size_t failures = 0;
  Event ev;
  auto drain_server = [&] {
    while (server->poll_event(ev)) {
      if (ev.type == EventType::connect) ++server_connected;
      if (ev.type == EventType::disconnect) ++failures;
    }
  };
  auto drain_client = [&](HostCore& c) {
    while (c.poll_event(ev)) {
      if (ev.type == EventType::connect) ++client_connected;
      if (ev.type == EventType::disconnect) ++failures;
    }
  };

  std::uint64_t now = 1'000'000;
  std::size_t started = 0;
  std::size_t rounds = 0;
  std::size_t settle = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (settle < 5) {
    ++rounds;
    for (std::size_t w = 0; w < wave && started < peers; ++w, ++started) {
      const auto h = clients[started / kPerClient]->connect(now, server_address, channels, 0);
      if (!h.valid()) {
        std::fprintf(stderr, "connect %zu refused\n", started);
        return 1;
      }
    }
    for (std::size_t i = 0; i < client_count; ++i) {
      for (;;) {
        const std::size_t n = clients[i]->flush(now, batch);
        for (std::size_t k = 0; k < n; ++k) {
          server->on_datagram(now, client_address[i], batch[k].view());
          drain_server();
        }
        if (n < batch.size()) break;
      }
      drain_client(*clients[i]);
    }
    for (;;) {
      const std::size_t n = server->flush(now, batch);
      for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = batch[k].to.v4_host_order() - kClientBase;
        clients[i]->on_datagram(now, server_address, batch[k].view());
        drain_client(*clients[i]);
      }
      if (n < batch.size()) break;
    }
    drain_server();
    now += kRoundUs;
    if (failures != 0) {
      std::fprintf(stderr, "%zu connections failed\n", failures);
      return 1;
    }
    if (server_connected == peers && client_connected == peers) ++settle;
    if (rounds > 100000) {
      std::fprintf(stderr, "not connected after %zu rounds: server %zu client %zu\n", rounds,
                   server_connected, client_connected);
      return 1;
    }
  }
  const double connect_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (server->peer_count() != peers) {
    std::fprintf(stderr, "server holds %zu peers, expected %zu\n", server->peer_count(), peers);
    return 1;
  }

  malloc_trim(0);
  const std::size_t before = heap_in_use();
  server.reset();
  const std::size_t after = heap_in_use();
  const std::size_t server_bytes = before > after ? before - after : 0;
  std::printf(
      "idle_memory peers=%zu channels=%zu server_bytes=%zu bytes_per_peer=%.1f "
      "sizeof_peer=%zu\n",
      peers, channels, server_bytes, static_cast<double>(server_bytes) / static_cast<double>(peers),
      HostCore::sizeof_peer());
  std::printf("connect_ms=%.1f rounds=%zu fake_ms=%llu\n", connect_ms, rounds,
              static_cast<unsigned long long>(rounds * kRoundUs / 1000));
  return 0;
}
