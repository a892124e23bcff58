// Two HostCores wired back to back in memory, on simulated time (STYLE habit 1 and 9): every
// datagram one flushes is handed to the other, nothing is lost, and the test owns the clock.
#pragma once

#include "host_core.hpp"
#include "wire.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace tern::test {

class CorePair {
 public:
  explicit CorePair(const proto::HostConfig& client_cfg = {},
                    const proto::HostConfig& server_cfg = {})
      : client(client_cfg), server(server_cfg), out_(32) {}

  proto::HostCore client;
  proto::HostCore server;
  const Endpoint client_ep = Endpoint::v4(0x0A000001, 40001);
  const Endpoint server_ep = Endpoint::v4(0x0A000002, 7777);
  std::uint64_t now_us = 1'000'000;
  PeerHandle client_peer;  // the server as seen by the client
  PeerHandle server_peer;  // the client as seen by the server

  // Called for each received event; defaults keep nothing.
  std::function<void(Event&)> on_client_event = [](Event&) {};
  std::function<void(Event&)> on_server_event = [](Event&) {};
  // The last client->server datagram, so tests can copy its header (peer ID and session).
  std::vector<std::byte> last_client_datagram;

  // Flushes both sides once (repeating while a side fills the batch), delivers everything to
  // the other side, and drains events. Returns the number of datagrams moved.
  std::size_t exchange() {
    std::size_t moved = 0;
    for (;;) {
      const std::size_t n = client.flush(now_us, out_);
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(out_[i].to, server_ep);
        const auto bytes = out_[i].view();
        last_client_datagram.assign(bytes.begin(), bytes.end());
        server.on_datagram(now_us, client_ep, bytes);
      }
      moved += n;
      if (n < out_.size()) break;
    }
    for (;;) {
      const std::size_t n = server.flush(now_us, out_);
      for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(out_[i].to, client_ep);
        client.on_datagram(now_us, server_ep, out_[i].view());
      }
      moved += n;
      if (n < out_.size()) break;
    }
    drain();
    return moved;
  }

  void step(std::uint64_t us) {
    now_us += us;
    exchange();
  }

  void drain() {
    Event ev;
    while (client.poll_event(ev)) {
      if (ev.type == EventType::connect) client_connected_ = true;
      on_client_event(ev);
    }
    while (server.poll_event(ev)) {
      if (ev.type == EventType::connect) {
        server_connected_ = true;
        server_peer = ev.peer;
      }
      on_server_event(ev);
    }
  }

  // Runs ENet's three-way handshake; both sides report connect.
  void handshake(std::size_t channels = 2, std::uint32_t data = 0x1234) {
    client_peer = client.connect(now_us, server_ep, channels, data);
    ASSERT_TRUE(client_peer.valid());
    for (int i = 0; i < 50 && !(client_connected_ && server_connected_); ++i) step(1000);
    ASSERT_TRUE(client_connected_) << "client never got its connect event";
    ASSERT_TRUE(server_connected_) << "server never got its connect event";
    ASSERT_EQ(client.peer_state(client_peer), PeerState::connected);
    ASSERT_EQ(server.peer_state(server_peer), PeerState::connected);
    // One more round so the handshake's last acknowledgements are through.
    step(1000);
  }

  // Flushes the server, hands all of it to the client and returns copies of it.
  std::vector<std::vector<std::byte>> server_output_to_client() {
    auto taken = take_server_output();
    for (const auto& d : taken) client.on_datagram(now_us, server_ep, d);
    drain();
    return taken;
  }

  // Flushes the server and returns what it wrote, without delivering it (for tests that
  // impersonate the client).
  std::vector<std::vector<std::byte>> take_server_output() {
    std::vector<std::vector<std::byte>> taken;
    for (;;) {
      const std::size_t n = server.flush(now_us, out_);
      for (std::size_t i = 0; i < n; ++i)
        taken.emplace_back(out_[i].view().begin(), out_[i].view().end());
      if (n < out_.size()) return taken;
    }
  }

 private:
  std::vector<proto::OutDatagram> out_;
  bool client_connected_ = false;
  bool server_connected_ = false;
};

// Payloads carry their own sequence number (big-endian, first four bytes) so receivers can
// check order and exactly-once delivery.
inline std::vector<std::byte> numbered_payload(std::uint32_t index, std::size_t size = 8) {
  std::vector<std::byte> p(size < 4 ? 4 : size, std::byte{0});
  p[0] = std::byte(index >> 24);
  p[1] = std::byte((index >> 16) & 0xff);
  p[2] = std::byte((index >> 8) & 0xff);
  p[3] = std::byte(index & 0xff);
  for (std::size_t i = 4; i < p.size(); ++i) p[i] = std::byte((index + i) & 0xff);
  return p;
}

inline std::uint32_t payload_index(std::span<const std::byte> p) {
  if (p.size() < 4) return 0xFFFFFFFFu;
  return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) |
         std::uint32_t(p[3]);
}

}  // namespace tern::test
