// Several client/server pairs of tern::Host on one simulated network, on virtual time: the
// fixture the extension tests share (nodelay, delivery modes). Every loop is bounded in
// virtual time and the tests never sleep.
#pragma once

#include <tern/host.hpp>

#include "sim_network.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace tern::apitest {

using namespace std::chrono_literals;

// TERN_API_SEED=<n> replays the scenarios under another seed.
const std::uint64_t kSeed = [] {
  const char* text = std::getenv("TERN_API_SEED");
  return text != nullptr && *text != '\0' ? std::strtoull(text, nullptr, 0) : 0x5eed0002ull;
}();
constexpr std::uint64_t kOneWayLatencyUs = 5000;

// The tests' hostile link for exactness under loss: 20% loss, 5% duplicates, 10% of datagrams
// held back by `reorder_delay_us`, up to `jitter_us` on top of the base latency.
inline tern::drv::LinkConditions hostile_link(std::uint64_t jitter_us,
                                              std::uint64_t reorder_delay_us) {
  return {.loss = 0.2,
          .duplicate = 0.05,
          .reorder = 0.1,
          .latency_us = kOneWayLatencyUs,
          .jitter_us = jitter_us,
          .reorder_delay_us = reorder_delay_us};
}
constexpr std::uint64_t kMaxStepUs = 1000;

inline std::vector<std::byte> numbered(std::uint32_t index, std::size_t size) {
  std::vector<std::byte> out(std::max<std::size_t>(size, 4));
  std::memcpy(out.data(), &index, 4);
  for (std::size_t i = 4; i < out.size(); ++i) out[i] = static_cast<std::byte>(index + i);
  return out;
}

inline std::uint32_t index_of(std::span<const std::byte> bytes) {
  std::uint32_t index = 0;
  std::memcpy(&index, bytes.data(), 4);
  return index;
}

// A client and a server on the network, connected, with what each received.
struct Pair {
  std::unique_ptr<Host> server, client;
  Endpoint server_at, client_at;
  PeerHandle at_client, at_server;  // the server as the client sees it, and the reverse
  std::vector<Event> server_events, client_events;
  std::vector<std::uint64_t> server_times;  // when each of server_events was taken
  bool up = false;
};

class SimPairs : public ::testing::Test {
 protected:
  void SetUp() override {
    std::printf("sim seed %#llx\n", static_cast<unsigned long long>(kSeed));
    tern::drv::LinkConditions link;
    link.latency_us = kOneWayLatencyUs;
    net_.set_default_link(link);
  }

  Pair& add_pair(HostOptions server_options, HostOptions client_options) {
    auto pair = std::make_unique<Pair>();
    const auto n = static_cast<std::uint32_t>(pairs_.size());
    pair->server_at = Endpoint::v4(0x0a000100 + n, 7777);
    pair->client_at = Endpoint::v4(0x0a000200 + n, 40001);
    server_options.random_seed = kSeed ^ (2 * n + 1);
    client_options.random_seed = kSeed ^ (2 * n + 2);
    pair->server = Host::over(server_options, net_.attach(pair->server_at), net_);
    pair->client = Host::over(client_options, net_.attach(pair->client_at), net_);
    pairs_.push_back(std::move(pair));
    return *pairs_.back();
  }

  void step() {
    std::uint64_t next = net_.next_delivery_us();
    for (auto& p : pairs_) {
      Event ev;
      while (p->server->service(ev, 0us)) {
        p->server_events.push_back(std::move(ev));
        p->server_times.push_back(net_.now_us());
      }
      while (p->client->service(ev, 0us)) p->client_events.push_back(std::move(ev));
      next = std::min({next, p->server->next_deadline_us(), p->client->next_deadline_us()});
    }
    const std::uint64_t now = net_.now_us();
    net_.advance_to(std::clamp(next, now + 1, now + kMaxStepUs));
  }

  bool run_until(const std::function<bool()>& done, std::uint64_t budget_us) {
    const std::uint64_t end = net_.now_us() + budget_us;
    while (!done()) {
      if (net_.now_us() >= end) return false;
      step();
    }
    return true;
  }

  void run_for(std::uint64_t us) {
    const std::uint64_t end = net_.now_us() + us;
    while (net_.now_us() < end) step();
  }

  static const Event* find(const std::vector<Event>& events, EventType type) {
    for (const auto& e : events) {
      if (e.type == type) return &e;
    }
    return nullptr;
  }
  static std::size_t count(const std::vector<Event>& events, EventType type) {
    return static_cast<std::size_t>(std::count_if(events.begin(), events.end(),
                                                  [&](const Event& e) { return e.type == type; }));
  }

  // Connects every pair not yet up (on a clean link).
  void connect_all(std::size_t channels = 2) {
    for (auto& p : pairs_) {
      if (p->up) continue;
      p->at_client = p->client->connect(p->server_at, channels, 0);
      ASSERT_TRUE(p->at_client.valid());
    }
    ASSERT_TRUE(run_until(
        [&] {
          return std::all_of(pairs_.begin(), pairs_.end(), [](const auto& p) {
            return p->up || (find(p->client_events, EventType::connect) &&
                             find(p->server_events, EventType::connect));
          });
        },
        10'000'000));
    for (auto& p : pairs_) {
      if (p->up) continue;
      p->at_server = find(p->server_events, EventType::connect)->peer;
      p->client_events.clear();
      p->server_events.clear();
      p->server_times.clear();
      p->up = true;
    }
    run_for(2'000'000);  // RTT samples from a few pings
  }

  static bool agreed(const Host& host, PeerHandle peer) {
    PeerStats s;
    EXPECT_TRUE(host.peer_stats(peer, s));
    return s.nodelay;
  }

  // Messages the server received, per channel, in order of arrival.
  static std::vector<std::uint32_t> received(const Pair& p, std::uint8_t channel) {
    return received_by(p.server_events, channel);
  }
  static std::vector<std::uint32_t> received_by(const std::vector<Event>& events,
                                                std::uint8_t channel) {
    std::vector<std::uint32_t> out;
    for (const auto& e : events) {
      if (e.type == EventType::receive && e.channel == channel) {
        out.push_back(index_of(e.packet.bytes()));
      }
    }
    return out;
  }

  static std::vector<std::uint32_t> first_n(std::uint32_t n) {
    std::vector<std::uint32_t> v(n);
    for (std::uint32_t i = 0; i < n; ++i) v[i] = i;
    return v;
  }

  tern::drv::SimNetwork net_{kSeed};
  std::vector<std::unique_ptr<Pair>> pairs_;
};

}  // namespace tern::apitest
