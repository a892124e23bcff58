// ClientFleet: many ENet client connections driven from one test thread.
//
// Each source is a kernel UDP socket bound to its own 127.0.0.0/8 address with its own
// HostCore, and each core holds many connections to the server (one socket, many peers, as
// ENet allows). The server's SO_REUSEPORT hash sees one 4-tuple per source, so sources are
// what spreads the load over its shards. The fleet is polled in one loop, so a test needs no
// client threads and every wait has a wall-clock bound.
#pragma once

#include "host_core.hpp"
#include "socket_driver.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace tern::test {

class ClientFleet {
 public:
  struct Source {
    std::unique_ptr<drv::SocketDriver> driver;
    std::unique_ptr<proto::HostCore> core;
  };

  // Called for every event of every source, on the polling thread.
  std::function<void(std::size_t source, proto::HostCore&, Event&)> on_event =
      [](std::size_t, proto::HostCore&, Event&) {};

  // Sources bound to 127.1.<i / 250>.<1 + i % 250>, each allowed `peers_per_source`
  // connections. False with a reason if a socket cannot be opened.
  bool open(std::size_t sources, std::size_t peers_per_source, const proto::HostConfig& base,
            std::string& error) {
    for (std::size_t i = 0; i < sources; ++i) {
      drv::SocketOptions so;
      so.bind = Endpoint::v4(0x7f010000u | static_cast<std::uint32_t>((i / 250) << 8) |
                                 static_cast<std::uint32_t>(1 + i % 250),
                             0);
      so.receive_buffer = 8 << 20;
      so.send_buffer = 8 << 20;
      Source s;
      s.driver = drv::open_socket_driver(so, error);
      if (s.driver == nullptr) return false;
      proto::HostConfig c = base;
      c.peer_limit = peers_per_source;
      c.random_seed = base.random_seed + 7919 * (i + 1);
      s.core = std::make_unique<proto::HostCore>(c);
      sources_.push_back(std::move(s));
    }
    return true;
  }

  std::size_t size() const { return sources_.size(); }
  Source& source(std::size_t i) { return sources_[i]; }
  std::uint64_t now_us() const {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
  }

  // One pass over every source: receive, events, flush. Returns datagrams moved.
  std::size_t poll() {
    std::size_t moved = 0;
    for (std::size_t i = 0; i < sources_.size(); ++i) {
      Source& s = sources_[i];
      const std::uint64_t now = now_us();
      for (;;) {
        const std::size_t n = s.driver->rx_burst(rx_);
        for (std::size_t k = 0; k < n; ++k) s.core->on_datagram(now, rx_[k].from, rx_[k].bytes);
        moved += n;
        if (n < rx_.size()) break;
      }
      Event ev;
      while (s.core->poll_event(ev)) on_event(i, *s.core, ev);
      for (;;) {
        const std::size_t n = s.core->flush(now_us(), out_);
        for (std::size_t k = 0; k < n; ++k) tx_[k] = rt::TxFrame{out_[k].to, out_[k].view()};
        s.driver->tx_burst(std::span<const rt::TxFrame>(tx_.data(), n));
        moved += n;
        if (n < out_.size()) break;
      }
    }
    return moved;
  }

  // Polls until done() or the deadline; naps briefly when a pass moved nothing, so the
  // server shards keep most of the two CPUs.
  template <class Done>
  bool run_until(Done done, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      if (poll() == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

 private:
  std::vector<Source> sources_;
  std::vector<rt::RxFrame> rx_ = std::vector<rt::RxFrame>(64);
  std::vector<proto::OutDatagram> out_ = std::vector<proto::OutDatagram>(64);
  std::vector<rt::TxFrame> tx_ = std::vector<rt::TxFrame>(64);
};

}  // namespace tern::test
