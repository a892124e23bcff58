#include "proxy.hpp"

#include "common/signals.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace tern::netem {

namespace {

constexpr std::size_t kBatch = 32;
constexpr std::size_t kRxBytes = 65536;  // any UDP datagram fits: oversize is measured, not cut
constexpr int kBatchesPerWake = 8;       // then serve timers and other sockets
constexpr std::uint64_t kListenTag = ~std::uint64_t{0};
constexpr std::uint64_t kTickNs = 1000000000;

volatile std::sig_atomic_t g_reload_requested = 0;

void on_sighup(int) { g_reload_requested = 1; }

// Without SA_RESTART, so the wait returns at once to act on it.
void install_reload_handler() {
  struct sigaction sa = {};
  sa.sa_handler = on_sighup;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGHUP, &sa, nullptr);
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

socklen_t to_sockaddr(const Endpoint& e, sockaddr_storage& ss) {
  std::memset(&ss, 0, sizeof ss);
  if (e.is_v4()) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(e.port);
    sin->sin_addr.s_addr = htonl(e.v4_host_order());
    return sizeof(sockaddr_in);
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(e.port);
  std::memcpy(&sin6->sin6_addr, e.addr.data(), 16);
  return sizeof(sockaddr_in6);
}

Endpoint from_sockaddr(const sockaddr_storage& ss) {
  if (ss.ss_family == AF_INET) {
    const auto* sin = reinterpret_cast<const sockaddr_in*>(&ss);
    return Endpoint::v4(ntohl(sin->sin_addr.s_addr), ntohs(sin->sin_port));
  }
  const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&ss);
  std::uint8_t bytes[16];
  std::memcpy(bytes, &sin6->sin6_addr, 16);
  return Endpoint::v6(bytes, ntohs(sin6->sin6_port));
}

// A burst the server answers at once must wait in the kernel while the loop serves others; the
// buffer is only a limit, memory is used as datagrams wait. Beyond rmem_max without the
// privilege for SO_RCVBUFFORCE.
void set_receive_buffer(int fd, int bytes) {
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
  }
  // What still overflows is counted by the kernel and reported with later datagrams, so the
  // proxy's counters can say so instead of passing a kernel drop off as an impairment.
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_RXQ_OVFL, &on, sizeof on);
}

// The socket's drop count carried by a received datagram, or `seen` when it carries none.
std::uint32_t kernel_drop_count(const msghdr& h, std::uint32_t seen) {
  for (const cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&h), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_RXQ_OVFL) {
      std::uint32_t v;
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      return v;
    }
  }
  return seen;
}

struct Flow {
  bool used = false;
  int fd = -1;
  Endpoint client;
  sockaddr_storage client_addr{};
  socklen_t client_len = 0;
  std::uint64_t index = 0;
  std::uint64_t last_active_ns = 0;
  std::uint32_t kernel_drops = 0;  // the socket's SO_RXQ_OVFL count seen so far
  DirState dir[2];
};

struct Scheduled {
  std::uint64_t release_ns;
  std::uint64_t order;  // arrival order breaks ties, so equal release times keep it
  std::uint32_t slot;
  std::uint32_t flow;
  std::uint32_t len;
  std::uint8_t dir;
};

struct LaterFirst {
  bool operator()(const Scheduled& a, const Scheduled& b) const {
    return a.release_ns != b.release_ns ? a.release_ns > b.release_ns : a.order > b.order;
  }
};

class Proxy {
 public:
  Proxy(const Config& c, Reload reload) : c_(c), reload_(std::move(reload)) {}
  ~Proxy();
  int run();

 private:
  bool open_sockets();
  void wait(std::uint64_t timeout_ns);
  void on_listen_readable(std::uint64_t now);
  void on_flow_readable(std::uint32_t slot, std::uint64_t now);
  void accept_datagram(int d, std::uint32_t flow, const std::byte* data, std::size_t len,
                       std::uint64_t now);
  void release_due(std::uint64_t now);
  void flush_down();
  Flow* flow_for(const sockaddr_storage& from, socklen_t len, std::uint64_t now,
                 std::uint32_t& slot);
  void expire_idle(std::uint64_t now);
  void report(std::uint64_t now, bool final);
  std::string json(std::uint64_t now) const;
  bool write_stats(std::uint64_t now);

  void reload();

  Config c_;
  Reload reload_;
  std::uint64_t reloads_ = 0;
  std::uint64_t reloads_refused_ = 0;
  int epoll_fd_ = -1;
  int listen_fd_ = -1;
  sockaddr_storage upstream_addr_{};
  socklen_t upstream_len_ = 0;
  std::uint64_t start_ns_ = 0;

  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_flows_;
  std::unordered_map<Endpoint, std::uint32_t, EndpointHash> by_client_;
  std::uint64_t next_flow_index_ = 0;
  std::uint64_t flows_created_ = 0;
  std::uint64_t flows_expired_ = 0;
  std::uint64_t flows_refused_ = 0;  // datagrams from new clients past max_flows or fd limits
  bool told_socket_error_ = false;
  bool told_stats_error_ = false;

  std::unique_ptr<std::byte[]> pool_;
  std::vector<std::uint32_t> free_slots_;
  std::vector<Scheduled> heap_;  // capacity `pool`: never grows
  std::uint64_t order_ = 0;
  DirCounters counters_[2];

  // Receive batch (shared by every socket) and the downstream send batch.
  std::unique_ptr<std::byte[]> rx_;
  mmsghdr rx_msgs_[kBatch]{};
  iovec rx_iov_[kBatch]{};
  sockaddr_storage rx_from_[kBatch]{};
  alignas(cmsghdr) char rx_control_[kBatch][CMSG_SPACE(sizeof(std::uint32_t))]{};
  std::uint32_t listen_kernel_drops_ = 0;
  mmsghdr tx_msgs_[kBatch]{};
  iovec tx_iov_[kBatch]{};
  std::uint32_t tx_slots_[kBatch]{};
  std::size_t tx_count_ = 0;
  bool have_pwait2_ = true;
};

Proxy::~Proxy() {
  for (Flow& f : flows_) {
    if (f.fd >= 0) close(f.fd);
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
}

bool Proxy::open_sockets() {
  // One descriptor per flow: ask for the hard limit up front.
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    std::perror("tern-netem: epoll_create1");
    return false;
  }
  sockaddr_storage ss;
  const socklen_t len = to_sockaddr(c_.listen, ss);
  listen_fd_ = socket(ss.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    std::perror("tern-netem: socket");
    return false;
  }
  if (ss.ss_family == AF_INET6) {
    const int off = 0;  // "*:PORT" serves IPv4 clients too
    setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  }
  // Bursts from many clients wait here while the loop is busy.
  set_receive_buffer(listen_fd_, 32 << 20);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    std::fprintf(stderr, "tern-netem: cannot listen on %s: %s\n", c_.listen.to_string().c_str(),
                 std::strerror(errno));
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  upstream_len_ = to_sockaddr(c_.upstream, upstream_addr_);

  sockaddr_storage bound;
  socklen_t bound_len = sizeof bound;
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  std::printf("listening %s upstream %s\n", from_sockaddr(bound).to_string().c_str(),
              c_.upstream.to_string().c_str());
  std::fflush(stdout);
  return true;
}

Flow* Proxy::flow_for(const sockaddr_storage& from, socklen_t len, std::uint64_t now,
                      std::uint32_t& slot) {
  const Endpoint key = from_sockaddr(from);
  if (const auto it = by_client_.find(key); it != by_client_.end()) {
    slot = it->second;
    return &flows_[slot];
  }
  if (free_flows_.empty()) {
    ++flows_refused_;
    return nullptr;
  }
  const int fd = socket(upstream_addr_.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 ||
      connect(fd, reinterpret_cast<const sockaddr*>(&upstream_addr_), upstream_len_) != 0) {
    if (!told_socket_error_) {
      std::fprintf(stderr,
                   "tern-netem: cannot open an upstream socket for %s: %s (counted as refused)\n",
                   key.to_string().c_str(), std::strerror(errno));
      told_socket_error_ = true;
    }
    if (fd >= 0) close(fd);
    ++flows_refused_;
    return nullptr;
  }
  set_receive_buffer(fd, 4 << 20);
  slot = free_flows_.back();
  free_flows_.pop_back();
  Flow& f = flows_[slot];
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = slot;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  f.used = true;
  f.fd = fd;
  f.kernel_drops = 0;
  f.client = key;
  f.client_addr = from;
  f.client_len = len;
  f.index = next_flow_index_++;
  f.last_active_ns = now;
  for (int d = 0; d < 2; ++d) {
    f.dir[d] = DirState{};
    f.dir[d].rng.seed(stream_seed(c_.seed, f.index, d));
  }
  by_client_.emplace(key, slot);
  ++flows_created_;
  return &f;
}

void Proxy::expire_idle(std::uint64_t now) {
  const std::uint64_t idle_ns = c_.idle_timeout_ms * 1000000;
  for (std::uint32_t i = 0; i < flows_.size(); ++i) {
    Flow& f = flows_[i];
    // A flow with datagrams still scheduled keeps its slot: the heap refers to it.
    if (!f.used || now - f.last_active_ns < idle_ns || f.dir[0].held != 0 || f.dir[1].held != 0) {
      continue;
    }
    close(f.fd);
    by_client_.erase(f.client);
    f.used = false;
    f.fd = -1;
    free_flows_.push_back(i);
    ++flows_expired_;
  }
}

void Proxy::accept_datagram(int d, std::uint32_t flow, const std::byte* data, std::size_t len,
                            std::uint64_t now) {
  Flow& f = flows_[flow];
  f.last_active_ns = now;
  const Impairment& imp = c_.dir[d];
  DirCounters& cnt = counters_[d];
  // The mtu drop is the impairment's; beyond it, what does not fit a buffer is the proxy's.
  if (len > c_.slot_bytes && !(imp.mtu != 0 && len > imp.mtu)) {
    ++cnt.in;
    cnt.in_bytes += len;
    ++cnt.drop_oversize;
    return;
  }
  const Plan plan = plan_datagram(imp, f.dir[d], cnt, now, len);
  for (int i = 0; i < plan.copies; ++i) {
    if (free_slots_.empty()) {
      ++cnt.drop_pool;
      released(f.dir[d], cnt);
      continue;
    }
    const std::uint32_t slot = free_slots_.back();
    free_slots_.pop_back();
    std::memcpy(pool_.get() + std::size_t{slot} * c_.slot_bytes, data, len);
    heap_.push_back(Scheduled{plan.release_ns[i], order_++, slot, flow,
                              static_cast<std::uint32_t>(len), static_cast<std::uint8_t>(d)});
    std::push_heap(heap_.begin(), heap_.end(), LaterFirst{});
  }
}

void Proxy::on_listen_readable(std::uint64_t now) {
  for (int round = 0; round < kBatchesPerWake; ++round) {
    for (std::size_t i = 0; i < kBatch; ++i) {
      rx_msgs_[i].msg_hdr.msg_namelen = sizeof rx_from_[i];
      rx_msgs_[i].msg_hdr.msg_controllen = sizeof rx_control_[i];
    }
    const int n = recvmmsg(listen_fd_, rx_msgs_, kBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      const std::uint32_t drops = kernel_drop_count(rx_msgs_[i].msg_hdr, listen_kernel_drops_);
      counters_[kUp].drop_kernel += drops - listen_kernel_drops_;
      listen_kernel_drops_ = drops;
      std::uint32_t slot;
      if (flow_for(rx_from_[i], rx_msgs_[i].msg_hdr.msg_namelen, now, slot) == nullptr) continue;
      accept_datagram(kUp, slot, rx_.get() + std::size_t(i) * kRxBytes, rx_msgs_[i].msg_len, now);
    }
    if (static_cast<std::size_t>(n) < kBatch) return;
  }
}

void Proxy::on_flow_readable(std::uint32_t slot, std::uint64_t now) {
  Flow& f = flows_[slot];
  for (int round = 0; round < kBatchesPerWake; ++round) {
    for (std::size_t i = 0; i < kBatch; ++i) {
      rx_msgs_[i].msg_hdr.msg_namelen = 0;
      rx_msgs_[i].msg_hdr.msg_controllen = sizeof rx_control_[i];
    }
    // Errors are the upstream's ICMP replies (ECONNREFUSED while no server listens): the
    // client's datagrams were already counted out, the socket stays for the next try.
    const int n = recvmmsg(f.fd, rx_msgs_, kBatch, MSG_DONTWAIT, nullptr);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      const std::uint32_t drops = kernel_drop_count(rx_msgs_[i].msg_hdr, f.kernel_drops);
      counters_[kDown].drop_kernel += drops - f.kernel_drops;
      f.kernel_drops = drops;
      accept_datagram(kDown, slot, rx_.get() + std::size_t(i) * kRxBytes, rx_msgs_[i].msg_len, now);
    }
    if (static_cast<std::size_t>(n) < kBatch) return;
  }
}

void Proxy::flush_down() {
  std::size_t sent = 0;
  while (sent < tx_count_) {
    const int n = sendmmsg(listen_fd_, tx_msgs_ + sent, static_cast<unsigned>(tx_count_ - sent), 0);
    if (n > 0) {
      for (std::size_t i = sent; i < sent + static_cast<std::size_t>(n); ++i) {
        ++counters_[kDown].out;
        counters_[kDown].out_bytes += tx_iov_[i].iov_len;
      }
      sent += static_cast<std::size_t>(n);
    } else {
      // The first remaining one was refused (full buffer, unreachable client): count and skip.
      ++counters_[kDown].drop_send;
      ++sent;
    }
  }
  for (std::size_t i = 0; i < tx_count_; ++i) free_slots_.push_back(tx_slots_[i]);
  tx_count_ = 0;
}

void Proxy::release_due(std::uint64_t now) {
  while (!heap_.empty() && heap_.front().release_ns <= now) {
    std::pop_heap(heap_.begin(), heap_.end(), LaterFirst{});
    const Scheduled s = heap_.back();
    heap_.pop_back();
    Flow& f = flows_[s.flow];
    std::byte* data = pool_.get() + std::size_t{s.slot} * c_.slot_bytes;
    released(f.dir[s.dir], counters_[s.dir]);
    if (s.dir == kUp) {
      if (send(f.fd, data, s.len, 0) == static_cast<ssize_t>(s.len)) {
        ++counters_[kUp].out;
        counters_[kUp].out_bytes += s.len;
      } else {
        ++counters_[kUp].drop_send;
      }
      free_slots_.push_back(s.slot);
      continue;
    }
    tx_iov_[tx_count_] = iovec{data, s.len};
    msghdr& h = tx_msgs_[tx_count_].msg_hdr;
    h = msghdr{};
    h.msg_name = &f.client_addr;
    h.msg_namelen = f.client_len;
    h.msg_iov = &tx_iov_[tx_count_];
    h.msg_iovlen = 1;
    tx_slots_[tx_count_++] = s.slot;
    if (tx_count_ == kBatch) flush_down();
  }
  if (tx_count_ != 0) flush_down();
}

void Proxy::wait(std::uint64_t timeout_ns) {
  epoll_event events[64];
  int n;
  if (have_pwait2_) {
    timespec ts{static_cast<time_t>(timeout_ns / 1000000000),
                static_cast<long>(timeout_ns % 1000000000)};
    n = epoll_pwait2(epoll_fd_, events, 64, &ts, nullptr);
    if (n < 0 && errno == ENOSYS) {
      have_pwait2_ = false;
      return;
    }
  } else {
    n = epoll_wait(epoll_fd_, events, 64, static_cast<int>((timeout_ns + 999999) / 1000000));
  }
  if (n <= 0) return;
  const std::uint64_t now = now_ns();
  for (int i = 0; i < n; ++i) {
    const std::uint64_t tag = events[i].data.u64;
    if (tag == kListenTag) {
      on_listen_readable(now);
    } else if (flows_[tag].used) {
      on_flow_readable(static_cast<std::uint32_t>(tag), now);
    }
  }
}

std::string Proxy::json(std::uint64_t now) const {
  std::string out;
  char buf[512];
  std::snprintf(
      buf, sizeof buf,
      "{\n  \"elapsed_s\": %.3f,\n  \"seed\": %llu,\n  \"flows_active\": %zu,\n"
      "  \"flows_created\": %llu,\n  \"flows_expired\": %llu,\n  \"flows_refused\": %llu,\n"
      "  \"reloads\": %llu,\n  \"reloads_refused\": %llu",
      static_cast<double>(now - start_ns_) / 1e9, static_cast<unsigned long long>(c_.seed),
      by_client_.size(), static_cast<unsigned long long>(flows_created_),
      static_cast<unsigned long long>(flows_expired_),
      static_cast<unsigned long long>(flows_refused_), static_cast<unsigned long long>(reloads_),
      static_cast<unsigned long long>(reloads_refused_));
  out += buf;
  for (int d = 0; d < 2; ++d) {
    const DirCounters& k = counters_[d];
    const std::pair<const char*, std::uint64_t> fields[] = {
        {"in", k.in},
        {"in_bytes", k.in_bytes},
        {"out", k.out},
        {"out_bytes", k.out_bytes},
        {"drop_mtu", k.drop_mtu},
        {"drop_loss", k.drop_loss},
        {"loss_bursts", k.loss_bursts},
        {"drop_queue", k.drop_queue},
        {"drop_oversize", k.drop_oversize},
        {"drop_pool", k.drop_pool},
        {"drop_send", k.drop_send},
        {"drop_kernel", k.drop_kernel},
        {"duplicated", k.duplicated},
        {"reordered", k.reordered},
        {"queued", k.queued},
        {"queued_peak", k.queued_peak},
    };
    out += ",\n  \"";
    out += kDirName[d];
    out += "\": {";
    bool first = true;
    for (const auto& [name, value] : fields) {
      std::snprintf(buf, sizeof buf, "%s\"%s\": %llu", first ? "" : ", ", name,
                    static_cast<unsigned long long>(value));
      out += buf;
      first = false;
    }
    out += "}";
  }
  out += "\n}\n";
  return out;
}

bool Proxy::write_stats(std::uint64_t now) {
  // Written aside and renamed, so a script polling the file never reads half of it.
  const std::string tmp = c_.stats_json + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const std::string text = json(now);
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  return (std::fclose(f) == 0) && ok && std::rename(tmp.c_str(), c_.stats_json.c_str()) == 0;
}

void Proxy::report(std::uint64_t now, bool final) {
  if (!c_.stats_json.empty() && !write_stats(now) && !told_stats_error_) {
    std::fprintf(stderr, "tern-netem: cannot write %s: %s\n", c_.stats_json.c_str(),
                 std::strerror(errno));
    told_stats_error_ = true;
  }
  auto dir_text = [&](int d) {
    const DirCounters& k = counters_[d];
    char buf[320];
    std::snprintf(
        buf, sizeof buf,
        "%s in=%llu out=%llu drop loss=%llu mtu=%llu queue=%llu oversize=%llu pool=%llu "
        "send=%llu kernel=%llu dup=%llu reorder=%llu queued=%llu",
        kDirName[d], static_cast<unsigned long long>(k.in), static_cast<unsigned long long>(k.out),
        static_cast<unsigned long long>(k.drop_loss), static_cast<unsigned long long>(k.drop_mtu),
        static_cast<unsigned long long>(k.drop_queue),
        static_cast<unsigned long long>(k.drop_oversize),
        static_cast<unsigned long long>(k.drop_pool), static_cast<unsigned long long>(k.drop_send),
        static_cast<unsigned long long>(k.drop_kernel),
        static_cast<unsigned long long>(k.duplicated), static_cast<unsigned long long>(k.reordered),
        static_cast<unsigned long long>(k.queued));
    return std::string(buf);
  };
  const double elapsed = static_cast<double>(now - start_ns_) / 1e9;
  if (!final) {
    if (!c_.quiet) {
      std::fprintf(stderr, "netem %.0fs flows=%zu refused=%llu | %s | %s\n", elapsed,
                   by_client_.size(), static_cast<unsigned long long>(flows_refused_),
                   dir_text(kUp).c_str(), dir_text(kDown).c_str());
    }
    return;
  }
  std::printf(
      "netem done elapsed_s=%.3f seed=%llu flows_created=%llu flows_expired=%llu "
      "refused=%llu | %s | %s\n",
      elapsed, static_cast<unsigned long long>(c_.seed),
      static_cast<unsigned long long>(flows_created_),
      static_cast<unsigned long long>(flows_expired_),
      static_cast<unsigned long long>(flows_refused_), dir_text(kUp).c_str(),
      dir_text(kDown).c_str());
  std::fflush(stdout);
}

void Proxy::reload() {
  Config fresh;
  std::string error;
  if (!reload_ || !reload_(fresh, error)) {
    std::fprintf(stderr, "tern-netem: reload refused, impairments unchanged: %s\n", error.c_str());
    ++reloads_refused_;
    return;
  }
  // Flows, their PRNG streams, queues and links carry on; only the rules change. Sockets and
  // buffers were sized at start.
  c_.dir[kUp] = fresh.dir[kUp];
  c_.dir[kDown] = fresh.dir[kDown];
  ++reloads_;
  const bool same_rest = fresh.listen == c_.listen && fresh.upstream == c_.upstream &&
                         fresh.seed == c_.seed && fresh.max_flows == c_.max_flows &&
                         fresh.pool == c_.pool && fresh.slot_bytes == c_.slot_bytes &&
                         fresh.idle_timeout_ms == c_.idle_timeout_ms;
  std::fprintf(stderr, "tern-netem: reloaded the impairments%s\n",
               same_rest ? "" : " (other changed keys need a restart and were ignored)");
}

int Proxy::run() {
  flows_.resize(c_.max_flows);
  free_flows_.reserve(c_.max_flows);
  for (std::uint32_t i = c_.max_flows; i > 0; --i) free_flows_.push_back(i - 1);
  by_client_.reserve(c_.max_flows);
  // Default-initialised: pages the traffic never reaches are never touched.
  pool_.reset(new (std::nothrow) std::byte[std::size_t{c_.pool} * c_.slot_bytes]);
  if (pool_ == nullptr) {
    std::fprintf(stderr, "tern-netem: cannot reserve pool * slot_bytes = %zu bytes\n",
                 std::size_t{c_.pool} * c_.slot_bytes);
    return kExitFailure;
  }
  free_slots_.reserve(c_.pool);
  for (std::uint32_t i = c_.pool; i > 0; --i) free_slots_.push_back(i - 1);
  heap_.reserve(c_.pool);
  rx_.reset(new std::byte[kBatch * kRxBytes]);
  for (std::size_t i = 0; i < kBatch; ++i) {
    rx_iov_[i] = iovec{rx_.get() + i * kRxBytes, kRxBytes};
    rx_msgs_[i].msg_hdr.msg_iov = &rx_iov_[i];
    rx_msgs_[i].msg_hdr.msg_iovlen = 1;
    rx_msgs_[i].msg_hdr.msg_name = &rx_from_[i];
    rx_msgs_[i].msg_hdr.msg_control = rx_control_[i];
  }
  start_ns_ = now_ns();
  // At once, so a bad path fails the start rather than every report, and scripts have a file
  // to poll from the beginning.
  if (!c_.stats_json.empty() && !write_stats(start_ns_)) {
    std::fprintf(stderr, "tern-netem: cannot write %s: %s\n", c_.stats_json.c_str(),
                 std::strerror(errno));
    return kExitFailure;
  }
  // Before the listening line: a script may signal as soon as it reads it.
  app::install_stop_handler();
  install_reload_handler();
  if (!open_sockets()) return kExitFailure;
  const std::uint64_t end_ns =
      c_.duration_ms == 0 ? ~std::uint64_t{0} : start_ns_ + c_.duration_ms * 1000000;
  std::uint64_t next_tick = start_ns_ + kTickNs;
  for (;;) {
    std::uint64_t now = now_ns();
    release_due(now);
    if (app::stop_requested() || now >= end_ns) break;
    if (g_reload_requested != 0) {
      g_reload_requested = 0;
      reload();
    }
    if (now >= next_tick) {
      report(now, false);
      expire_idle(now);
      next_tick += kTickNs;
      if (next_tick <= now) next_tick = now + kTickNs;
    }
    std::uint64_t until = std::min(next_tick, end_ns);
    if (!heap_.empty()) until = std::min(until, heap_.front().release_ns);
    wait(until > now ? until - now : 0);
  }
  report(now_ns(), true);
  return kExitOk;
}

}  // namespace

int run(const Config& config, Reload reload) {
  Proxy proxy(config, std::move(reload));
  return proxy.run();
}

}  // namespace tern::netem
