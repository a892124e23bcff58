// tern-ping --serve: an echo server on a shard group sharing one port.
#include "runtime.hpp"

#include "common/signals.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace tern::ping {

namespace {

constexpr auto kStopGrace = std::chrono::seconds(2);

// Written only by its shard's thread (the handler); read by main after the threads are
// joined, except `live`, which main reads while they run.
struct alignas(64) ServeShardStats {
  std::uint64_t echo_failed = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t retransmits = 0;      // the core's count as of the last connect/disconnect event
  std::atomic<std::int64_t> live{0};  // connected peers
};

}  // namespace

int run_server(const ServeConfig& config) {
  DriverSetup setup;  // before the group: the drivers close before the port does
  std::string setup_error;
  if (!setup.open(config.runtime, setup_error)) {
    std::fprintf(stderr, "tern-ping: %s\n", setup_error.c_str());
    return kExitFailure;
  }
  rt::ShardGroupOptions options =
      group_options(config.runtime, config.bind, true, config.peers, config.channels);
  options.busy_poll_only_connected = true;  // a server: no spinning while no one is connected
  options.host.discovery = config.discovery;
  rt::ShardGroup group(options);
  if (config.discovery) {
    // Each shard's core answers the pings its socket receives; the info is set once, on the
    // shard's own thread.
    auto set = std::make_shared<std::vector<char>>(config.runtime.shards, 0);
    group.set_tick_handler([set, info = config.info](rt::Shard& shard) -> std::uint64_t {
      char& done = (*set)[shard.index()];
      if (done == 0) {
        shard.set_discovery_info(std::as_bytes(std::span(info.data(), info.size())));
        done = 1;
      }
      return ~std::uint64_t{0};
    });
  }
  std::vector<std::unique_ptr<ServeShardStats>> stats;
  for (std::size_t i = 0; i < config.runtime.shards; ++i) {
    stats.push_back(std::make_unique<ServeShardStats>());
  }
  group.set_event_handler([&stats](rt::Shard& shard, tern::Event& ev) {
    ServeShardStats& st = *stats[shard.index()];
    switch (ev.type) {
      case tern::EventType::receive:
        // Zero copy: the received packet goes back out as it is.
        if (shard.send(ev.peer, ev.channel, ev.delivery, std::move(ev.packet)) !=
            tern::SendResult::ok) {
          ++st.echo_failed;
        }
        break;
      case tern::EventType::connect:
        st.live.store(st.live.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        st.retransmits = shard.retransmits();
        break;
      case tern::EventType::disconnect:
        st.live.store(st.live.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
        if (ev.reason == tern::DisconnectReason::timeout) ++st.timeouts;
        st.retransmits = shard.retransmits();
        break;
      case tern::EventType::none:
      case tern::EventType::receipt:               // never asked for here
      case tern::EventType::block_refused: break;  // no block sent here
    }
  });

  // The shard threads inherit a mask without SIGINT/SIGTERM, so the signal lands here.
  block_stop_signals();
  std::string error;
  const bool started = group.start(error);
  tern::app::install_stop_handler();
  unblock_stop_signals();
  if (!started) {
    std::fprintf(stderr, "tern-ping: cannot listen on %s: %s\n", config.bind.to_string().c_str(),
                 error.c_str());
    return kExitFailure;
  }
  // Tests and scripts bind port 0 and read the real port from this line.
  std::printf("serving %s\n", group.local_endpoint().to_string().c_str());
  std::fflush(stdout);

  tern::app::wait_for_stop();

  std::int64_t live = 0;
  for (const auto& st : stats) live += st->live.load(std::memory_order_relaxed);
  group.stop(kStopGrace);  // every client is told; the threads are joined

  const rt::ShardCounters t = group.total();
  std::uint64_t echo_failed = 0, timeouts = 0, retransmits = 0;
  for (const auto& st : stats) {
    echo_failed += st->echo_failed;
    timeouts += st->timeouts;
    retransmits += st->retransmits;
  }
  std::printf("served signal=%d connects=%" PRIu64 " disconnects=%" PRIu64 " timeouts=%" PRIu64
              " messages_in=%" PRIu64 " messages_out=%" PRIu64 " echo_failed=%" PRIu64
              " datagrams_in=%" PRIu64 " datagrams_out=%" PRIu64 " bytes_in=%" PRIu64
              " bytes_out=%" PRIu64 " retransmits=%" PRIu64 " dropped=%" PRIu64
              " disconnected_at_exit=%lld busy_us=%" PRIu64 " busy_iterations=%" PRIu64 "\n",
              tern::app::stop_signal(), t.connects, t.disconnects, timeouts, t.messages_in,
              t.messages_out, echo_failed, t.datagrams_in, t.datagrams_out, t.bytes_in, t.bytes_out,
              retransmits, t.drops, static_cast<long long>(live > 0 ? live : 0),
              t.loop_time_us - std::min(t.loop_time_us, t.idle_poll_us),
              t.iterations - std::min(t.iterations, t.idle_polls));
  std::fflush(stdout);
  if (group.size() > 1) {
    // How the port (SO_REUSEPORT, RSS, fanout, software steering) spread the traffic.
    std::string per_shard;
    for (std::size_t i = 0; i < group.size(); ++i) {
      if (i != 0) per_shard += ',';
      per_shard += std::to_string(group.counters(i).datagrams_in);
    }
    std::fprintf(stderr, "tern-ping: datagrams_in per shard %s\n", per_shard.c_str());
  }
  if (t.port.link >= 0) {
    // The device's own view (DPDK ports), as the shard counters carry it.
    std::fprintf(stderr,
                 "tern-ping: port link=%s speed_mbps=%u rx_packets=%" PRIu64 " tx_packets=%" PRIu64
                 " rx_missed=%" PRIu64 " rx_no_mbuf=%" PRIu64 " rx_errors=%" PRIu64
                 " tx_errors=%" PRIu64 " tx_dropped=%" PRIu64 "\n",
                 t.port.link == 1 ? "up" : "down", t.port.link_speed_mbps, t.port.rx_packets,
                 t.port.tx_packets, t.port.rx_missed, t.port.rx_no_mbuf, t.port.rx_errors,
                 t.port.tx_errors, t.tx_dropped);
  }
  return kExitOk;
}

}  // namespace tern::ping
