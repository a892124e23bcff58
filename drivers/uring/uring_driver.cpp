// io_uring driver: multishot recvmsg into a provided buffer ring, batched sendmsg (DESIGN §6).
#include "uring_driver.hpp"

#include "sockaddr.hpp"

#include <liburing.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

namespace tern::drv {
namespace {

// user_data tags: the CQ is shared by the one receive, every send and the shutdown cancel.
constexpr std::uint64_t kRecvTag = 1;
constexpr std::uint64_t kSendTag = 2;
constexpr std::uint64_t kWakeTag = 4;  // multishot poll on the owner's wake eventfd
constexpr std::uint64_t kCancelTag = 3;
// A held send (set_tx_deferred): IOSQE_CQE_SKIP_SUCCESS, so only a failure completes, tagged
// with its length above the low byte. Sent ones are counted when held; a completion that
// would end a wait for nothing (the wait's own submit sent it) is not posted at all.
constexpr std::uint64_t kHeldSendTag = 5;

constexpr std::uint16_t kBufferGroup = 0;
// Buffer ids are 16 bits and the kernel caps a buffer ring at 32768 entries.
constexpr unsigned kMaxBuffers = 32768;
constexpr unsigned kMaxRingEntries = 32768;
constexpr std::size_t kMaxBufferSize = 1 << 20;
// Room for either family's address in every buffer; a longer name means a foreign family.
constexpr std::size_t kNameBytes = sizeof(sockaddr_in6);
// How often a tx_burst may wait 1 ms for the SQPOLL thread to issue its sends (the frames'
// bytes belong to the caller and must not be read after tx_burst returns).
constexpr int kSqpollWaitSlices = 4;
constexpr std::size_t kReapBatch = 64;
// With set_tx_deferred, a tx_burst of at most this many frames, each at most kTxCopyBytes (an
// ENet MTU and then some), is copied and left in the SQ for the next enter: an idle server's
// reply or ack then costs no enter of its own. Larger bursts go at once; their enter is
// shared by many datagrams, and copying them would cost more than it saves.
constexpr std::size_t kTxDeferMax = 8;
constexpr std::size_t kTxCopyBytes = 4160;
// How many more enters a short rx_burst makes while the kernel flags task work (datagrams that
// arrived since the last enter) before it gives the rest to the next call.
constexpr int kRxRefills = 2;

std::string errno_text(int err) { return std::strerror(err); }
// Anonymous memory: page aligned as the buffer ring requires, and faulted in lazily so a large
// pool costs nothing until traffic touches it.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping() {
    if (data_ != nullptr) ::munmap(data_, bytes_);
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  bool map(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return false;
    data_ = static_cast<std::byte*>(p);
    bytes_ = bytes;
    return true;
  }
  std::byte* data() const { return data_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Best first; each later entry drops what an older kernel refuses with EINVAL.
// SUBMIT_ALL: a send the kernel refuses at prep must not leave the rest of the burst queued
// behind it, pointing at slots the next burst reuses. TASKRUN_FLAG: the kernel raises
// IORING_SQ_TASKRUN when completions wait for an enter, so rx_burst can tell an empty socket
// without one.
constexpr unsigned kPlainAttempts[] = {
    IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
        IORING_SETUP_TASKRUN_FLAG,
    IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
    IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN |
        IORING_SETUP_TASKRUN_FLAG,
    IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
    IORING_SETUP_COOP_TASKRUN,
    0,
};
// DEFER_TASKRUN needs the application to run task work, which an SQPOLL ring cannot promise.
constexpr unsigned kSqpollAttempts[] = {
    IORING_SETUP_SQPOLL | IORING_SETUP_SINGLE_ISSUER,
    IORING_SETUP_SQPOLL,
};

}  // namespace

struct UringDriver::State {
  // A receive completion that owns a buffer and has not been handed out yet.
  struct Ready {
    std::uint16_t bid;
    std::int32_t res;
  };

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  ~State() {
    if (ring_ready) {
      cancel_receive();
      io_uring_queue_exit(&ring);  // also drops the buffer ring registration
    }
    if (fd >= 0) ::close(fd);
  }

  // The kernel must stop writing into `buffers` before they are unmapped.
  void cancel_receive() {
    if (!armed) return;
    io_uring_sqe* sqe = io_uring_get_sqe(&ring);
    if (sqe == nullptr) {
      (void)io_uring_submit(&ring);
      sqe = io_uring_get_sqe(&ring);
    }
    if (sqe == nullptr) return;
    io_uring_prep_cancel64(sqe, kRecvTag, 0);
    io_uring_sqe_set_data64(sqe, kCancelTag);
    (void)io_uring_submit(&ring);
    for (int i = 0; i < 100 && armed; ++i) {
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec ts{0, 1000000};
      if (io_uring_wait_cqe_timeout(&ring, &cqe, &ts) != 0 || cqe == nullptr) continue;
      if (cqe->user_data == kRecvTag && !(cqe->flags & IORING_CQE_F_MORE)) armed = false;
      io_uring_cqe_seen(&ring, cqe);
    }
  }

  std::byte* buffer(std::uint16_t bid) const { return buffers.data() + std::size_t{bid} * stride; }

  io_uring ring{};
  bool ring_ready = false;
  int fd = -1;
  bool ipv6 = false;
  bool dual_stack = false;
  bool sqpoll = false;
  std::size_t burst = 64;

  // Provided buffer ring: `nbuf` buffers of `stride` bytes, each laid out as
  // io_uring_recvmsg_out | name (kNameBytes) | payload.
  Mapping ring_mem;
  Mapping buffers;
  io_uring_buf_ring* br = nullptr;
  unsigned nbuf = 0;
  int mask = 0;
  std::size_t stride = 0;
  std::size_t payload_capacity = 0;
  unsigned staged = 0;     // added to the ring but not yet published with advance()
  unsigned in_kernel = 0;  // published and not yet returned by a completion
  msghdr recv_hdr{};
  bool armed = false;
  bool ever_armed = false;
  int wake_fd = -1;  // not owned
  bool wake_armed = false;

  // FIFO of Ready, at most one entry per buffer, so `nbuf` slots never overflow.
  std::unique_ptr<Ready[]> ready;
  unsigned ready_head = 0;
  unsigned ready_count = 0;
  // Buffers behind the frames of the last rx_burst; they go back on the next one.
  std::unique_ptr<std::uint16_t[]> held;
  unsigned held_count = 0;

  // One sockaddr/iovec/msghdr per frame of a tx chunk: the kernel reads them at issue time.
  std::unique_ptr<sockaddr_storage[]> tx_names;
  std::unique_ptr<iovec[]> tx_iov;
  std::unique_ptr<msghdr[]> tx_msgs;
  unsigned tx_inflight = 0;

  // The kernel flags pending task work in the SQ ring (IORING_SETUP_TASKRUN_FLAG accepted).
  bool taskrun_flag = false;
  bool tx_deferred = false;  // set_tx_deferred
  // Sends prepared (their bytes copied to tx_copy) and left in the SQ for the next enter.
  unsigned tx_held = 0;
  Mapping tx_copy;  // kTxDeferMax slots of kTxCopyBytes

  unsigned sq_flags() const { return __atomic_load_n(ring.sq.kflags, __ATOMIC_ACQUIRE); }
  // Completions, or task work that makes them, that only an enter hands over.
  bool kernel_has_news() const {
    return !taskrun_flag || (sq_flags() & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) != 0;
  }
};

std::unique_ptr<rt::Driver> open_uring_driver(const UringOptions& options, std::string& error) {
  if (options.force_fail_for_test) {
    error = "io_uring refused by UringOptions::force_fail_for_test";
    return nullptr;
  }
  if (options.ring_entries == 0 || options.ring_entries > kMaxRingEntries) {
    error = "ring_entries " + std::to_string(options.ring_entries) + " outside 1.." +
            std::to_string(kMaxRingEntries);
    return nullptr;
  }
  if (options.cq_entries != 0 &&
      (options.cq_entries < options.ring_entries || options.cq_entries > 2 * kMaxRingEntries)) {
    error = "cq_entries " + std::to_string(options.cq_entries) + " outside ring_entries.." +
            std::to_string(2 * kMaxRingEntries);
    return nullptr;
  }
  if (options.buffer_count == 0 || options.buffer_count > kMaxBuffers) {
    error = "buffer_count " + std::to_string(options.buffer_count) + " outside 1.." +
            std::to_string(kMaxBuffers);
    return nullptr;
  }
  if (options.buffer_size == 0 || options.buffer_size > kMaxBufferSize) {
    error = "buffer_size " + std::to_string(options.buffer_size) + " outside 1.." +
            std::to_string(kMaxBufferSize);
    return nullptr;
  }

  auto s = std::make_unique<UringDriver::State>();

  // The socket driver owns the bind rules (families, dual stack, SO_REUSEPORT, buffer sizes);
  // borrowing its socket keeps the two drivers from ever disagreeing about them.
  Endpoint local;
  {
    std::string why;
    auto sock = open_socket_driver(options.socket, why);
    if (!sock) {
      error = why;
      return nullptr;
    }
    s->fd = ::fcntl(sock->fd(), F_DUPFD_CLOEXEC, 0);
    if (s->fd < 0) {
      error = "dup socket: " + errno_text(errno);
      return nullptr;
    }
    local = sock->local_endpoint();
    s->dual_stack = sock->caps().dual_stack;
    s->burst = sock->caps().max_burst;
  }
  s->ipv6 = !options.socket.bind.is_v4();
  s->sqpoll = options.sqpoll;
  s->nbuf = std::bit_ceil(options.buffer_count);

  // Every buffer can complete before rx_burst runs, plus a burst of sends: a CQ that size only
  // overflows when the application stops reaping, and overflow is still drained, not lost.
  const unsigned cq_entries =
      options.cq_entries != 0
          ? options.cq_entries
          : std::bit_ceil(std::max(2 * options.ring_entries, s->nbuf + 2 * options.ring_entries));
  int rc = -EINVAL;
  const std::span<const unsigned> attempts = options.sqpoll
                                                 ? std::span<const unsigned>(kSqpollAttempts)
                                                 : std::span<const unsigned>(kPlainAttempts);
  for (const unsigned flags : attempts) {
    io_uring_params p{};
    p.flags = flags | IORING_SETUP_CQSIZE;
    p.cq_entries = cq_entries;
    p.sq_thread_idle = options.sqpoll_idle_ms;
    rc = io_uring_queue_init_params(options.ring_entries, &s->ring, &p);
    if (rc != -EINVAL) break;
  }
  if (rc != 0) {
    error = std::string("io_uring_queue_init") + (options.sqpoll ? " (sqpoll)" : "") + ": " +
            errno_text(-rc);
    if (rc == -EPERM) error += " (io_uring disabled by kernel.io_uring_disabled or a sandbox)";
    return nullptr;
  }
  s->ring_ready = true;
  s->taskrun_flag = (s->ring.flags & IORING_SETUP_TASKRUN_FLAG) != 0;
  // Saves an fd lookup per io_uring_enter; harmless to lack.
  (void)io_uring_register_ring_fd(&s->ring);

  s->stride = (sizeof(io_uring_recvmsg_out) + kNameBytes + options.buffer_size + 63) & ~63ull;
  s->payload_capacity = s->stride - sizeof(io_uring_recvmsg_out) - kNameBytes;
  s->mask = io_uring_buf_ring_mask(s->nbuf);
  if (!s->ring_mem.map(std::size_t{s->nbuf} * sizeof(io_uring_buf)) ||
      !s->buffers.map(std::size_t{s->nbuf} * s->stride)) {
    error = "mmap receive buffers: " + errno_text(errno);
    return nullptr;
  }
  s->br = reinterpret_cast<io_uring_buf_ring*>(s->ring_mem.data());
  io_uring_buf_ring_init(s->br);
  io_uring_buf_reg reg{};
  reg.ring_addr = reinterpret_cast<std::uintptr_t>(s->br);
  reg.ring_entries = s->nbuf;
  reg.bgid = kBufferGroup;
  rc = io_uring_register_buf_ring(&s->ring, &reg, 0);
  if (rc != 0) {
    error = "io_uring_register_buf_ring: " + errno_text(-rc) +
            (rc == -EINVAL ? " (kernel without provided buffer rings, needs 5.19)" : "");
    return nullptr;
  }

  s->recv_hdr.msg_namelen = kNameBytes;
  s->ready = std::make_unique<UringDriver::State::Ready[]>(s->nbuf);
  s->held = std::make_unique<std::uint16_t[]>(s->nbuf);
  s->tx_names = std::make_unique<sockaddr_storage[]>(s->burst);
  s->tx_iov = std::make_unique<iovec[]>(s->burst);
  s->tx_msgs = std::make_unique<msghdr[]>(s->burst);
  if (!s->tx_copy.map(kTxDeferMax * kTxCopyBytes)) {
    error = "mmap transmit slots: " + errno_text(errno);
    return nullptr;
  }

  auto d = std::unique_ptr<UringDriver>(new UringDriver(std::move(s)));
  d->local_ = local;
  d->ustats_.setup_flags = d->s_->ring.flags;
  for (unsigned bid = 0; bid < d->s_->nbuf; ++bid) d->give_back(static_cast<std::uint16_t>(bid));
  d->publish_buffers();
  d->arm_receive();
  // Submitting now surfaces a kernel without multishot recvmsg (6.0+) as an open error
  // rather than as silence.
  (void)io_uring_submit_and_get_events(&d->s_->ring);
  d->reap();
  if (!d->s_->armed && d->stats_.rx_errors > 0) {
    error = "multishot recvmsg refused by the kernel (needs Linux 6.0)";
    return nullptr;
  }
  return d;
}

std::unique_ptr<rt::Driver> open_best_driver(const UringOptions& options, std::string& error) {
  std::string why;
  if (auto d = open_uring_driver(options, why)) return d;
  std::string socket_error;
  auto s = open_socket_driver(options.socket, socket_error);
  if (!s) {
    error = "io_uring: " + why + "; socket: " + socket_error;
    return nullptr;
  }
  // One line, so operators learn why a shard runs slower without digging through logs.
  std::fprintf(stderr, "tern: io_uring driver unavailable (%s); using the socket driver\n",
               why.c_str());
  return s;
}

UringDriver::UringDriver(std::unique_ptr<State> state) : s_(std::move(state)) {}

UringDriver::~UringDriver() {
  if (s_ != nullptr && s_->ring_ready) submit_held();
}

void UringDriver::give_back(std::uint16_t bid) {
  State& s = *s_;
  io_uring_buf_ring_add(s.br, s.buffer(bid), static_cast<unsigned>(s.stride), bid, s.mask,
                        static_cast<int>(s.staged));
  ++s.staged;
}

void UringDriver::publish_buffers() {
  State& s = *s_;
  if (s.staged == 0) return;
  io_uring_buf_ring_advance(s.br, static_cast<int>(s.staged));
  s.in_kernel += s.staged;
  s.staged = 0;
}

void UringDriver::recycle_held() {
  State& s = *s_;
  for (unsigned i = 0; i < s.held_count; ++i) give_back(s.held[i]);
  s.held_count = 0;
}

void UringDriver::arm_receive() {
  State& s = *s_;
  io_uring_sqe* sqe = io_uring_get_sqe(&s.ring);
  if (sqe == nullptr) {
    // The SQ is full of sends not yet submitted; push them so the receive gets a slot.
    (void)io_uring_submit(&s.ring);
    sqe = io_uring_get_sqe(&s.ring);
    if (sqe == nullptr) return;  // retried on the next rx_burst
  }
  io_uring_prep_recvmsg_multishot(sqe, s.fd, &s.recv_hdr, 0);
  sqe->flags |= IOSQE_BUFFER_SELECT;
  sqe->buf_group = kBufferGroup;
  io_uring_sqe_set_data64(sqe, kRecvTag);
  if (s.ever_armed) ++ustats_.rx_rearms;
  s.ever_armed = true;
  s.armed = true;
}

void UringDriver::reap_one(std::uint64_t user_data, std::int32_t res, std::uint32_t flags) {
  State& s = *s_;
  if (user_data == kSendTag) {
    if (s.tx_inflight > 0) --s.tx_inflight;
    if (res >= 0) {
      ++stats_.tx_datagrams;
      stats_.tx_bytes += static_cast<std::uint64_t>(res);
    } else {
      ++stats_.tx_errors;
      ++stats_.tx_dropped;
    }
    return;
  }
  if ((user_data & 0xff) == kHeldSendTag) {
    // Counted as sent when held; this one failed (a full buffer, an unreachable address).
    --stats_.tx_datagrams;
    stats_.tx_bytes -= user_data >> 8;
    ++stats_.tx_errors;
    ++stats_.tx_dropped;
    return;
  }
  if (user_data == kWakeTag) {
    // Emptied here so a level-triggered readiness cannot outlive the wake-up it announced.
    // Re-armed by the next wait() if the kernel ended the multishot poll.
    if (!(flags & IORING_CQE_F_MORE)) s.wake_armed = false;
    std::uint64_t count;
    (void)!::read(s.wake_fd, &count, sizeof count);
    return;
  }
  if (user_data != kRecvTag) return;  // the shutdown cancel's own completion

  // Without F_MORE the multishot request is over, whatever the reason; it is re-armed once
  // there are buffers to receive into.
  if (!(flags & IORING_CQE_F_MORE)) s.armed = false;
  if (flags & IORING_CQE_F_BUFFER) {
    const auto bid = static_cast<std::uint16_t>(flags >> IORING_CQE_BUFFER_SHIFT);
    if (s.in_kernel > 0) --s.in_kernel;
    if (res > 0 && s.ready_count < s.nbuf) {
      s.ready[(s.ready_head + s.ready_count) & (s.nbuf - 1)] = State::Ready{bid, res};
      ++s.ready_count;
    } else {
      give_back(bid);
    }
    return;
  }
  if (res == -ENOBUFS) {
    ++ustats_.rx_no_buffers;
  } else if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED) {
    ++stats_.rx_errors;
  }
}

void UringDriver::reap() {
  State& s = *s_;
  for (;;) {
    // The CQ was full at some point: the kernel parked completions and hands them over only
    // when asked, so ask before each batch until nothing is parked.
    bool flushed = true;
    if (io_uring_cq_has_overflow(&s.ring)) {
      ++ustats_.cq_overflows;
      ++stats_.rx_syscalls;
      flushed = io_uring_get_events(&s.ring) >= 0;
    }
    // Read straight off the CQ ring: io_uring_peek_batch_cqe would make an enter of its own
    // whenever the kernel flags task work, which is the caller's to make (and to count).
    unsigned n = 0;
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&s.ring, head, cqe) {
      reap_one(cqe->user_data, cqe->res, cqe->flags);
      if (++n == kReapBatch) break;
    }
    io_uring_cq_advance(&s.ring, n);
    // A failed flush with nothing reaped would spin; the next call tries again.
    if (n == 0 && (!flushed || !io_uring_cq_has_overflow(&s.ring))) break;
  }
}

bool UringDriver::frame_from(std::uint16_t bid, std::int32_t res, rt::RxFrame& frame) {
  State& s = *s_;
  io_uring_recvmsg_out* o = io_uring_recvmsg_validate(s.buffer(bid), res, &s.recv_hdr);
  if (o == nullptr) {
    ++stats_.rx_errors;
    return false;
  }
  // Larger than any MTU we negotiate: the prefix would only hand the decoder a corrupt message.
  if (o->flags & MSG_TRUNC) {
    ++stats_.rx_truncated;
    return false;
  }
  if (o->namelen > s.recv_hdr.msg_namelen ||
      !sockaddr_to_endpoint(io_uring_recvmsg_name(o), o->namelen, frame.from)) {
    ++stats_.rx_errors;
    return false;
  }
  const auto* payload = static_cast<const std::byte*>(io_uring_recvmsg_payload(o, &s.recv_hdr));
  const std::size_t len = io_uring_recvmsg_payload_length(o, res, &s.recv_hdr);
  frame.bytes = std::span<const std::byte>(payload, len);
  ++stats_.rx_datagrams;
  stats_.rx_bytes += len;
  return true;
}

std::size_t UringDriver::rx_burst(std::span<rt::RxFrame> out) {
  State& s = *s_;
  recycle_held();
  publish_buffers();
  if (!s.armed && s.in_kernel > 0) arm_receive();
  // At most one enter per burst: it submits held sends and a re-arm if any and runs the
  // deferred task work that moves datagrams from the socket into buffers and completions.
  // With nothing to submit and no task work flagged, the CQ already holds all there is (a wait
  // that just woke on a datagram reaped it), and the enter is skipped.
  if (io_uring_sq_ready(&s.ring) > 0 || s.kernel_has_news()) enter_for_rx();
  reap();

  std::size_t n = 0;
  for (int refill = 0;; ++refill) {
    while (n < out.size() && s.ready_count > 0) {
      const State::Ready r = s.ready[s.ready_head];
      s.ready_head = (s.ready_head + 1) & (s.nbuf - 1);
      --s.ready_count;
      if (frame_from(r.bid, r.res, out[n])) {
        s.held[s.held_count++] = r.bid;
        ++n;
      } else {
        give_back(r.bid);
      }
    }
    // A short burst must mean an empty socket (caps: short_burst_means_empty), so datagrams
    // that arrived since the enter are fetched now, while the kernel says there are some.
    if (n == out.size() || !s.taskrun_flag || refill == kRxRefills) break;
    if ((s.sq_flags() & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) == 0) break;
    publish_buffers();
    if (!s.armed && s.in_kernel > 0) arm_receive();
    enter_for_rx();
    reap();
  }
  // Dropped frames' buffers can go back at once; a re-arm waits for the next enter.
  publish_buffers();
  if (!s.armed && s.in_kernel > 0) arm_receive();
  return n;
}

void UringDriver::enter_for_rx() {
  ++stats_.rx_syscalls;
  s_->tx_held = 0;
  (void)io_uring_submit_and_get_events(&s_->ring);
}

bool UringDriver::hold_small_burst(std::span<const rt::TxFrame> frames, std::size_t& handed) {
  State& s = *s_;
  if (!s.tx_deferred || s.sqpoll || frames.size() > kTxDeferMax - s.tx_held) return false;
  if (io_uring_sq_space_left(&s.ring) < frames.size() + 1) return false;  // + a re-arm
  for (const rt::TxFrame& f : frames) {
    if (f.bytes.size() > kTxCopyBytes) return false;
  }
  for (const rt::TxFrame& f : frames) {
    // Slots after the held ones: the held sends' slots are in the SQ, read at the next enter.
    const unsigned slot = s.tx_held;
    const socklen_t len = endpoint_to_sockaddr(f.to, s.ipv6, s.dual_stack, s.tx_names[slot]);
    if (len == 0) {
      ++stats_.tx_errors;
      ++stats_.tx_dropped;
      continue;
    }
    std::byte* copy = s.tx_copy.data() + std::size_t{slot} * kTxCopyBytes;
    std::memcpy(copy, f.bytes.data(), f.bytes.size());
    s.tx_iov[slot].iov_base = copy;
    s.tx_iov[slot].iov_len = f.bytes.size();
    msghdr& m = s.tx_msgs[slot];
    m = msghdr{};
    m.msg_name = &s.tx_names[slot];
    m.msg_namelen = len;
    m.msg_iov = &s.tx_iov[slot];
    m.msg_iovlen = 1;
    io_uring_sqe* sqe = io_uring_get_sqe(&s.ring);  // space checked above
    io_uring_prep_sendmsg(sqe, s.fd, &m, MSG_DONTWAIT);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, kHeldSendTag | (std::uint64_t{f.bytes.size()} << 8));
    ++stats_.tx_datagrams;
    stats_.tx_bytes += f.bytes.size();
    ++s.tx_held;
    ++handed;
  }
  return true;
}

void UringDriver::submit_held() {
  State& s = *s_;
  if (s.tx_held == 0) return;
  s.tx_held = 0;
  ++stats_.tx_syscalls;
  (void)io_uring_submit(&s.ring);
  reap();
}

std::size_t UringDriver::tx_burst(std::span<const rt::TxFrame> frames) {
  State& s = *s_;
  std::size_t handed = 0;
  if (hold_small_burst(frames, handed)) return handed;
  // The per-frame slots below are the held sends' too: those go first.
  submit_held();
  for (std::size_t off = 0; off < frames.size(); off += s.burst) {
    const std::size_t end = std::min(frames.size(), off + s.burst);
    unsigned prepared = 0;
    for (std::size_t i = off; i < end; ++i) {
      const rt::TxFrame& f = frames[i];
      const socklen_t len = endpoint_to_sockaddr(f.to, s.ipv6, s.dual_stack, s.tx_names[prepared]);
      if (len == 0) {
        // The address family cannot leave this socket; no retry changes that.
        ++stats_.tx_errors;
        ++stats_.tx_dropped;
        continue;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(&s.ring);
      if (sqe == nullptr) {
        ++stats_.tx_syscalls;
        (void)io_uring_submit(&s.ring);
        sqe = io_uring_get_sqe(&s.ring);
      }
      if (sqe == nullptr) {
        ++stats_.tx_dropped;
        continue;
      }
      s.tx_iov[prepared].iov_base = const_cast<std::byte*>(f.bytes.data());
      s.tx_iov[prepared].iov_len = f.bytes.size();
      msghdr& m = s.tx_msgs[prepared];
      m = msghdr{};
      m.msg_name = &s.tx_names[prepared];
      m.msg_namelen = len;
      m.msg_iov = &s.tx_iov[prepared];
      m.msg_iovlen = 1;
      // MSG_DONTWAIT: a full socket buffer completes with -EAGAIN instead of parking the send
      // on a poll, so the kernel never reads the caller's bytes after tx_burst returns.
      io_uring_prep_sendmsg(sqe, s.fd, &m, MSG_DONTWAIT);
      io_uring_sqe_set_data64(sqe, kSendTag);
      ++prepared;
    }
    if (prepared == 0) continue;
    s.tx_inflight += prepared;
    handed += prepared;
    // Without SQPOLL the sends are issued, and completed, inside this one submit. A refused
    // submit (a full CQ backlog on old kernels) is retried after reaping: the queued SQEs
    // point at slots the next chunk overwrites.
    for (int attempt = 0; attempt < 4; ++attempt) {
      ++stats_.tx_syscalls;
      const int r = io_uring_submit(&s.ring);
      reap();
      if (r >= 0 || s.sqpoll) break;
    }
    for (int slice = 0; s.sqpoll && s.tx_inflight > 0 && slice < kSqpollWaitSlices; ++slice) {
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec ts{0, 1000000};
      ++stats_.tx_syscalls;
      (void)io_uring_submit_and_wait_timeout(&s.ring, &cqe, 1, &ts, nullptr);
      reap();
    }
  }
  return handed;
}

void UringDriver::wait(std::uint64_t timeout_us) {
  State& s = *s_;
  reap();
  // Work is already waiting, or nothing can arrive until rx_burst returns buffers: sleeping
  // now would only delay the caller (held sends go now all the same).
  if (s.ready_count > 0 || (!s.armed && s.in_kernel == 0)) {
    submit_held();
    return;
  }
  if (!s.armed) arm_receive();
  if (s.wake_fd >= 0 && !s.wake_armed) {
    if (io_uring_sqe* sqe = io_uring_get_sqe(&s.ring)) {
      io_uring_prep_poll_multishot(sqe, s.wake_fd, POLLIN);
      io_uring_sqe_set_data64(sqe, kWakeTag);
      s.wake_armed = true;
    }
  }
  // The one enter of an idle wake-up: it submits the held sends (and any re-arm), sleeps, and
  // runs the task work that turns the waking datagram into a completion for rx_burst.
  io_uring_cqe* cqe = nullptr;
  s.tx_held = 0;
  ++stats_.wait_syscalls;
  if (timeout_us == 0) {
    (void)io_uring_submit_and_get_events(&s.ring);
    return;
  }
  if (timeout_us == UINT64_MAX) {
    (void)io_uring_submit_and_wait(&s.ring, 1);
    return;
  }
  // Clamp so a far deadline cannot overflow; the caller re-waits anyway.
  const std::uint64_t capped = std::min<std::uint64_t>(timeout_us, 3600ull * 1000000ull);
  __kernel_timespec ts{};
  ts.tv_sec = static_cast<long long>(capped / 1000000);
  ts.tv_nsec = static_cast<long long>((capped % 1000000) * 1000);
  (void)io_uring_submit_and_wait_timeout(&s.ring, &cqe, 1, &ts, nullptr);
}

void UringDriver::set_tx_deferred(bool on) {
  if (!on) submit_held();
  s_->tx_deferred = on;
}

void UringDriver::set_wake_fd(int fd) {
  s_->wake_fd = fd;
  s_->wake_armed = false;
}

void UringDriver::set_time(std::uint64_t now_us) { drop_poll_.poll(s_->fd, now_us, stats_); }

void UringDriver::refresh_stats() {
  // The owner's last report, or a look between bursts: held sends are not left waiting on it.
  submit_held();
  stats_.rx_kernel_dropped = kernel_receive_drops(s_->fd);
}

rt::DriverCaps UringDriver::caps() const {
  rt::DriverCaps c;
  c.dual_stack = s_->dual_stack;
  c.waitable = true;
  c.max_burst = s_->burst;
  c.max_datagram = s_->payload_capacity;
  // rx_burst fetches what the kernel flags as arrived before it returns a short burst; without
  // the flag it cannot tell, and is asked again while bursts bring anything.
  c.short_burst_means_empty = s_->taskrun_flag;
  return c;
}

}  // namespace tern::drv
