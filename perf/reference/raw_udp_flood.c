/* raw-udp-flood: the raw-UDP counterpart of `tern-ping --flood`, the load client for
 * raw-udp-echo. P flows, each its own UDP socket on its own ephemeral port (so the server sees
 * P sources, as it would see P peers), each keeping W datagrams in flight (or sending at a
 * fixed rate); every echo is timed and, in window mode, answered with the next datagram.
 *
 *   raw-udp-flood --target HOST:PORT [--flows P] [--window W | --rate HZ] [--duration S]
 *                 [--warmup S] [--size B] [--busy-poll] [--json FILE]
 *
 * Prints one line:
 *
 *   flood flows=P window=W rate=R size=B duration_s=D sent=N received=N lost=N late=N
 *         msgs_per_s=X rtt_us p50=X p90=X p99=X p99.9=X max=X
 *
 * Counted by send time, as tern-ping --flood counts: sent = datagrams sent during the measured
 * period, received = their echoes (awaited up to 200 ms after the period), lost = the rest.
 * With --flows 1 --window 1 it is a ping-pong RTT client. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "udp_address.h"

enum {
  kBurst = 64,       /* datagrams per recvmmsg / sendmmsg */
  kMaxSize = 8192,   /* largest --size */
  kHeader = 16,      /* u64 send time, u32 flow, u32 sequence */
  kMaxFlows = 60000, /* one ephemeral port each */
  kMaxWindow = 4096,
  kEvents = 256,
};
static const uint64_t kLossNs = 200000000u; /* unanswered this long: lost, replaced */
static const uint64_t kScanNs = 10000000u;  /* how often the loss scan runs */

/* One datagram in flight: its sequence number and send time. */
typedef struct {
  uint32_t seq;
  uint16_t active;
  uint16_t measured; /* sent during the measured period: counts in sent/received/lost */
  uint64_t sent_ns;
} Slot;

typedef struct {
  int fd;
  uint32_t next_seq;
  uint32_t inflight;
} Flow;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: raw-udp-flood --target HOST:PORT [--flows P] [--window W | --rate HZ]\n"
          "                     [--duration S] [--warmup S] [--size B] [--busy-poll]\n"
          "                     [--json FILE]\n"
          "  Load client for raw-udp-echo: P flows, each its own UDP socket on its own\n"
          "  ephemeral port. Prints one line:\n"
          "    flood flows=P window=W rate=R size=B duration_s=D sent=N received=N lost=N\n"
          "          late=N msgs_per_s=X rtt_us p50=X p90=X p99=X p99.9=X max=X\n"
          "  --flows P      sockets / sources (1..%d, default 1)\n"
          "  --window W     datagrams in flight per flow, each echo answered by the next\n"
          "                 (1..%d, default 1)\n"
          "  --rate HZ      instead of a window: send HZ datagrams per second per flow, paced\n"
          "                 (0 = send nothing: idle sockets)\n"
          "  --duration S   measured seconds (default 5)\n"
          "  --warmup S     unmeasured seconds first (default 1)\n"
          "  --size B       payload bytes, %d..%d (default 64)\n"
          "  --busy-poll    spin on the sockets instead of sleeping\n"
          "  --json FILE    also write the results as JSON\n"
          "  Counted by send time, as tern-ping --flood: sent = datagrams sent in the measured\n"
          "  period, received = their echoes (awaited up to 200 ms after it), lost = the rest;\n"
          "  msgs_per_s = received / duration. A datagram unanswered after 200 ms is lost (and\n"
          "  replaced in window mode); an echo arriving after that is counted late. RTTs are\n"
          "  nearest-rank percentiles in microseconds of the received echoes.\n"
          "  HOST is an IPv4 address or [IPv6].\n"
          "exit status: 0 success, 1 socket error or nothing echoed, 2 bad command line\n",
          kMaxFlows, kMaxWindow, kHeader, kMaxSize);
}

static int parse_long(const char* text, long min, long max, long* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

static int parse_seconds(const char* text, double min, double max, double* out) {
  char* end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(v >= min && v <= max)) return -1;
  *out = v;
  return 0;
}

static void put_u64(unsigned char* p, uint64_t v) { memcpy(p, &v, 8); }
static void put_u32(unsigned char* p, uint32_t v) { memcpy(p, &v, 4); }
static uint64_t get_u64(const unsigned char* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}
static uint32_t get_u32(const unsigned char* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* ---- run state ---------------------------------------------------------------------------- */

static Flow* g_flows;
static Slot* g_slots;  /* flows x cap */
static uint32_t g_cap; /* slots per flow, a power of two */
static size_t g_size;
static int g_measuring;   /* sends now belong to the measured period */
static int g_sending = 1; /* 0 after the period: only echoes of measured sends are awaited */
static unsigned long long g_inflight; /* over all flows */
static unsigned long long g_sent, g_received, g_lost, g_late, g_send_errors;
static uint32_t* g_rtt; /* RTT samples in ns (saturated at ~4.29 s) */
static size_t g_rtt_n, g_rtt_cap;
static unsigned char g_payload[kMaxSize];

static void record_rtt(uint64_t ns) {
  if (g_rtt_n == g_rtt_cap) {
    size_t cap = g_rtt_cap ? g_rtt_cap * 2 : 1u << 16;
    if (cap > ((size_t)1 << 30)) return; /* 4 GiB of samples: stop sampling, keep counting */
    uint32_t* grown = realloc(g_rtt, cap * sizeof *grown);
    if (grown == NULL) return;
    g_rtt = grown;
    g_rtt_cap = cap;
  }
  g_rtt[g_rtt_n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

/* Retires a slot as lost (its datagram unanswered, or evicted by a newer one). */
static void lose(Flow* f, Slot* s) {
  s->active = 0;
  --f->inflight;
  --g_inflight;
  if (s->measured) ++g_lost;
}

/* Sends `n` new datagrams on flow `i` in one sendmmsg. */
static void send_new(uint32_t i, unsigned n) {
  static struct mmsghdr msgs[kBurst];
  static struct iovec pair[kBurst][2];
  static unsigned char bufs[kBurst][kHeader];
  Flow* f = &g_flows[i];
  if (!g_sending) return;
  while (n > 0) {
    unsigned batch = n > kBurst ? kBurst : n;
    uint64_t t = now_ns();
    for (unsigned k = 0; k < batch; ++k) {
      uint32_t seq = f->next_seq++;
      Slot* s = &g_slots[(size_t)i * g_cap + (seq & (g_cap - 1))];
      if (s->active) lose(f, s); /* wrapped onto a datagram still unanswered */
      s->seq = seq;
      s->active = 1;
      s->measured = (uint16_t)g_measuring;
      s->sent_ns = t;
      ++f->inflight;
      ++g_inflight;
      put_u64(bufs[k], t);
      put_u32(bufs[k] + 8, i);
      put_u32(bufs[k] + 12, seq);
      /* Header in its own buffer, the fixed pattern after it: no per-datagram copy. */
      memset(&msgs[k], 0, sizeof msgs[k]);
      pair[k][0].iov_base = bufs[k];
      pair[k][0].iov_len = kHeader;
      pair[k][1].iov_base = g_payload + kHeader;
      pair[k][1].iov_len = g_size - kHeader;
      msgs[k].msg_hdr.msg_iov = pair[k];
      msgs[k].msg_hdr.msg_iovlen = g_size > kHeader ? 2 : 1;
    }
    unsigned done = 0;
    while (done < batch) {
      int r = sendmmsg(f->fd, msgs + done, batch - done, 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        /* ENOBUFS/EAGAIN/ECONNREFUSED: the datagram is gone; the loss scan retires it. */
        ++g_send_errors;
        ++done;
        if (g_measuring) ++g_sent;
        continue;
      }
      done += (unsigned)r;
      if (g_measuring) g_sent += (unsigned long long)r;
    }
    n -= batch;
  }
}

/* Drains flow `i`'s socket; in window mode every answered datagram is replaced. Returns -1
 * on a fatal socket error. */
static int drain(uint32_t i, int window_mode) {
  static unsigned char bufs[kBurst][kMaxSize];
  static struct iovec iov[kBurst];
  static struct mmsghdr msgs[kBurst];
  Flow* f = &g_flows[i];
  for (;;) {
    for (int k = 0; k < kBurst; ++k) {
      iov[k].iov_base = bufs[k];
      iov[k].iov_len = kMaxSize;
      memset(&msgs[k], 0, sizeof msgs[k]);
      msgs[k].msg_hdr.msg_iov = &iov[k];
      msgs[k].msg_hdr.msg_iovlen = 1;
    }
    int got = recvmmsg(f->fd, msgs, kBurst, MSG_DONTWAIT, NULL);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      if (errno == ECONNREFUSED) return 0; /* server not (yet) there: losses tell */
      perror("raw-udp-flood: recvmmsg");
      return -1;
    }
    if (got == 0) return 0;
    uint64_t t = now_ns();
    unsigned answered = 0;
    for (int k = 0; k < got; ++k) {
      if (msgs[k].msg_len < kHeader) continue;
      uint32_t flow = get_u32(bufs[k] + 8), seq = get_u32(bufs[k] + 12);
      Slot* s = &g_slots[(size_t)i * g_cap + (seq & (g_cap - 1))];
      if (flow != i || !s->active || s->seq != seq) {
        ++g_late;
        continue;
      }
      s->active = 0;
      --f->inflight;
      --g_inflight;
      ++answered;
      if (s->measured) {
        ++g_received;
        record_rtt(t - get_u64(bufs[k]));
      }
    }
    if (window_mode && answered > 0) send_new(i, answered);
    if (got < kBurst) return 0;
  }
}

static int cmp_u32(const void* a, const void* b) {
  uint32_t x = *(const uint32_t*)a, y = *(const uint32_t*)b;
  return (x > y) - (x < y);
}

/* Nearest rank of `milli` thousandths of a percent (99.9% = 99900), in microseconds; 0
 * without samples. */
static double percentile_us(unsigned long long milli) {
  if (g_rtt_n == 0) return 0.0;
  size_t rank = (size_t)((milli * g_rtt_n + 99999u) / 100000u);
  if (rank < 1) rank = 1;
  if (rank > g_rtt_n) rank = g_rtt_n;
  return g_rtt[rank - 1] / 1000.0;
}

int main(int argc, char** argv) {
  const char* target_text = NULL;
  const char* json_path = NULL;
  long flows = 1, window = 1, rate = -1, size = 64;
  double duration = 5.0, warmup = 1.0;
  int busy_poll = 0, window_given = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    int has = i + 1 < argc;
    int ok = 1;
    if (strcmp(a, "--target") == 0 && has) {
      target_text = argv[++i];
    } else if (strcmp(a, "--flows") == 0 && has) {
      ok = parse_long(argv[++i], 1, kMaxFlows, &flows) == 0;
    } else if (strcmp(a, "--window") == 0 && has) {
      ok = parse_long(argv[++i], 1, kMaxWindow, &window) == 0;
      window_given = 1;
    } else if (strcmp(a, "--rate") == 0 && has) {
      ok = parse_long(argv[++i], 0, 1000000, &rate) == 0;
    } else if (strcmp(a, "--duration") == 0 && has) {
      ok = parse_seconds(argv[++i], 0.001, 86400, &duration) == 0;
    } else if (strcmp(a, "--warmup") == 0 && has) {
      ok = parse_seconds(argv[++i], 0, 86400, &warmup) == 0;
    } else if (strcmp(a, "--size") == 0 && has) {
      ok = parse_long(argv[++i], kHeader, kMaxSize, &size) == 0;
    } else if (strcmp(a, "--json") == 0 && has) {
      json_path = argv[++i];
    } else if (strcmp(a, "--busy-poll") == 0) {
      busy_poll = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      ok = 0;
    }
    if (!ok) {
      fprintf(stderr, "raw-udp-flood: bad argument '%s'%s\n", a, has ? "" : " (or missing value)");
      usage(stderr);
      return 2;
    }
  }
  struct sockaddr_storage target;
  socklen_t target_len = target_text != NULL ? parse_address(target_text, &target) : 0;
  /* Both families keep the port at the same offset. */
  if (target_len != 0 && ((struct sockaddr_in*)&target)->sin_port == 0) target_len = 0;
  if (target_len == 0) {
    fprintf(stderr, "raw-udp-flood: need --target HOST:PORT\n");
    usage(stderr);
    return 2;
  }
  if (window_given && rate >= 0) {
    fprintf(stderr, "raw-udp-flood: --window and --rate exclude each other\n");
    usage(stderr);
    return 2;
  }
  const int window_mode = rate < 0;
  g_size = (size_t)size;

  /* One descriptor per flow plus a few: raise the soft limit as far as the hard one. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)flows + 64) {
    rlim_t want = (rlim_t)flows + 64;
    rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)flows + 8) {
      fprintf(stderr, "raw-udp-flood: %ld flows need %ld descriptors, the limit is %lu\n", flows,
              flows + 8, (unsigned long)rl.rlim_cur);
      return 1;
    }
  }

  /* Slots per flow: room for the window (or for 200 ms at the rate) several times over, so a
   * new sequence number lands on a slot still busy only when its datagram is long lost. */
  uint64_t need =
      window_mode ? (uint64_t)window * 4 : (uint64_t)((double)rate * (double)kLossNs / 1e9) * 2 + 4;
  g_cap = 4;
  while (g_cap < need && g_cap < (1u << 20)) g_cap <<= 1;
  g_flows = calloc((size_t)flows, sizeof *g_flows);
  g_slots = calloc((size_t)flows * g_cap, sizeof *g_slots);
  if (g_flows == NULL || g_slots == NULL) {
    fprintf(stderr, "raw-udp-flood: out of memory\n");
    return 1;
  }
  for (size_t k = 0; k < sizeof g_payload; ++k) g_payload[k] = (unsigned char)(k * 7u + 3u);

  int ep = epoll_create1(0);
  if (ep < 0) {
    perror("raw-udp-flood: epoll_create1");
    return 1;
  }
  for (long i = 0; i < flows; ++i) {
    int fd = socket(target.ss_family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    if (fd < 0) {
      fprintf(stderr, "raw-udp-flood: socket %ld: %s\n", i, strerror(errno));
      return 1;
    }
    if (flows <= 16) {
      int buf = 4 << 20;
      setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
      setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
    }
    /* connect() binds an ephemeral port and filters to the server's datagrams. */
    if (connect(fd, (struct sockaddr*)&target, target_len) != 0) {
      fprintf(stderr, "raw-udp-flood: connect %s: %s\n", target_text, strerror(errno));
      return 1;
    }
    g_flows[i].fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      perror("raw-udp-flood: epoll_ctl");
      return 1;
    }
  }

  const uint64_t t0 = now_ns();
  const uint64_t t_measure = t0 + (uint64_t)(warmup * 1e9);
  const uint64_t t_end = t_measure + (uint64_t)(duration * 1e9);
  /* Rate mode: send number g goes to flow g % P at t0 + g / (P * HZ), which spreads the
   * flows evenly over each period. */
  uint64_t paced = 0;
  const double pace_ns = rate > 0 ? 1e9 / ((double)rate * (double)flows) : 0.0;
  if (window_mode) {
    for (long i = 0; i < flows; ++i) send_new((uint32_t)i, (unsigned)window);
  }
  uint64_t next_scan = t0 + kScanNs;
  int rc = 0;
  struct epoll_event events[kEvents];
  for (;;) {
    uint64_t t = now_ns();
    if (g_sending && !g_measuring && t >= t_measure) g_measuring = 1;
    if (g_sending && t >= t_end) {
      /* Counted by send time: stop sending, await the echoes of the measured period's
       * datagrams until each is answered or lost. */
      g_measuring = 0;
      g_sending = 0;
    }
    if (!g_sending && (g_inflight == 0 || t >= t_end + kLossNs + 2 * kScanNs)) break;
    if (rate > 0 && g_sending) {
      /* Catch up at most one period's worth at once after a stall. */
      uint64_t due = (uint64_t)((double)(t - t0) / pace_ns) + 1;
      if (due > paced + (uint64_t)flows) paced = due - (uint64_t)flows;
      while (paced < due) {
        send_new((uint32_t)(paced % (uint64_t)flows), 1);
        ++paced;
      }
    }
    if (t >= next_scan) {
      t = now_ns(); /* the paced sends above are newer than the loop's first reading */
      for (long i = 0; i < flows; ++i) {
        Flow* f = &g_flows[i];
        if (f->inflight == 0) continue;
        Slot* s = &g_slots[(size_t)i * g_cap];
        unsigned lost = 0;
        for (uint32_t k = 0; k < g_cap; ++k) {
          if (s[k].active && t >= s[k].sent_ns + kLossNs) {
            lose(f, &s[k]);
            ++lost;
          }
        }
        if (window_mode && lost > 0) send_new((uint32_t)i, lost);
      }
      next_scan = t + kScanNs;
    }
    /* Sleep until the next thing to do: a paced send, the loss scan, a phase change. */
    uint64_t wake = next_scan < t_end || !g_sending ? next_scan : t_end;
    if (!g_measuring && g_sending && t_measure < wake) wake = t_measure;
    if (rate > 0 && g_sending) {
      uint64_t next_send = t0 + (uint64_t)((double)paced * pace_ns);
      if (next_send < wake) wake = next_send;
    }
    t = now_ns();
    int timeout_ms = 0;
    if (!busy_poll && wake > t) timeout_ms = (int)((wake - t + 999999) / 1000000);
    if (flows == 1) {
      /* One socket: read it directly, no epoll in the round trip. */
      if (drain(0, window_mode) != 0) {
        rc = 1;
        break;
      }
      if (timeout_ms > 0) {
        struct pollfd p = {.fd = g_flows[0].fd, .events = POLLIN};
        poll(&p, 1, timeout_ms);
        if (p.revents && drain(0, window_mode) != 0) {
          rc = 1;
          break;
        }
      }
      continue;
    }
    int n = epoll_wait(ep, events, kEvents, timeout_ms);
    if (n < 0 && errno != EINTR) {
      perror("raw-udp-flood: epoll_wait");
      rc = 1;
      break;
    }
    for (int k = 0; k < n; ++k) {
      if (drain(events[k].data.u32, window_mode) != 0) {
        rc = 1;
        break;
      }
    }
    if (rc != 0) break;
  }

  qsort(g_rtt, g_rtt_n, sizeof *g_rtt, cmp_u32);
  double p50 = percentile_us(50000), p90 = percentile_us(90000), p99 = percentile_us(99000),
         p999 = percentile_us(99900), max = g_rtt_n ? g_rtt[g_rtt_n - 1] / 1000.0 : 0.0;
  double rate_out = (double)g_received / duration;
  printf(
      "flood flows=%ld window=%ld rate=%ld size=%ld duration_s=%.3f sent=%llu received=%llu "
      "lost=%llu late=%llu msgs_per_s=%.1f rtt_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f "
      "max=%.1f\n",
      flows, window_mode ? window : 0, rate < 0 ? 0 : rate, size, duration, g_sent, g_received,
      g_lost, g_late, rate_out, p50, p90, p99, p999, max);
  fflush(stdout);
  if (g_send_errors > 0) fprintf(stderr, "raw-udp-flood: %llu send errors\n", g_send_errors);
  if (json_path != NULL) {
    FILE* f = fopen(json_path, "w");
    if (f == NULL) {
      fprintf(stderr, "raw-udp-flood: cannot write %s: %s\n", json_path, strerror(errno));
      rc = 1;
    } else {
      fprintf(f,
              "{\"flows\": %ld, \"window\": %ld, \"rate\": %ld, \"size\": %ld, "
              "\"duration_s\": %.3f, \"warmup_s\": %.3f, \"busy_poll\": %s, \"sent\": %llu, "
              "\"received\": %llu, \"lost\": %llu, \"late\": %llu, \"send_errors\": %llu, "
              "\"msgs_per_s\": %.1f, \"rtt_us\": {\"p50\": %.1f, \"p90\": %.1f, \"p99\": %.1f, "
              "\"p99.9\": %.1f, \"max\": %.1f}}\n",
              flows, window_mode ? window : 0, rate < 0 ? 0 : rate, size, duration, warmup,
              busy_poll ? "true" : "false", g_sent, g_received, g_lost, g_late, g_send_errors,
              rate_out, p50, p90, p99, p999, max);
      fclose(f);
    }
  }
  for (long i = 0; i < flows; ++i) close(g_flows[i].fd);
  close(ep);
  /* Sending something and never hearing back means no server: say so in the status. */
  if (rc == 0 && g_sent > 0 && g_received == 0) {
    fprintf(stderr, "raw-udp-flood: no echoes received from %s\n", target_text);
    rc = 1;
  }
  return rc;
}
