// A connect flood on real sockets (issue 29): a tern::Host server on loopback echoes for
// established libenet clients while hundreds of sockets bound to 127.1.x.y send it libenet
// CONNECTs and never read, at 100,000 a second or more; new libenet clients connect meanwhile.
// Every new client connects, no established one is disconnected, no flood source gets a peer,
// the half-open table stays within its capacity, and no flood source is sent more bytes than
// it sent. The flood is paced at 120,000 CONNECTs/s and lasts until 300,000 are sent (bounded
// at 15 s for a loaded machine); the rate reached is printed.
#include <tern/host.hpp>

#include "host_core.hpp"
#include "wire.hpp"

#include <enet/enet.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

namespace tern {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

std::vector<std::byte> connect_datagram(std::uint32_t n) {
  proto::Header h;
  h.has_sent_time = true;
  h.sent_time = static_cast<std::uint16_t>(n);
  std::vector<std::byte> out(80);
  std::size_t size = proto::encode_header(out, h, false);
  proto::Command c;
  c.command = static_cast<std::uint8_t>(proto::Cmd::connect) | proto::kFlagAcknowledge;
  c.channel_id = proto::kSystemChannel;
  c.reliable_seq = 1;
  c.connect = proto::Connect{0,
                             0xFF,
                             0xFF,
                             1400,
                             proto::kMaxWindowSize,
                             2,
                             0,
                             0,
                             proto::kPacketThrottleInterval,
                             proto::kPacketThrottleAcceleration,
                             proto::kPacketThrottleDeceleration,
                             n * 2654435761u,
                             0};
  size += proto::encode_command(std::span<std::byte>(out).subspan(size), c);
  out.resize(size);
  return out;
}

struct FloodSource {
  int fd = -1;
  std::uint64_t sent = 0;
};

TEST(ConnectFlood, LibenetClientsConnectAndStayThroughAFloodOfConnects) {
  ASSERT_EQ(enet_initialize(), 0);
  std::string error;
  HostOptions so;
  so.peer_limit = 256;
  // 120,000 CONNECTs/s turn 65,536 entries over in about 0.5 s, as fast as a libenet client
  // pings: one whose acknowledgement the loaded server's socket dropped could lose its entry
  // before its ping asks again. Sized for the flood, as a server expecting one would be.
  so.half_open_capacity = 262144;
  auto server = Host::listen(so, *Endpoint::parse("127.0.0.1:0"), error);
  ASSERT_NE(server, nullptr) << error;
  const std::uint16_t port = server->local_endpoint().port;

  std::atomic<bool> stop{false};
  std::set<std::string> connect_sources;  // written by the server thread only
  std::atomic<std::uint64_t> server_disconnects{0};
  std::atomic<std::size_t> server_peers{0};
  std::thread serve([&] {
    Event ev;
    while (!stop.load(std::memory_order_relaxed)) {
      const bool got = server->service(ev, std::chrono::milliseconds(1));
      server_peers.store(server->peer_count(), std::memory_order_relaxed);
      if (!got) continue;
      if (ev.type == EventType::connect) connect_sources.insert(ev.address.to_string());
      if (ev.type == EventType::disconnect) ++server_disconnects;
      if (ev.type == EventType::receive) {
        server->send(ev.peer, 0, Delivery::reliable, ev.packet.bytes());
      }
    }
  });

  ENetAddress addr;
  enet_address_set_host(&addr, "127.0.0.1");
  addr.port = port;
  auto make_client = [&](std::vector<ENetHost*>& hosts, std::vector<ENetPeer*>& peers) {
    ENetHost* h = enet_host_create(nullptr, 1, 2, 0, 0);
    ASSERT_NE(h, nullptr);
    ENetPeer* p = enet_host_connect(h, &addr, 2, 0);
    ASSERT_NE(p, nullptr);
    hosts.push_back(h);
    peers.push_back(p);
  };
  // Services every client once; counts connects, disconnects and echoes.
  std::size_t connects = 0, disconnects = 0, echoes = 0;
  auto service_all = [&](std::vector<ENetHost*>& hosts) {
    for (ENetHost* h : hosts) {
      ENetEvent e;
      while (enet_host_service(h, &e, 0) > 0) {
        if (e.type == ENET_EVENT_TYPE_CONNECT) ++connects;
        if (e.type == ENET_EVENT_TYPE_DISCONNECT) ++disconnects;
        if (e.type == ENET_EVENT_TYPE_RECEIVE) {
          ++echoes;
          enet_packet_destroy(e.packet);
        }
      }
    }
  };

  constexpr std::size_t kEstablished = 10;
  std::vector<ENetHost*> established;
  std::vector<ENetPeer*> established_peers;
  for (std::size_t i = 0; i < kEstablished; ++i) make_client(established, established_peers);
  for (auto until = Clock::now() + 10s; connects < kEstablished && Clock::now() < until;) {
    service_all(established);
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(connects, kEstablished);
  connects = 0;
  for (auto until = Clock::now() + 10s;
       server_peers.load() < kEstablished && Clock::now() < until;) {
    service_all(established);  // their acks make the server's peers
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_EQ(server_peers.load(), kEstablished);

  // The flood: sockets bound to 127.1.x.y, never read until the end.
  constexpr std::size_t kSources = 400;
  std::vector<FloodSource> sources(kSources);
  for (std::size_t i = 0; i < kSources; ++i) {
    sources[i].fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    ASSERT_GE(sources[i].fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f010000u + static_cast<std::uint32_t>(i) + 1);
    ASSERT_EQ(::bind(sources[i].fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(0x7f000001u);
    ASSERT_EQ(::connect(sources[i].fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  }
  std::atomic<std::uint64_t> flood_sent{0};
  std::atomic<bool> flood_stop{false};
  Clock::duration flood_time{};
  std::thread flood([&] {
    std::vector<std::vector<std::byte>> datagrams;
    for (std::uint32_t n = 0; n < 256; ++n) datagrams.push_back(connect_datagram(n));
    const auto start = Clock::now();
    std::uint32_t n = 0;
    // Paced at kRate: faster would only measure how far this machine's loopback goes.
    constexpr double kRate = 120'000;
    while (!flood_stop.load(std::memory_order_relaxed)) {
      const double due = std::chrono::duration<double>(Clock::now() - start).count() * kRate;
      if (static_cast<double>(flood_sent.load(std::memory_order_relaxed)) > due) {
        std::this_thread::sleep_for(100us);
        continue;
      }
      for (FloodSource& s : sources) {
        const auto& d = datagrams[n++ % datagrams.size()];
        if (::send(s.fd, d.data(), d.size(), 0) == static_cast<ssize_t>(d.size())) {
          s.sent += d.size();
          flood_sent.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    flood_time = Clock::now() - start;
  });

  // During the flood: the established clients send and get echoes; new clients connect.
  constexpr std::size_t kNew = 20;
  std::vector<ENetHost*> fresh;
  std::vector<ENetPeer*> fresh_peers;
  // At least 3 s and 300,000 CONNECTs (2.5 s at the pace; a loaded machine takes longer, up
  // to 15 s): the count is required, the rate reported.
  constexpr std::uint64_t kFloodCount = 300'000;
  const auto flood_start = Clock::now();
  std::size_t sent_messages = 0;
  while ((Clock::now() < flood_start + 3s || flood_sent.load() < kFloodCount) &&
         Clock::now() < flood_start + 15s) {
    if (fresh.size() < kNew) make_client(fresh, fresh_peers);
    for (ENetPeer* p : established_peers) {
      ENetPacket* pkt = enet_packet_create("ping", 4, ENET_PACKET_FLAG_RELIABLE);
      enet_peer_send(p, 0, pkt);
      ++sent_messages;
    }
    service_all(established);
    service_all(fresh);
    std::this_thread::sleep_for(10ms);
  }
  flood_stop = true;
  flood.join();
  // Let the stragglers finish (bounded).
  for (auto until = Clock::now() + 10s;
       (connects < kNew || echoes < sent_messages || server_peers.load() < kEstablished + kNew) &&
       Clock::now() < until;) {
    service_all(established);
    service_all(fresh);
    std::this_thread::sleep_for(1ms);
  }
  const double seconds = std::chrono::duration<double>(flood_time).count();
  const double rate = static_cast<double>(flood_sent.load()) / seconds;
  std::printf("flood: %llu CONNECTs in %.2f s (%.0f/s)\n",
              static_cast<unsigned long long>(flood_sent.load()), seconds, rate);

  EXPECT_EQ(connects, kNew) << "every new libenet client connects during the flood";
  EXPECT_EQ(disconnects, 0u) << "no established client is disconnected";
  EXPECT_EQ(echoes, sent_messages);
  EXPECT_GE(flood_sent.load(), kFloodCount);

  // Each flood source: what the server sent it (waiting in its receive buffer) against what
  // it sent.
  std::size_t answered = 0;
  for (FloodSource& s : sources) {
    std::uint64_t got = 0;
    char buf[2048];
    for (ssize_t r; (r = ::recv(s.fd, buf, sizeof buf, 0)) > 0;)
      got += static_cast<std::uint64_t>(r);
    answered += got > 0 ? 1 : 0;
    EXPECT_LE(got, s.sent);
    ::close(s.fd);
  }
  EXPECT_GT(answered, 0u);  // the check above saw replies

  stop = true;
  serve.join();
  const HostStats st = server->stats();
  EXPECT_EQ(st.peers, kEstablished + kNew) << "no flood source owns a peer slot";
  EXPECT_EQ(server_disconnects.load(), 0u);
  for (const std::string& src : connect_sources) EXPECT_EQ(src.rfind("127.0.0.1:", 0), 0u) << src;
  EXPECT_LE(st.half_open, so.half_open_capacity);
  EXPECT_LE(st.unverified_bytes_out, st.unverified_bytes_in);
  std::printf(
      "server: half-open %zu, created %llu, cookies %llu, promoted %llu, "
      "unverified bytes in %llu out %llu\n",
      st.half_open, static_cast<unsigned long long>(st.half_open_created),
      static_cast<unsigned long long>(st.cookies_sent),
      static_cast<unsigned long long>(st.peers_promoted),
      static_cast<unsigned long long>(st.unverified_bytes_in),
      static_cast<unsigned long long>(st.unverified_bytes_out));

  for (ENetHost* h : established) enet_host_destroy(h);
  for (ENetHost* h : fresh) enet_host_destroy(h);
  enet_deinitialize();
}

}  // namespace
}  // namespace tern
