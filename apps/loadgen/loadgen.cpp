// tern-loadgen's engine.
//
// The clients are spread over "lanes": one lane per shard of each client ShardGroup (one group
// per source address, share_port=false, so every shard has its own socket holding many
// connections to the relay). Client i lives on lane i % lanes, so each room spans lanes and
// the relay's cross-shard fan-out is exercised. A lane owns its clients, their per-sender
// receive windows and its latency histograms outright: the event handler and the posted
// tasks run on the lane's shard thread, so the per-message path neither locks nor allocates
// (payloads come from the shard thread's Packet pool; everything else is sized up front).
// Counters other threads read are single-writer atomics, written with a plain load + store.
//
// The main thread connects everyone, then posts a 1 ms tick to every lane (pacing, progress
// snapshots), prints the progress line, waits for stragglers and says goodbye.
#include "loadgen.hpp"

#include "common/dpdk_session.hpp"

#include "common/histogram.hpp"
#include "common/little_endian.hpp"
#include "common/signals.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace tern::loadgen {

namespace {

using namespace std::chrono_literals;

constexpr auto kTick = 1ms;
constexpr auto kConnectPoll = 1ms;
constexpr std::uint64_t kDrainNs = 2'000'000'000;  // wait for stragglers after the period
constexpr std::uint64_t kSettleNs = 20'000'000;    // let sends stamped just before the end count
constexpr std::uint64_t kLiveLostAgeNs = 2'000'000'000;  // live "lost": messages this old
constexpr std::uint64_t kSnapshotWaitNs = 200'000'000;   // progress: give up on a slow lane
constexpr auto kGoodbyeGrace = 2s;
constexpr std::size_t kMaxBins = 4096;  // live loss accounting, per lane
constexpr std::uint32_t kNoClient = std::numeric_limits<std::uint32_t>::max();
constexpr std::size_t kReasonSlots = 8;      // tern::DisconnectReason values
constexpr std::size_t kRemoteDataSlots = 8;  // disconnect data 0..6, and 7 for anything above
// --broadcast senders send this once, before the spectators connect (count_registered).
constexpr std::array<std::byte, 1> kProbe{std::byte{0}};
// Duplicate detection, per (receiver, sender): 448 sequence numbers (about a second of one
// sender at 500 Hz) is what fits one cache line beside the track's header. A track is touched
// for every copy and there are 7,000 of them at 1,000 clients in rooms of 8, so a track of two
// or three lines (1,024 bits) cost a cache miss per copy that this one mostly avoids.
constexpr std::size_t kWindowWords = 7;
constexpr std::size_t kWindowBits = kWindowWords * 64;
// --flood-rate: a libenet 1.3 client's first datagram (header, CONNECT), sent in batches of
// kFloodBatch from lane 0's shard, at most kFloodCatchUpNs' worth at once after a stall.
constexpr std::size_t kConnectSize = 52;
constexpr std::size_t kRawHeaders = 28;  // IPv4 (no options) + UDP, for the raw socket
constexpr std::size_t kFloodBatch = 32;
constexpr std::uint64_t kFloodCatchUpNs = 20'000'000;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// Single-writer counter that other threads may read while it changes.
template <class T>
void bump(std::atomic<T>& a, T by = 1) {
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

tern::Delivery delivery_for(DeliveryMode mode, std::uint32_t seq) {
  if (mode == DeliveryMode::mix) return static_cast<tern::Delivery>(seq % 3);
  return static_cast<tern::Delivery>(mode);  // the first three values coincide
}

// The channel a message goes on: round-robin over the channels. Most runs use one channel,
// where the division (on the path of every copy) is skipped.
std::uint8_t channel_for(const Config& c, std::uint32_t seq) {
  return c.channels <= 1 ? 0 : static_cast<std::uint8_t>(seq % c.channels);
}

// What one receiver has seen from one sender of its room: the highest sequence number and a
// bitmap of the last kWindowBits below it, for duplicate detection.
struct alignas(64) SenderTrack {
  std::uint32_t highest = 0;
  bool any = false;
  std::array<std::uint64_t, kWindowWords> seen{};
};
static_assert(sizeof(SenderTrack) == 64);

// True when `seq` is new (or too old to tell); false for a duplicate.
bool mark_seen(SenderTrack& t, std::uint32_t seq) {
  const auto bit = [](std::uint32_t s) { return std::uint64_t{1} << (s % 64); };
  const auto word = [](std::uint32_t s) { return (s % kWindowBits) / 64; };
  if (!t.any || seq > t.highest) {
    if (!t.any || seq - t.highest >= kWindowBits) {
      t.seen.fill(0);
    } else {
      for (std::uint32_t q = t.highest + 1; q != seq; ++q) t.seen[word(q)] &= ~bit(q);
      t.seen[word(seq)] &= ~bit(seq);
    }
    t.any = true;
    t.highest = seq;
    t.seen[word(seq)] |= bit(seq);
    return true;
  }
  if (t.highest - seq >= kWindowBits) return true;
  if ((t.seen[word(seq)] & bit(seq)) != 0) return false;
  t.seen[word(seq)] |= bit(seq);
  return true;
}

struct Client {
  tern::PeerHandle handle;
  std::uint32_t global = 0;
  std::uint32_t room = 0;          // connect data
  std::uint32_t room_first = 0;    // global id of the room's first member
  std::uint32_t room_members = 0;  // the last room may be short
  std::uint32_t tracks = 0;        // this receiver's first SenderTrack in its lane
  std::uint32_t next_seq = 0;
  std::uint32_t phase = 0;  // sending phase: this sender's index among all senders
  bool sender = false;
  bool connected = false;
  bool registered = false;  // --broadcast senders: the relay has counted the join (its probe)
  bool late = false;        // --late-clients: connects later, alone in its room, idle
  std::uint64_t connect_start_ns = 0;
};

struct LoadGen;

struct alignas(64) Lane {
  LoadGen* lg = nullptr;
  std::size_t group = 0;
  std::size_t shard = 0;  // index within the group
  // Shard thread only (main reads them after the threads are joined).
  std::vector<Client> clients;
  std::vector<std::uint32_t> senders;  // indices into clients, in phase order
  std::vector<std::uint32_t> by_slot;  // PeerHandle::slot -> index into clients
  std::vector<SenderTrack> tracks;
  std::vector<std::uint32_t> ordered_next;  // per track and channel: highest ordered seq + 1
  tern::app::LatencyHistogram histogram;    // measured period
  tern::app::LatencyHistogram interval;     // since the last progress snapshot
  tern::app::LatencyHistogram snapshot;     // handed to main (see LoadGen::snapshot_gen)
  std::uint64_t snapshot_seen = 0;
  bool traffic = false;
  std::size_t cursor = 0;
  std::uint64_t cycle_start_ns = 0;   // every sender sends once per cycle, at its phase
  std::uint64_t cycle_period_ns = 0;  // this cycle's (0: paused until the schedule changes)
  // --per-second, by bins of the measured period (LoadGen::bin_ns): messages sent and refused
  // and the latency of copies, by send time; copies that arrived, by arrival time.
  std::vector<std::uint64_t> sent_bins;
  std::vector<std::uint64_t> refused_bins;
  std::vector<std::uint64_t> arrived_bins;
  std::vector<tern::app::LatencyHistogram> latency_bins;
  std::uint64_t send_failed = 0;
  // Read by main while the shard runs.
  std::atomic<std::uint64_t> snapshot_ack{0};
  std::atomic<std::uint64_t> sent_total{0};
  std::atomic<std::uint64_t> delivered_total{0};
  std::atomic<std::uint64_t> refused_total{0};
  std::atomic<std::uint64_t> sent{0};       // measured period
  std::atomic<std::uint64_t> refused{0};    // measured period: due, but the queue was full
  std::atomic<std::uint64_t> expected{0};   // copies owed for those
  std::atomic<std::uint64_t> delivered{0};  // copies received of those
  std::atomic<std::uint64_t> duplicates{0};
  std::atomic<std::uint64_t> out_of_order{0};
  std::atomic<std::uint64_t> misrouted{0};
  std::atomic<std::uint64_t> mismatched{0};
  std::atomic<std::uint32_t> connected{0};
  std::atomic<std::uint32_t> registered{0};  // --broadcast senders whose probe was acknowledged
  std::atomic<std::uint32_t> dropped{0};     // connections lost before the goodbye
  std::atomic<std::uint32_t> goodbyes{0};
  std::atomic<std::uint32_t> connect_failed{0};
  std::atomic<std::uint64_t> last_connect_ns{0};
  std::atomic<std::uint8_t> last_reason{0};
  // Connections lost during the run, by reason; a relay's own disconnects (remote) also by the
  // data it gave (tern-relay: 1 shutdown, 2 slow consumer, 3 message too large, ...).
  std::array<std::atomic<std::uint32_t>, kReasonSlots> lost_by_reason{};
  std::array<std::atomic<std::uint32_t>, kRemoteDataSlots> lost_by_remote_data{};
  // --late-clients on this lane: connect times (µs; main reads them once the shards stopped)
  // and connections lost after connecting.
  std::vector<std::uint32_t> late_connect_us;
  std::atomic<std::uint32_t> late_dropped{0};
  // --flood-rate (lane 0 only): the raw socket (kernel drivers) or the DPDK driver it sends
  // on, CONNECTs due so far, and those the socket or queue took.
  bool flood_owner = false;
  int flood_fd = -1;
  rt::Driver* flood_driver = nullptr;
  std::uint64_t flood_due = 0;
  std::uint32_t flood_seq = 0;
  std::atomic<std::uint64_t> flood_sent{0};
  std::atomic<std::uint64_t> flood_last_ns{0};
  // By send time (bins of LoadGen::bin_ns from the measured period's start): copies owed by
  // this lane's senders and copies its receivers got, for the live loss figure.
  std::unique_ptr<std::atomic<std::uint64_t>[]> expected_bins;
  std::unique_ptr<std::atomic<std::uint64_t>[]> delivered_bins;
};

struct LoadGen {
  explicit LoadGen(const Config& c) : config(c) {}
  const Config& config;
  std::uint32_t tracks_per_client = 1;
  std::uint64_t senders = 1;  // sending clients over all lanes: the phases' denominator
  std::uint64_t bin_ns = 1'000'000'000;
  std::size_t bins = 1;
  // Written by main before traffic starts; read on every shard.
  std::atomic<std::uint64_t> traffic_ns{0};
  std::atomic<std::uint64_t> start_ns{0};  // measured period [start_ns, end_ns)
  std::atomic<std::uint64_t> end_ns{0};
  std::atomic<std::uint64_t> snapshot_gen{0};  // main asks every lane for a progress snapshot
  std::atomic<bool> finishing{false};
  std::atomic<std::uint64_t> flood_start_ns{0};  // --flood-rate: [flood_start_ns, flood_end_ns)
  std::atomic<std::uint64_t> flood_end_ns{0};
  std::vector<std::unique_ptr<Lane>> lanes;
};

// The DPDK driver of the client shard (one group of one shard), for the forged flood: drivers
// are opened on their shard's thread, and only a task posted to that shard may use it.
std::atomic<rt::Driver*> dpdk_client_driver{nullptr};

std::unique_ptr<rt::Driver> open_client_driver(const rt::DriverSpec& spec, std::string& error) {
  auto d = rt::open_driver(spec, error);
  if (d != nullptr && spec.kind == rt::DriverKind::dpdk) {
    dpdk_client_driver.store(d.get(), std::memory_order_release);
  }
  return d;
}

void put16be(std::byte* p, std::uint32_t v) {
  p[0] = static_cast<std::byte>(v >> 8);
  p[1] = static_cast<std::byte>(v);
}
void put32be(std::byte* p, std::uint32_t v) {
  put16be(p, v >> 16);
  put16be(p + 2, v & 0xffff);
}

// A libenet 1.3 client's first datagram, as perf/reference/connect-flood sends it: peer ID
// 0xFFF, a sent time, CONNECT (acknowledge) with a fresh outgoing peer ID and connect ID.
void build_connect(std::byte* d, std::uint32_t seed) {
  put16be(d, 0x8FFF);
  put16be(d + 2, seed & 0xffff);
  d[4] = std::byte{2 | 0x80};
  d[5] = std::byte{0xFF};
  put16be(d + 6, 1);
  put16be(d + 8, seed % 4095);
  d[10] = std::byte{0xFF};
  d[11] = std::byte{0xFF};
  put32be(d + 12, 1400);   // MTU
  put32be(d + 16, 65536);  // window
  put32be(d + 20, 2);      // channels
  put32be(d + 24, 0);
  put32be(d + 28, 0);
  put32be(d + 32, 5000);
  put32be(d + 36, 2);
  put32be(d + 40, 2);
  put32be(d + 44, seed * 2654435761u);  // connect ID
  put32be(d + 48, 0);                   // data: no room
}

// Forged source k: an address of --flood-from (never its first or last) and a port, both
// spread by a multiplicative hash so consecutive datagrams share neither.
Endpoint flood_source(const Config& c, std::uint32_t k) {
  const std::uint32_t h = k * 2654435761u;
  return Endpoint::v4(c.flood_network + 1 + h % c.flood_hosts,
                      static_cast<std::uint16_t>(1024 + (h >> 16) % 64512));
}

// Sends `n` forged CONNECTs; returns how many the raw socket or the DPDK queue took.
std::size_t send_flood_batch(Lane& lane, const Config& c, std::size_t n) {
  std::array<std::array<std::byte, kRawHeaders + kConnectSize>, kFloodBatch> buf;
  if (lane.flood_driver != nullptr) {
    std::array<app::ForgedDatagram, kFloodBatch> out;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t k = lane.flood_seq++;
      build_connect(buf[i].data(), k);
      out[i] = {flood_source(c, k), c.target,
                std::span<const std::byte>(buf[i].data(), kConnectSize)};
    }
    return app::dpdk_send_forged(*lane.flood_driver, std::span(out.data(), n));
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(c.target.v4_host_order());
  std::array<iovec, kFloodBatch> iov;
  std::array<mmsghdr, kFloodBatch> msgs{};
  const std::uint32_t dst = c.target.v4_host_order();
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t k = lane.flood_seq++;
    const Endpoint src = flood_source(c, k);
    std::byte* p = buf[i].data();
    // IPv4 header: the kernel fills in the checksum and, left 0, the ID (raw(7), IP_HDRINCL).
    std::memset(p, 0, kRawHeaders);
    p[0] = std::byte{0x45};
    put16be(p + 2, kRawHeaders + kConnectSize);
    p[8] = std::byte{64};
    p[9] = std::byte{IPPROTO_UDP};
    put32be(p + 12, src.v4_host_order());
    put32be(p + 16, dst);
    // UDP header; checksum 0 ("none", allowed over IPv4).
    put16be(p + 20, src.port);
    put16be(p + 22, c.target.port);
    put16be(p + 24, 8 + kConnectSize);
    build_connect(p + kRawHeaders, k);
    iov[i] = {p, kRawHeaders + kConnectSize};
    msgs[i].msg_hdr.msg_name = &to;
    msgs[i].msg_hdr.msg_namelen = sizeof to;
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  const int sent = ::sendmmsg(lane.flood_fd, msgs.data(), static_cast<unsigned>(n), MSG_DONTWAIT);
  return sent > 0 ? static_cast<std::size_t>(sent) : 0;
}

// --flood-rate, on lane 0's shard each tick: the CONNECTs that fell due since the last tick.
// What the socket or queue refuses is not sent again (a flood does not retry); after a stall
// at most kFloodCatchUpNs' worth goes out at once.
void flood_tick(Lane& lane, std::uint64_t now) {
  const LoadGen& lg = *lane.lg;
  const Config& c = lg.config;
  const std::uint64_t start = lg.flood_start_ns.load(std::memory_order_relaxed);
  if (start == 0 || now < start) return;
  const std::uint64_t t = std::min(now, lg.flood_end_ns.load(std::memory_order_relaxed));
  const auto due = static_cast<std::uint64_t>(static_cast<unsigned __int128>(t - start) *
                                              c.flood_rate / 1'000'000'000);
  if (due <= lane.flood_due) return;
  const std::uint64_t cap = c.flood_rate * kFloodCatchUpNs / 1'000'000'000 + kFloodBatch;
  std::uint64_t want = std::min(due - lane.flood_due, cap);
  lane.flood_due = due;
  // DPDK: no more than the transmit backlog can still hold, so the clients' own frames are
  // never dropped for the flood's; the flood's excess is simply not sent.
  if (lane.flood_driver != nullptr)
    want = std::min<std::uint64_t>(want, lane.flood_driver->tx_room());
  std::uint64_t sent = 0;
  while (want > 0) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(want, kFloodBatch));
    const std::size_t k = send_flood_batch(lane, c, n);
    sent += k;
    want -= n;
    if (k < n) break;  // the socket or queue is full: the rest of this tick's share is lost
  }
  bump(lane.flood_sent, sent);
  lane.flood_last_ns.store(now, std::memory_order_relaxed);
}

// Nanoseconds between one client's messages from time `t` on (--rate, then --schedule); 0 for
// none (paused).
std::uint64_t period_at(const LoadGen& lg, std::uint64_t t) {
  const std::uint64_t start = lg.start_ns.load(std::memory_order_relaxed);
  std::uint64_t rate = lg.config.rate_hz;
  for (const RateStep& step : lg.config.schedule) {
    if (t < start + step.at_ms * 1'000'000) break;
    rate = step.rate_hz;
  }
  return rate == 0 ? 0 : std::max<std::uint64_t>(1, 1'000'000'000 / rate);
}

// The first schedule change after time `t`; none: the maximum.
std::uint64_t next_rate_change(const LoadGen& lg, std::uint64_t t) {
  const std::uint64_t start = lg.start_ns.load(std::memory_order_relaxed);
  for (const RateStep& step : lg.config.schedule) {
    if (start + step.at_ms * 1'000'000 > t) return start + step.at_ms * 1'000'000;
  }
  return std::numeric_limits<std::uint64_t>::max();
}

std::size_t bin_of(const LoadGen& lg, std::uint64_t start, std::uint64_t t) {
  if (t < start) return 0;
  return static_cast<std::size_t>(std::min<std::uint64_t>((t - start) / lg.bin_ns, lg.bins - 1));
}

// A lane's clients are all ENet peers or all KCP sessions, so the slot without the KCP mark
// indexes them either way.
std::uint32_t slot_of(tern::PeerHandle h) { return h.slot & ~rt::Shard::kKcpPeer; }

std::uint32_t find_client(const Lane& lane, tern::PeerHandle h) {
  if (slot_of(h) >= lane.by_slot.size()) return kNoClient;
  const std::uint32_t k = lane.by_slot[slot_of(h)];
  return k != kNoClient && lane.clients[k].handle == h ? k : kNoClient;
}

void send_message(Lane& lane, rt::Shard& shard, Client& client, std::uint64_t now) {
  const LoadGen& lg = *lane.lg;
  const Config& c = lg.config;
  const std::uint32_t seq = client.next_seq++;
  const tern::Delivery delivery = delivery_for(c.delivery, seq);
  const auto channel = channel_for(c, seq);
  tern::Packet packet = tern::Packet::allocate(c.size);
  const auto bytes = packet.mutable_bytes();
  app::store_le<std::uint32_t>(bytes, 0, client.global);
  app::store_le<std::uint32_t>(bytes, 4, seq);
  app::store_le<std::uint64_t>(bytes, 8, now);
  bytes[16] = static_cast<std::byte>(delivery);
  std::memset(bytes.data() + kHeaderBytes, 0x5a, bytes.size() - kHeaderBytes);
  const tern::SendResult result = shard.send(client.handle, channel, delivery, std::move(packet));
  // Refused for a full queue (--max-queued): the target is not keeping up. The message was
  // due, so its copies are owed and, never sent, count as lost.
  const bool refused = result == tern::SendResult::queue_full;
  if (result != tern::SendResult::ok && !refused) {
    ++lane.send_failed;
    return;
  }
  const std::uint64_t copies = client.room_members - 1;
  bump(refused ? lane.refused_total : lane.sent_total);
  const std::uint64_t start = lg.start_ns.load(std::memory_order_relaxed);
  if (now >= start && now < lg.end_ns.load(std::memory_order_relaxed)) {
    bump(refused ? lane.refused : lane.sent);
    bump(lane.expected, copies);
    const std::size_t bin = bin_of(lg, start, now);
    bump(lane.expected_bins[bin], copies);
    if (c.per_second) ++(refused ? lane.refused_bins : lane.sent_bins)[bin];
  }
}

void on_receive(Lane& lane, Client& receiver, const tern::Event& ev, std::uint64_t now) {
  const LoadGen& lg = *lane.lg;
  const Config& c = lg.config;
  const auto bytes = ev.payload();
  if (bytes.size() < kHeaderBytes) {
    bump(lane.mismatched);
    return;
  }
  const auto from = app::load_le<std::uint32_t>(bytes, 0);
  const auto seq = app::load_le<std::uint32_t>(bytes, 4);
  const auto sent_ns = app::load_le<std::uint64_t>(bytes, 8);
  const auto tag = std::to_integer<std::uint8_t>(bytes[16]);
  // Only the other members of the receiver's room (only its first member with --broadcast).
  const std::uint32_t pos = from - receiver.room_first;  // wraps for ids below the room
  if (pos >= receiver.room_members || from == receiver.global || (c.broadcast && pos != 0)) {
    bump(lane.misrouted);
    return;
  }
  const tern::Delivery want = delivery_for(c.delivery, seq);
  const auto channel = channel_for(c, seq);
  if (bytes.size() != c.size || tag != static_cast<std::uint8_t>(want) || ev.delivery != want ||
      ev.channel != channel) {
    bump(lane.mismatched);
  }
  const std::uint32_t track = receiver.tracks + (c.broadcast ? 0 : pos);
  if (!mark_seen(lane.tracks[track], seq)) {
    bump(lane.duplicates);
    return;
  }
  // Reliable and unreliable (sequenced) delivery keep each channel's order; unsequenced
  // promises none.
  if (want != tern::Delivery::unsequenced) {
    std::uint32_t& next = lane.ordered_next[std::size_t{track} * c.channels + channel];
    if (seq + 1 < next) {
      bump(lane.out_of_order);
    } else {
      next = seq + 1;
    }
  }
  const std::uint64_t latency = now > sent_ns ? now - sent_ns : 0;
  bump(lane.delivered_total);
  lane.interval.record(latency);
  const std::uint64_t start = lg.start_ns.load(std::memory_order_relaxed);
  if (c.per_second && now >= start) ++lane.arrived_bins[bin_of(lg, start, now)];
  if (sent_ns >= start && sent_ns < lg.end_ns.load(std::memory_order_relaxed)) {
    const std::size_t bin = bin_of(lg, start, sent_ns);
    bump(lane.delivered);
    bump(lane.delivered_bins[bin]);
    lane.histogram.record(latency);
    if (c.per_second) lane.latency_bins[bin].record(latency);
  }
}

void on_event(Lane& lane, rt::Shard& shard, tern::Event& ev) {
  const std::uint32_t k = find_client(lane, ev.peer);
  if (k == kNoClient) return;
  Client& client = lane.clients[k];
  switch (ev.type) {
    case tern::EventType::receive: on_receive(lane, client, ev, shard.delivery_time_ns()); break;
    case tern::EventType::connect:
      client.connected = true;
      if (client.late) {
        const std::uint64_t t = now_ns();
        lane.late_connect_us.push_back(static_cast<std::uint32_t>(
            std::min<std::uint64_t>((t - client.connect_start_ns) / 1000, 0xffffffffu)));
        break;
      }
      bump(lane.connected);
      // Our connect event comes with the relay's VERIFY_CONNECT; the relay's comes with our
      // acknowledgement of it, which can be lost. A relay acknowledges a message only once the
      // connection is complete on its side (its join handled), so an acknowledged probe shows
      // this sender joined before any spectator connects. Nobody is in the room to get it.
      if (lane.lg->config.broadcast && client.sender &&
          shard.send(client.handle, 0, tern::Delivery::reliable,
                     tern::Packet::copy_of(std::span<const std::byte>(kProbe))) !=
              tern::SendResult::ok) {
        ++lane.send_failed;
      }
      lane.last_connect_ns.store(now_ns(), std::memory_order_relaxed);
      break;
    case tern::EventType::disconnect:
      if (client.late) {
        // One that never connected is counted by what late_connected lacks.
        if (client.connected && !lane.lg->finishing.load(std::memory_order_acquire)) {
          bump(lane.late_dropped);
        }
        client.connected = false;
        break;
      }
      client.connected = false;
      if (lane.lg->finishing.load(std::memory_order_acquire)) {
        bump(lane.goodbyes);
      } else {
        bump(lane.dropped);
        lane.last_reason.store(static_cast<std::uint8_t>(ev.reason), std::memory_order_relaxed);
        bump(lane.lost_by_reason[std::min<std::size_t>(static_cast<std::size_t>(ev.reason),
                                                       kReasonSlots - 1)]);
        if (ev.reason == tern::DisconnectReason::remote) {
          bump(lane.lost_by_remote_data[std::min<std::size_t>(ev.data, kRemoteDataSlots - 1)]);
        }
      }
      break;
    case tern::EventType::none:
    case tern::EventType::receipt:               // never asked for here
    case tern::EventType::block_refused: break;  // no block sent here
  }
}

// --broadcast: counts the senders whose probe the relay has acknowledged.
void count_registered(Lane& lane, rt::Shard& shard) {
  for (Client& client : lane.clients) {
    if (!client.sender || !client.connected || client.registered) continue;
    tern::PeerStats s;
    if (shard.peer_stats(client.handle, s) && s.reliable_in_transit == 0 &&
        s.queued_outgoing == 0) {
      client.registered = true;
      bump(lane.registered);
    }
  }
}

// Wave 0: every client, except that with --broadcast only the rooms' first members (the
// senders) go first, so that a relay which ranks members by join order sees them first.
// Wave 1: the --broadcast spectators, once the relay has every first member in (their
// probes acknowledged). Wave 2: the --late-clients.
void connect_wave(Lane& lane, rt::Shard& shard, int wave) {
  const Config& c = lane.lg->config;
  for (std::uint32_t k = 0; k < lane.clients.size(); ++k) {
    Client& client = lane.clients[k];
    if ((client.late ? 2 : c.broadcast && !client.sender ? 1 : 0) != wave) continue;
    client.connect_start_ns = now_ns();
    if (c.kcp) {
      client.handle = shard.kcp_connect(c.target, client.global + 1);
    } else if (c.token_key) {
      tern::TokenRequest req;
      req.client_id = k;
      req.servers = {c.target};
      req.user_data = "room=" + std::to_string(client.room);
      req.now_s =
          static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                         std::chrono::system_clock::now().time_since_epoch())
                                         .count());
      req.expire_s = req.now_s + 3600;
      tern::ConnectToken token;
      std::string error;
      client.handle = tern::mint_token(*c.token_key, req, token, error)
                          ? shard.connect_secure(c.target, c.channels, client.room, token)
                          : tern::PeerHandle{};
    } else {
      client.handle = shard.connect(c.target, c.channels, client.room);
    }
    if (!client.handle.valid()) {
      bump(lane.connect_failed);
      continue;
    }
    if (slot_of(client.handle) >= lane.by_slot.size()) {
      lane.by_slot.resize(slot_of(client.handle) + 1, kNoClient);
    }
    lane.by_slot[slot_of(client.handle)] = k;
    if (c.kcp) {
      // tern-relay's KCP room rule "join": the session's first message names its room. Its
      // connect event here comes with the relay's acknowledgement, sent after the join was
      // handled.
      const std::string join = "join:" + std::to_string(client.room);
      if (shard.send(client.handle, 0, tern::Delivery::reliable,
                     std::as_bytes(std::span(join.data(), join.size()))) != tern::SendResult::ok) {
        bump(lane.connect_failed);
      }
    }
  }
}

void tick(Lane& lane, rt::Shard& shard) {
  const LoadGen& lg = *lane.lg;
  const std::uint64_t gen = lg.snapshot_gen.load(std::memory_order_acquire);
  if (gen != lane.snapshot_seen) {
    lane.snapshot = lane.interval;
    lane.interval = tern::app::LatencyHistogram{};
    lane.snapshot_seen = gen;
    lane.snapshot_ack.store(gen, std::memory_order_release);
  }
  if (lane.flood_owner) flood_tick(lane, now_ns());
  if (!lane.traffic || lane.senders.empty()) return;
  const std::uint64_t now = now_ns();
  const std::uint64_t end = lg.end_ns.load(std::memory_order_relaxed);
  if (lane.cycle_start_ns == 0) {
    lane.cycle_start_ns = lg.traffic_ns.load(std::memory_order_relaxed);
    lane.cycle_period_ns = period_at(lg, lane.cycle_start_ns);
  }
  // Senders go in a fixed cyclic order, each at its own phase; sends that fell due since the
  // last tick go out now (late ticks catch up, nothing is skipped). A rate change takes effect
  // with the next cycle, so every cycle still sends one message per client.
  for (;;) {
    if (lane.cycle_period_ns == 0) {
      const std::uint64_t resume = next_rate_change(lg, lane.cycle_start_ns);
      if (resume > now || resume >= end) break;
      lane.cycle_start_ns = resume;
      lane.cycle_period_ns = period_at(lg, resume);
      continue;
    }
    Client& client = lane.clients[lane.senders[lane.cursor]];
    const std::uint64_t due =
        lane.cycle_start_ns + client.phase * lane.cycle_period_ns / lg.senders;
    if (due > now || due >= end) break;
    if (client.connected) send_message(lane, shard, client, now);
    if (++lane.cursor == lane.senders.size()) {
      lane.cursor = 0;
      lane.cycle_start_ns += lane.cycle_period_ns;
      lane.cycle_period_ns = period_at(lg, lane.cycle_start_ns);
    }
  }
}

// A counter summed over the lanes (they may still be writing it).
template <class T>
std::uint64_t total(const LoadGen& lg, std::atomic<T> Lane::*field) {
  std::uint64_t sum = 0;
  for (const auto& lane : lg.lanes) sum += ((*lane).*field).load(std::memory_order_relaxed);
  return sum;
}

// The client side's own work, summed over its shards. Retransmits climbing with the offered
// rate mean queueing delay has outgrown the RTO, the first sign of overload. Poll iterations
// over 1 ms are the load generator's own stalls: while one runs, the relay's copies pile up in
// front of it (a memif ring holds ~1,000 datagrams).
struct ClientSide {
  std::uint64_t retransmits = 0;
  std::uint64_t busy_us = 0;  // polls that found nothing excluded
  std::uint64_t slow_polls = 0;
  std::uint64_t longest_poll_bound_us = 0;  // loop-time bucket bound of the longest poll
  std::uint64_t tx_waits = 0;               // flushes held back for a full transmit queue (DPDK)
};

struct Groups {
  std::vector<std::unique_ptr<rt::ShardGroup>> groups;
  std::size_t per_group = 1;  // shards (lanes) per group

  ClientSide client_side() const {
    ClientSide t;
    for (const auto& g : groups) {
      const rt::ShardCounters c = g->total();
      t.retransmits += c.retransmits + c.kcp_retransmits;
      t.tx_waits += c.tx_waits;
      t.busy_us += c.loop_time_us - std::min(c.loop_time_us, c.idle_poll_us);
      for (std::size_t b = 0; b < rt::kLoopTimeBuckets; ++b) {
        if (c.loop_time[b] == 0) continue;
        const std::uint64_t bound = rt::loop_time_bucket_bound_us(b);
        t.longest_poll_bound_us = std::max(t.longest_poll_bound_us, bound);
        if (bound > 1024) t.slow_polls += c.loop_time[b];
      }
    }
    return t;
  }

  template <class Task>
  void post(Lane& lane, Task task) {
    groups[lane.group]->post(lane.shard, [&lane, task](rt::Shard& s) { task(lane, s); });
  }

  // Every group at once: each waits up to `grace` for its peers to say goodbye.
  bool stop_all(std::chrono::milliseconds grace) {
    std::vector<std::thread> stoppers;
    std::vector<char> ok(groups.size(), 0);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      stoppers.emplace_back([this, g, grace, &ok] { ok[g] = groups[g]->stop(grace) ? 1 : 0; });
    }
    for (auto& t : stoppers) t.join();
    return std::all_of(ok.begin(), ok.end(), [](char v) { return v != 0; });
  }
};

void set_stop_signals_blocked(bool blocked) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &set, nullptr);
}

const char* idle_name(rt::IdlePolicy p) { return p == rt::IdlePolicy::busy_poll ? "busy" : "wait"; }

bool write_file(const std::string& path, const std::string& body) {
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) return false;
  const bool ok = std::fputs(body.c_str(), out) >= 0;
  return std::fclose(out) == 0 && ok;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return std::string(
      buf, n < 0 ? 0 : std::min<std::size_t>(static_cast<std::size_t>(n), sizeof buf - 1));
}

// --per-second: one 'loadgen_second ...' line per bin of the measured period on stdout; returns
// the same rows as a JSON array. Reads the lanes' bins: only once the shards have stopped.
std::string per_second_report(const LoadGen& lg) {
  const std::uint64_t duration_ns = lg.config.duration_ms * 1'000'000;
  const std::size_t shown = std::min<std::size_t>(
      lg.bins, static_cast<std::size_t>((duration_ns + lg.bin_ns - 1) / lg.bin_ns));
  std::string json = "[";
  tern::app::LatencyHistogram latency;
  for (std::size_t b = 0; b < shown; ++b) {
    std::uint64_t sent = 0, refused = 0, expected = 0, delivered = 0, arrived = 0;
    latency = tern::app::LatencyHistogram{};
    for (const auto& l : lg.lanes) {
      sent += l->sent_bins[b];
      refused += l->refused_bins[b];
      expected += l->expected_bins[b].load(std::memory_order_relaxed);
      delivered += l->delivered_bins[b].load(std::memory_order_relaxed);
      arrived += l->arrived_bins[b];
      latency.merge(l->latency_bins[b]);
    }
    const double t = static_cast<double>(b * lg.bin_ns) / 1e9;
    const double width = static_cast<double>(lg.bin_ns) / 1e9;
    const double p50 = latency.percentile(50) / 1e3, p99 = latency.percentile(99) / 1e3;
    std::printf("loadgen_second t=%g width_s=%g sent=%" PRIu64 " refused=%" PRIu64
                " expected=%" PRIu64 " delivered=%" PRIu64 " arrived=%" PRIu64
                " p50_us=%.1f p99_us=%.1f\n",
                t, width, sent, refused, expected, delivered, arrived, p50, p99);
    json +=
        format("%s{\"t\": %g, \"width_s\": %g, \"sent\": %" PRIu64 ", \"refused\": %" PRIu64
               ", \"expected\": %" PRIu64 ", \"delivered\": %" PRIu64 ", \"arrived\": %" PRIu64
               ", \"p50_us\": %.1f, \"p99_us\": %.1f}",
               b == 0 ? "" : ", ", t, width, sent, refused, expected, delivered, arrived, p50, p99);
  }
  return json + "]";
}

// `body`, one JSON object ending in "}\n", with a "per_second" member added.
std::string splice_json(const std::string& body, const std::string& seconds) {
  const std::size_t close = body.rfind('}');
  return body.substr(0, close) + ", \"per_second\": " + seconds + "}\n";
}

}  // namespace

int run(const Config& config) {
  const std::size_t n = config.clients;
  const std::size_t r = config.room_size;
  const std::size_t rooms = (n + r - 1) / r;

  // ---- lanes: one group per source address, `per_group` shards each ----
  const std::size_t sources = std::min(config.sources.size(), n);
  const std::size_t ngroups = std::max<std::size_t>(1, sources);
  std::size_t per_group =
      sources > 1 ? std::max<std::size_t>(1, config.shards / sources) : std::min(config.shards, n);
  per_group = std::max<std::size_t>(1, std::min(per_group, n / ngroups));
  const std::size_t nlanes = ngroups * per_group;
  const std::size_t per_lane = (n + nlanes - 1) / nlanes;
  const std::size_t late_per_lane = (config.late_clients + nlanes - 1) / nlanes;

  LoadGen lg(config);
  lg.tracks_per_client = config.broadcast ? 1 : static_cast<std::uint32_t>(r);
  const std::size_t nsenders = config.broadcast ? rooms : n;
  lg.senders = std::max<std::size_t>(1, nsenders);
  const std::uint64_t run_ns = config.duration_ms * 1'000'000 + 1'000'000'000;
  lg.bin_ns = std::max<std::uint64_t>(1'000'000'000, run_ns / kMaxBins + 1);
  lg.bins = static_cast<std::size_t>(run_ns / lg.bin_ns + 2);

  for (std::size_t i = 0; i < nlanes; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->lg = &lg;
    lane->group = i / per_group;
    lane->shard = i % per_group;
    lane->clients.reserve(per_lane + late_per_lane);
    lane->by_slot.assign(per_lane + late_per_lane, kNoClient);
    lane->late_connect_us.reserve(late_per_lane);
    lane->expected_bins.reset(new std::atomic<std::uint64_t>[lg.bins]());
    lane->delivered_bins.reset(new std::atomic<std::uint64_t>[lg.bins]());
    if (config.per_second) {
      lane->sent_bins.assign(lg.bins, 0);
      lane->refused_bins.assign(lg.bins, 0);
      lane->arrived_bins.assign(lg.bins, 0);
      lane->latency_bins.resize(lg.bins);
    }
    lg.lanes.push_back(std::move(lane));
  }
  std::size_t sender_index = 0;
  for (std::size_t g = 0; g < n; ++g) {
    Lane& lane = *lg.lanes[g % nlanes];
    const std::size_t room_index = g / r;
    Client c;
    c.global = static_cast<std::uint32_t>(g);
    c.room = config.first_room + static_cast<std::uint32_t>(room_index);
    c.room_first = static_cast<std::uint32_t>(room_index * r);
    c.room_members = static_cast<std::uint32_t>(std::min(r, n - room_index * r));
    c.tracks = static_cast<std::uint32_t>(lane.clients.size() * lg.tracks_per_client);
    c.sender = !config.broadcast || g == c.room_first;
    if (c.sender) {
      // Phases spread evenly over one period across all senders, whatever lane they are on.
      c.phase = static_cast<std::uint32_t>(sender_index++);
      lane.senders.push_back(static_cast<std::uint32_t>(lane.clients.size()));
    }
    lane.clients.push_back(c);
  }
  // --late-clients: each alone in a room after the established ones, never sending.
  for (std::size_t j = 0; j < config.late_clients; ++j) {
    const std::size_t g = n + j;
    Lane& lane = *lg.lanes[g % nlanes];
    Client c;
    c.global = static_cast<std::uint32_t>(g);
    c.room = config.first_room + static_cast<std::uint32_t>(rooms + j);
    c.room_first = c.global;
    c.room_members = 1;
    c.tracks = static_cast<std::uint32_t>(lane.clients.size() * lg.tracks_per_client);
    c.late = true;
    lane.clients.push_back(c);
  }
  for (auto& lane : lg.lanes) {
    lane->tracks.assign(lane->clients.size() * lg.tracks_per_client, SenderTrack{});
    lane->ordered_next.assign(lane->tracks.size() * config.channels, 0);
  }

  set_stop_signals_blocked(true);  // the shard threads (and DPDK's) inherit the mask
  // --driver dpdk: the EAL and the port before the (one, one-shard) group; gone after it.
  app::DpdkSession dpdk("tern-loadgen");
  {
    std::string error;
    if (config.driver == rt::DriverKind::dpdk && !dpdk.open(config.dpdk, 1, error)) {
      set_stop_signals_blocked(false);
      std::fprintf(stderr, "tern-loadgen: cannot start the DPDK port: %s\n", error.c_str());
      return kExitFailure;
    }
  }
  Groups groups;
  groups.per_group = per_group;
  for (std::size_t g = 0; g < ngroups; ++g) {
    rt::ShardGroupOptions o;
    o.open_driver = open_client_driver;
    if (config.driver == rt::DriverKind::dpdk) {
      o.bind = app::dpdk_client_bind(config.dpdk);
    } else if (sources > 0) {
      o.bind = tern::Endpoint::v4(config.sources[g], 0);
    } else {
      o.bind = *tern::Endpoint::parse(config.target.is_v4() ? "0.0.0.0:0" : "[::]:0");
    }
    o.shards = per_group;
    o.driver = config.driver;
    o.idle = config.idle;
    o.pin = false;
    o.share_port = false;
    o.host.peer_limit = per_lane + late_per_lane;
    o.host.channel_limit = config.channels;
    o.host.ack_delay_ms = config.ack_delay_ms;
    o.host.checksum = config.checksum;
    // Every message is read once here and never kept: no copy of each out of its datagram.
    o.host.lend_payloads = true;
    o.host.selective_acks = config.selective_acks;
    o.host.fast_retransmit = config.fast_retransmit;
    o.host.nodelay = config.nodelay;
    o.host.redundancy = config.redundancy;
    o.host.congestion_control = config.congestion_control;
    o.host.congestion_window = config.congestion_window;
    o.host.channels = proto::channel_switches(config.channel_rules);
    o.host.min_rto_ms = config.min_rto_ms;
    o.host.max_queued = config.max_queued;
    o.host.throttle_reliable_window = config.throttle_window;
    if (config.kcp) {
      o.kcp_listen = true;
      o.kcp_bind = o.bind;
      o.kcp.session_limit = per_lane;
      o.kcp.snd_wnd = 128;
      o.kcp.rcv_wnd = 256;
    }
    auto group = std::make_unique<rt::ShardGroup>(o);
    const std::size_t base = g * per_group;
    group->set_event_handler([&lg, base](rt::Shard& shard, tern::Event& ev) {
      on_event(*lg.lanes[base + shard.index()], shard, ev);
    });
    std::string error;
    if (!group->start(error)) {
      set_stop_signals_blocked(false);
      std::fprintf(stderr, "tern-loadgen: cannot open the client sockets on %s: %s\n",
                   o.bind.to_string().c_str(), error.c_str());
      groups.stop_all(0ms);
      return kExitFailure;
    }
    groups.groups.push_back(std::move(group));
  }
  set_stop_signals_blocked(false);
  tern::app::install_stop_handler();

  // --flood-rate: lane 0 sends it, through its DPDK queue or a raw socket of its own.
  Lane& flooder = *lg.lanes.front();
  if (config.flood_rate > 0) {
    if (config.driver == rt::DriverKind::dpdk) {
      flooder.flood_driver = dpdk_client_driver.load(std::memory_order_acquire);
    } else {
      flooder.flood_fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
      if (flooder.flood_fd < 0) {
        const int err = errno;
        groups.stop_all(0ms);
        std::fprintf(stderr, "tern-loadgen: --flood-rate needs a raw socket (CAP_NET_RAW): %s\n",
                     std::strerror(err));
        return kExitFailure;
      }
    }
    flooder.flood_owner = true;
  }
  struct FdCloser {
    int fd;
    ~FdCloser() {
      if (fd >= 0) ::close(fd);
    }
  } flood_fd_closer{flooder.flood_fd};

  const std::string target = config.target.to_string();
  const auto fail_now = [&](const std::string& what) {
    lg.finishing.store(true, std::memory_order_release);
    // Say goodbye to the clients that made it; no need to wait when none did.
    groups.stop_all(total(lg, &Lane::connected) > 0 ? kGoodbyeGrace : 0ms);
    std::fprintf(stderr, "tern-loadgen: %s\n", what.c_str());
    return kExitFailure;
  };

  // ---- connect everyone at once ----
  const std::uint64_t connect_ns = now_ns();
  for (std::size_t i = 0; i < nlanes; ++i) {
    groups.post(*lg.lanes[i], [](Lane& lane, rt::Shard& shard) { connect_wave(lane, shard, 0); });
  }
  const std::uint64_t connect_deadline = connect_ns + config.timeout_ms * 1'000'000;
  bool spectators_posted = !config.broadcast;
  std::uint64_t connected = 0;
  for (;;) {
    connected = total(lg, &Lane::connected);
    if (!spectators_posted) {
      for (std::size_t i = 0; i < nlanes; ++i) {
        groups.post(*lg.lanes[i],
                    [](Lane& lane, rt::Shard& shard) { count_registered(lane, shard); });
      }
    }
    if (!spectators_posted && total(lg, &Lane::registered) >= rooms) {
      for (std::size_t i = 0; i < nlanes; ++i) {
        groups.post(*lg.lanes[i],
                    [](Lane& lane, rt::Shard& shard) { connect_wave(lane, shard, 1); });
      }
      spectators_posted = true;
    }
    if (connected == n) break;
    const std::uint64_t failed = total(lg, &Lane::dropped) + total(lg, &Lane::connect_failed);
    if (tern::app::stop_requested()) return fail_now("interrupted while connecting");
    if (failed > 0) {
      std::uint8_t reason = 0;
      for (const auto& l : lg.lanes) reason = std::max(reason, l->last_reason.load());
      return fail_now(format("connected %" PRIu64 "/%zu clients to %s; %" PRIu64
                             " failed (last reason: %s)",
                             connected, n, target.c_str(), failed,
                             tern::to_string(static_cast<tern::DisconnectReason>(reason))));
    }
    if (now_ns() >= connect_deadline) {
      return fail_now(format("connected only %" PRIu64 "/%zu clients to %s within %" PRIu64 " ms",
                             connected, n, target.c_str(), config.timeout_ms));
    }
    std::this_thread::sleep_for(kConnectPoll);
  }
  std::uint64_t last_connect = connect_ns;
  for (const auto& l : lg.lanes) {
    last_connect = std::max(last_connect, l->last_connect_ns.load(std::memory_order_relaxed));
  }
  const double connect_ms = static_cast<double>(last_connect - connect_ns) / 1e6;
  std::printf("connected %" PRIu64 "/%zu in %.1f ms\n", connected, n, connect_ms);
  std::fflush(stdout);

  // ---- warm-up, measured period, stragglers ----
  const std::uint64_t traffic_ns = now_ns();
  const std::uint64_t start_ns = traffic_ns + config.warmup_ms * 1'000'000;
  const std::uint64_t end_ns = start_ns + config.duration_ms * 1'000'000;
  lg.traffic_ns.store(traffic_ns, std::memory_order_relaxed);
  lg.start_ns.store(start_ns, std::memory_order_relaxed);
  lg.end_ns.store(end_ns, std::memory_order_relaxed);
  const std::uint64_t flood_start = start_ns + config.flood_at_ms * 1'000'000;
  const std::uint64_t flood_end =
      config.flood_for_ms == 0 ? end_ns
                               : std::min(end_ns, flood_start + config.flood_for_ms * 1'000'000);
  lg.flood_end_ns.store(flood_end, std::memory_order_relaxed);
  if (config.flood_rate > 0) lg.flood_start_ns.store(flood_start, std::memory_order_relaxed);
  const std::uint64_t late_ns = start_ns + config.late_at_ms * 1'000'000;
  bool late_posted = config.late_clients == 0;
  for (std::size_t i = 0; i < nlanes; ++i) {
    groups.post(*lg.lanes[i], [](Lane& lane, rt::Shard&) { lane.traffic = true; });
  }

  auto progress_hist = std::make_unique<tern::app::LatencyHistogram>();
  std::uint64_t progress_gen = 0;
  std::uint64_t pending_since = 0;  // a snapshot was requested at this time (0: none)
  std::uint64_t next_progress = traffic_ns + 1'000'000'000;
  std::uint64_t last_progress = traffic_ns, last_sent = 0, last_delivered = 0, last_refused = 0;
  std::uint64_t last_retransmits = 0, last_slow_polls = 0;
  bool interrupted = false;
  // Each tick wakes every lane's thread. With many source groups (one thread each) on few
  // CPUs, 1 ms ticks would spend the load generator's CPU on wake-ups, so the period grows
  // with lanes per CPU, up to 5 ms; ticks send whatever fell due since the last one anyway.
  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  const auto tick_period = std::clamp<std::chrono::milliseconds>(
      std::chrono::milliseconds(nlanes / ncpu), kTick, 5 * kTick);
  auto next_tick = std::chrono::steady_clock::now();
  for (;;) {
    const std::uint64_t now = now_ns();
    if (tern::app::stop_requested()) {
      interrupted = true;
      break;
    }
    if (total(lg, &Lane::dropped) >= connected)
      break;  // the relay went away: nothing more to measure
    if (now >= end_ns + kSettleNs &&
        (total(lg, &Lane::delivered) >= total(lg, &Lane::expected) || now >= end_ns + kDrainNs)) {
      break;
    }
    if (!config.quiet) {
      if (pending_since == 0 && now >= next_progress) {
        lg.snapshot_gen.store(++progress_gen, std::memory_order_release);
        pending_since = now;
      }
      if (pending_since != 0) {
        const bool all = std::all_of(lg.lanes.begin(), lg.lanes.end(), [&](const auto& l) {
          return l->snapshot_ack.load(std::memory_order_acquire) == progress_gen;
        });
        if (all || now - pending_since > kSnapshotWaitNs) {
          *progress_hist = tern::app::LatencyHistogram{};
          for (const auto& l : lg.lanes) {
            if (l->snapshot_ack.load(std::memory_order_acquire) == progress_gen) {
              progress_hist->merge(l->snapshot);
            }
          }
          const std::uint64_t sent_total = total(lg, &Lane::sent_total);
          const std::uint64_t refused_total = total(lg, &Lane::refused_total);
          const std::uint64_t delivered_total = total(lg, &Lane::delivered_total);
          const ClientSide now_side = groups.client_side();
          const std::uint64_t retransmits = now_side.retransmits, slow_polls = now_side.slow_polls;
          const double dt = static_cast<double>(pending_since - last_progress) / 1e9;
          // Settled loss: copies owed for messages sent at least kLiveLostAgeNs ago.
          std::uint64_t owed = 0, got = 0;
          for (std::size_t b = 0; b < lg.bins; ++b) {
            if (start_ns + (b + 1) * lg.bin_ns + kLiveLostAgeNs > pending_since) break;
            for (const auto& l : lg.lanes) {
              owed += l->expected_bins[b].load(std::memory_order_relaxed);
              got += l->delivered_bins[b].load(std::memory_order_relaxed);
            }
          }
          std::fprintf(stderr,
                       "t=%" PRIu64 "s clients=%" PRIu64
                       "/%zu sent/s=%.0f delivered/s=%.0f "
                       "p99_ms=%.2f lost=%" PRIu64 " retransmits/s=%.0f slow_polls=%" PRIu64 "%s\n",
                       (pending_since - traffic_ns + 500'000'000) / 1'000'000'000,
                       connected - std::min<std::uint64_t>(connected, total(lg, &Lane::dropped)), n,
                       static_cast<double>(sent_total - last_sent) / dt,
                       static_cast<double>(delivered_total - last_delivered) / dt,
                       progress_hist->percentile(99) / 1e6, owed > got ? owed - got : 0,
                       static_cast<double>(retransmits - last_retransmits) / dt,
                       slow_polls - last_slow_polls,
                       refused_total != last_refused
                           ? format(" refused/s=%.0f",
                                    static_cast<double>(refused_total - last_refused) / dt)
                                 .c_str()
                           : "");
          last_refused = refused_total;
          last_retransmits = retransmits;
          last_slow_polls = slow_polls;
          last_progress = pending_since;
          last_sent = sent_total;
          last_delivered = delivered_total;
          next_progress += 1'000'000'000;
          pending_since = 0;
        }
      }
    }
    if (!late_posted && now >= late_ns) {
      for (std::size_t i = 0; i < nlanes; ++i) {
        groups.post(*lg.lanes[i],
                    [](Lane& lane, rt::Shard& shard) { connect_wave(lane, shard, 2); });
      }
      late_posted = true;
    }
    for (std::size_t i = 0; i < nlanes; ++i) {
      groups.post(*lg.lanes[i], [](Lane& lane, rt::Shard& shard) { tick(lane, shard); });
    }
    next_tick += tick_period;
    const auto wall = std::chrono::steady_clock::now();
    if (next_tick + 10 * tick_period < wall) next_tick = wall;  // fell far behind: do not burst
    std::this_thread::sleep_until(next_tick);
  }

  // ---- goodbye; from here the lanes are main's ----
  lg.finishing.store(true, std::memory_order_release);
  const bool all_gone = groups.stop_all(kGoodbyeGrace);

  tern::app::LatencyHistogram histogram;
  std::uint64_t send_failed = 0;
  std::uint8_t reason = 0;
  for (const auto& l : lg.lanes) {
    histogram.merge(l->histogram);
    send_failed += l->send_failed;
    reason = std::max(reason, l->last_reason.load());
  }
  const std::uint64_t sent = total(lg, &Lane::sent), expected = total(lg, &Lane::expected);
  const std::uint64_t refused = total(lg, &Lane::refused);
  const std::uint64_t delivered = total(lg, &Lane::delivered),
                      duplicates = total(lg, &Lane::duplicates);
  const std::uint64_t out_of_order = total(lg, &Lane::out_of_order),
                      misrouted = total(lg, &Lane::misrouted);
  const std::uint64_t mismatched = total(lg, &Lane::mismatched),
                      dropped = total(lg, &Lane::dropped);
  const std::uint64_t goodbyes = total(lg, &Lane::goodbyes);
  // --flood-rate: CONNECTs the socket or queue took, over the flood's window as far as it ran.
  const std::uint64_t flood_sent = flooder.flood_sent.load();
  const std::uint64_t flood_last = flooder.flood_last_ns.load();
  const double flood_s =
      flood_last > flood_start
          ? static_cast<double>(std::min(flood_last, flood_end) - flood_start) / 1e9
          : 0.0;
  const double flood_rate = flood_s > 0 ? static_cast<double>(flood_sent) / flood_s : 0.0;
  // --late-clients: connect times of those that connected.
  std::vector<std::uint32_t> late_us;
  std::uint64_t late_dropped = 0;
  for (const auto& l : lg.lanes) {
    late_us.insert(late_us.end(), l->late_connect_us.begin(), l->late_connect_us.end());
    late_dropped += l->late_dropped.load();
  }
  std::sort(late_us.begin(), late_us.end());
  const double late_p50_ms = late_us.empty() ? 0.0 : late_us[(late_us.size() - 1) / 2] / 1e3;
  const double late_max_ms = late_us.empty() ? 0.0 : late_us.back() / 1e3;
  const std::size_t late_connected = late_us.size();
  const std::uint64_t lost = expected > delivered ? expected - delivered : 0;
  const double duration_s = static_cast<double>(config.duration_ms) / 1000.0;
  const double sent_per_s = static_cast<double>(sent) / duration_s;
  const double delivered_per_s = static_cast<double>(delivered) / duration_s;
  const double lost_pct =
      expected > 0 ? 100.0 * static_cast<double>(lost) / static_cast<double>(expected) : 0.0;
  const tern::app::LatencySummary s = histogram.summary(1e-3);
  const char* delivery = to_string(config.delivery);
  const std::string driver = groups.groups.front()->driver_name(0);
  const ClientSide side = groups.client_side();
  const std::uint64_t retransmits = side.retransmits, busy_us = side.busy_us,
                      slow_polls = side.slow_polls,
                      longest_poll_bound_us = side.longest_poll_bound_us, tx_waits = side.tx_waits;

  std::printf(
      "tern-loadgen -> %s: %zu clients in %zu rooms of %zu%s, %s on %u channel%s, %zu B at "
      "%" PRIu64 " Hz, %g s measured after %g s warm-up\n",
      target.c_str(), n, rooms, r, config.broadcast ? " (broadcast: first member sends)" : "",
      delivery, config.channels, config.channels == 1 ? "" : "s", config.size, config.rate_hz,
      duration_s, static_cast<double>(config.warmup_ms) / 1000.0);
  std::printf("  %-14s %zu group%s x %zu shard%s, %s driver, idle %s%s%s\n", "runtime", ngroups,
              ngroups == 1 ? "" : "s", per_group, per_group == 1 ? "" : "s", driver.c_str(),
              idle_name(config.idle), config.sources_text.empty() ? "" : ", sources ",
              config.sources_text.c_str());
  if (!config.schedule.empty()) {
    std::string steps;
    for (const RateStep& step : config.schedule) {
      steps += format("%s%g s: %" PRIu64 " Hz", steps.empty() ? "" : ", ",
                      static_cast<double>(step.at_ms) / 1000.0, step.rate_hz);
    }
    std::printf("  %-14s %s (into the measured period)\n", "schedule", steps.c_str());
  }
  std::printf("  %-14s %" PRIu64 "/%zu in %.1f ms\n", "connected", connected, n, connect_ms);
  std::printf("  %-14s %" PRIu64 " messages (%.0f/s)\n", "sent", sent, sent_per_s);
  if (refused > 0) {
    std::printf("  %-14s %" PRIu64
                " messages held back: the client's queue was full (--max-queued)\n",
                "refused", refused);
  }
  std::printf("  %-14s %" PRIu64 " copies\n", "expected", expected);
  std::printf("  %-14s %" PRIu64 " copies (%.0f/s)\n", "delivered", delivered, delivered_per_s);
  std::printf("  %-14s %" PRIu64 " (%.3f%%)\n", "lost", lost, lost_pct);
  std::printf("  %-14s %" PRIu64 "\n", "duplicates", duplicates);
  std::printf("  %-14s %" PRIu64 "\n", "out of order", out_of_order);
  std::printf("  %-14s %" PRIu64 "\n", "misrouted", misrouted);
  std::printf("  %-14s %" PRIu64 "\n", "mismatched", mismatched);
  std::printf("  %-14s p50 %.1f  p90 %.1f  p99 %.1f  p99.9 %.1f  max %.1f  (%zu samples)\n",
              "latency us", s.p50, s.p90, s.p99, s.p999, s.max, s.count);
  std::printf(
      "  %-14s %" PRIu64 " retransmits, %.2f s working, %" PRIu64
      " polls over 1 ms (longest %s %.1f ms), %" PRIu64 " flushes held for a full tx queue\n",
      "client side", retransmits, static_cast<double>(busy_us) / 1e6, slow_polls,
      longest_poll_bound_us >= tern::rt::loop_time_bucket_bound_us(tern::rt::kLoopTimeBuckets - 1)
          ? "over"
          : "at most",
      static_cast<double>(longest_poll_bound_us) / 1000.0, tx_waits);
  if (config.flood_rate > 0) {
    std::printf("  %-14s %" PRIu64 " forged CONNECTs sent (%.0f/s asked %" PRIu64
                "/s) from %s over %.2f s\n",
                "flood", flood_sent, flood_rate, config.flood_rate, config.flood_from_text.c_str(),
                flood_s);
  }
  if (config.late_clients > 0) {
    std::printf(
        "  %-14s %zu/%zu connected %g s into the period, connect p50 %.1f ms, max %.1f ms, "
        "%" PRIu64 " lost after connecting\n",
        "late clients", late_connected, config.late_clients,
        static_cast<double>(config.late_at_ms) / 1000.0, late_p50_ms, late_max_ms, late_dropped);
  }
  std::printf("  %-14s %" PRIu64 "/%" PRIu64 " disconnected gracefully%s\n", "goodbye", goodbyes,
              connected - std::min(connected, dropped), all_gone ? "" : " (timed out)");
  const std::string seconds = config.per_second ? per_second_report(lg) : std::string{};
  std::printf("loadgen clients=%zu rooms=%zu room_size=%zu rate=%" PRIu64
              " size=%zu delivery=%s duration_s=%g sent=%" PRIu64 " expected=%" PRIu64
              " delivered=%" PRIu64 " lost=%" PRIu64 " duplicates=%" PRIu64 " out_of_order=%" PRIu64
              " misrouted=%" PRIu64 " mismatched=%" PRIu64
              " delivered_per_s=%.0f latency_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f "
              "max=%.1f connect_ms=%.1f retransmits=%" PRIu64 " busy_us=%" PRIu64
              " slow_polls=%" PRIu64 " tx_waits=%" PRIu64 " refused=%" PRIu64
              " protocol=%s"
              " flood_sent=%" PRIu64
              " flood_rate=%.0f late_clients=%zu late_connected=%zu"
              " late_dropped=%" PRIu64 " late_p50_ms=%.1f late_max_ms=%.1f\n",
              n, rooms, r, config.rate_hz, config.size, delivery, duration_s, sent, expected,
              delivered, lost, duplicates, out_of_order, misrouted, mismatched, delivered_per_s,
              s.p50, s.p90, s.p99, s.p999, s.max, connect_ms, retransmits, busy_us, slow_polls,
              tx_waits, refused, config.kcp ? "kcp" : "enet", flood_sent, flood_rate,
              config.late_clients, late_connected, late_dropped, late_p50_ms, late_max_ms);
  std::fflush(stdout);

  int status = kExitOk;
  if (!config.json_path.empty()) {
    const std::string body = format(
        "{\"protocol\": \"%s\", \"clients\": %zu, \"rooms\": %zu, \"room_size\": %zu, \"rate\": "
        "%" PRIu64
        ", \"size\": %zu, \"delivery\": \"%s\", \"channels\": %u, \"broadcast\": %s, "
        "\"duration_s\": %g, \"warmup_s\": %g, \"sent\": %" PRIu64 ", \"refused\": %" PRIu64
        ", \"expected\": %" PRIu64 ", \"delivered\": %" PRIu64 ", \"lost\": %" PRIu64
        ", \"duplicates\": %" PRIu64 ", \"out_of_order\": %" PRIu64 ", \"misrouted\": %" PRIu64
        ", \"mismatched\": %" PRIu64
        ", \"delivered_per_s\": %.0f, \"latency_us\": {\"p50\": %.1f, \"p90\": %.1f, "
        "\"p99\": %.1f, \"p99.9\": %.1f, \"max\": %.1f, \"count\": %zu}, \"connect_ms\": %.1f, "
        "\"connected\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"goodbyes\": %" PRIu64
        ", \"first_room\": %u, \"groups\": %zu, \"shards_per_group\": %zu, \"driver\": \"%s\", "
        "\"idle\": \"%s\", \"target\": \"%s\", \"interrupted\": %s, \"flood_sent\": %" PRIu64
        ", \"flood_rate\": %.0f, \"late_clients\": %zu, \"late_connected\": %zu, "
        "\"late_dropped\": %" PRIu64 ", \"late_p50_ms\": %.1f, \"late_max_ms\": %.1f}\n",
        config.kcp ? "kcp" : "enet", n, rooms, r, config.rate_hz, config.size, delivery,
        config.channels, config.broadcast ? "true" : "false", duration_s,
        static_cast<double>(config.warmup_ms) / 1000.0, sent, refused, expected, delivered, lost,
        duplicates, out_of_order, misrouted, mismatched, delivered_per_s, s.p50, s.p90, s.p99,
        s.p999, s.max, s.count, connect_ms, connected, dropped, goodbyes, config.first_room,
        ngroups, per_group, driver.c_str(), idle_name(config.idle), target.c_str(),
        interrupted ? "true" : "false", flood_sent, flood_rate, config.late_clients, late_connected,
        late_dropped, late_p50_ms, late_max_ms);
    if (!write_file(config.json_path, seconds.empty() ? body : splice_json(body, seconds))) {
      std::fprintf(stderr, "tern-loadgen: cannot write %s\n", config.json_path.c_str());
      status = kExitFailure;
    }
  }
  if (send_failed > 0) {
    std::fprintf(stderr, "tern-loadgen: %" PRIu64 " sends refused by the host\n", send_failed);
  }
  if (dropped > 0) {
    std::string reasons;
    for (std::size_t k = 0; k < kReasonSlots; ++k) {
      std::uint64_t count = 0;
      for (const auto& l : lg.lanes) count += l->lost_by_reason[k].load();
      if (count == 0) continue;
      const auto why = static_cast<tern::DisconnectReason>(k);
      reasons += format("%s%s %" PRIu64, reasons.empty() ? "" : ", ", tern::to_string(why), count);
      if (why != tern::DisconnectReason::remote) continue;
      for (std::size_t d = 0; d < kRemoteDataSlots; ++d) {
        std::uint64_t with = 0;
        for (const auto& l : lg.lanes) with += l->lost_by_remote_data[d].load();
        if (with != 0) {
          reasons +=
              format(" [data %s%zu: %" PRIu64 "]", d + 1 == kRemoteDataSlots ? ">=" : "", d, with);
        }
      }
    }
    std::fprintf(stderr,
                 "tern-loadgen: %" PRIu64
                 " of %zu connections were lost during the run (%s; last reason: %s)\n",
                 dropped, n, reasons.c_str(),
                 tern::to_string(static_cast<tern::DisconnectReason>(reason)));
    status = kExitFailure;
  }
  if (late_dropped > 0) {
    std::fprintf(stderr, "tern-loadgen: %" PRIu64 " late clients lost their connection\n",
                 late_dropped);
    status = kExitFailure;
  }
  if (interrupted) {
    std::fprintf(stderr, "tern-loadgen: interrupted by signal %d; the figures are partial\n",
                 tern::app::stop_signal());
    status = kExitFailure;
  }
  return status;
}

}  // namespace tern::loadgen
