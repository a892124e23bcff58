// A connect flood at the protocol core (issue 29): ns per forged CONNECT from a new source,
// half-open entry, cookie and VERIFY_CONNECT included, flushing every 64 datagrams as a shard
// does after a receive burst. Arg 0: the table in its steady state under a flood (full,
// evicting); arg 1: the same CONNECTs refused by a per-prefix rate limit.
#include "host_core.hpp"
#include "wire.hpp"

#include <benchmark/benchmark.h>

#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;

std::vector<std::byte> connect_datagram(std::uint32_t n) {
  Header h;
  h.has_sent_time = true;
  h.sent_time = static_cast<std::uint16_t>(n);
  std::vector<std::byte> out(80);
  std::size_t size = encode_header(out, h, false);
  Command c;
  c.command = static_cast<std::uint8_t>(Cmd::connect) | kFlagAcknowledge;
  c.channel_id = kSystemChannel;
  c.reliable_seq = 1;
  c.connect = Connect{0,
                      0xFF,
                      0xFF,
                      1400,
                      kMaxWindowSize,
                      2,
                      0,
                      0,
                      kPacketThrottleInterval,
                      kPacketThrottleAcceleration,
                      kPacketThrottleDeceleration,
                      n * 2654435761u,
                      0};
  size += encode_command(std::span<std::byte>(out).subspan(size), c);
  out.resize(size);
  return out;
}

void BM_ConnectFlood(benchmark::State& state) {
  HostConfig cfg;
  if (state.range(0) == 1) cfg.connect_rate_per_prefix = 1;
  HostCore server(cfg);
  std::vector<std::vector<std::byte>> datagrams;
  for (std::uint32_t i = 0; i < 256; ++i) datagrams.push_back(connect_datagram(i));
  std::vector<OutDatagram> out(64);
  std::uint64_t now_us = 1'000'000;
  std::uint32_t n = 0;
  for (auto _ : state) {
    // Sources across 10/8, or (limited) 4,096 addresses in 16 /24s, whose buckets run dry.
    const std::uint32_t host = state.range(0) == 1 ? (n & 0xFFF) : (n * 2654435761u >> 8);
    const Endpoint src =
        Endpoint::v4(0x0a000000u + host, static_cast<std::uint16_t>(1024 + (n & 7)));
    server.on_datagram(now_us, src, datagrams[n & 255]);
    if ((++n & 63) == 0) {
      now_us += 500;  // 128,000 CONNECTs/s of simulated time
      while (server.flush(now_us, out) == out.size()) {
      }
    }
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["half_open"] = static_cast<double>(server.counters().half_open);
  state.counters["peers"] = static_cast<double>(server.peer_count());
}
BENCHMARK(BM_ConnectFlood)->Arg(0)->Arg(1);

}  // namespace
