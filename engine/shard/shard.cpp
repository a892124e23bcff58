// The shard poll loop and the group that starts, feeds and stops the shards.
#include "shard.hpp"
#include "mix.hpp"

#include "driver.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <utility>

namespace tern::rt {

namespace {

constexpr std::size_t kBatch = CoreIo::kBatch;
constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

using base::mix64;

// Shards started together must not hand out the same connect IDs.
proto::HostConfig shard_config(const ShardGroupOptions& o, std::size_t index) {
  proto::HostConfig c = o.host;
  const std::uint64_t seed = mix64(c.random_seed ^ mix64(index + 1) ^ base::FastClock::steady_ns());
  c.random_seed = seed != 0 ? seed : 0x7465726e;
  return c;
}

void pin_to_cpu(std::size_t index) {
  const unsigned ncpu = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<int>(index % ncpu), &set);
  // Failure (a restricted cpuset, say) only costs locality; the shard still runs.
  if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set) != 0) {
    std::fprintf(stderr, "tern: shard %zu: cannot pin to CPU %zu; running unpinned\n", index,
                 index % ncpu);
  }
}

}  // namespace

// Mirrors of the shard's counters for other threads. Written only by the shard, once per
// iteration, so relaxed stores suffice: a reader wants recent values, not a consistent cut.
struct Shard::LiveCounters {
  std::atomic<std::uint64_t> datagrams_in{0};
  std::atomic<std::uint64_t> bytes_in{0};
  std::atomic<std::uint64_t> datagrams_out{0};
  std::atomic<std::uint64_t> bytes_out{0};
  std::atomic<std::uint64_t> messages_in{0};
  std::atomic<std::uint64_t> messages_out{0};
  std::atomic<std::uint64_t> commands_in{0};
  std::atomic<std::uint64_t> acks_out{0};
  std::atomic<std::uint64_t> connects{0};
  std::atomic<std::uint64_t> disconnects{0};
  std::atomic<std::uint64_t> peers{0};
  std::atomic<std::uint64_t> iterations{0};
  std::atomic<std::uint64_t> idle_waits{0};
  std::atomic<std::uint64_t> posted_run{0};
  std::atomic<std::uint64_t> drops{0};
  std::atomic<std::uint64_t> peer_timer_runs{0};
  std::atomic<std::uint64_t> retransmits{0};
  std::atomic<std::uint64_t> fast_retransmits{0};
  std::atomic<std::uint64_t> timeouts_deferred{0};
  std::atomic<std::uint64_t> pacer_waits{0};
  std::atomic<std::uint64_t> cwnd_limited{0};
  std::atomic<std::uint64_t> half_open{0};
  std::atomic<std::uint64_t> half_open_created{0};
  std::atomic<std::uint64_t> half_open_evicted{0};
  std::atomic<std::uint64_t> cookies_sent{0};
  std::atomic<std::uint64_t> connects_rate_limited{0};
  std::atomic<std::uint64_t> connects_shed{0};
  std::atomic<std::uint64_t> connects_banned{0};
  std::atomic<std::uint64_t> cookies_invalid{0};
  std::atomic<std::uint64_t> cookies_expired{0};
  std::atomic<std::uint64_t> amplification_capped{0};
  std::atomic<std::uint64_t> peers_promoted{0};
  std::atomic<std::uint64_t> unverified_bytes_in{0};
  std::atomic<std::uint64_t> unverified_bytes_out{0};
  std::atomic<std::uint64_t> timeouts{0};
  std::atomic<std::uint64_t> discovery_pings_in{0};
  std::atomic<std::uint64_t> discovery_pongs_out{0};
  std::atomic<std::uint64_t> discovery_refused{0};
  std::atomic<std::uint64_t> tokens_accepted{0};
  std::atomic<std::uint64_t> tokens_refused{0};
  std::atomic<std::uint64_t> sealed_out{0};
  std::atomic<std::uint64_t> opened_in{0};
  std::atomic<std::uint64_t> seal_refused{0};
  std::atomic<std::uint64_t> over_limit_refused{0};
  std::atomic<std::uint64_t> over_limit_dropped{0};
  std::atomic<std::uint64_t> tx_dropped{0};
  std::atomic<std::uint64_t> rx_kernel_dropped{0};
  std::atomic<std::uint64_t> tx_waits{0};
  std::atomic<std::uint64_t> cross_sent{0};
  std::atomic<std::uint64_t> cross_received{0};
  std::atomic<std::uint64_t> cross_dropped{0};
  std::array<std::atomic<std::uint64_t>, kLoopTimeBuckets> loop_time{};
  std::atomic<std::uint64_t> loop_time_us{0};
  std::atomic<std::uint64_t> idle_polls{0};
  std::atomic<std::uint64_t> idle_poll_us{0};
  std::atomic<std::uint64_t> tx_backlog{0};
  std::atomic<std::int32_t> link{-1};
  std::atomic<std::uint32_t> link_speed_mbps{0};
  std::atomic<std::uint64_t> port_rx_packets{0};
  std::atomic<std::uint64_t> port_tx_packets{0};
  std::atomic<std::uint64_t> port_rx_missed{0};
  std::atomic<std::uint64_t> port_rx_no_mbuf{0};
  std::atomic<std::uint64_t> port_rx_errors{0};
  std::atomic<std::uint64_t> port_tx_errors{0};
  std::atomic<std::uint64_t> kcp_sessions{0};
  std::atomic<std::uint64_t> kcp_datagrams_in{0};
  std::atomic<std::uint64_t> kcp_bytes_in{0};
  std::atomic<std::uint64_t> kcp_datagrams_out{0};
  std::atomic<std::uint64_t> kcp_bytes_out{0};
  std::atomic<std::uint64_t> kcp_messages_in{0};
  std::atomic<std::uint64_t> kcp_messages_out{0};
  std::atomic<std::uint64_t> kcp_connects{0};
  std::atomic<std::uint64_t> kcp_disconnects{0};
  std::atomic<std::uint64_t> kcp_timeouts{0};
  std::atomic<std::uint64_t> kcp_retransmits{0};
  std::atomic<std::uint64_t> kcp_drops{0};
  std::atomic<std::uint64_t> kcp_refused{0};
  std::atomic<std::uint64_t> kcp_intake_waits{0};
};

// ---- Shard ---------------------------------------------------------------------------------

Shard::Shard(std::size_t index, const ShardGroupOptions& options, const ShardEventHandler& handler,
             const ShardMessageHandler& message_handler, const ShardBatchFilter& batch_filter,
             const ShardTickHandler& tick_handler,
             const std::vector<std::unique_ptr<Shard>>& group_shards)
    : index_(index),
      options_(options),
      handler_(handler),
      message_handler_(message_handler),
      batch_filter_(batch_filter),
      tick_handler_(tick_handler),
      cross_ring_limit_(options.cross_ring_limit == 0
                            ? CrossRing::capacity()
                            : std::min(options.cross_ring_limit, CrossRing::capacity())),
      group_shards_(&group_shards),
      core_(shard_config(options, index)),
      cross_batch_(kBatch),
      touched_(options.shards),
      peers_by_slot_(options.host.peer_limit),
      live_(std::make_unique<LiveCounters>()) {
  inbound_.reserve(options.shards);
  for (std::size_t i = 0; i < options.shards; ++i)
    inbound_.push_back(std::make_unique<CrossRing>());
  touched_list_.reserve(options.shards);
  if (options.kcp_listen) {
    kcp_bind_ = options.kcp_bind;
    kcp_by_slot_.resize(options.kcp.session_limit);
    kcp_closed_.reserve(std::min<std::size_t>(options.kcp.session_limit, 4096));
  }
  // Connect tokens expire on wall time (secure sessions); the core keeps the offset.
  core_.set_unix_time(clock_.now_us(), static_cast<std::uint64_t>(
                                           std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count()));
  // Without an eventfd (fd exhaustion) the shard still works: it just sleeps until traffic,
  // a timer or max_wait instead of being woken early.
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Shard::~Shard() {
  // Messages nobody consumed still hold packet references.
  for (auto& ring : inbound_) {
    CrossMessage m;
    while (ring->try_pop(m)) Packet::from_raw(m.packet).reset();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (kcp_epoll_fd_ >= 0) ::close(kcp_epoll_fd_);
}

std::uint64_t Shard::now_us() const { return now_; }

std::uint64_t Shard::delivery_time_ns() {
  if (!delivering_) return clock_.now_ns();
  if (delivery_ns_ == 0) delivery_ns_ = clock_.now_ns();
  return delivery_ns_;
}

void Shard::run(const Endpoint& bind,
                const std::function<void(const Endpoint*, std::string)>& ready) {
  if (options_.pin) pin_to_cpu(index_);
  if (options_.open_driver == nullptr) {
    return ready(nullptr,
                 "no driver opener (ShardGroupOptions::open_driver; drivers/factory "
                 "gives rt::open_driver)");
  }
  DriverSpec spec;
  spec.kind = options_.driver;
  spec.bind = bind;
  spec.reuse_port = options_.share_port;
  spec.receive_buffer = options_.socket_receive_buffer;
  spec.send_buffer = options_.socket_send_buffer;
  spec.burst = kBatch;
  spec.queue = static_cast<unsigned>(index_);
  std::string error;
  // Opened on this thread: io_uring rings and DPDK queues belong to the thread that opens them.
  std::unique_ptr<Driver> driver = options_.open_driver(spec, error);
  if (driver == nullptr) {
    if (error.empty()) error = "cannot open the driver on " + bind.to_string();
    return ready(nullptr, std::move(error));
  }
  driver_name_ = driver->name();
  io_ = std::make_unique<CoreIo>(core_, *driver);
  // The poll loop calls rx_burst or wait() right after every transmit step.
  driver->set_tx_deferred(true);
  if (options_.kcp_listen && !open_kcp(error)) return ready(nullptr, std::move(error));
  const Endpoint local = local_ = driver->local_endpoint();
  ready(&local, {});
  run_with(*driver);
  io_.reset();  // it refers to the driver, which closes here
  kcp_io_.reset();
  kcp_driver_.reset();
}

bool Shard::open_kcp(std::string& error) {
  if (options_.driver == DriverKind::dpdk) {
    error = "the KCP port needs kernel sockets: not available with the dpdk driver";
    return false;
  }
  proto::kcp::KcpConfig config = options_.kcp;
  config.random_seed = mix64(config.random_seed ^ mix64(index_ + 0x6b63));
  kcp_ = std::make_unique<proto::kcp::KcpCore>(config);
  DriverSpec spec;
  spec.kind = options_.driver == DriverKind::sim ? DriverKind::sim : DriverKind::socket;
  spec.bind = kcp_bind_;
  spec.reuse_port = options_.share_port;
  spec.receive_buffer = options_.socket_receive_buffer;
  spec.send_buffer = options_.socket_send_buffer;
  spec.burst = kBatch;
  spec.queue = static_cast<unsigned>(index_);
  kcp_driver_ = options_.open_driver(spec, error);
  if (kcp_driver_ == nullptr) {
    if (error.empty()) error = "cannot open the KCP port on " + kcp_bind_.to_string();
    return false;
  }
  kcp_io_ = std::make_unique<KcpIo>(*kcp_, *kcp_driver_);
  kcp_local_ = kcp_driver_->local_endpoint();
  // One wait() for both ports: the ENet driver watches an epoll descriptor holding the KCP
  // socket and the wake eventfd (and the shard empties the eventfd itself after a sleep).
  const int ready_fd = kcp_driver_->readiness_fd();
  if (ready_fd >= 0) {
    kcp_epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (kcp_epoll_fd_ < 0) {
      error = "cannot create an epoll descriptor for the KCP port";
      return false;
    }
    epoll_event e{};
    e.events = EPOLLIN;
    e.data.fd = ready_fd;
    ::epoll_ctl(kcp_epoll_fd_, EPOLL_CTL_ADD, ready_fd, &e);
    if (wake_fd_ >= 0) {
      e.data.fd = wake_fd_;
      ::epoll_ctl(kcp_epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &e);
    }
  }
  return true;
}

void Shard::run_with(Driver& driver) {
  driver.set_wake_fd(kcp_epoll_fd_ >= 0 ? kcp_epoll_fd_ : wake_fd_);
  for (;;) {
    poll_once(driver);
    if (!stopping_) {
      if (!stop_requested_.load(std::memory_order_acquire)) continue;
      begin_graceful_stop();
    }
    if (kcp_) drain_kcp_on_stop();
    const bool kcp_gone = !kcp_ || kcp_->session_count() == 0;
    if ((core_.peer_count() == 0 && kcp_gone) || now_ >= stop_deadline_) break;
  }
  // The disconnect events of the KCP sessions let go in the last pass.
  if (kcp_) (void)deliver_events();
  // What the last iteration queued (the final acks of the disconnect handshakes) still goes
  // out; after this the socket closes.
  now_ = clock_.now_us();
  io_->transmit(now_);
  if (kcp_io_) kcp_io_->transmit(now_);
  driver.refresh_stats();
  publish_counters(driver);
}

// DESIGN §2 steps 1-11 with the protocol work (4-5, 8-9) inside the core. Events go to the
// application before posted work runs and before the flush, so replies the handler queues
// leave in the same tx burst as the acks of the datagrams that caused them.
void Shard::poll_once(Driver& driver) {
  // A busy-polling shard goes round millions of times a second and each clock read costs
  // ~9 ns (FastClock; ~21 ns through clock_gettime), so the clock is read where time can have
  // moved: an iteration that did not sleep starts when the previous one ended, and one in
  // which no callback ran keeps its start time.
  now_ = resume_at_us_ != 0 ? resume_at_us_ : clock_.now_us();
  const std::uint64_t started = now_;
  const std::uint64_t work_before = posted_run_ + cross_received_;
  driver.set_time(now_);
  bool delivered = false;
  const bool received = receive(delivered) != 0;  // 1, 4-6: rx_burst → on_datagram → callback
  // Only a receive that may have left datagrams behind, or found them dense, keeps the shard
  // awake: after the one or two an idle wake-up finds, the sleep's own readiness check is the
  // next look at the socket.
  bool busy = io_->rx_more() || (kcp_io_ && kcp_io_->rx_more());
  // Far behind the input (kShedBehindDatagrams read without the input running dry): new
  // CONNECTs go unanswered until the shard catches up. Under a connect flood the answers are
  // most of the work; without them the backlog drains, and a handshake answered afterwards is
  // acknowledged before newer CONNECTs push it out of the half-open table. A burst of genuine
  // connects, a few thousand, never reaches the limit.
  if ((io_->rx_behind() >= kShedBehindDatagrams) != shedding_connects_) {
    shedding_connects_ = !shedding_connects_;
    core_.shed_connects(shedding_connects_);
  }
  delivered = deliver_events() || delivered;  // events of timers and sends outside a burst
  drain_posted();                             // 7: work from other threads
  busy = drain_cross() || busy;               //    and from other shards
  if (tick_handler_) {                        // 8: the application's timers
    tick_deadline_ = tick_handler_(*this);
    delivered = deliver_events() || delivered;
  }
  if (busy || received || delivered || posted_run_ + cross_received_ != work_before)
    now_ = clock_.now_us();  // the callbacks may have taken a while
  driver.set_time(now_);
  io_->transmit(now_);  // 8-10: timers, datagrams, tx_burst
  if (kcp_io_) {
    kcp_driver_->set_time(now_);
    kcp_io_->transmit(now_);
  }
  wake_touched();  // shards we sent to this iteration
  ++iterations_;
  const std::uint64_t ended = clock_.now_us();
  const std::uint64_t took = ended - started;
  const std::size_t bucket =
      took <= 1 ? 0 : std::min<std::size_t>(std::bit_width(took - 1), kLoopTimeBuckets - 1);
  ++loop_time_[bucket];
  loop_time_us_ += took;
  if (!busy && !received && !delivered && posted_run_ + cross_received_ == work_before) {
    // Found nothing to do: what a busy-polling shard spends waiting, not working.
    ++idle_polls_;
    idle_poll_us_ += took;
  }
  // Observers see the counters at most 16 iterations late, and always before a sleep.
  if ((iterations_ & 15) == 0) publish_counters(driver);
  const bool slept = idle(driver, busy);  // 11: busy-poll or sleep to the next deadline
  resume_at_us_ = slept ? 0 : ended;
}

std::size_t Shard::receive(bool& delivered) {
  std::size_t kcp_frames = 0;
  if (kcp_io_) {
    kcp_driver_->set_time(now_);
    kcp_frames = kcp_io_->receive(
        now_,
        [this](std::span<RxFrame> frames) {
          return batch_filter_ ? batch_filter_(*this, frames) : frames.size();
        },
        [this, &delivered] { delivered = deliver_events() || delivered; });
  }
  return kcp_frames +
         io_->receive(
             now_,
             [this](std::span<RxFrame> frames) {
               return batch_filter_ ? batch_filter_(*this, frames) : frames.size();
             },
             // The handler takes each burst's messages before the next burst arrives: the buffers
             // the core just filled are still in cache, and the pool hands the same ones out again
             // for the next burst instead of cycling through eight bursts' worth.
             [this, &delivered] { delivered = deliver_events() || delivered; });
}

bool Shard::deliver_events() {
  Event ev;
  bool any = false;
  delivering_ = true;
  delivery_ns_ = 0;
  while (core_.poll_event(ev)) {
    any = true;
    track(ev);
    // A peer whose handshake completes while we are shutting down is turned away at once.
    if (stopping_ && ev.type == EventType::connect) core_.disconnect(ev.peer, 0);
    if (handler_) handler_(*this, ev);
  }
  if (kcp_) {
    // Handlers may disconnect KCP sessions while these run, which appends to kcp_closed_.
    for (std::size_t i = 0; i < kcp_closed_.size(); ++i) {
      any = true;
      Event closed = std::move(kcp_closed_[i]);
      if (handler_) handler_(*this, closed);
    }
    kcp_closed_.clear();
    while (kcp_->poll_event(ev)) {
      any = true;
      ev.peer.slot |= kKcpPeer;
      track_kcp(ev);
      if (stopping_ && ev.type == EventType::connect) disconnect(ev.peer, 0);
      if (handler_) handler_(*this, ev);
    }
  }
  delivering_ = false;
  return any;
}

void Shard::track_kcp(const Event& ev) {
  if (ev.type != EventType::connect && ev.type != EventType::disconnect) return;
  const std::size_t slot = ev.peer.slot & ~kKcpPeer;
  if (slot >= kcp_by_slot_.size()) kcp_by_slot_.resize(slot + 1);
  if (ev.type == EventType::connect) {
    kcp_by_slot_[slot] = ev.peer;
  } else if (kcp_by_slot_[slot] == ev.peer) {
    kcp_by_slot_[slot] = PeerHandle{};
  }
}

PeerHandle Shard::kcp_connect(const Endpoint& to, std::uint32_t conv) {
  if (!kcp_) return {};
  PeerHandle h = kcp_->connect(now_, to, conv);
  if (h.valid()) h.slot |= kKcpPeer;
  return h;
}

// KCP sends everything reliably; what the caller meant as unreliable is refused past half of
// KcpConfig::max_queued_bytes, as the ENet core refuses it past half of max_queued, so a
// backlog sheds those first.
SendResult Shard::kcp_send(PeerHandle peer, Delivery delivery, std::span<const std::byte> payload) {
  if (!kcp_) return SendResult::not_connected;
  const std::uint64_t cap = kcp_->config().max_queued_bytes;
  if (cap != 0 && !is_reliable(delivery) && queued_bytes(peer) + payload.size() > cap / 2)
    return SendResult::queue_full;
  return kcp_->send(kcp_inner(peer), payload);
}

std::size_t Shard::send_many(std::span<const PeerHandle> peers, std::uint8_t channel,
                             Delivery delivery, const Packet& payload, PeerHandle skip,
                             std::size_t* deepest) {
  if (!kcp_) return core_.send_many(peers, channel, delivery, payload, skip, deepest);
  // The ENet core skips handles that are not its own (a KCP handle's slot is past its
  // table), so it takes the whole list and the KCP sessions are served after it.
  std::size_t sent = core_.send_many(peers, channel, delivery, payload, skip, deepest);
  for (const PeerHandle& p : peers) {
    if (!is_kcp(p) || p == skip) continue;
    if (kcp_send(p, delivery, payload.bytes()) != SendResult::ok) continue;
    ++sent;
    if (deepest != nullptr) *deepest = std::max(*deepest, queued_bytes(p));
  }
  return sent;
}

void Shard::disconnect(PeerHandle peer, std::uint32_t data) {
  if (!is_kcp(peer)) return core_.disconnect(peer, data);
  if (!kcp_) return;
  const std::optional<Endpoint> address = kcp_->session_address(kcp_inner(peer));
  if (!address) return;
  kcp_->disconnect(kcp_inner(peer));
  Event ev;
  ev.type = EventType::disconnect;
  ev.peer = peer;
  ev.address = *address;
  ev.reason = DisconnectReason::local;
  ev.data = data;
  track_kcp(ev);
  // Handed over by the next deliver_events(), not from inside this call: the caller may be
  // walking its own lists. idle() does not sleep on one that is owed.
  kcp_closed_.push_back(std::move(ev));
}

PeerState Shard::peer_state(PeerHandle peer) const {
  if (!is_kcp(peer)) return core_.peer_state(peer);
  return kcp_ && kcp_->session_address(kcp_inner(peer)) ? PeerState::connected
                                                        : PeerState::disconnected;
}

bool Shard::peer_stats(PeerHandle peer, PeerStats& out) const {
  if (!is_kcp(peer)) return core_.peer_stats(peer, out);
  proto::kcp::KcpSessionStats k;
  if (!kcp_ || !kcp_->session_stats(kcp_inner(peer), k)) return false;
  out = PeerStats{};
  out.rtt_ms = k.srtt_ms;
  out.mtu = kcp_->config().mtu;
  out.window_size = k.remote_wnd;
  out.channel_count = 1;
  out.queued_bytes = k.queued_bytes;  // queued or unacknowledged
  return true;
}

std::size_t Shard::queued_bytes(PeerHandle peer) const {
  if (!is_kcp(peer)) return core_.queued_bytes(peer);
  proto::kcp::KcpSessionStats k;
  if (!kcp_ || !kcp_->session_stats(kcp_inner(peer), k)) return 0;
  return static_cast<std::size_t>(k.queued_bytes);
}

// KCP has no goodbye: a session is let go once what was queued to it is acknowledged, so a
// drain delivers the room's last messages to KCP members as it does to ENet ones.
void Shard::drain_kcp_on_stop() {
  for (const PeerHandle p : kcp_by_slot_) {
    if (!p.valid()) continue;
    proto::kcp::KcpSessionStats k;
    if (!kcp_->session_stats(kcp_inner(p), k) || k.in_flight + k.queued == 0) disconnect(p, 0);
  }
}

void Shard::track(const Event& ev) {
  if (ev.type != EventType::connect && ev.type != EventType::disconnect) return;
  const std::size_t slot = ev.peer.slot;
  if (slot >= peers_by_slot_.size()) {
    // Only if the core hands out slots beyond its peer limit; connects are rare enough.
    peers_by_slot_.resize(slot + 1);
  }
  if (ev.type == EventType::connect) {
    peers_by_slot_[slot] = ev.peer;
  } else if (peers_by_slot_[slot] == ev.peer) {
    peers_by_slot_[slot] = PeerHandle{};
  }
}

void Shard::drain_posted() {
  if (!posted_pending_.load(std::memory_order_acquire)) return;
  {
    std::lock_guard lock(posted_mutex_);
    draining_.swap(posted_);
    posted_pending_.store(false, std::memory_order_relaxed);
  }
  for (ShardTask& task : draining_) {
    task(*this);
    ++posted_run_;
  }
  // clear() keeps the capacity, so the next swap hands the producers a vector that already
  // has room and post() rarely allocates either.
  draining_.clear();
}

bool Shard::send_to_shard(std::size_t target, ShardMessage message) {
  return offer_to_shard(target, message);
}

bool Shard::offer_to_shard(std::size_t target, ShardMessage& message) {
  if (target >= group_shards_->size()) {
    ++cross_dropped_;
    return false;
  }
  Shard& to = *(*group_shards_)[target];
  const CrossMessage m{message.tag,     message.peer,     message.data,
                       message.channel, message.delivery, std::move(message.packet).into_raw()};
  CrossRing& ring = *to.inbound_[index_];
  if ((cross_ring_limit_ < CrossRing::capacity() && ring.size_approx() >= cross_ring_limit_) ||
      !ring.try_push(m)) {
    message.packet = Packet::from_raw(m.packet);  // still the caller's
    ++cross_dropped_;
    return false;
  }
  ++cross_sent_;
  if (touched_[target] == 0) {
    touched_[target] = 1;
    touched_list_.push_back(static_cast<std::uint32_t>(target));
  }
  return true;
}

bool Shard::drain_cross() {
  bool more = false;
  for (auto& ring : inbound_) {
    // One batch per ring per iteration: a chatty neighbour cannot starve the network side.
    // A full batch may have left more behind, so the shard must not sleep on it.
    const std::size_t n = ring->pop_batch(std::span<CrossMessage>(cross_batch_));
    more = more || n == cross_batch_.size();
    for (std::size_t i = 0; i < n; ++i) {
      const CrossMessage& c = cross_batch_[i];
      ShardMessage m{c.tag, c.peer, c.data, c.channel, c.delivery, Packet::from_raw(c.packet)};
      ++cross_received_;
      if (message_handler_) {
        message_handler_(*this, m);
      } else if (m.peer.valid()) {
        core_.send(m.peer, m.channel, m.delivery, std::move(m.packet));
      }
    }
  }
  return more;
}

void Shard::wake_touched() {
  if (touched_list_.empty()) return;
  for (const std::uint32_t t : touched_list_) {
    touched_[t] = 0;
    if (t != index_) (*group_shards_)[t]->announce_work();
  }
  touched_list_.clear();
}

void Shard::wake() {
  if (wake_fd_ < 0 || !sleeping_.load(std::memory_order_seq_cst)) return;
  if (wake_sent_.exchange(true, std::memory_order_acq_rel)) return;
  const std::uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the shard is being woken anyway.
  (void)!::write(wake_fd_, &one, sizeof one);
  wakeups_sent_.fetch_add(1, std::memory_order_relaxed);
}

bool Shard::idle(Driver& driver, bool busy) {
  if (options_.idle == IdlePolicy::busy_poll &&
      (!options_.busy_poll_only_connected || core_.peer_count() != 0 ||
       (kcp_ && kcp_->session_count() != 0))) {
    return false;
  }
  // More work is likely right behind a full burst or a full ring batch: go round again.
  if (busy) return false;
  if (posted_pending_.load(std::memory_order_relaxed)) return false;
  if (!kcp_closed_.empty()) return false;
  if (stop_requested_.load(std::memory_order_relaxed) && !stopping_) return false;
  const std::uint64_t now = clock_.now_us();
  std::uint64_t deadline =
      std::min(core_.next_deadline_us(), tick_handler_ ? tick_deadline_ : kNever);
  if (kcp_) deadline = std::min(deadline, kcp_->next_deadline_us());
  if (deadline <= now) return false;
  const auto cap = static_cast<std::uint64_t>(std::max<std::int64_t>(options_.max_wait.count(), 0));
  const std::uint64_t wait = deadline == kNever ? cap : std::min(deadline - now, cap);
  if (wait == 0) return false;
  // Announce the sleep, then check whether anything was handed to us since we last looked
  // (see announce_work). Both are seq_cst: either this load sees a producer's increment, or
  // that producer's later load of `sleeping_` sees our store and it wakes us.
  sleeping_.store(true, std::memory_order_seq_cst);
  const std::uint64_t announced = work_announced_.load(std::memory_order_seq_cst);
  const bool work_waiting = announced != work_seen_;
  work_seen_ = announced;
  if (!work_waiting) {
    // Published before the sleep, so an observer can tell the shard is (about to be) asleep.
    ++idle_waits_;
    publish_counters(driver);
    driver.wait(wait);
    if (kcp_epoll_fd_ >= 0 && wake_fd_ >= 0) {
      // The driver watched the epoll descriptor, not the eventfd: empty it here, or it would
      // keep every later wait from sleeping.
      std::uint64_t count;
      (void)!::read(wake_fd_, &count, sizeof count);
    }
  }
  sleeping_.store(false, std::memory_order_relaxed);
  // The driver has emptied the eventfd if it woke on it. A producer that raced with this
  // store leaves it readable, which costs one early return from the next wait, no more.
  wake_sent_.store(false, std::memory_order_release);
  return !work_waiting;
}

void Shard::publish_counters(const Driver& driver) {
  const proto::HostCounters& c = core_.counters();
  LiveCounters& l = *live_;
  constexpr auto r = std::memory_order_relaxed;
  l.datagrams_in.store(c.datagrams_in, r);
  l.bytes_in.store(c.bytes_in, r);
  l.datagrams_out.store(c.datagrams_out, r);
  l.bytes_out.store(c.bytes_out, r);
  l.messages_in.store(c.messages_in, r);
  l.messages_out.store(c.messages_out, r);
  l.commands_in.store(c.commands_in, r);
  l.acks_out.store(c.acks_out, r);
  l.connects.store(c.connects, r);
  l.disconnects.store(c.disconnects, r);
  l.peers.store(core_.peer_count(), r);
  l.iterations.store(iterations_, r);
  l.idle_waits.store(idle_waits_, r);
  l.posted_run.store(posted_run_, r);
  l.drops.store(c.drops.total(), r);
  l.peer_timer_runs.store(c.peer_timer_runs, r);
  l.retransmits.store(c.retransmits, r);
  l.fast_retransmits.store(c.fast_retransmits, r);
  l.timeouts_deferred.store(c.timeouts_deferred, r);
  l.pacer_waits.store(c.pacer_waits, r);
  l.cwnd_limited.store(c.cwnd_limited, r);
  l.half_open.store(c.half_open, r);
  l.half_open_created.store(c.half_open_created, r);
  l.half_open_evicted.store(c.half_open_evicted, r);
  l.cookies_sent.store(c.cookies_sent, r);
  l.connects_rate_limited.store(c.connects_rate_limited, r);
  l.connects_shed.store(c.connects_shed, r);
  l.connects_banned.store(c.connects_banned, r);
  l.cookies_invalid.store(c.cookies_invalid, r);
  l.cookies_expired.store(c.cookies_expired, r);
  l.amplification_capped.store(c.amplification_capped, r);
  l.peers_promoted.store(c.peers_promoted, r);
  l.unverified_bytes_in.store(c.unverified_bytes_in, r);
  l.unverified_bytes_out.store(c.unverified_bytes_out, r);
  l.timeouts.store(c.timeouts, r);
  l.discovery_pings_in.store(c.discovery_pings_in, r);
  l.discovery_pongs_out.store(c.discovery_pongs_out, r);
  l.discovery_refused.store(c.discovery_refused, r);
  l.tokens_accepted.store(c.tokens_accepted, r);
  l.tokens_refused.store(c.tokens_refused, r);
  l.sealed_out.store(c.sealed_out, r);
  l.opened_in.store(c.opened_in, r);
  l.seal_refused.store(c.drops[proto::Drop::bad_seal] + c.drops[proto::Drop::replayed], r);
  l.over_limit_refused.store(c.intake_over_limit, r);
  l.over_limit_dropped.store(c.drops[proto::Drop::over_limit], r);
  const DriverStats d = driver.stats();
  l.tx_dropped.store(d.tx_dropped, r);
  l.rx_kernel_dropped.store(d.rx_kernel_dropped, r);
  l.tx_backlog.store(d.tx_backlog, r);
  l.link.store(d.port.link, r);
  l.link_speed_mbps.store(d.port.link_speed_mbps, r);
  l.port_rx_packets.store(d.port.rx_packets, r);
  l.port_tx_packets.store(d.port.tx_packets, r);
  l.port_rx_missed.store(d.port.rx_missed, r);
  l.port_rx_no_mbuf.store(d.port.rx_no_mbuf, r);
  l.port_rx_errors.store(d.port.rx_errors, r);
  l.port_tx_errors.store(d.port.tx_errors, r);
  l.cross_sent.store(cross_sent_, r);
  l.cross_received.store(cross_received_, r);
  l.cross_dropped.store(cross_dropped_, r);
  for (std::size_t i = 0; i < kLoopTimeBuckets; ++i) l.loop_time[i].store(loop_time_[i], r);
  l.loop_time_us.store(loop_time_us_, r);
  l.idle_polls.store(idle_polls_, r);
  l.tx_waits.store(io_->tx_waits(), r);
  l.idle_poll_us.store(idle_poll_us_, r);
  if (kcp_) {
    const proto::kcp::KcpCounters& k = kcp_->counters();
    l.kcp_sessions.store(kcp_->session_count(), r);
    l.kcp_datagrams_in.store(k.datagrams_in, r);
    l.kcp_bytes_in.store(k.bytes_in, r);
    l.kcp_datagrams_out.store(k.datagrams_out, r);
    l.kcp_bytes_out.store(k.bytes_out, r);
    l.kcp_messages_in.store(k.messages_in, r);
    l.kcp_messages_out.store(k.messages_out, r);
    l.kcp_connects.store(k.sessions_opened, r);
    l.kcp_disconnects.store(k.sessions_closed, r);
    l.kcp_timeouts.store(k.dead_links + k.idle_timeouts, r);
    l.kcp_retransmits.store(k.retransmits + k.fast_retransmits, r);
    l.kcp_drops.store(k.drops.total(), r);
    l.kcp_refused.store(k.drops[proto::kcp::KcpDrop::refused], r);
    l.kcp_intake_waits.store(k.intake_waits, r);
  }
}

void Shard::begin_graceful_stop() {
  stopping_ = true;
  const std::int64_t graceful = std::max<std::int64_t>(graceful_us_.load(), 0);
  stop_deadline_ = clock_.now_us() + static_cast<std::uint64_t>(graceful);
  for (PeerHandle& p : peers_by_slot_) {
    if (!p.valid()) continue;
    core_.disconnect(p, 0);
  }
  // Handshakes still in flight have no connect event yet; they are turned away when it comes
  // (deliver_events), or time out with the deadline.
}

void Shard::post(ShardTask task) {
  {
    std::lock_guard lock(posted_mutex_);
    posted_.push_back(std::move(task));
    posted_pending_.store(true, std::memory_order_release);
  }
  announce_work();
}

void Shard::announce_work() {
  work_announced_.fetch_add(1, std::memory_order_seq_cst);
  wake();
}

ShardCounters Shard::counters() const {
  const LiveCounters& l = *live_;
  constexpr auto r = std::memory_order_relaxed;
  ShardCounters s;
  s.datagrams_in = l.datagrams_in.load(r);
  s.bytes_in = l.bytes_in.load(r);
  s.datagrams_out = l.datagrams_out.load(r);
  s.bytes_out = l.bytes_out.load(r);
  s.messages_in = l.messages_in.load(r);
  s.messages_out = l.messages_out.load(r);
  s.commands_in = l.commands_in.load(r);
  s.acks_out = l.acks_out.load(r);
  s.connects = l.connects.load(r);
  s.disconnects = l.disconnects.load(r);
  s.peers = l.peers.load(r);
  s.iterations = l.iterations.load(r);
  s.idle_waits = l.idle_waits.load(r);
  s.posted_run = l.posted_run.load(r);
  s.drops = l.drops.load(r);
  s.peer_timer_runs = l.peer_timer_runs.load(r);
  s.retransmits = l.retransmits.load(r);
  s.fast_retransmits = l.fast_retransmits.load(r);
  s.timeouts_deferred = l.timeouts_deferred.load(r);
  s.pacer_waits = l.pacer_waits.load(r);
  s.cwnd_limited = l.cwnd_limited.load(r);
  s.half_open = l.half_open.load(r);
  s.half_open_created = l.half_open_created.load(r);
  s.half_open_evicted = l.half_open_evicted.load(r);
  s.cookies_sent = l.cookies_sent.load(r);
  s.connects_rate_limited = l.connects_rate_limited.load(r);
  s.connects_shed = l.connects_shed.load(r);
  s.connects_banned = l.connects_banned.load(r);
  s.cookies_invalid = l.cookies_invalid.load(r);
  s.cookies_expired = l.cookies_expired.load(r);
  s.amplification_capped = l.amplification_capped.load(r);
  s.peers_promoted = l.peers_promoted.load(r);
  s.unverified_bytes_in = l.unverified_bytes_in.load(r);
  s.unverified_bytes_out = l.unverified_bytes_out.load(r);
  s.timeouts = l.timeouts.load(r);
  s.discovery_pings_in = l.discovery_pings_in.load(r);
  s.discovery_pongs_out = l.discovery_pongs_out.load(r);
  s.discovery_refused = l.discovery_refused.load(r);
  s.tokens_accepted = l.tokens_accepted.load(r);
  s.tokens_refused = l.tokens_refused.load(r);
  s.sealed_out = l.sealed_out.load(r);
  s.opened_in = l.opened_in.load(r);
  s.seal_refused = l.seal_refused.load(r);
  s.over_limit_refused = l.over_limit_refused.load(r);
  s.over_limit_dropped = l.over_limit_dropped.load(r);
  s.tx_dropped = l.tx_dropped.load(r);
  s.rx_kernel_dropped = l.rx_kernel_dropped.load(r);
  s.tx_backlog = l.tx_backlog.load(r);
  s.port.link = l.link.load(r);
  s.port.link_speed_mbps = l.link_speed_mbps.load(r);
  s.port.rx_packets = l.port_rx_packets.load(r);
  s.port.tx_packets = l.port_tx_packets.load(r);
  s.port.rx_missed = l.port_rx_missed.load(r);
  s.port.rx_no_mbuf = l.port_rx_no_mbuf.load(r);
  s.port.rx_errors = l.port_rx_errors.load(r);
  s.port.tx_errors = l.port_tx_errors.load(r);
  s.cross_sent = l.cross_sent.load(r);
  s.cross_received = l.cross_received.load(r);
  s.cross_dropped = l.cross_dropped.load(r);
  s.wakeups_sent = wakeups_sent_.load(r);
  for (std::size_t i = 0; i < kLoopTimeBuckets; ++i) s.loop_time[i] = l.loop_time[i].load(r);
  s.loop_time_us = l.loop_time_us.load(r);
  s.idle_polls = l.idle_polls.load(r);
  s.tx_waits = l.tx_waits.load(r);
  s.idle_poll_us = l.idle_poll_us.load(r);
  s.kcp_sessions = l.kcp_sessions.load(r);
  s.kcp_datagrams_in = l.kcp_datagrams_in.load(r);
  s.kcp_bytes_in = l.kcp_bytes_in.load(r);
  s.kcp_datagrams_out = l.kcp_datagrams_out.load(r);
  s.kcp_bytes_out = l.kcp_bytes_out.load(r);
  s.kcp_messages_in = l.kcp_messages_in.load(r);
  s.kcp_messages_out = l.kcp_messages_out.load(r);
  s.kcp_connects = l.kcp_connects.load(r);
  s.kcp_disconnects = l.kcp_disconnects.load(r);
  s.kcp_timeouts = l.kcp_timeouts.load(r);
  s.kcp_retransmits = l.kcp_retransmits.load(r);
  s.kcp_drops = l.kcp_drops.load(r);
  s.kcp_refused = l.kcp_refused.load(r);
  s.kcp_intake_waits = l.kcp_intake_waits.load(r);
  return s;
}

// ---- ShardGroup ----------------------------------------------------------------------------

ShardGroup::ShardGroup(ShardGroupOptions options) : options_(std::move(options)) {
  if (options_.shards == 0) options_.shards = 1;
}

ShardGroup::~ShardGroup() { stop(std::chrono::milliseconds(0)); }

void ShardGroup::set_event_handler(ShardEventHandler handler) {
  if (!running_) handler_ = std::move(handler);
}

void ShardGroup::set_message_handler(ShardMessageHandler handler) {
  if (!running_) message_handler_ = std::move(handler);
}

void ShardGroup::set_batch_filter(ShardBatchFilter filter) {
  if (!running_) batch_filter_ = std::move(filter);
}

void ShardGroup::set_tick_handler(ShardTickHandler tick) {
  if (!running_) tick_handler_ = std::move(tick);
}

bool ShardGroup::start(std::string& error) {
  if (running_ || !threads_.empty()) {
    error = "shard group already started";
    return false;
  }
  shards_.clear();
  for (std::size_t i = 0; i < options_.shards; ++i) {
    shards_.push_back(std::unique_ptr<Shard>(
        new Shard(i, options_, handler_, message_handler_, batch_filter_, tick_handler_, shards_)));
  }

  // Each shard opens its driver on its own thread and reports back here. Shard 0 goes first
  // so that with port 0 the others know which port to share.
  std::mutex m;
  std::condition_variable cv;
  std::size_t reported = 0;
  std::string first_error;
  Endpoint bound;
  auto ready = [&](const Endpoint* local, std::string why) {
    std::lock_guard lock(m);
    if (local == nullptr && first_error.empty()) first_error = std::move(why);
    if (local != nullptr && reported == 0) bound = *local;
    ++reported;
    cv.notify_all();
  };
  const std::function<void(const Endpoint*, std::string)> ready_fn = ready;

  auto launch = [&](std::size_t i, Endpoint bind) {
    Shard* shard = shards_[i].get();
    if (i != 0 && options_.share_port && options_.kcp_listen) {
      shard->kcp_bind_.port = shards_[0]->kcp_local_.port;  // shard 0 has reported
    }
    threads_.emplace_back([shard, bind, &ready_fn] { shard->run(bind, ready_fn); });
  };
  auto wait_reports = [&](std::size_t n) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return reported >= n; });
    return first_error.empty();
  };

  bool ok = true;
  launch(0, options_.bind);
  ok = wait_reports(1);
  if (ok) {
    Endpoint shared = options_.bind;
    if (options_.share_port) shared.port = bound.port;
    for (std::size_t i = 1; i < shards_.size(); ++i) launch(i, shared);
    ok = wait_reports(shards_.size());
  }
  // From here on the shards no longer touch `ready_fn` (each calls it once, before polling).
  if (!ok) {
    error = first_error;
    running_ = true;  // lets stop() tear down the shards that did open
    stop(std::chrono::milliseconds(0));
    shards_.clear();
    return false;
  }
  local_ = bound;
  running_ = true;
  return true;
}

bool ShardGroup::post(std::size_t shard, ShardTask task) {
  if (!running_ || shard >= shards_.size()) return false;
  shards_[shard]->post(std::move(task));
  return true;
}

bool ShardGroup::stop(std::chrono::milliseconds graceful) {
  if (!running_.exchange(false)) return all_gone_;
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(graceful).count();
  for (auto& s : shards_) {
    s->graceful_us_.store(us, std::memory_order_relaxed);
    s->stop_requested_.store(true, std::memory_order_release);
  }
  for (auto& s : shards_) s->announce_work();
  join();
  all_gone_ = true;
  for (auto& s : shards_) all_gone_ = all_gone_ && s->counters().peers == 0;
  return all_gone_;
}

void ShardGroup::join() {
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

ShardCounters ShardGroup::counters(std::size_t shard) const {
  return shard < shards_.size() ? shards_[shard]->counters() : ShardCounters{};
}

ShardCounters ShardGroup::total() const {
  ShardCounters t;
  for (const auto& s : shards_) {
    const ShardCounters c = s->counters();
    t.datagrams_in += c.datagrams_in;
    t.bytes_in += c.bytes_in;
    t.datagrams_out += c.datagrams_out;
    t.bytes_out += c.bytes_out;
    t.messages_in += c.messages_in;
    t.messages_out += c.messages_out;
    t.commands_in += c.commands_in;
    t.acks_out += c.acks_out;
    t.connects += c.connects;
    t.disconnects += c.disconnects;
    t.peers += c.peers;
    t.iterations += c.iterations;
    t.idle_waits += c.idle_waits;
    t.posted_run += c.posted_run;
    t.drops += c.drops;
    t.peer_timer_runs += c.peer_timer_runs;
    t.retransmits += c.retransmits;
    t.fast_retransmits += c.fast_retransmits;
    t.timeouts_deferred += c.timeouts_deferred;
    t.pacer_waits += c.pacer_waits;
    t.cwnd_limited += c.cwnd_limited;
    t.half_open += c.half_open;
    t.half_open_created += c.half_open_created;
    t.half_open_evicted += c.half_open_evicted;
    t.cookies_sent += c.cookies_sent;
    t.connects_rate_limited += c.connects_rate_limited;
    t.connects_shed += c.connects_shed;
    t.connects_banned += c.connects_banned;
    t.cookies_invalid += c.cookies_invalid;
    t.cookies_expired += c.cookies_expired;
    t.amplification_capped += c.amplification_capped;
    t.peers_promoted += c.peers_promoted;
    t.unverified_bytes_in += c.unverified_bytes_in;
    t.unverified_bytes_out += c.unverified_bytes_out;
    t.timeouts += c.timeouts;
    t.discovery_pings_in += c.discovery_pings_in;
    t.discovery_pongs_out += c.discovery_pongs_out;
    t.discovery_refused += c.discovery_refused;
    t.tokens_accepted += c.tokens_accepted;
    t.tokens_refused += c.tokens_refused;
    t.sealed_out += c.sealed_out;
    t.opened_in += c.opened_in;
    t.seal_refused += c.seal_refused;
    t.over_limit_refused += c.over_limit_refused;
    t.over_limit_dropped += c.over_limit_dropped;
    t.tx_dropped += c.tx_dropped;
    t.rx_kernel_dropped += c.rx_kernel_dropped;
    t.tx_backlog += c.tx_backlog;
    if (c.port.link == 0 || (c.port.link == 1 && t.port.link != 0)) t.port.link = c.port.link;
    t.port.link_speed_mbps = std::max(t.port.link_speed_mbps, c.port.link_speed_mbps);
    t.port.rx_packets += c.port.rx_packets;
    t.port.tx_packets += c.port.tx_packets;
    t.port.rx_missed += c.port.rx_missed;
    t.port.rx_no_mbuf += c.port.rx_no_mbuf;
    t.port.rx_errors += c.port.rx_errors;
    t.port.tx_errors += c.port.tx_errors;
    t.cross_sent += c.cross_sent;
    t.cross_received += c.cross_received;
    t.cross_dropped += c.cross_dropped;
    t.wakeups_sent += c.wakeups_sent;
    for (std::size_t i = 0; i < kLoopTimeBuckets; ++i) t.loop_time[i] += c.loop_time[i];
    t.loop_time_us += c.loop_time_us;
    t.idle_polls += c.idle_polls;
    t.tx_waits += c.tx_waits;
    t.idle_poll_us += c.idle_poll_us;
    t.kcp_sessions += c.kcp_sessions;
    t.kcp_datagrams_in += c.kcp_datagrams_in;
    t.kcp_bytes_in += c.kcp_bytes_in;
    t.kcp_datagrams_out += c.kcp_datagrams_out;
    t.kcp_bytes_out += c.kcp_bytes_out;
    t.kcp_messages_in += c.kcp_messages_in;
    t.kcp_messages_out += c.kcp_messages_out;
    t.kcp_connects += c.kcp_connects;
    t.kcp_disconnects += c.kcp_disconnects;
    t.kcp_timeouts += c.kcp_timeouts;
    t.kcp_retransmits += c.kcp_retransmits;
    t.kcp_drops += c.kcp_drops;
    t.kcp_refused += c.kcp_refused;
    t.kcp_intake_waits += c.kcp_intake_waits;
  }
  return t;
}

std::thread::id ShardGroup::thread_id(std::size_t shard) const {
  return shard < threads_.size() ? threads_[shard].get_id() : std::thread::id{};
}

Endpoint ShardGroup::local_endpoint(std::size_t shard) const {
  return shard < shards_.size() ? shards_[shard]->local_ : Endpoint{};
}

Endpoint ShardGroup::kcp_endpoint(std::size_t shard) const {
  return shard < shards_.size() ? shards_[shard]->kcp_local_ : Endpoint{};
}

std::string ShardGroup::driver_name(std::size_t shard) const {
  return shard < shards_.size() ? shards_[shard]->driver_name_ : std::string{};
}

}  // namespace tern::rt
