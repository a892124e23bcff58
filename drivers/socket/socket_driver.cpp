// Kernel UDP sockets batched with recvmmsg/sendmmsg (DESIGN §6).
#include "socket_driver.hpp"

#include "sockaddr.hpp"

#include <arpa/inet.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>
#include <vector>

namespace tern::drv {
namespace {

// How long one tx_burst may sleep in total on a full send buffer: UDP promises no delivery, so
// a stalled poll loop costs more than the datagrams it would save.
constexpr int kWriteWaitSlices = 4;
constexpr int kWriteWaitSliceMs = 1;

std::string errno_text(int err) { return std::strerror(err); }
// Buffer sizes are requests: with CAP_NET_ADMIN the FORCE variant passes rmem_max/wmem_max,
// otherwise the kernel clamps silently. Neither outcome is worth failing the open for.
void request_buffer(int fd, int force_opt, int opt, int bytes) {
  if (bytes <= 0) return;
  if (::setsockopt(fd, SOL_SOCKET, force_opt, &bytes, sizeof bytes) == 0) return;
  (void)::setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof bytes);
}

class FdGuard {
 public:
  explicit FdGuard(int fd) : fd_(fd) {}
  ~FdGuard() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdGuard(const FdGuard&) = delete;
  FdGuard& operator=(const FdGuard&) = delete;
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

struct SocketDriver::Batch {
  explicit Batch(std::size_t n)
      : rx_slots(n * kRxSlotBytes),
        rx_names(n),
        rx_iov(n),
        rx_msgs(n),
        tx_names(n),
        tx_iov(n),
        tx_msgs(n) {
    // The receive side never changes where it points, so wire it once.
    for (std::size_t i = 0; i < n; ++i) {
      rx_iov[i].iov_base = rx_slots.data() + i * kRxSlotBytes;
      rx_iov[i].iov_len = kRxSlotBytes;
      rx_msgs[i] = mmsghdr{};
      rx_msgs[i].msg_hdr.msg_name = &rx_names[i];
      rx_msgs[i].msg_hdr.msg_iov = &rx_iov[i];
      rx_msgs[i].msg_hdr.msg_iovlen = 1;
      rx_msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
    }
  }

  std::vector<std::byte> rx_slots;
  std::vector<sockaddr_storage> rx_names;
  std::vector<iovec> rx_iov;
  std::vector<mmsghdr> rx_msgs;
  std::vector<sockaddr_storage> tx_names;
  std::vector<iovec> tx_iov;
  std::vector<mmsghdr> tx_msgs;
};

std::unique_ptr<SocketDriver> open_socket_driver(const SocketOptions& options, std::string& error) {
  const Endpoint& bind_to = options.bind;
  const bool ipv6 = !bind_to.is_v4();
  const bool dual_stack = ipv6 && bind_to.is_unspecified() && !options.v6_only;
  const std::string where = bind_to.to_string();

  const int raw = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (raw < 0) {
    error = std::string("socket(") + (ipv6 ? "AF_INET6" : "AF_INET") + ") for " + where + ": " +
            errno_text(errno);
    return nullptr;
  }
  FdGuard fd(raw);

  if (ipv6) {
    // Set explicitly: the system default (net.ipv6.bindv6only) differs between machines.
    const int v6_only = dual_stack ? 0 : (options.v6_only ? 1 : 0);
    if (::setsockopt(raw, IPPROTO_IPV6, IPV6_V6ONLY, &v6_only, sizeof v6_only) != 0) {
      error = "setsockopt(IPV6_V6ONLY) for " + where + ": " + errno_text(errno);
      return nullptr;
    }
  }
  if (options.reuse_port) {
    const int on = 1;
    if (::setsockopt(raw, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
      error = "setsockopt(SO_REUSEPORT) for " + where + ": " + errno_text(errno);
      return nullptr;
    }
  }
  request_buffer(raw, SO_RCVBUFFORCE, SO_RCVBUF, options.receive_buffer);
  request_buffer(raw, SO_SNDBUFFORCE, SO_SNDBUF, options.send_buffer);
  // Discovery pings may go to a broadcast address (tern::Host::discover); without it the
  // kernel refuses them (EACCES). Harmless for every other datagram.
  const int broadcast = 1;
  (void)::setsockopt(raw, SOL_SOCKET, SO_BROADCAST, &broadcast, sizeof broadcast);

  sockaddr_storage ss{};
  socklen_t len = 0;
  if (ipv6) {
    auto& sin6 = reinterpret_cast<sockaddr_in6&>(ss);
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(bind_to.port);
    std::memcpy(&sin6.sin6_addr, bind_to.addr.data(), 16);
    len = sizeof(sockaddr_in6);
  } else {
    len = endpoint_to_sockaddr(bind_to, false, false, ss);
  }
  if (::bind(raw, reinterpret_cast<const sockaddr*>(&ss), len) != 0) {
    const int err = errno;
    error = "bind " + where + ": " + errno_text(err);
    if (err == EADDRINUSE) {
      error += options.reuse_port
                   ? " (the holder did not set SO_REUSEPORT, or runs as another user)"
                   : " (another socket holds the port; set reuse_port to share it)";
    }
    return nullptr;
  }

  sockaddr_storage bound{};
  socklen_t bound_len = sizeof bound;
  Endpoint local;
  if (::getsockname(raw, reinterpret_cast<sockaddr*>(&bound), &bound_len) != 0 ||
      !sockaddr_to_endpoint(&bound, bound_len, local)) {
    error = "getsockname for " + where + ": " + errno_text(errno);
    return nullptr;
  }

  const std::size_t burst = std::clamp<std::size_t>(options.burst, 1, SocketDriver::kMaxBurst);
  return std::unique_ptr<SocketDriver>(
      new SocketDriver(fd.release(), ipv6, dual_stack, burst, local));
}

SocketDriver::SocketDriver(int fd, bool ipv6, bool dual_stack, std::size_t burst,
                           const Endpoint& local)
    : fd_(fd),
      ipv6_(ipv6),
      dual_stack_(dual_stack),
      burst_(burst),
      local_(local),
      batch_(std::make_unique<Batch>(burst)) {}

SocketDriver::~SocketDriver() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t SocketDriver::rx_burst(std::span<rt::RxFrame> out) {
  const std::size_t want = std::min(out.size(), burst_);
  if (want == 0) return 0;
  if (rx_known_empty_) {
    rx_known_empty_ = false;
    return 0;
  }
  Batch& b = *batch_;
  // The name length is value-result and the kernel writes it back only for the datagrams it
  // returned (msg_flags is output only), so only the last call's entries need their capacity
  // back: a busy-polling shard's empty recvmmsg then costs no rewrite of the whole burst.
  for (std::size_t i = 0; i < rx_names_used_; ++i) {
    b.rx_msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
  }
  rx_names_used_ = 0;

  int got = 0;
  do {
    ++stats_.rx_syscalls;
    got = ::recvmmsg(fd_, b.rx_msgs.data(), static_cast<unsigned>(want), MSG_DONTWAIT, nullptr);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    // An empty queue is the common case, not an error.
    if (errno != EAGAIN && errno != EWOULDBLOCK) ++stats_.rx_errors;
    return 0;
  }
  rx_names_used_ = static_cast<std::size_t>(got);

  std::size_t n = 0;
  for (int i = 0; i < got; ++i) {
    const msghdr& h = b.rx_msgs[i].msg_hdr;
    // A truncated datagram is not one of ours (it exceeds any MTU we negotiate); passing the
    // prefix on would only hand the decoder a corrupt message.
    if (h.msg_flags & MSG_TRUNC) {
      ++stats_.rx_truncated;
      continue;
    }
    Endpoint from;
    if (!sockaddr_to_endpoint(&b.rx_names[i], h.msg_namelen, from)) {
      ++stats_.rx_errors;
      continue;
    }
    const std::size_t len = b.rx_msgs[i].msg_len;
    out[n].from = from;
    out[n].bytes = std::span<const std::byte>(b.rx_slots.data() + i * kRxSlotBytes, len);
    stats_.rx_bytes += len;
    ++n;
  }
  stats_.rx_datagrams += n;
  return n;
}

std::size_t SocketDriver::tx_burst(std::span<const rt::TxFrame> frames) {
  int wait_budget = kWriteWaitSlices;
  std::size_t sent = 0;
  for (std::size_t off = 0; off < frames.size(); off += burst_) {
    sent += send_chunk(frames.subspan(off, std::min(burst_, frames.size() - off)), wait_budget);
  }
  return sent;
}

std::size_t SocketDriver::send_chunk(std::span<const rt::TxFrame> frames, int& wait_budget) {
  Batch& b = *batch_;
  std::size_t count = 0;
  for (const rt::TxFrame& f : frames) {
    const socklen_t len = endpoint_to_sockaddr(f.to, ipv6_, dual_stack_, b.tx_names[count]);
    if (len == 0) {
      // The address family cannot leave this socket; retrying would not change that.
      ++stats_.tx_errors;
      ++stats_.tx_dropped;
      continue;
    }
    b.tx_iov[count].iov_base = const_cast<std::byte*>(f.bytes.data());
    b.tx_iov[count].iov_len = f.bytes.size();
    mmsghdr& m = b.tx_msgs[count];
    m = mmsghdr{};
    m.msg_hdr.msg_name = &b.tx_names[count];
    m.msg_hdr.msg_namelen = len;
    m.msg_hdr.msg_iov = &b.tx_iov[count];
    m.msg_hdr.msg_iovlen = 1;
    ++count;
  }

  std::size_t sent = 0;
  std::size_t i = 0;
  std::size_t refused_retry_at = count;  // index already retried after a stale ICMP error
  while (i < count) {
    ++stats_.tx_syscalls;
    const int r =
        ::sendmmsg(fd_, b.tx_msgs.data() + i, static_cast<unsigned>(count - i), MSG_DONTWAIT);
    if (r > 0) {
      for (std::size_t k = i; k < i + static_cast<std::size_t>(r); ++k) {
        stats_.tx_bytes += b.tx_iov[k].iov_len;
      }
      sent += static_cast<std::size_t>(r);
      i += static_cast<std::size_t>(r);
      continue;
    }
    const int err = r == 0 ? EAGAIN : errno;
    if (err == EINTR) continue;
    if (err == EAGAIN || err == EWOULDBLOCK) {
      if (wait_budget > 0) {
        --wait_budget;
        pollfd p{fd_, POLLOUT, 0};
        ++stats_.tx_syscalls;
        (void)::poll(&p, 1, kWriteWaitSliceMs);
        continue;
      }
      stats_.tx_dropped += count - i;
      break;
    }
    // sendmmsg reports an error only for the first datagram of the vector it was given, so
    // the failure belongs to message i: count it and move past it.
    ++stats_.tx_errors;
    if (err == ECONNREFUSED && refused_retry_at != i) {
      // An ICMP error left over from an earlier datagram surfaces on whatever is sent next;
      // this datagram has not been tried yet, so it deserves one more attempt.
      refused_retry_at = i;
      continue;
    }
    ++stats_.tx_dropped;
    ++i;
  }
  stats_.tx_datagrams += sent;
  return sent;
}

void SocketDriver::wait(std::uint64_t timeout_us) {
  pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  const nfds_t n = wake_fd_ >= 0 ? 2 : 1;
  timespec ts{};
  if (timeout_us != UINT64_MAX) {
    // Clamp so a far deadline cannot overflow time_t arithmetic; the caller re-waits anyway.
    const std::uint64_t capped = std::min<std::uint64_t>(timeout_us, 3600ull * 1000000ull);
    ts.tv_sec = static_cast<time_t>(capped / 1000000);
    ts.tv_nsec = static_cast<long>((capped % 1000000) * 1000);
  }
  ++stats_.wait_syscalls;
  const int ready = ::ppoll(p, n, timeout_us == UINT64_MAX ? nullptr : &ts, nullptr);
  // A failed ppoll (EINTR) tells nothing, so the next rx_burst asks the kernel.
  rx_known_empty_ = ready >= 0 && (p[0].revents & (POLLIN | POLLERR)) == 0;
  if (wake_fd_ >= 0 && (p[1].revents & POLLIN) != 0) {
    // Emptied once it has done its job of ending a wait.
    std::uint64_t count;
    ++stats_.wait_syscalls;
    (void)!::read(wake_fd_, &count, sizeof count);
  }
}

rt::DriverCaps SocketDriver::caps() const {
  rt::DriverCaps c;
  c.dual_stack = dual_stack_;
  c.waitable = true;
  c.max_burst = burst_;
  // What arrives whole: larger datagrams can be sent but a peer on this driver drops them.
  c.max_datagram = kRxSlotBytes;
  return c;
}

std::uint64_t kernel_receive_drops(int fd) {
  std::uint32_t info[SK_MEMINFO_VARS] = {};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &len) != 0 ||
      len < (SK_MEMINFO_DROPS + 1) * sizeof(std::uint32_t)) {
    return 0;
  }
  return info[SK_MEMINFO_DROPS];
}

int SocketDriver::receive_buffer_bytes() const {
  int bytes = 0;
  socklen_t len = sizeof bytes;
  if (::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, &len) != 0) return -1;
  return bytes;
}

}  // namespace tern::drv
