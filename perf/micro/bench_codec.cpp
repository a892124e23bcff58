// Codec microbenchmarks: one command encoded/decoded, a full 1400-byte datagram of aggregated
// commands, and CRC32 throughput.
#include "wire.hpp"

#include <benchmark/benchmark.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using namespace tern::proto;

constexpr std::uint16_t kSmallPayload = 32;  // a typical game-state message

Command make_command(Cmd type) {
  Command c;
  const bool reliable = type != Cmd::acknowledge && type != Cmd::send_unreliable &&
                        type != Cmd::send_unsequenced && type != Cmd::send_unreliable_fragment;
  c.command = static_cast<std::uint8_t>(static_cast<std::uint8_t>(type) |
                                        (reliable ? kFlagAcknowledge : 0) |
                                        (type == Cmd::send_unsequenced ? kFlagUnsequenced : 0));
  c.channel_id = 1;
  c.reliable_seq = 0x1234;
  switch (type) {
    case Cmd::acknowledge:
      c.ack.received_reliable_seq = 0x1233;
      c.ack.received_sent_time = 0x4321;
      break;
    case Cmd::send_reliable: c.reliable.data_length = kSmallPayload; break;
    case Cmd::send_unreliable:
      c.unreliable.unreliable_seq = 7;
      c.unreliable.data_length = kSmallPayload;
      break;
    case Cmd::send_unsequenced:
      c.unsequenced.unsequenced_group = 99;
      c.unsequenced.data_length = kSmallPayload;
      break;
    case Cmd::send_fragment:
      c.fragment.start_seq = 0x1200;
      c.fragment.data_length = 1372;
      c.fragment.fragment_count = 48;
      c.fragment.fragment_number = 17;
      c.fragment.total_length = 65536;
      c.fragment.fragment_offset = 17 * 1372;
      break;
    default: break;
  }
  return c;
}

// The commands a steady-state connection is made of.
constexpr std::array<Cmd, 6> kCommon = {Cmd::acknowledge,     Cmd::send_reliable,
                                        Cmd::send_unreliable, Cmd::send_unsequenced,
                                        Cmd::send_fragment,   Cmd::ping};

void encode_one(benchmark::State& state, Cmd type) {
  const Command c = make_command(type);
  std::array<std::byte, 64> buf{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(buf.data());
    const std::size_t n = encode_command(buf, c);
    benchmark::DoNotOptimize(n);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

void decode_one(benchmark::State& state, Cmd type) {
  const Command c = make_command(type);
  std::vector<std::byte> bytes(command_size(type) + c.data_length(), std::byte{0x5A});
  encode_command(bytes, c);
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes.data());
    CommandDecoder dec(bytes, 0);
    Command out;
    Drop why = Drop::count_;
    const bool ok = dec.next(out, why);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
}

// A datagram filled to 1400 bytes the way a busy peer's flush fills one: a few acks, then
// small reliable and unreliable messages alternating (ENet caps a datagram at 32 commands).
struct FullDatagram {
  Header header;
  std::vector<Command> commands;
  std::vector<std::byte> payload = std::vector<std::byte>(kSmallPayload + 8, std::byte{0x42});
  std::size_t size = 0;

  FullDatagram() {
    header.peer_id = 17;
    header.session = 1;
    header.has_sent_time = true;
    header.sent_time = 1000;
    size = header_size(true, false);
    std::uint16_t seq = 100;
    for (int i = 0; i < 4; ++i) add(make_command(Cmd::acknowledge));
    while (commands.size() < kMaxPacketCommands) {
      Command c =
          make_command(commands.size() % 2 == 0 ? Cmd::send_reliable : Cmd::send_unreliable);
      c.reliable_seq = seq++;
      // The last message is sized so the datagram ends at exactly 1400 bytes.
      const std::size_t fixed = command_size(c.type());
      const std::size_t left = kDefaultMtu - size - fixed;
      const bool last = commands.size() + 1 == kMaxPacketCommands;
      const auto len =
          static_cast<std::uint16_t>(last ? left : std::min<std::size_t>(kSmallPayload + 8, left));
      if (c.type() == Cmd::send_reliable)
        c.reliable.data_length = len;
      else
        c.unreliable.data_length = len;
      if (len > payload.size()) payload.resize(len, std::byte{0x42});
      add(c);
    }
  }
  void add(const Command& c) {
    commands.push_back(c);
    size += command_size(c.type()) + c.data_length();
  }
  std::size_t encode(std::span<std::byte> out) const {
    std::size_t at = encode_header(out, header, false);
    for (const Command& c : commands) {
      at += encode_command(out.subspan(at), c);
      const std::size_t len = c.data_length();
      std::memcpy(out.data() + at, payload.data(), len);
      at += len;
    }
    return at;
  }
};

void BM_EncodeDatagram1400(benchmark::State& state) {
  const FullDatagram d;
  std::array<std::byte, kMaxMtu> buf{};
  std::size_t n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(buf.data());
    n = d.encode(buf);
    benchmark::ClobberMemory();
  }
  if (n != kDefaultMtu) state.SkipWithError("datagram is not 1400 bytes");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.commands.size()));
  state.counters["commands"] = static_cast<double>(d.commands.size());
}
BENCHMARK(BM_EncodeDatagram1400);

void BM_DecodeDatagram1400(benchmark::State& state) {
  const FullDatagram d;
  std::vector<std::byte> bytes(kDefaultMtu);
  if (d.encode(bytes) != kDefaultMtu) state.SkipWithError("datagram is not 1400 bytes");
  std::size_t commands = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes.data());
    DecodedHeader dh;
    Drop why = Drop::count_;
    decode_header(bytes, false, dh, why);
    CommandDecoder dec(bytes, dh.size);
    Command c;
    commands = 0;
    std::size_t payload = 0;
    while (dec.next(c, why)) {
      ++commands;
      payload += c.payload.size();
    }
    benchmark::DoNotOptimize(payload);
  }
  if (commands != d.commands.size()) state.SkipWithError("decoded a different number of commands");
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * commands));
  state.counters["commands"] = static_cast<double>(commands);
}
BENCHMARK(BM_DecodeDatagram1400);

void BM_Crc32(benchmark::State& state) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(state.range(0)));
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 131);
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes.data());
    const std::uint32_t crc = crc32(bytes);
    benchmark::DoNotOptimize(crc);
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}
BENCHMARK(BM_Crc32)->Arg(64)->Arg(576)->Arg(1400)->Arg(4096);

// One benchmark per common command, named after it (BM_EncodeCommand/send_reliable).
const bool kRegistered = [] {
  for (Cmd type : kCommon) {
    const std::string name = cmd_name(type);
    benchmark::RegisterBenchmark(("BM_EncodeCommand/" + name).c_str(), encode_one, type);
    benchmark::RegisterBenchmark(("BM_DecodeCommand/" + name).c_str(), decode_one, type);
  }
  return true;
}();

}  // namespace
