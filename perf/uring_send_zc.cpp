// tern-uring-sendzc: does IORING_OP_SENDMSG_ZC beat IORING_OP_SENDMSG for Tern's datagrams?
//
// A UDP sender on 127.0.0.1 (pinned to CPU 0) sends datagrams of size S in bursts of B to a
// receiving socket drained by a recvmmsg thread (pinned to CPU 1). Modes:
//   sendmsg      IORING_OP_SENDMSG, MSG_DONTWAIT, one SQE per datagram, one submit per burst:
//                what drivers/uring/uring_driver.cpp does.
//   sendmsg_zc   IORING_OP_SENDMSG_ZC, same shape; a buffer slot is reused only after both its
//                send CQE and its notification CQE (IORING_CQE_F_NOTIF) have arrived.
//                IORING_SEND_ZC_REPORT_USAGE asks the kernel whether it copied after all.
//   send_zc_fix  IORING_OP_SEND_ZC with registered (fixed) buffers and a per-SQE address:
//                the cheapest zero-copy send io_uring offers, for comparison.
//   sendmmsg     plain sendmmsg(2), B datagrams per call, MSG_DONTWAIT (reference).
// The ring is set up like the driver's: SUBMIT_ALL | SINGLE_ISSUER | DEFER_TASKRUN, CQSIZE.
// For each mode and size: median of --reps runs of --secs seconds each.
#include <arpa/inet.h>
#include <dirent.h>
#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

namespace {

constexpr std::size_t kMaxSize = 8192;

struct Options {
  std::vector<std::size_t> sizes{64, 512, 1400, 8192};
  unsigned burst = 64;          // the driver's max_burst
  unsigned ring_entries = 256;  // the driver's ring_entries
  unsigned slots = 1024;        // buffer ring for zero-copy (must cover sends awaiting notifs)
  int reps = 5;
  double secs = 0.5;
  int sender_cpu = 0;
  int receiver_cpu = 1;
  std::vector<std::string> modes{"sendmsg", "sendmsg_zc", "send_zc_fix", "sendmmsg"};
};

std::uint64_t now_ns(clockid_t c) {
  timespec ts{};
  clock_gettime(c, &ts);
  return std::uint64_t(ts.tv_sec) * 1000000000ull + std::uint64_t(ts.tv_nsec);
}

bool pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Busy jiffies (everything but idle and iowait) of one CPU, from /proc/stat.
std::uint64_t cpu_busy_jiffies(int cpu) {
  FILE* f = std::fopen("/proc/stat", "r");
  if (f == nullptr) return 0;
  char line[512];
  char want[16];
  std::snprintf(want, sizeof(want), "cpu%d ", cpu);
  std::uint64_t busy = 0;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, want, std::strlen(want)) != 0) continue;
    unsigned long long v[10] = {};
    std::sscanf(line + std::strlen(want), "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
                &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9]);
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];  // user nice system irq softirq steal
    break;
  }
  std::fclose(f);
  return busy;
}

// Host-wide Udp RcvbufErrors from /proc/net/snmp (datagrams dropped at a full receive buffer).
std::uint64_t udp_rcvbuf_errors() {
  FILE* f = std::fopen("/proc/net/snmp", "r");
  if (f == nullptr) return 0;
  char line[1024];
  std::uint64_t v = 0;
  bool header = true;
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    if (std::strncmp(line, "Udp: ", 5) != 0) continue;
    if (header) {
      header = false;
      continue;
    }
    unsigned long long x[5] = {};
    std::sscanf(line + 5, "%llu %llu %llu %llu %llu", &x[0], &x[1], &x[2], &x[3], &x[4]);
    v = x[4];
    break;
  }
  std::fclose(f);
  return v;
}

int count_threads() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

// ---- receiver --------------------------------------------------------------------------
struct Receiver {
  int fd = -1;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> received{0};
  std::atomic<bool> ready{false};
  clockid_t cpu_clock{};
  int cpu = 1;

  void run() {
    if (!pin(cpu)) std::fprintf(stderr, "warning: cannot pin receiver to CPU %d\n", cpu);
    pthread_getcpuclockid(pthread_self(), &cpu_clock);
    constexpr unsigned kN = 64;
    std::vector<char> bufs(kN * 9000);
    mmsghdr msgs[kN];
    iovec iov[kN];
    ready.store(true);
    while (!stop.load(std::memory_order_relaxed)) {
      for (unsigned i = 0; i < kN; ++i) {
        iov[i] = {bufs.data() + i * 9000, 9000};
        msgs[i] = mmsghdr{};
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
      }
      const int n = recvmmsg(fd, msgs, kN, MSG_WAITFORONE, nullptr);
      if (n > 0) received.fetch_add(unsigned(n), std::memory_order_relaxed);
    }
  }
};

// ---- one measurement -------------------------------------------------------------------
struct Sample {
  double dgr_per_s = 0;      // sends that completed with res >= 0
  double rx_per_s = 0;       // datagrams the receiver got
  double sender_ns = 0;      // sender thread CPU / sent datagram
  double receiver_ns = 0;    // receiver thread CPU / sent datagram
  double other_ns = 0;       // process CPU minus both threads (io-wq workers) / sent datagram
  double cpu0_ns = 0;        // /proc/stat busy time of the sender's CPU / sent datagram
  double drop_frac = 0;      // host RcvbufErrors / sent datagrams
  double eagain_frac = 0;    // sends that completed -EAGAIN / attempted
  std::uint64_t errors = 0;  // other negative results
  std::uint64_t notifs = 0, copied = 0;  // zero-copy notifications, those flagged COPIED
};

struct Sender {
  const Options& o;
  int fd = -1;
  sockaddr_in dst{};
  std::vector<char> pool;  // slots * kMaxSize
  std::vector<msghdr> msgs;
  std::vector<iovec> iovs;
  std::vector<std::uint8_t> busy;  // per slot: 1 while the kernel may still read it
  std::vector<unsigned> free_list;
  io_uring ring{};
  bool ring_ok = false;
  bool fixed_ok = false;

  explicit Sender(const Options& opt) : o(opt) {
    pool.assign(std::size_t(o.slots) * kMaxSize, 'x');
    msgs.resize(o.slots);
    iovs.resize(o.slots);
    busy.assign(o.slots, 0);
  }

  bool setup_ring() {
    io_uring_params p{};
    p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
              IORING_SETUP_CQSIZE;
    p.cq_entries = std::max(4096u, 4 * o.slots);
    const int rc = io_uring_queue_init_params(o.ring_entries, &ring, &p);
    if (rc != 0) {
      std::fprintf(stderr, "io_uring_queue_init_params: %s\n", std::strerror(-rc));
      return false;
    }
    (void)io_uring_register_ring_fd(&ring);
    iovec whole{pool.data(), pool.size()};
    const int r = io_uring_register_buffers(&ring, &whole, 1);
    fixed_ok = r == 0;
    if (!fixed_ok)
      std::fprintf(stderr, "register_buffers: %s (send_zc_fix skipped)\n", std::strerror(-r));
    ring_ok = true;
    return true;
  }

  void reset_slots() {
    free_list.clear();
    for (unsigned i = o.slots; i-- > 0;) free_list.push_back(i);
    std::fill(busy.begin(), busy.end(), 0);
  }

  struct Counts {
    std::uint64_t sent = 0, eagain = 0, err = 0, attempted = 0, notifs = 0, copied = 0;
  };

  void release(unsigned slot) {
    if (--busy[slot] == 0) free_list.push_back(slot);
  }

  void reap(Counts& c) {
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0, n = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      ++n;
      const unsigned slot = unsigned(cqe->user_data);
      if (cqe->flags & IORING_CQE_F_NOTIF) {
        ++c.notifs;
        if (std::uint32_t(cqe->res) & IORING_NOTIF_USAGE_ZC_COPIED) ++c.copied;
        release(slot);
        continue;
      }
      if (cqe->res >= 0)
        ++c.sent;
      else if (cqe->res == -EAGAIN)
        ++c.eagain;
      else
        ++c.err;
      // F_MORE on a zero-copy send: a notification for this slot follows.
      if (!(cqe->flags & IORING_CQE_F_MORE)) release(slot);
    }
    io_uring_cq_advance(&ring, n);
  }

  // Waits until every slot is free again (all notifications in).
  void drain(Counts& c) {
    while (free_list.size() < o.slots) {
      io_uring_cqe* cqe = nullptr;
      __kernel_timespec ts{0, 10000000};
      (void)io_uring_submit_and_wait_timeout(&ring, &cqe, 1, &ts, nullptr);
      reap(c);
    }
  }

  Counts run_uring(int mode, std::size_t size, std::uint64_t deadline) {
    Counts c;
    reset_slots();
    const unsigned B = o.burst;
    std::uint64_t iter = 0;
    while (true) {
      if ((iter++ & 15) == 0 && now_ns(CLOCK_MONOTONIC) >= deadline) break;
      // A full burst needs B free slots: wait for notifications otherwise.
      while (free_list.size() < B) {
        io_uring_cqe* cqe = nullptr;
        (void)io_uring_submit_and_wait(&ring, 1);
        (void)cqe;
        reap(c);
      }
      for (unsigned i = 0; i < B; ++i) {
        const unsigned slot = free_list.back();
        free_list.pop_back();
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        char* buf = pool.data() + std::size_t(slot) * kMaxSize;
        if (mode == 2) {
          io_uring_prep_send_zc_fixed(sqe, fd, buf, size, MSG_DONTWAIT, IORING_SEND_ZC_REPORT_USAGE,
                                      0);
          io_uring_prep_send_set_addr(sqe, reinterpret_cast<const sockaddr*>(&dst), sizeof(dst));
        } else {
          iovs[slot] = {buf, size};
          msghdr& m = msgs[slot];
          m = msghdr{};
          m.msg_name = &dst;
          m.msg_namelen = sizeof(dst);
          m.msg_iov = &iovs[slot];
          m.msg_iovlen = 1;
          if (mode == 0) {
            io_uring_prep_sendmsg(sqe, fd, &m, MSG_DONTWAIT);
          } else {
            io_uring_prep_sendmsg_zc(sqe, fd, &m, MSG_DONTWAIT);
            sqe->ioprio |= IORING_SEND_ZC_REPORT_USAGE;
          }
        }
        io_uring_sqe_set_data64(sqe, slot);
        // Freed by the slot's last CQE: the notification for a zero-copy send whose CQE had
        // F_MORE, otherwise the send CQE itself.
        busy[slot] = 1;
      }
      c.attempted += B;
      // Plain sendmsg: the driver's io_uring_submit (inline completions need no task work).
      // Zero-copy: notifications arrive as deferred task work, which only GETEVENTS runs;
      // still one io_uring_enter per burst.
      if (mode == 0)
        (void)io_uring_submit(&ring);
      else
        (void)io_uring_submit_and_get_events(&ring);
      reap(c);
    }
    drain(c);
    return c;
  }

  Counts run_sendmmsg(std::size_t size, std::uint64_t deadline) {
    Counts c;
    const unsigned B = o.burst;
    std::vector<mmsghdr> mm(B);
    for (unsigned i = 0; i < B; ++i) {
      iovs[i] = {pool.data() + std::size_t(i) * kMaxSize, size};
      mm[i] = mmsghdr{};
      mm[i].msg_hdr.msg_name = &dst;
      mm[i].msg_hdr.msg_namelen = sizeof(dst);
      mm[i].msg_hdr.msg_iov = &iovs[i];
      mm[i].msg_hdr.msg_iovlen = 1;
    }
    std::uint64_t iter = 0;
    while (true) {
      if ((iter++ & 15) == 0 && now_ns(CLOCK_MONOTONIC) >= deadline) break;
      const int n = sendmmsg(fd, mm.data(), B, MSG_DONTWAIT);
      c.attempted += B;
      if (n >= 0) {
        c.sent += unsigned(n);
        if (unsigned(n) < B) ++c.eagain;  // the rest of the burst is not sent
      } else if (errno == EAGAIN) {
        c.eagain += B;
      } else {
        c.err += B;
      }
    }
    return c;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int mode_index(const std::string& m) {
  if (m == "sendmsg") return 0;
  if (m == "sendmsg_zc") return 1;
  if (m == "send_zc_fix") return 2;
  if (m == "sendmmsg") return 3;
  return -1;
}

std::vector<std::size_t> parse_sizes(const char* s) {
  std::vector<std::size_t> out;
  std::string str(s);
  std::size_t pos = 0;
  while (pos < str.size()) {
    const std::size_t comma = str.find(',', pos);
    const std::size_t v = std::strtoull(str.substr(pos, comma - pos).c_str(), nullptr, 10);
    if (v > 0 && v <= kMaxSize) out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::vector<std::string> parse_modes(const char* s) {
  std::vector<std::string> out;
  std::string str(s);
  std::size_t pos = 0;
  while (pos <= str.size()) {
    const std::size_t comma = str.find(',', pos);
    out.push_back(str.substr(pos, comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void usage() {
  std::fprintf(stderr,
               "usage: tern-uring-sendzc [--sizes 64,512,1400,8192] [--burst 64] [--reps 5]\n"
               "         [--secs 0.5] [--slots 1024] [--sender-cpu 0] [--receiver-cpu 1]\n"
               "         [--modes sendmsg,sendmsg_zc,send_zc_fix,sendmmsg]\n");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    if (v == nullptr) {
      usage();
      return 2;
    }
    if (a == "--sizes")
      o.sizes = parse_sizes(v);
    else if (a == "--burst")
      o.burst = unsigned(std::atoi(v));
    else if (a == "--reps")
      o.reps = std::atoi(v);
    else if (a == "--secs")
      o.secs = std::atof(v);
    else if (a == "--slots")
      o.slots = unsigned(std::atoi(v));
    else if (a == "--sender-cpu")
      o.sender_cpu = std::atoi(v);
    else if (a == "--receiver-cpu")
      o.receiver_cpu = std::atoi(v);
    else if (a == "--modes")
      o.modes = parse_modes(v);
    else {
      usage();
      return 2;
    }
    ++i;
  }
  if (o.burst == 0 || o.burst > o.ring_entries || o.slots < 2 * o.burst || o.reps < 1) {
    std::fprintf(stderr, "need 0 < burst <= %u, slots >= 2*burst, reps >= 1\n", o.ring_entries);
    return 2;
  }

  // Receiving socket, drained on its own CPU.
  Receiver rx;
  rx.cpu = o.receiver_cpu;
  rx.fd = socket(AF_INET, SOCK_DGRAM, 0);
  int rcvbuf = 8 << 20;
  if (setsockopt(rx.fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) != 0)
    (void)setsockopt(rx.fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(rx.fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror("bind");
    return 1;
  }
  socklen_t alen = sizeof(addr);
  getsockname(rx.fd, reinterpret_cast<sockaddr*>(&addr), &alen);
  timeval tv{0, 100000};  // lets the receiver see `stop`
  setsockopt(rx.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  std::thread rx_thread([&] { rx.run(); });
  while (!rx.ready.load()) std::this_thread::yield();

  if (!pin(o.sender_cpu))
    std::fprintf(stderr, "warning: cannot pin sender to CPU %d\n", o.sender_cpu);
  Sender tx(o);
  tx.fd = socket(AF_INET, SOCK_DGRAM, 0);
  tx.dst = addr;
  if (!tx.setup_ring()) return 1;

  int got_rcv = 0;
  socklen_t gl = sizeof(got_rcv);
  getsockopt(rx.fd, SOL_SOCKET, SO_RCVBUF, &got_rcv, &gl);
  const long hz = sysconf(_SC_CLK_TCK);
  std::printf(
      "# tern-uring-sendzc: 127.0.0.1 UDP, burst %u, %d reps x %.2f s (median), sender CPU %d, "
      "receiver CPU %d (recvmmsg), rcvbuf %d, kernel ring flags SUBMIT_ALL|SINGLE_ISSUER|"
      "DEFER_TASKRUN\n",
      o.burst, o.reps, o.secs, o.sender_cpu, o.receiver_cpu, got_rcv);
  std::printf(
      "# ns figures are CPU time per sent datagram; other = process - sender - receiver "
      "threads (io-wq); cpu0 = /proc/stat busy of the sender CPU (%ld Hz ticks); drop%% = host "
      "Udp RcvbufErrors / sent\n",
      hz);
  std::printf("%-12s %6s %12s %12s %10s %10s %8s %8s %7s %8s %7s %10s\n", "mode", "size",
              "sent dgr/s", "recv dgr/s", "sender ns", "recvr ns", "other ns", "cpu0 ns", "drop%",
              "eagain%", "errors", "zc copied");

  for (const std::string& mname : o.modes) {
    if (mode_index(mname) < 0) {
      std::fprintf(stderr, "unknown mode %s\n", mname.c_str());
      return 2;
    }
  }
  for (const std::size_t size : o.sizes) {
    // Repetitions outer, modes inner: a neighbour's load drifting during the run hits every
    // mode alike. Repetition -1 is a short warm-up per mode.
    std::vector<std::vector<Sample>> all(o.modes.size());
    for (int rep = -1; rep < o.reps; ++rep) {
      for (std::size_t mi = 0; mi < o.modes.size(); ++mi) {
        const int mode = mode_index(o.modes[mi]);
        if (mode == 2 && !tx.fixed_ok) continue;
        std::vector<Sample>& samples = all[mi];
        const double secs = rep < 0 ? 0.1 : o.secs;
        const std::uint64_t rx0 = rx.received.load();
        const std::uint64_t w0 = now_ns(CLOCK_MONOTONIC);
        const std::uint64_t s0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        const std::uint64_t r0 = now_ns(rx.cpu_clock);
        const std::uint64_t p0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
        const std::uint64_t j0 = cpu_busy_jiffies(o.sender_cpu);
        const std::uint64_t d0 = udp_rcvbuf_errors();
        const std::uint64_t deadline = w0 + std::uint64_t(secs * 1e9);
        Sender::Counts c =
            mode == 3 ? tx.run_sendmmsg(size, deadline) : tx.run_uring(mode, size, deadline);
        const std::uint64_t w1 = now_ns(CLOCK_MONOTONIC);
        const std::uint64_t s1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        const std::uint64_t p1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
        const std::uint64_t j1 = cpu_busy_jiffies(o.sender_cpu);
        // Let the receiver catch up with what is queued before counting it.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        const std::uint64_t r1 = now_ns(rx.cpu_clock);
        const std::uint64_t rx1 = rx.received.load();
        const std::uint64_t d1 = udp_rcvbuf_errors();
        if (rep < 0) continue;
        Sample s;
        const double wall = double(w1 - w0) / 1e9;
        const double sent = double(std::max<std::uint64_t>(c.sent, 1));
        s.dgr_per_s = double(c.sent) / wall;
        s.rx_per_s = double(rx1 - rx0) / wall;
        s.sender_ns = double(s1 - s0) / sent;
        s.receiver_ns = double(r1 - r0) / sent;
        const double other = double(p1 - p0) - double(s1 - s0) - double(r1 - r0);
        s.other_ns = std::max(0.0, other) / sent;
        s.cpu0_ns = double(j1 - j0) * (1e9 / double(hz)) / sent;
        s.drop_frac = double(d1 - d0) / sent;
        s.eagain_frac = c.attempted ? double(c.eagain) / double(c.attempted) : 0;
        s.errors = c.err;
        s.notifs = c.notifs;
        s.copied = c.copied;
        samples.push_back(s);
      }
    }
    for (std::size_t mi = 0; mi < o.modes.size(); ++mi) {
      const std::string& mname = o.modes[mi];
      const int mode = mode_index(mname);
      const std::vector<Sample>& samples = all[mi];
      if (samples.empty()) continue;
      auto med = [&](auto field) {
        std::vector<double> v;
        for (const Sample& s : samples) v.push_back(double(s.*field));
        return median(v);
      };
      std::uint64_t errs = 0, notifs = 0, copied = 0;
      for (const Sample& s : samples) {
        errs += s.errors;
        notifs += s.notifs;
        copied += s.copied;
      }
      char zc[32] = "-";
      if (mode == 1 || mode == 2)
        std::snprintf(zc, sizeof(zc), "%.1f%%",
                      notifs ? 100.0 * double(copied) / double(notifs) : 0.0);
      std::printf("%-12s %6zu %12.0f %12.0f %10.1f %10.1f %8.1f %8.1f %7.2f %8.2f %7llu %10s\n",
                  mname.c_str(), size, med(&Sample::dgr_per_s), med(&Sample::rx_per_s),
                  med(&Sample::sender_ns), med(&Sample::receiver_ns), med(&Sample::other_ns),
                  med(&Sample::cpu0_ns), 100 * med(&Sample::drop_frac),
                  100 * med(&Sample::eagain_frac), static_cast<unsigned long long>(errs), zc);
      std::fflush(stdout);
    }
  }
  std::printf("# threads in process at end: %d (sender + receiver = 2; more means io-wq workers)\n",
              count_threads());

  rx.stop.store(true);
  rx_thread.join();
  io_uring_queue_exit(&tx.ring);
  close(tx.fd);
  close(rx.fd);
  return 0;
}
