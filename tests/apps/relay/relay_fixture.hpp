// Shared by the relay tests: a libenet client host with one connection to a relay running in
// this process, and a fixture that starts the relay on two shards and services the clients.
#pragma once

#include "relay.hpp"

#include <enet/enet.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace tern::relay {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

struct Copy {
  std::uint32_t sender = 0;
  std::uint32_t seq = 0;
  std::uint8_t channel = 0;
  std::uint32_t flags = 0;
  std::string bytes;  // the payload as received
};

// One libenet client host with one connection to the relay, on its own source address.
struct Client {
  ENetHost* host = nullptr;
  ENetPeer* peer = nullptr;
  std::uint32_t id = 0;
  bool connected = false;
  bool disconnected = false;
  std::uint32_t disconnect_data = 0;
  std::vector<Copy> got;
  bool paused = false;  // service() does nothing: a member that stopped reading and acking

  ~Client() {
    if (host != nullptr) enet_host_destroy(host);
  }

  void send(std::uint8_t channel, std::uint32_t flags, std::uint32_t seq) {
    std::uint8_t payload[12];
    std::memcpy(payload, &id, 4);
    std::memcpy(payload + 4, &seq, 4);
    std::memcpy(payload + 8, &flags, 4);
    ENetPacket* p = enet_packet_create(payload, sizeof payload, flags);
    ASSERT_EQ(enet_peer_send(peer, channel, p), 0);
  }

  void send_text(std::uint8_t channel, std::uint32_t flags, const std::string& text) {
    ENetPacket* p = enet_packet_create(text.data(), text.size(), flags);
    ASSERT_EQ(enet_peer_send(peer, channel, p), 0);
  }

  void service() {
    if (paused) return;
    ENetEvent ev;
    while (enet_host_service(host, &ev, 0) > 0) {
      switch (ev.type) {
        case ENET_EVENT_TYPE_CONNECT:
          connected = true;
          // As in the interop tests: a loaded CI machine must not make libenet's own throttle
          // discard the unreliable messages whose arrival is being checked.
          enet_peer_throttle_configure(peer, ENET_PEER_PACKET_THROTTLE_INTERVAL,
                                       ENET_PEER_PACKET_THROTTLE_ACCELERATION, 0);
          break;
        case ENET_EVENT_TYPE_DISCONNECT:
          disconnected = true;
          disconnect_data = ev.data;
          break;
        case ENET_EVENT_TYPE_RECEIVE: {
          Copy c;
          if (ev.packet->dataLength == 12) {
            std::memcpy(&c.sender, ev.packet->data, 4);
            std::memcpy(&c.seq, ev.packet->data + 4, 4);
          } else {
            c.sender = 0xffffffff;
          }
          c.bytes.assign(reinterpret_cast<const char*>(ev.packet->data), ev.packet->dataLength);
          c.channel = ev.channelID;
          c.flags = ev.packet->flags & (ENET_PACKET_FLAG_RELIABLE | ENET_PACKET_FLAG_UNSEQUENCED);
          got.push_back(c);
          enet_packet_destroy(ev.packet);
          break;
        }
        default: break;
      }
    }
  }
};

class RelayFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ASSERT_EQ(enet_initialize(), 0); }
  static void TearDownTestSuite() { enet_deinitialize(); }

  void start(RelayConfig c) {
    c.listen = Endpoint::v4(0x7f000001u, 0);
    c.shards = 2;
    c.pin = false;
    c.drain_timeout_ms = 1000;
    relay_ = std::make_unique<Relay>(c);
    std::string error;
    ASSERT_TRUE(relay_->start(error)) << error;
  }

  // A client from 127.0.1.<next> joining `room` (or from the address of client `same_as`).
  Client& connect(std::uint32_t room, const Client* same_as = nullptr) {
    auto c = std::make_unique<Client>();
    c->id = static_cast<std::uint32_t>(clients_.size() + 1);
    ENetAddress bind{};
    bind.host = htonl(0x7f010000u | ((same_as != nullptr ? same_as->id : c->id) + 1));
    bind.port = 0;
    c->host = enet_host_create(&bind, 1, 4, 0, 0);
    EXPECT_NE(c->host, nullptr);
    ENetAddress to{};
    to.host = htonl(0x7f000001u);
    to.port = relay_->local_endpoint().port;
    c->peer = enet_host_connect(c->host, &to, 4, room);
    EXPECT_NE(c->peer, nullptr);
    clients_.push_back(std::move(c));
    return *clients_.back();
  }

  template <class Pred>
  bool run_until(Pred pred, std::chrono::milliseconds limit = 10s) {
    const auto deadline = SteadyClock::now() + limit;
    for (;;) {
      for (auto& c : clients_) c->service();
      if (pred()) return true;
      if (SteadyClock::now() > deadline) return false;
      std::this_thread::sleep_for(200us);
    }
  }

  void settle(std::chrono::milliseconds d) {
    run_until([] { return false; }, d);
  }

  bool all_connected() {
    for (auto& c : clients_) {
      if (!c->connected && !c->disconnected) return false;
    }
    return true;
  }

  std::unique_ptr<Relay> relay_;
  std::vector<std::unique_ptr<Client>> clients_;
};

}  // namespace tern::relay
