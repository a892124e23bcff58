// Helpers shared by the kernel-socket driver tests (socket, uring): loopback endpoints,
// payload conversions, and receive loops bounded by wall-clock deadlines.
#pragma once

#include "driver.hpp"
#include "socket_driver.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace tern::drv::test {

using Clock = std::chrono::steady_clock;
inline constexpr auto kDeadline = std::chrono::seconds(10);

inline std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

inline std::string as_string(std::span<const std::byte> b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

inline Endpoint endpoint(std::string_view text) {
  const auto e = Endpoint::parse(text);
  EXPECT_TRUE(e.has_value()) << text;
  return e.value_or(Endpoint{});
}

// The same port on another address, e.g. a wildcard listener's port seen through 127.0.0.1.
inline Endpoint at(std::string_view host_with_zero_port, const Endpoint& port_from) {
  Endpoint e = endpoint(host_with_zero_port);
  e.port = port_from.port;
  return e;
}

inline bool ipv6_loopback_available() {
  SocketOptions o;
  o.bind = Endpoint::parse("[::1]:0").value();
  std::string error;
  return open_socket_driver(o, error) != nullptr;
}

struct Received {
  Endpoint from;
  std::string payload;
};

// Collects until `count` datagrams arrived or the deadline passed; copies out of the frames
// because they are only valid until the next rx_burst.
inline std::vector<Received> receive(rt::Driver& d, std::size_t count,
                                     Clock::duration limit = kDeadline) {
  std::vector<Received> got;
  std::vector<rt::RxFrame> frames(64);
  const auto deadline = Clock::now() + limit;
  while (got.size() < count && Clock::now() < deadline) {
    const std::size_t n = d.rx_burst(frames);
    for (std::size_t i = 0; i < n; ++i) got.push_back({frames[i].from, as_string(frames[i].bytes)});
    if (n == 0) d.wait(20000);
  }
  return got;
}

inline void send(rt::Driver& d, const Endpoint& to, std::string_view payload) {
  const rt::TxFrame f{to, as_bytes(payload)};
  EXPECT_EQ(d.tx_burst({&f, 1}), 1u) << "to " << to.to_string();
}

}  // namespace tern::drv::test
