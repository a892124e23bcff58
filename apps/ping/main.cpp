// tern-ping: round-trip latency over Tern/ENet connections (DESIGN §8), on the shard runtime.
//
//   tern-ping --serve 0.0.0.0:7777 [--shards N]         echo every message back to its sender
//   tern-ping --connect 127.0.0.1:7777 --count 1000     one ping in flight, RTT percentiles
//   tern-ping --connect 127.0.0.1:7777 --flood --peers 1000 --window 8
//                                                       many connections, throughput + RTT
//   tern-ping --discover 255.255.255.255:7777          the servers that answer discovery
//
// The server echoes with the message's own channel and delivery, so one server serves every
// client mode. Ping-pong keeps exactly one ping outstanding: the measured time is a full round
// trip through both hosts' poll loops, not a pipelined throughput figure. Every mode runs on
// an rt::ShardGroup, so --driver and --idle choose the I/O backend and the idle policy.
#include "options.hpp"
#include "runtime.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  tern::ping::Config config;
  std::string error;
  if (!tern::ping::parse_config(argc, argv, config, error)) {
    std::fprintf(stderr, "tern-ping: %s\n%s", error.c_str(), tern::ping::kUsage);
    return tern::ping::kExitUsage;
  }
  switch (config.mode) {
    case tern::ping::Mode::help: std::fputs(tern::ping::kUsage, stdout); return tern::ping::kExitOk;
    case tern::ping::Mode::serve:
      return config.serve.protocol == tern::ping::Protocol::kcp
                 ? tern::ping::run_kcp_server(config.serve)
                 : tern::ping::run_server(config.serve);
    case tern::ping::Mode::ping:
      return config.ping.protocol == tern::ping::Protocol::kcp
                 ? tern::ping::run_kcp_ping(config.ping)
                 : tern::ping::run_ping(config.ping);
    case tern::ping::Mode::flood: return tern::ping::run_flood(config.flood);
    case tern::ping::Mode::discover: return tern::ping::run_discover(config.discover);
  }
  return tern::ping::kExitFailure;
}
