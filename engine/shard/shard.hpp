// tern::rt::ShardGroup: N shards on one UDP port (DESIGN §2, §4).
//
// Each shard is a thread with its own driver (SO_REUSEPORT: the kernel spreads remote 4-tuples
// over the shards' sockets), its own HostCore and its own preallocated I/O batches. Nothing on
// the poll path is shared; the only way in from another thread is post().
//
//   rt::ShardGroupOptions options;
//   options.open_driver = rt::open_driver;  // the driver factory (drivers/factory)
//   rt::ShardGroup group(options);
//   group.set_event_handler([](rt::Shard& s, Event& ev) {
//     if (ev.type == EventType::receive) s.send(ev.peer, ev.channel, ev.delivery, ev.packet);
//   });
//   if (!group.start(error)) ...;
//   group.post(1, [](rt::Shard& s) { ... runs on shard 1's thread ... });
//   group.stop(std::chrono::seconds(2));  // graceful disconnects, then the threads exit
//
// Shards talk to each other through bounded SPSC rings (one per ordered pair of shards) that
// carry ShardMessages: a descriptor plus a reference-counted Packet, so a payload sent to many
// peers on many shards is stored once. A sleeping shard is woken through an eventfd that its
// driver's wait() watches; a shard that is busy never takes a system call for it.
#pragma once

#include "core_io.hpp"
#include "driver.hpp"
#include "fast_clock.hpp"
#include "host_core.hpp"
#include "kcp/kcp_core.hpp"
#include "spsc_ring.hpp"

#include <tern/endpoint.hpp>
#include <tern/secure.hpp>
#include <tern/types.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace tern::rt {

enum class IdlePolicy : std::uint8_t {
  busy_poll,      // never sleep: lowest latency, one core burnt per shard
  wait_deadline,  // sleep in the driver until traffic or the core's next timer
};

struct ShardGroupOptions {
  Endpoint bind;  // port 0: shard 0 picks one and the others join it
  std::size_t shards = std::thread::hardware_concurrency();  // 0 is treated as 1
  // Each shard opens its driver on its own thread with open_driver(DriverSpec{driver, bind,
  // ...}, error): rt::open_driver, the factory in drivers/factory, for every kind, or a test's
  // own. Required: start() refuses without one. With DriverKind::dpdk, shard i opens queue
  // pair i of the port the process set up with drv::dpdk_init (before start(), with at least
  // `shards` queues); the shards share the configured IPv4 address and bind.port, which must
  // not be 0; share_port, SO_REUSEPORT and the socket buffer sizes do not apply.
  DriverKind driver = DriverKind::socket;
  DriverOpener open_driver = nullptr;
  proto::HostConfig host;  // per shard; random_seed is varied per shard
  IdlePolicy idle = IdlePolicy::wait_deadline;
  // With busy_poll: a shard holding no connection at all waits as wait_deadline does instead
  // of spinning, and spins again from the first datagram. Servers set it: nothing is lost
  // while no one is connected (a connect is seen at most one DPDK nap, 50 µs, later), and a
  // DPDK memif port whose peer process exits is then almost never inside a receive burst when
  // DPDK 22.11's memif unmaps the peer's rings under it, a PMD race that crashes the burst
  // (4 times in 250 client exits with the server spinning, none in 250 with it waiting).
  bool busy_poll_only_connected = false;
  bool pin = true;  // shard i runs on CPU i % ncpu
  // Servers share one port (SO_REUSEPORT steers each remote 4-tuple to one shard). A client
  // group sets this false: each shard then binds `bind` on its own (port 0: its own ephemeral
  // port), so the replies to a peer's datagrams come back to the shard that owns the peer.
  bool share_port = true;
  // Longest single sleep. post(), cross-shard messages and stop() wake a sleeping shard at
  // once; this only bounds how long a shard with no timers goes without looking around.
  std::chrono::microseconds max_wait{1'000'000};
  int socket_receive_buffer = 4 << 20;
  int socket_send_buffer = 4 << 20;
  // Messages each cross-shard ring holds before send_to_shard refuses (0 or more than the
  // ring's capacity: the capacity). For tests that need full rings with little traffic.
  std::size_t cross_ring_limit = 0;
  // The KCP personality on a second port (DESIGN §3.4; engine/protocol/kcp): each shard also
  // runs a KcpCore on kcp_bind (shared with SO_REUSEPORT like bind, so the kernel steers each
  // remote address and port, and so each (address, port, conv) session, to one shard; port 0:
  // shard 0 picks one and the others join it). Its sessions arrive through the same events as
  // ENet peers, with handles Shard::is_kcp tells apart. The KCP port is a kernel socket (the
  // socket driver) for socket and uring groups and a sim address for sim groups; DPDK groups
  // refuse it.
  bool kcp_listen = false;
  Endpoint kcp_bind;
  proto::kcp::KcpConfig kcp;
};

// Poll iterations by how long their work took (sleep excluded): bucket i counts iterations
// of at most 2^i µs, the last one everything longer.
inline constexpr std::size_t kLoopTimeBuckets = 16;
inline constexpr std::uint64_t loop_time_bucket_bound_us(std::size_t i) {
  return std::uint64_t{1} << i;
}

// A snapshot; the shard publishes its live values once per poll iteration.
struct ShardCounters {
  std::uint64_t datagrams_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t datagrams_out = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t messages_in = 0;
  std::uint64_t messages_out = 0;
  std::uint64_t commands_in = 0;  // protocol commands decoded (acks, messages, pings...)
  std::uint64_t acks_out = 0;     // acknowledgement commands sent (an ack range counts once)
  std::uint64_t connects = 0;
  std::uint64_t disconnects = 0;
  std::uint64_t peers = 0;  // connections the core holds, handshakes included
  std::uint64_t iterations = 0;
  std::uint64_t idle_waits = 0;
  std::uint64_t posted_run = 0;        // post()ed functions executed
  std::uint64_t drops = 0;             // the core's drop total, every reason
  std::uint64_t peer_timer_runs = 0;   // peers whose timer fired: the work idle peers cost
  std::uint64_t retransmits = 0;       // reliable commands sent again: loss, or an RTO too short
  std::uint64_t fast_retransmits = 0;  // commands found lost by later acks (fast_retransmit)
  // Retransmission timeouts put off while the shard read behind its input (acks may be waiting
  // unread: proto::HostCore::input_read_until).
  std::uint64_t timeouts_deferred = 0;
  // Congestion control holding a peer's bulk back: its pacer, or its window.
  std::uint64_t pacer_waits = 0;
  std::uint64_t cwnd_limited = 0;
  // The handshake under attack (proto::HostConfig::verify_before_peer; WIRE.md).
  std::uint64_t half_open = 0;             // half-open handshakes held now (gauge)
  std::uint64_t half_open_created = 0;     // CONNECTs from unknown sources given a half-open entry
  std::uint64_t half_open_evicted = 0;     // half-open entries pushed out by newer ones
  std::uint64_t cookies_sent = 0;          // VERIFY_CONNECTs sent to unverified sources
  std::uint64_t cookies_invalid = 0;       // acks of a VERIFY_CONNECT with the wrong cookie
  std::uint64_t cookies_expired = 0;       // datagrams for a handshake past its timeout
  std::uint64_t amplification_capped = 0;  // replies not sent: more than the unverified source sent
  std::uint64_t peers_promoted = 0;        // handshakes acknowledged: peers made
  std::uint64_t unverified_bytes_in = 0;   // bytes from sources not yet verified
  std::uint64_t unverified_bytes_out = 0;  // bytes sent to them
  std::uint64_t timeouts = 0;              // peers disconnected because they stopped answering
  // Handshake datagrams refused unanswered: over [connect_rate_per_*], or from a banned source.
  std::uint64_t connects_rate_limited = 0;
  std::uint64_t connects_banned = 0;
  // CONNECTs unanswered while the shard read far behind its input (HostCore::shed_connects).
  std::uint64_t connects_shed = 0;
  // Offline discovery (proto::HostConfig::discovery): pings received, answered, refused.
  std::uint64_t discovery_pings_in = 0;
  std::uint64_t discovery_pongs_out = 0;
  std::uint64_t discovery_refused = 0;
  // Secure sessions (proto::HostConfig::security): tokens taken and refused, datagrams sealed
  // and opened, and sealed datagrams refused (bad_seal or replayed).
  std::uint64_t tokens_accepted = 0;
  std::uint64_t tokens_refused = 0;
  std::uint64_t sealed_out = 0;
  std::uint64_t opened_in = 0;
  std::uint64_t seal_refused = 0;
  // host.intake_rate / intake_bandwidth: reliable messages left unacknowledged (resent later)
  // and unreliable ones dropped.
  std::uint64_t over_limit_refused = 0;
  std::uint64_t over_limit_dropped = 0;
  std::uint64_t tx_dropped = 0;         // refused by the driver
  std::uint64_t rx_kernel_dropped = 0;  // kernel sockets: lost to a full receive buffer
  std::uint64_t tx_backlog = 0;         // held by the driver for a full transmit queue (gauge)
  std::uint64_t tx_waits = 0;           // flushes put off because the driver had no transmit room
  std::uint64_t cross_sent = 0;         // messages this shard put on other shards' rings
  std::uint64_t cross_received = 0;     // messages taken off this shard's inbound rings
  std::uint64_t cross_dropped = 0;      // refused because the target's ring was full
  std::uint64_t wakeups_sent = 0;       // eventfd writes to wake a sleeping shard
  std::array<std::uint64_t, kLoopTimeBuckets> loop_time{};  // see kLoopTimeBuckets
  std::uint64_t loop_time_us = 0;                           // sum over all iterations
  // Iterations that found nothing to do (no frame, event, posted task or message) and their
  // time: loop_time_us - idle_poll_us is the time the shard spent working.
  std::uint64_t idle_polls = 0;
  std::uint64_t idle_poll_us = 0;
  // The KCP personality (ShardGroupOptions::kcp_listen); zero without it. The counters above
  // are the ENet core's only.
  std::uint64_t kcp_sessions = 0;  // gauge
  std::uint64_t kcp_datagrams_in = 0;
  std::uint64_t kcp_bytes_in = 0;
  std::uint64_t kcp_datagrams_out = 0;
  std::uint64_t kcp_bytes_out = 0;
  std::uint64_t kcp_messages_in = 0;
  std::uint64_t kcp_messages_out = 0;
  std::uint64_t kcp_connects = 0;
  std::uint64_t kcp_disconnects = 0;   // timeouts and the application's disconnects
  std::uint64_t kcp_timeouts = 0;      // dead links and idle timeouts
  std::uint64_t kcp_retransmits = 0;   // timeouts and fast resends
  std::uint64_t kcp_drops = 0;         // malformed or refused segments, every reason
  std::uint64_t kcp_refused = 0;       // of those: segments of sessions the application ended
  std::uint64_t kcp_intake_waits = 0;  // messages that waited for intake_rate/_bandwidth
  // The driver's device (DPDK ports): reported by the shard on the port's first queue.
  // total() sums the counts; its link is down if any shard's is, else up if any is.
  PortStats port;
};

// One message between shards. What tag, peer, data and channel mean is the application's
// business; without a message handler a shard sends `packet` to `peer` (a peer of the
// receiving shard) on `channel` with `delivery`.
struct ShardMessage {
  std::uint64_t tag = 0;
  PeerHandle peer;
  std::uint32_t data = 0;
  std::uint8_t channel = 0;
  Delivery delivery = Delivery::reliable;
  Packet packet;
};

class Shard;
// Events are handed over right after the receive burst that produced them, while the burst's
// frames are still valid: with host.lend_payloads, a receive event's `lent` bytes stay valid
// until the handler returns.
using ShardEventHandler = std::function<void(Shard&, Event&)>;
using ShardTask = std::function<void(Shard&)>;
using ShardMessageHandler = std::function<void(Shard&, ShardMessage&)>;
// Sees every received burst before the protocol does; keeps the frames to pass on at the front
// of the span (in order) and returns how many. What it removes is its own to count.
using ShardBatchFilter = std::function<std::size_t(Shard&, std::span<RxFrame>)>;
// The application's own timers: runs once per poll iteration, after the inbound rings are
// drained and before the flush, and returns when it next wants to run (Shard::now_us() time;
// UINT64_MAX: not until something else wakes the shard). A sleeping shard wakes by then.
// Events it causes (a released hold_intake, say) are delivered before the flush.
using ShardTickHandler = std::function<std::uint64_t(Shard&)>;

class Shard {
 public:
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  ~Shard();

  // Shard-thread only (inside the event handler, a posted task, a message or tick handler).
  //
  // The connection work an application does on this shard's protocol core; each is
  // proto::HostCore's function of the same name (engine/protocol/host_core.hpp), at now_us().
  //
  // KCP sessions (ShardGroupOptions::kcp_listen) take the same calls: their handles carry
  // kKcpPeer in the slot (is_kcp), and each call goes to the shard's KcpCore instead. KCP is
  // one reliable ordered stream: channel and delivery are ignored, every message is sent
  // reliably and in order. disconnect() forgets a KCP session at once (KCP has no goodbye)
  // and the handler still gets its disconnect event (reason local, the given data) at the
  // shard's next delivery, as for ENet peers; the core then refuses that session's segments
  // for a while (KcpConfig::refused_ms). hold_intake holds a KCP session through its receive
  // window (KcpCore::hold).
  static constexpr std::uint32_t kKcpPeer = 0x80000000u;
  static bool is_kcp(PeerHandle peer) { return peer.valid() && (peer.slot & kKcpPeer) != 0; }
  PeerHandle connect(const Endpoint& to, std::size_t channel_count, std::uint32_t data = 0) {
    return core_.connect(now_, to, channel_count, data);
  }
  // Client side of KCP: a session with `conv` to `to` on the shard's KCP port (invalid
  // without one). Its connect event comes with the peer's first segment.
  PeerHandle kcp_connect(const Endpoint& to, std::uint32_t conv);
  // connect() with a connect token (tern/secure.hpp): the connection is encrypted (WIRE.md,
  // "Secure sessions"); the salt is drawn here, at connection set-up.
  PeerHandle connect_secure(const Endpoint& to, std::size_t channel_count, std::uint32_t data,
                            const ConnectToken& token) {
    std::array<std::uint8_t, 16> salt{};
    proto::sec::random_bytes(salt.data(), salt.size());
    return core_.connect_secure(now_, to, channel_count, data, token.sealed, token.client_to_server,
                                token.server_to_client, salt);
  }
  // Secure sessions: whether a connection is encrypted; the user data of its client's token.
  bool peer_secure(PeerHandle peer) const { return core_.peer_secure(peer); }
  std::span<const std::uint8_t> peer_user_data(PeerHandle peer) const {
    return core_.peer_user_data(peer);
  }
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload) {
    if (is_kcp(peer)) return kcp_send(peer, delivery, payload.bytes());
    return core_.send(peer, channel, delivery, std::move(payload));
  }
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                  std::span<const std::byte> payload) {
    if (is_kcp(peer)) return kcp_send(peer, delivery, payload);
    return core_.send(peer, channel, delivery, payload);
  }
  // One payload to many peers of this shard, `skip` left out; the payload is referenced, not
  // copied (KCP sessions copy it into their segments). `deepest`, when given, is raised to the
  // largest queued_bytes() it sent to.
  std::size_t send_many(std::span<const PeerHandle> peers, std::uint8_t channel, Delivery delivery,
                        const Packet& payload, PeerHandle skip = {},
                        std::size_t* deepest = nullptr);
  void disconnect(PeerHandle peer, std::uint32_t data = 0);
  // Back-pressure: while held, the peer's new reliable messages are not delivered, and its own
  // window stops it: an ENet peer's are not acknowledged either, a KCP session's wait
  // acknowledged in the receive window it advertises shrinking. Released: delivered in order.
  void hold_intake(PeerHandle peer, bool held) {
    if (!is_kcp(peer)) return core_.hold_intake(peer, held);
    if (kcp_) kcp_->hold(kcp_inner(peer), held);
  }
  PeerState peer_state(PeerHandle peer) const;
  bool peer_stats(PeerHandle peer, PeerStats& out) const;
  // Offline discovery: what this shard's core answers discovery pings with (copied).
  void set_discovery_info(std::span<const std::byte> info) { core_.set_discovery_info(info); }
  // The host-level ban list: refuses handshakes from the address or prefix (Shard time). The
  // relay checks it for KCP sessions too, which have no handshake to refuse.
  bool ban(const Endpoint& address, std::uint64_t until_us, unsigned prefix_bits = 128) {
    return core_.ban(address, until_us, prefix_bits);
  }
  void unban(const Endpoint& address, unsigned prefix_bits = 128) {
    core_.unban(address, prefix_bits);
  }
  bool banned(const Endpoint& address) const { return core_.banned(address, now_); }
  std::vector<proto::HostCore::BanEntry> bans() const { return core_.bans(now_); }
  // Payload bytes queued to the peer, in flight or unacknowledged (0 for stale handles).
  std::size_t queued_bytes(PeerHandle peer) const;
  // The KCP core, for the runtime's own tests (null without kcp_listen).
  proto::kcp::KcpCore* kcp_core() { return kcp_.get(); }
  // Reliable commands this shard's core has sent again so far (live, unlike counters()).
  std::uint64_t retransmits() const { return core_.counters().retransmits; }
  // The whole core, for the runtime's own tests; applications use the functions above.
  proto::HostCore& core() { return core_; }

  std::uint64_t now_us() const;
  // Steady-clock nanoseconds (std::chrono::steady_clock) at which the handler started on the
  // current burst's events (the events of one received burst, up to 64 datagrams): the first
  // call reads the clock and the rest of the burst's events get the same value, so a handler
  // that times every message pays one clock read per burst, not one per message. The clock
  // is the shard's FastClock (the timestamp counter, anchored to steady_clock). Outside the event
  // handler it reads the clock each time.
  std::uint64_t delivery_time_ns();
  std::size_t index() const { return index_; }
  std::size_t shard_count() const { return group_shards_->size(); }
  // Queues a message for shard `target` (this shard included), delivered in order per sending
  // shard at the target's next iteration. False, with the message dropped and counted, when
  // the target's ring from this shard is full or `target` is out of range: the caller may
  // keep the packet (pass a copy) and retry on a later iteration.
  bool send_to_shard(std::size_t target, ShardMessage message);
  // The same, except that a refused message stays with the caller, packet and all.
  bool offer_to_shard(std::size_t target, ShardMessage& message);

 private:
  friend class ShardGroup;
  struct LiveCounters;

  // Descriptor form of ShardMessage: the packet travels as a bare reference.
  struct CrossMessage {
    std::uint64_t tag;
    PeerHandle peer;
    std::uint32_t data;
    std::uint8_t channel;
    Delivery delivery;
    detail::PacketBuffer* packet;
  };
  static constexpr std::size_t kCrossRingCapacity = 1024;
  using CrossRing = SpscRing<CrossMessage, kCrossRingCapacity>;

  Shard(std::size_t index, const ShardGroupOptions& options, const ShardEventHandler& handler,
        const ShardMessageHandler& message_handler, const ShardBatchFilter& batch_filter,
        const ShardTickHandler& tick_handler,
        const std::vector<std::unique_ptr<Shard>>& group_shards);

  // Thread body: opens the driver on this thread (io_uring requires it), reports the bound
  // endpoint through `ready`, then polls until stopped.
  void run(const Endpoint& bind, const std::function<void(const Endpoint*, std::string)>& ready);
  void run_with(Driver& driver);

  // DESIGN §2, one function per step, in order. Receiving and transmitting are the runtime's
  // CoreIo steps, which tern::Host runs too.
  void poll_once(Driver& driver);
  std::size_t receive(bool& delivered);
  bool deliver_events();  // true if any event was delivered
  void drain_posted();
  bool drain_cross();  // true when a ring may hold more than this iteration took
  void wake_touched();
  bool idle(Driver& driver, bool busy);  // true if it slept
  void publish_counters(const Driver& driver);

  void begin_graceful_stop();
  void track(const Event& ev);
  void track_kcp(const Event& ev);
  SendResult kcp_send(PeerHandle peer, Delivery delivery, std::span<const std::byte> payload);
  static PeerHandle kcp_inner(PeerHandle p) { return PeerHandle{p.slot & ~kKcpPeer, p.generation}; }
  bool open_kcp(std::string& error);
  void drain_kcp_on_stop();

  // Any thread.
  void post(ShardTask task);
  // After queueing work for this shard: counts it and wakes the shard if it sleeps.
  void announce_work();
  void wake();  // makes a sleeping shard's wait() return
  ShardCounters counters() const;

  const std::size_t index_;
  const ShardGroupOptions& options_;
  const ShardEventHandler& handler_;
  const ShardMessageHandler& message_handler_;
  const ShardBatchFilter& batch_filter_;
  const ShardTickHandler& tick_handler_;
  std::uint64_t tick_deadline_ = 0;  // what tick_handler_ last asked for
  std::size_t cross_ring_limit_;
  const std::vector<std::unique_ptr<Shard>>* group_shards_;
  proto::HostCore core_;
  // The receive and transmit steps over the shard's driver, with their batches; made once the
  // driver is open, so the poll path never allocates for them.
  std::unique_ptr<CoreIo> io_;
  // Every time the shard reads is this clock's: steady_clock's epoch at a third of the cost.
  base::FastClock clock_;
  std::uint64_t now_ = 0;
  std::uint64_t delivery_ns_ = 0;  // 0: not read yet in this delivery
  bool delivering_ = false;
  std::uint64_t resume_at_us_ = 0;
  std::uint64_t idle_polls_ = 0;
  std::uint64_t idle_poll_us_ = 0;  // the last iteration's end, when it did not sleep
  std::uint64_t iterations_ = 0;
  // Whether the core is shedding CONNECTs (HostCore::shed_connects): after this many datagrams
  // read without the input running dry (CoreIo::rx_behind).
  static constexpr std::size_t kShedBehindDatagrams = 16384;
  bool shedding_connects_ = false;
  std::uint64_t idle_waits_ = 0;
  std::uint64_t posted_run_ = 0;
  std::uint64_t cross_sent_ = 0;
  std::uint64_t cross_received_ = 0;
  std::uint64_t cross_dropped_ = 0;
  std::array<std::uint64_t, kLoopTimeBuckets> loop_time_{};
  std::uint64_t loop_time_us_ = 0;

  // inbound_[i]: messages from shard i (this shard is its only consumer, i its only producer).
  std::vector<std::unique_ptr<CrossRing>> inbound_;
  std::vector<CrossMessage> cross_batch_;  // pop buffer, sized once
  // Shards this one sent to during the current iteration; each is woken (if asleep) once, at
  // the end of the iteration, rather than once per message.
  std::vector<std::uint8_t> touched_;
  std::vector<std::uint32_t> touched_list_;

  // Wake-up: a producer queues work, increments `work_announced_`, then looks at
  // `sleeping_`; the shard raises `sleeping_`, then compares `work_announced_` with what it
  // saw last. All four accesses are seq_cst (no fences, which ThreadSanitizer cannot check),
  // so either the shard sees the work and does not sleep, or the producer sees it asleep and
  // writes the eventfd, at most once per sleep (`wake_sent_`).
  std::atomic<std::uint64_t> work_announced_{0};
  std::uint64_t work_seen_ = 0;  // shard thread only
  int wake_fd_ = -1;
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> wake_sent_{false};
  std::atomic<std::uint64_t> wakeups_sent_{0};

  // Connected peers by slot, so a graceful stop can disconnect each one; sized to the peer
  // limit up front so tracking never allocates on the poll path.
  std::vector<PeerHandle> peers_by_slot_;
  bool stopping_ = false;
  std::uint64_t stop_deadline_ = 0;

  // Requested by the group; read once per iteration.
  std::atomic<bool> stop_requested_{false};
  std::atomic<std::int64_t> graceful_us_{0};

  // post(): producers append under the mutex and raise `posted_pending_`; the shard looks at
  // the flag (one relaxed-cost acquire load) every iteration and takes the lock only when it is
  // set, swapping the whole vector out so tasks run without the lock held.
  std::atomic<bool> posted_pending_{false};
  std::mutex posted_mutex_;
  std::vector<ShardTask> posted_;
  std::vector<ShardTask> draining_;  // shard-thread only; keeps its capacity between swaps

  // The KCP personality (kcp_listen): its core, driver and batches, made on the shard's thread
  // before polling. Its socket and the wake eventfd are watched through one epoll descriptor
  // handed to the ENet driver as its wake fd, so one wait() covers both ports.
  Endpoint kcp_bind_;  // set by the group before the thread starts
  std::unique_ptr<proto::kcp::KcpCore> kcp_;
  std::unique_ptr<Driver> kcp_driver_;
  std::unique_ptr<KcpIo> kcp_io_;
  int kcp_epoll_fd_ = -1;
  // Sessions by core slot (a graceful stop walks them) and the disconnect events disconnect()
  // owes the handler; both reserved up front.
  std::vector<PeerHandle> kcp_by_slot_;
  std::vector<Event> kcp_closed_;
  Endpoint kcp_local_;  // written before `ready`, read-only afterwards

  std::unique_ptr<LiveCounters> live_;
  std::string driver_name_;  // written before `ready`, read-only afterwards
  Endpoint local_;           // likewise
};

class ShardGroup {
 public:
  explicit ShardGroup(ShardGroupOptions options);
  ~ShardGroup();  // stop(0)
  ShardGroup(const ShardGroup&) = delete;
  ShardGroup& operator=(const ShardGroup&) = delete;

  // Before start(). Runs on the shard threads; without one, events are discarded.
  void set_event_handler(ShardEventHandler handler);
  // Before start(). Runs on the receiving shard's thread for every ShardMessage.
  void set_message_handler(ShardMessageHandler handler);
  // Before start(). Runs on the shard's thread for every received burst (a payload filter).
  void set_batch_filter(ShardBatchFilter filter);
  // Before start(). Runs on every shard's thread once per iteration (ShardTickHandler).
  void set_tick_handler(ShardTickHandler tick);
  // Opens every shard's driver on the shard's own thread and starts polling. Returns false
  // with a one-line reason (and no thread left running) if any driver fails to open.
  // A group starts once.
  bool start(std::string& error);

  // Thread-safe. The task runs on shard `shard`'s thread at its next iteration (within about
  // options.max_wait when the shard is sleeping). False if the index is out of range or the
  // group is not running. Not to be called concurrently with start(); a task that races
  // with stop() may be discarded unrun.
  bool post(std::size_t shard, ShardTask task);

  // Every shard disconnects its peers gracefully and keeps polling until they are gone or
  // `graceful` has passed; then the threads exit and are joined. Returns true when every
  // peer went away before the timeout. Idempotent.
  bool stop(std::chrono::milliseconds graceful);
  void join();

  std::size_t size() const { return shards_.size(); }
  bool running() const { return running_.load(std::memory_order_acquire); }
  Endpoint local_endpoint() const { return local_; }  // shard 0's
  Endpoint local_endpoint(std::size_t shard) const;
  // The KCP port (kcp_listen), shard 0's or shard `shard`'s; empty without one.
  Endpoint kcp_endpoint(std::size_t shard = 0) const;
  ShardCounters counters(std::size_t shard) const;
  ShardCounters total() const;
  std::thread::id thread_id(std::size_t shard) const;
  // "socket", "uring" or "dpdk"; empty before start.
  std::string driver_name(std::size_t shard) const;

 private:
  ShardGroupOptions options_;
  ShardEventHandler handler_;
  ShardMessageHandler message_handler_;
  ShardBatchFilter batch_filter_;
  ShardTickHandler tick_handler_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<std::thread> threads_;
  Endpoint local_;
  std::atomic<bool> running_{false};  // post() may read it from any thread
  bool all_gone_ = true;
};

}  // namespace tern::rt
