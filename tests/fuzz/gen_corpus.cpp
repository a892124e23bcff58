// Writes the seed corpora in tests/fuzz/corpus/ from a real session between two HostCores:
//
//   gen_corpus OUT_DIR      -> OUT_DIR/fuzz_decoder/*  and  OUT_DIR/fuzz_reassembly/*
//
// fuzz_decoder seeds are whole datagrams as they crossed the wire (handshake, data, fragments,
// acknowledgements, disconnect; with and without checksums). fuzz_reassembly seeds are the
// client's datagrams with the header stripped, framed the way fuzz_reassembly.cpp reads them.
// The output is deterministic (fixed times, fixed seeds), so re-running it only changes the
// checked-in files when the core's output changes.
#include "host_core.hpp"
#include "wire.hpp"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace tern;
using namespace tern::proto;
namespace fs = std::filesystem;

using Bytes = std::vector<std::byte>;

const Endpoint kClientEp = Endpoint::v4(0x0A000001, 40001);
const Endpoint kServerEp = Endpoint::v4(0x0A000002, 7777);

struct Session {
  HostCore client;
  HostCore server;
  bool checksum;
  std::uint64_t now_us = 5'000'000;
  PeerHandle to_server;
  PeerHandle to_client;
  std::vector<OutDatagram> out = std::vector<OutDatagram>(32);
  std::vector<Bytes> from_client;  // every client->server datagram, in order
  std::vector<Bytes> from_server;

  static HostConfig config(bool checksum) {
    HostConfig cfg;
    cfg.checksum = checksum;
    return cfg;
  }

  explicit Session(bool with_checksum)
      : client(config(with_checksum)), server(config(with_checksum)), checksum(with_checksum) {}

  void step() {
    now_us += 1000;
    std::size_t n = 0;
    while ((n = client.flush(now_us, out)) > 0) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto v = out[i].view();
        from_client.emplace_back(v.begin(), v.end());
        server.on_datagram(now_us, kClientEp, v);
      }
      if (n < out.size()) break;
    }
    while ((n = server.flush(now_us, out)) > 0) {
      for (std::size_t i = 0; i < n; ++i) {
        const auto v = out[i].view();
        from_server.emplace_back(v.begin(), v.end());
        client.on_datagram(now_us, kServerEp, v);
      }
      if (n < out.size()) break;
    }
    Event ev;
    while (server.poll_event(ev)) {
      if (ev.type == EventType::connect) to_client = ev.peer;
    }
    while (client.poll_event(ev)) {
    }
  }

  void run(int steps) {
    for (int i = 0; i < steps; ++i) step();
  }
};

Bytes pattern(std::size_t n, std::uint8_t salt) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = std::byte((i * 7 + salt) & 0xff);
  return b;
}

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// One chunk in fuzz_reassembly's framing: control (advance 1 ms, flush), length, body.
void append_chunk(Bytes& out, std::span<const std::byte> body) {
  out.push_back(std::byte{0x03});
  out.push_back(std::byte(body.size() & 0xff));
  out.push_back(std::byte(body.size() >> 8));
  out.insert(out.end(), body.begin(), body.end());
}

Bytes strip_header(const Bytes& dg, bool checksum) {
  DecodedHeader dh;
  Drop why = Drop::count_;
  if (!decode_header(dg, checksum, dh, why)) return {};
  return Bytes(dg.begin() + static_cast<std::ptrdiff_t>(dh.size), dg.end());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  fs::create_directories(root / "fuzz_decoder");
  fs::create_directories(root / "fuzz_reassembly");

  // Ordered by size, then bytes: std::less on vector<byte> trips a GCC 12 false positive
  // (-Wstringop-overread in lexicographical_compare_three_way) at -O2.
  auto shorter_or_lower = [](const Bytes& a, const Bytes& b) {
    if (a.size() != b.size()) return a.size() < b.size();
    return !a.empty() && std::memcmp(a.data(), b.data(), a.size()) < 0;
  };
  std::set<Bytes, decltype(shorter_or_lower)> decoder_seeds(shorter_or_lower);
  for (bool checksum : {false, true}) {
    Session s(checksum);
    s.to_server = s.client.connect(s.now_us, kServerEp, 4, 0xC0FFEE);
    s.run(5);
    const std::size_t after_handshake = s.from_client.size();

    // Small messages of every delivery, then a reliable and an unreliable message big enough
    // to be fragmented, then both directions, then a graceful disconnect.
    s.client.send(s.to_server, 0, Delivery::reliable, pattern(16, 1));
    s.client.send(s.to_server, 1, Delivery::unreliable, pattern(24, 2));
    s.client.send(s.to_server, 2, Delivery::unsequenced, pattern(8, 3));
    s.run(3);
    const std::size_t after_small = s.from_client.size();
    s.client.send(s.to_server, 3, Delivery::reliable, pattern(5000, 4));
    s.run(5);
    const std::size_t after_reliable_fragments = s.from_client.size();
    s.client.send(s.to_server, 1, Delivery::unreliable, pattern(3000, 5));
    s.run(3);
    const std::size_t after_unreliable_fragments = s.from_client.size();
    // A large block (Tern peers agree to them): its slices, then the server's slice acks.
    s.client.send_block(s.to_server, 2, Packet::copy_of(pattern(6000, 8)));
    s.run(5);
    const std::size_t after_block = s.from_client.size();
    s.server.send(s.to_client, 0, Delivery::reliable, pattern(40, 6));
    s.client.ping(s.to_server);
    s.run(3);
    s.client.disconnect(s.to_server, 7);
    s.run(5);

    for (const Bytes& dg : s.from_client) decoder_seeds.insert(dg);
    for (const Bytes& dg : s.from_server) decoder_seeds.insert(dg);

    if (checksum) continue;  // fuzz_reassembly runs without checksums
    auto frame = [&](std::size_t first, std::size_t last, const char* name) {
      Bytes seed;
      for (std::size_t i = first; i < last && i < s.from_client.size(); ++i) {
        append_chunk(seed, strip_header(s.from_client[i], false));
      }
      if (!seed.empty()) write_file(root / "fuzz_reassembly" / name, seed);
    };
    frame(after_handshake, after_small, "small_messages");
    frame(after_small, after_reliable_fragments, "reliable_fragments");
    frame(after_reliable_fragments, after_unreliable_fragments, "unreliable_fragments");
    frame(after_unreliable_fragments, after_block, "block_slices");
    frame(after_block, s.from_client.size(), "ping_ack_disconnect");
  }

  int index = 0;
  for (const Bytes& dg : decoder_seeds) {
    char name[32];
    std::snprintf(name, sizeof name, "datagram_%03d", index++);
    write_file(root / "fuzz_decoder" / name, dg);
  }
  std::printf("wrote %d decoder seeds and the reassembly seeds to %s\n", index, root.c_str());
  return 0;
}
