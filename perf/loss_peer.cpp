// tern-loss-peer: the Tern side of perf/loss_compare, on tern::Host (a kernel UDP socket).
//
//   tern-loss-peer recv --listen HOST:PORT [--extensions LIST] [--timeout S]
//   tern-loss-peer send --connect HOST:PORT --workload game|bulk|block [--hz N] [--duration S]
//                       [--size B] [--bytes N] [--channels N] [--block-bytes N]
//                       [--extensions LIST] [--timeout S]
//
// block: one message of --bytes bytes (header first) sent with Host::send_block on channel 0:
// paced slices to a peer that agreed to blocks (extension "blocks"), else a reliable message
// in ENet fragments; its latency is the transfer time. game with --block-bytes N: the game
// stream, and on one more channel a block of N bytes kept in flight all through the timed
// part (the next sent as soon as the last is acknowledged; warm-up kind, so not timed).
//
// --extensions: "none" (plain ENet behaviour), "all", or a comma list of sacks (selective
// acks), fastrx (fast retransmit), cwnd (congestion window), nothrottle (ENet's throttle does
// not scale the reliable window), nodelay (KCP's: x1.5 backoff, resend after two later acks,
// no throttle on the reliable window), redundancy (copies of what is unacknowledged and
// repeated ack ranges while loss is measured, within a 30% byte budget), blocks (large blocks
// as paced slices), cc (congestion control: bulk paced at the estimated bandwidth, a window past
// ENet's 64 KiB), hibudget (redundancy's budget rises with the measured loss to 100% at 20%; by
// default it stays at 30%). Both sides take the same list; sacks, nodelay, redundancy, blocks and
// cc show on the wire (in the hello).
//
// Messages (warm-up ones too), the receiver's JSON report and the ending are those of
// perf/reference/enet_loss_peer.c, whose header describes them, so that the three stacks are
// measured by one harness. Exit 0 when the run finished, 1 on a connection failure, 2 on a bad
// command line.
#include <tern/host.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr std::size_t kHeaderBytes = 17;
constexpr std::uint8_t kKindData = 0;
constexpr std::uint8_t kKindEnd = 1;
constexpr std::uint8_t kKindWarmup = 2;  // delivered and checked, not timed
constexpr unsigned kMaxChannels = 255;

constexpr const char* kUsage =
    "usage: tern-loss-peer recv --listen HOST:PORT [--extensions LIST] [--timeout S]\n"
    "       tern-loss-peer send --connect HOST:PORT --workload game|bulk|block [--hz N]\n"
    "                           [--duration S] [--warmup S] [--size B] [--bytes N] [--channels N]\n"
    "                           [--block-bytes N] [--extensions LIST] [--timeout S]\n"
    "  LIST: none, all, or a comma list of sacks, fastrx, cwnd, nothrottle, nodelay,\n"
    "        redundancy, blocks, cc, hibudget\n";

// CLOCK_MONOTONIC as the other peers stamp: one machine, so now minus the stamp is one-way.
std::uint64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t get_le(const std::byte* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

void put_le(std::byte* p, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

struct Options {
  bool send = false;
  std::string address;
  bool bulk = false;
  bool block = false;
  unsigned long block_bytes = 0;  // game: a block kept in flight on one more channel
  double hz = 60, duration = 10, warmup = 1, timeout = 120;
  unsigned long size = 64, total = 4ul << 20, channels = 2;
  std::string extensions = "all";
};

bool parse_extensions(const std::string& list, tern::HostOptions& h) {
  h.selective_acks = h.fast_retransmit = h.congestion_window = h.nodelay = h.redundancy = false;
  h.congestion_control = false;
  h.delivery_modes = false;  // not used here: no hello unless an extension asks for one
  h.blocks = false;
  h.throttle_reliable_window = true;
  if (list == "none") return true;
  if (list == "all") {
    h.selective_acks = h.fast_retransmit = h.congestion_window = h.nodelay = h.redundancy = true;
    h.blocks = true;
    h.congestion_control = true;
    return true;
  }
  std::string_view rest = list;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item == "sacks") {
      h.selective_acks = true;
    } else if (item == "fastrx") {
      h.fast_retransmit = true;
    } else if (item == "cwnd") {
      h.congestion_window = true;
    } else if (item == "nothrottle") {
      h.throttle_reliable_window = false;
    } else if (item == "nodelay") {
      h.nodelay = true;
    } else if (item == "redundancy") {
      h.redundancy = true;
    } else if (item == "blocks") {
      h.blocks = true;
    } else if (item == "cc") {
      h.congestion_control = true;
    } else if (item == "hibudget") {  // redundancy's budget rises to 100% at 20% loss
      h.redundancy_high_loss_budget_percent = 100;
    } else {
      return false;
    }
  }
  return true;
}

bool parse(int argc, char** argv, Options& o) {
  if (argc < 2) return false;
  std::string_view role = argv[1];
  if (role != "send" && role != "recv") return false;
  o.send = role == "send";
  if (!o.send) o.address = "127.0.0.1:0";
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return false;
    std::string_view k = argv[i];
    const char* v = argv[i + 1];
    char* end = nullptr;
    if (k == "--listen" || k == "--connect") {
      o.address = v;
    } else if (k == "--workload") {
      if (std::strcmp(v, "game") != 0 && std::strcmp(v, "bulk") != 0 &&
          std::strcmp(v, "block") != 0)
        return false;
      o.bulk = std::strcmp(v, "bulk") == 0;
      o.block = std::strcmp(v, "block") == 0;
    } else if (k == "--extensions") {
      o.extensions = v;
    } else if (k == "--warmup") {
      o.warmup = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(o.warmup >= 0)) return false;
    } else if (k == "--hz" || k == "--duration" || k == "--timeout") {
      double d = std::strtod(v, &end);
      if (end == v || *end != '\0' || !(d > 0)) return false;
      (k == "--hz" ? o.hz : k == "--duration" ? o.duration : o.timeout) = d;
    } else if (k == "--size" || k == "--bytes" || k == "--channels" || k == "--block-bytes") {
      errno = 0;
      unsigned long n = std::strtoul(v, &end, 10);
      if (errno != 0 || end == v || *end != '\0') return false;
      (k == "--size"       ? o.size
       : k == "--bytes"    ? o.total
       : k == "--channels" ? o.channels
                           : o.block_bytes) = n;
    } else {
      return false;
    }
  }
  return !o.address.empty() && o.size >= kHeaderBytes && o.size <= 65535 && o.channels >= 1 &&
         o.channels + (o.block_bytes != 0 ? 1 : 0) <= kMaxChannels &&
         (!o.block || o.total >= kHeaderBytes) &&
         (o.block_bytes == 0 || o.block_bytes >= kHeaderBytes);
}

int run_recv(const Options& o, const tern::HostOptions& ho) {
  auto bind = tern::Endpoint::parse(o.address);
  if (!bind) {
    std::fprintf(stderr, "tern-loss-peer: bad --listen %s\n", o.address.c_str());
    return 2;
  }
  std::string error;
  auto host = tern::Host::listen(ho, *bind, error);
  if (!host) {
    std::fprintf(stderr, "tern-loss-peer: cannot listen on %s: %s\n", o.address.c_str(),
                 error.c_str());
    return 1;
  }
  std::printf("listening 127.0.0.1:%u\n", static_cast<unsigned>(host->local_endpoint().port));
  std::fflush(stdout);

  std::vector<std::uint32_t> lat;
  lat.reserve(1 << 16);
  std::array<std::uint32_t, kMaxChannels> next{};
  std::array<bool, kMaxChannels> ended{};
  int channels = -1, ends = 0;
  bool in_order = true, timed_out = false, disconnected = false;
  std::uint64_t received = 0, expected = 0, bytes = 0, first_send = 0, last_recv = 0,
                order_errors = 0;
  tern::PeerHandle peer;
  const std::uint64_t deadline = now_ns() + static_cast<std::uint64_t>(o.timeout * 1e9);
  tern::Event ev;
  while (channels < 0 || ends < channels) {
    if (now_ns() > deadline) {
      timed_out = true;
      break;
    }
    if (!host->service(ev, std::chrono::milliseconds(1))) continue;
    if (ev.type == tern::EventType::connect) {
      peer = ev.peer;
    } else if (ev.type == tern::EventType::disconnect) {
      timed_out = disconnected = true;
      break;
    } else if (ev.type == tern::EventType::receive) {
      const std::uint64_t now = now_ns();
      auto d = ev.payload();
      if (d.size() < kHeaderBytes) {
        in_order = false;
        continue;
      }
      const auto seq = static_cast<std::uint32_t>(get_le(d.data(), 4));
      const auto ch = static_cast<std::uint8_t>(d[4]);
      const auto kind = static_cast<std::uint8_t>(d[5]);
      const std::uint64_t stamp = get_le(d.data() + 8, 8);
      if (ch != ev.channel) in_order = false;
      if (kind == kKindEnd) {
        if (!ended[ch]) ++ends;
        ended[ch] = true;
        channels = static_cast<std::uint8_t>(d[16]);
        expected += seq;
        if (next[ch] != seq) in_order = false;
        continue;
      }
      if (seq != next[ch]) {
        in_order = false;
        ++order_errors;
      }
      next[ch] = seq + 1;
      if (received == 0 || stamp < first_send) first_send = stamp;
      ++received;
      if (kind != kKindWarmup) lat.push_back(static_cast<std::uint32_t>((now - stamp) / 1000));
      bytes += d.size();
      last_recv = now;
    }
  }
  if (received != expected) in_order = false;
  std::printf(
      "{\"stack\":\"tern\",\"extensions\":\"%s\",\"received\":%" PRIu64 ",\"expected\":%" PRIu64
      ",\"in_order\":%s,\"bytes\":%" PRIu64 ",\"first_send_ns\":%" PRIu64
      ",\"last_recv_ns\":%" PRIu64 ",\"order_errors\":%" PRIu64
      ",\"timed_out\":%s,\"disconnected\":%s,\"channels_done\":%d,\"latencies_us\":[",
      o.extensions.c_str(), received, expected, in_order ? "true" : "false", bytes, first_send,
      last_recv, order_errors, timed_out ? "true" : "false", disconnected ? "true" : "false", ends);
  for (std::size_t i = 0; i < lat.size(); ++i) std::printf(i ? ",%u" : "%u", lat[i]);
  std::printf("]}\n");
  std::fflush(stdout);
  if (peer.valid() && !timed_out) {
    // The sender leaves on this disconnect, once everything it sent is acknowledged.
    host->disconnect_later(peer);
    const std::uint64_t until = now_ns() + 3'000'000'000u;
    while (now_ns() < until) {
      if (host->service(ev, std::chrono::milliseconds(10)) &&
          ev.type == tern::EventType::disconnect)
        break;
    }
  }
  return 0;
}

int run_send(const Options& o, const tern::HostOptions& ho) {
  auto to = tern::Endpoint::parse(o.address);
  auto any = tern::Endpoint::parse("0.0.0.0:0");
  if (!to || !any) {
    std::fprintf(stderr, "tern-loss-peer: bad --connect %s\n", o.address.c_str());
    return 2;
  }
  std::string error;
  auto host = tern::Host::listen(ho, *any, error);
  if (!host) {
    std::fprintf(stderr, "tern-loss-peer: %s\n", error.c_str());
    return 1;
  }
  // game with --block-bytes: the block on a channel of its own, after the game's.
  const unsigned long block_channel = o.channels;
  const unsigned long nch = o.channels + (o.block_bytes != 0 ? 1 : 0);
  tern::PeerHandle peer = host->connect(*to, nch);
  tern::Event ev;
  const std::uint64_t deadline = now_ns() + static_cast<std::uint64_t>(o.timeout * 1e9);
  bool connected = false;
  while (!connected && now_ns() < deadline) {
    if (host->service(ev, std::chrono::milliseconds(10)) && ev.type == tern::EventType::connect)
      connected = true;
  }
  if (!connected) {
    std::fprintf(stderr, "tern-loss-peer: cannot connect to %s\n", o.address.c_str());
    return 1;
  }
  std::vector<std::byte> msg(o.size);
  std::array<std::uint32_t, kMaxChannels> seqs{};
  bool gone = false;
  auto send = [&](unsigned long ch, std::uint8_t kind) {
    put_le(msg.data(), seqs[ch], 4);
    msg[4] = static_cast<std::byte>(ch);
    msg[5] = static_cast<std::byte>(kind);
    put_le(msg.data() + 6, o.size, 2);
    put_le(msg.data() + 8, now_ns(), 8);
    msg[16] = static_cast<std::byte>(nch);
    auto r = host->send(peer, static_cast<std::uint8_t>(ch), tern::Delivery::reliable,
                        std::span<const std::byte>(msg));
    if (r != tern::SendResult::ok) {
      std::fprintf(stderr, "tern-loss-peer: send: %s\n", tern::to_string(r));
      std::exit(1);
    }
  };
  auto service_until = [&](std::uint64_t until) {
    for (;;) {
      const std::uint64_t n = now_ns();
      if (n >= until || gone) return;
      if (host->service(ev, std::chrono::microseconds((until - n) / 1000)) &&
          ev.type == tern::EventType::disconnect)
        gone = true;
    }
  };
  // A block: the same header, then zeros; sent with send_block on `ch`.
  auto send_block = [&](unsigned long ch, std::uint8_t kind, unsigned long bytes) {
    std::vector<std::byte> block(bytes);
    put_le(block.data(), seqs[ch], 4);
    block[4] = static_cast<std::byte>(ch);
    block[5] = static_cast<std::byte>(kind);
    put_le(block.data() + 6, 0, 2);
    put_le(block.data() + 8, now_ns(), 8);
    block[16] = static_cast<std::byte>(nch);
    auto r = host->send_block(peer, static_cast<std::uint8_t>(ch),
                              tern::Packet::copy_of(std::span<const std::byte>(block)));
    if (r != tern::SendResult::ok) {
      std::fprintf(stderr, "tern-loss-peer: send_block: %s\n", tern::to_string(r));
      std::exit(1);
    }
    ++seqs[ch];
    host->flush();
  };
  // Its end message must not overtake it: blocks have no place in the channel's sequence.
  auto wait_block = [&](unsigned long ch) {
    while (!gone && host->block_in_flight(peer, static_cast<std::uint8_t>(ch)) &&
           now_ns() < deadline) {
      if (host->service(ev, std::chrono::milliseconds(1)) && ev.type == tern::EventType::disconnect)
        gone = true;
    }
  };
  if (o.block) {
    send_block(0, kKindData, o.total);
    wait_block(0);
  } else if (o.bulk) {
    for (unsigned long sent = 0; sent < o.total; sent += o.size) {
      const unsigned long ch = (sent / o.size) % o.channels;
      send(ch, kKindData);
      ++seqs[ch];
    }
    host->flush();
  } else {
    const std::uint64_t start = now_ns();
    const auto period = static_cast<std::uint64_t>(1e9 / o.hz);
    const auto warm = static_cast<unsigned long>(o.warmup * o.hz);
    const auto ticks = warm + static_cast<unsigned long>(o.duration * o.hz);
    for (unsigned long t = 0; t < ticks && !gone; ++t) {
      service_until(start + t * period);
      for (unsigned long ch = 0; ch < o.channels; ++ch) {
        send(ch, t < warm ? kKindWarmup : kKindData);
        ++seqs[ch];
      }
      host->flush();
      if (o.block_bytes != 0 && t >= warm &&
          !host->block_in_flight(peer, static_cast<std::uint8_t>(block_channel))) {
        send_block(block_channel, kKindWarmup, o.block_bytes);
      }
    }
    if (o.block_bytes != 0) wait_block(block_channel);
  }
  for (unsigned long ch = 0; ch < nch; ++ch) send(ch, kKindEnd);
  host->flush();
  service_until(deadline);
  if (!gone) {
    std::fprintf(stderr, "tern-loss-peer: the receiver did not finish within --timeout\n");
    return 1;
  }
  std::printf("sent %u\n", seqs[0]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  tern::HostOptions ho;
  if (!parse(argc, argv, o) || !parse_extensions(o.extensions, ho)) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  ho.peer_limit = 4;
  return o.send ? run_send(o, ho) : run_recv(o, ho);
}
