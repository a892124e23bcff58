// tern::drv::SimNetwork: an in-memory network on virtual time with a seeded link conditioner.
//
// Every host attaches a SimDriver at an address. Datagrams travel through per-direction links
// that impose loss, latency, jitter, duplication, reordering and a bandwidth limit, all drawn
// from one seeded generator: the same seed and the same sequence of calls give the same run.
// Time only moves when the test calls advance_to(); the network is its own rt::Clock.
#pragma once

#include "driver.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tern::drv {

struct LinkConditions {
  double loss = 0.0;                   // probability a datagram is dropped
  double duplicate = 0.0;              // probability a datagram is delivered twice
  double reorder = 0.0;                // probability a datagram is held back by reorder_delay_us
  std::uint64_t latency_us = 0;        // one-way base delay
  std::uint64_t jitter_us = 0;         // uniform extra delay in [0, jitter_us]
  std::uint64_t reorder_delay_us = 0;  // extra delay of a reordered datagram
  std::uint64_t bandwidth_bytes_per_s = 0;  // 0 = unlimited; serialisation delay per byte
  std::uint64_t queue_limit_bytes = 0;      // 0 = unlimited; tail-drop beyond this backlog
  bool down = false;                        // drop everything (a dead link)
  std::uint32_t mtu = 0;                    // 0 = no limit; larger datagrams are dropped
};

struct SimStats {
  std::uint64_t sent = 0;
  std::uint64_t delivered = 0;
  std::uint64_t lost = 0;
  std::uint64_t duplicated = 0;
  std::uint64_t reordered = 0;
  std::uint64_t queue_dropped = 0;
  std::uint64_t unroutable = 0;   // no driver attached at the destination
  std::uint64_t mtu_dropped = 0;  // larger than the link's mtu
};

class SimDriver;

class SimNetwork final : public rt::Clock {
 public:
  explicit SimNetwork(std::uint64_t seed);
  ~SimNetwork() override;
  SimNetwork(const SimNetwork&) = delete;
  SimNetwork& operator=(const SimNetwork&) = delete;

  std::uint64_t now_us() override;
  void advance_to(std::uint64_t t_us);     // never moves backwards
  std::uint64_t next_delivery_us() const;  // UINT64_MAX when nothing is in flight

  // The driver stays valid while the network lives; destroying it detaches the address.
  std::unique_ptr<SimDriver> attach(const Endpoint& address);
  void set_default_link(const LinkConditions& c);
  // Conditions for datagrams from `from` to `to` (one direction), overriding the default.
  void set_link(const Endpoint& from, const Endpoint& to, const LinkConditions& c);
  const SimStats& stats() const;
  std::uint64_t seed() const;

 private:
  friend class SimDriver;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One host's view of the network. Datagrams sent through it enter the link towards their
// destination at the network's current time; rx_burst hands out, in delivery order, those
// addressed to it whose delivery time has come. Spans stay valid until the next rx_burst.
class SimDriver final : public rt::Driver {
 public:
  ~SimDriver() override;
  SimDriver(const SimDriver&) = delete;
  SimDriver& operator=(const SimDriver&) = delete;

  std::size_t rx_burst(std::span<rt::RxFrame> out) override;
  // Every frame is handed to the network (it returns frames.size()); what the links then lose
  // or drop shows in SimNetwork::stats(), as it would on a real wire.
  std::size_t tx_burst(std::span<const rt::TxFrame> frames) override;
  void wait(std::uint64_t) override {}  // virtual time: only the test moves the clock
  void set_wake_fd(int) override {}     // never sleeps, so never needs waking

  Endpoint local_endpoint() const override { return address_; }
  rt::DriverCaps caps() const override;
  rt::DriverStats stats() const override { return stats_; }
  std::string name() const override { return "sim"; }

 private:
  friend class SimNetwork;
  SimDriver(SimNetwork::Impl* net, const Endpoint& address);

  SimNetwork::Impl* net_;  // null once the network is destroyed
  Endpoint address_;
  rt::DriverStats stats_;
  std::vector<std::vector<std::byte>> held_;  // payloads lent out by the last rx_burst
};

}  // namespace tern::drv
