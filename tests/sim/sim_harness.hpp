// SimHarness: real HostCores on a simulated network and simulated time.
//
// The harness owns one SimNetwork and N hosts, each a HostCore on its own attached SimDriver.
// step() runs one poll iteration per host in the order a shard does it (DESIGN §2: receive,
// deliver events, flush timers and datagrams, transmit), then moves the clock straight to the
// next moment anything can happen: the earliest core deadline, the next datagram delivery, a
// wake-up the test asked for, or a cap. Nothing reads the wall clock, so a run is a function of
// its seed; the seed is printed and TERN_SIM_SEED overrides it to replay a failure.
#pragma once

#include "payload.hpp"

#include "host_core.hpp"
#include "sim_network.hpp"

#include <tern/types.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace tern::simtest {

inline constexpr std::uint64_t kMs = 1000;
inline constexpr std::uint64_t kSec = 1000 * kMs;

// TERN_SIM_SEED (decimal or 0x-hex) when set, `fallback` otherwise.
std::uint64_t seed_from_env(std::uint64_t fallback);

struct LoggedEvent {
  std::uint64_t at_us = 0;
  Event event;
};

struct SimHost {
  std::string name;
  Endpoint address;
  std::unique_ptr<drv::SimDriver> driver;
  std::unique_ptr<proto::HostCore> core;
  // Every event the core produced, in order, stamped with the simulated time it was drained.
  std::vector<LoggedEvent> log;
  // Long runs stop logging receive events and consume them in on_event instead (connect and
  // disconnect events are always logged).
  bool log_receives = true;
  // Called for each event as it is drained, before it is logged; may call into the core.
  std::function<void(SimHost&, const Event&)> on_event;
  // Called for each datagram the core emits, before it enters the network.
  std::function<void(SimHost&, const proto::OutDatagram&)> on_tx;

  // Log queries.
  std::size_t count(EventType type, PeerHandle peer) const;
  const LoggedEvent* first(EventType type, PeerHandle peer) const;
  const LoggedEvent* first_disconnect_from(const Endpoint& remote) const;
  const LoggedEvent* first_connect_from(const Endpoint& remote) const;
};

// The two ends of one connection.
struct Connection {
  PeerHandle client;  // handle on the connecting host
  PeerHandle server;  // handle on the accepting host
};

class SimHarness {
 public:
  // `default_seed` keeps CI deterministic; `label` names the run in the printed seed line.
  // TERN_SIM_SEED replaces the default unless `env_overrides` is false (a program that derives
  // many runs from one seed of its own, like sim_soak).
  SimHarness(std::uint64_t default_seed, std::string label, bool env_overrides = true);
  ~SimHarness();
  SimHarness(const SimHarness&) = delete;
  SimHarness& operator=(const SimHarness&) = delete;

  std::uint64_t seed() const { return seed_; }
  // "seed=N" for assertion messages, so every failure names its replay seed.
  std::string seed_note() const;
  drv::SimNetwork& net() { return *net_; }
  std::mt19937_64& rng() { return rng_; }
  std::uint64_t now() const;

  // 10.0.0.<n>:<port> style addresses, distinct per call.
  Endpoint next_address(std::uint16_t port = 7777);
  SimHost& add_host(std::string name, const proto::HostConfig& config,
                    std::optional<Endpoint> address = std::nullopt);
  // Detaches the host's driver and destroys its core (a crashed or departed machine).
  void remove_host(SimHost& host);
  std::size_t host_count() const { return hosts_.size(); }
  SimHost& host(std::size_t i) { return *hosts_[i]; }

  void step();
  // Steps until pred() holds (true) or max_sim_us of simulated time passed (false).
  bool run_until(const std::function<bool()>& pred, std::uint64_t max_sim_us);
  void run_for(std::uint64_t sim_us);
  // Makes sure a step happens at t (pacing senders at simulated times).
  void wake_at(std::uint64_t t_us);
  // Upper bound on one clock jump, so periodic checks in after_step see fine-grained time.
  void set_max_step_us(std::uint64_t us) { max_step_us_ = us; }
  // Runs at the start of every step, before any host is serviced (paced senders), and after
  // every step (invariant checks, samplers).
  std::function<void()> before_step;
  std::function<void()> after_step;

  // Connects `client` to `server` and runs until both connect events were drained.
  std::optional<Connection> connect(SimHost& client, SimHost& server, std::size_t channels,
                                    std::uint32_t data, std::uint64_t max_sim_us = 60 * kSec);

  // One line per host plus the network: what a run cost (printed by scenarios for the log).
  void print_summary() const;

  std::uint64_t steps() const { return steps_; }
  // Steps after which some core still reported a deadline at or before now: the core claims
  // work it did not do, which would make a real poll loop spin.
  std::uint64_t busy_steps() const { return busy_steps_; }

 private:
  void service(SimHost& h, std::uint64_t now);
  void advance();

  std::uint64_t seed_;
  std::string label_;
  std::unique_ptr<drv::SimNetwork> net_;
  std::mt19937_64 rng_;
  std::vector<std::unique_ptr<SimHost>> hosts_;
  std::vector<proto::OutDatagram> batch_;
  std::vector<std::uint64_t> wakes_;
  std::uint64_t max_step_us_ = 100 * kMs;
  std::uint64_t steps_ = 0;
  std::uint64_t busy_steps_ = 0;
  std::uint32_t next_host_ = 1;
};

}  // namespace tern::simtest
