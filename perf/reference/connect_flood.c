/* connect-flood: a CONNECT flood from many sources that never finish the handshake, the load
 * of perf/connect_flood.py (issue 29). Each source is its own UDP socket bound to its own
 * loopback address (127.B.x.y, so a server sees as many addresses as a botnet's forged ones
 * would give it), sends well-formed libenet 1.3 CONNECTs (fresh connect ID, outgoing peer ID
 * and sent time each) round robin at a paced rate, and reads back, without ever answering,
 * whatever the server sends it: that is what a spoofed victim would receive.
 *
 *   connect-flood --target IPV4:PORT [--rate N] [--duration S] [--sources N] [--base B]
 *
 * Prints one line when done:
 *
 *   flood sent=N bytes_sent=N received=N bytes_received=N sources_answered=N seconds=X rate=X
 *
 * bytes_received / bytes_sent is the amplification the flood met. Every loop is bounded by
 * --duration (at most 600 s) plus 200 ms of draining. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "udp_address.h"

enum { kMaxSources = 16384, kConnectSize = 52, kBurst = 32 };

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}
static void put32(uint8_t* p, uint32_t v) {
  put16(p, (uint16_t)(v >> 16));
  put16(p + 2, (uint16_t)v);
}

/* A libenet 1.3 client's first datagram: header (peer ID 0xFFF, sent time), then CONNECT. */
static void build_connect(uint8_t* d, uint32_t seed) {
  put16(d, 0x8FFF);
  put16(d + 2, (uint16_t)seed);
  d[4] = 2 | 0x80; /* CONNECT, acknowledge */
  d[5] = 0xFF;
  put16(d + 6, 1);
  put16(d + 8, (uint16_t)(seed % 4095)); /* outgoing peer ID */
  d[10] = 0xFF;
  d[11] = 0xFF;
  put32(d + 12, 1400);  /* MTU */
  put32(d + 16, 65536); /* window */
  put32(d + 20, 2);     /* channels */
  put32(d + 24, 0);
  put32(d + 28, 0);
  put32(d + 32, 5000);
  put32(d + 36, 2);
  put32(d + 40, 2);
  put32(d + 44, seed * 2654435761u); /* connect ID */
  put32(d + 48, 0);                  /* data: no room */
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: connect-flood --target IPV4:PORT [--rate N] [--duration S] [--sources N]\n"
          "                     [--base B]\n"
          "  --rate N      CONNECTs per second, all sources together (default 100000)\n"
          "  --duration S  seconds (default 5, at most 600)\n"
          "  --sources N   sockets, each on its own address 127.B.x.y (default 1024, at most "
          "%d)\n"
          "  --base B      the second octet of the source addresses (default 77)\n",
          kMaxSources);
}

int main(int argc, char** argv) {
  const char* target = NULL;
  double rate = 100000, duration = 5;
  long sources = 1024, base = 77;
  for (int i = 1; i < argc; ++i) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--target") == 0 && v) {
      target = v;
    } else if (strcmp(argv[i], "--rate") == 0 && v) {
      rate = atof(v);
    } else if (strcmp(argv[i], "--duration") == 0 && v) {
      duration = atof(v);
    } else if (strcmp(argv[i], "--sources") == 0 && v) {
      sources = atol(v);
    } else if (strcmp(argv[i], "--base") == 0 && v) {
      base = atol(v);
    } else if (strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
    ++i;
  }
  struct sockaddr_storage to;
  socklen_t to_len = target ? parse_address(target, &to) : 0;
  if (to_len == 0 || to.ss_family != AF_INET || rate <= 0 || duration <= 0 || duration > 600 ||
      sources < 1 || sources > kMaxSources || base < 1 || base > 254) {
    usage(stderr);
    return 2;
  }
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < (rlim_t)sources + 64) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  int* fds = calloc((size_t)sources, sizeof *fds);
  uint8_t* answered = calloc((size_t)sources, 1);
  if (fds == NULL || answered == NULL) return 1;
  for (long i = 0; i < sources; ++i) {
    fds[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl((127u << 24) | ((uint32_t)base << 16) | (uint32_t)(i + 1));
    if (fds[i] < 0 || bind(fds[i], (struct sockaddr*)&a, sizeof a) != 0 ||
        connect(fds[i], (struct sockaddr*)&to, to_len) != 0) {
      fprintf(stderr, "connect-flood: source %ld: %s\n", i, strerror(errno));
      return 1;
    }
  }
  uint64_t sent = 0, bytes_sent = 0, received = 0, bytes_received = 0;
  uint8_t d[kConnectSize], in[2048];
  const uint64_t start = now_ns();
  const uint64_t end = start + (uint64_t)(duration * 1e9);
  uint64_t next_drain = start;
  long next = 0;
  uint32_t seed = (uint32_t)start;
  for (;;) {
    const uint64_t now = now_ns();
    if (now >= next_drain || now >= end) {
      /* Read back what the server sent each source: every 25 ms, before any receive buffer fills.
       */
      for (long i = 0; i < sources; ++i) {
        ssize_t n;
        while ((n = recv(fds[i], in, sizeof in, 0)) > 0) {
          ++received;
          bytes_received += (uint64_t)n;
          answered[i] = 1;
        }
      }
      next_drain = now + 25000000u;
      if (now >= end) break;
    }
    const double due = (double)(now - start) * 1e-9 * rate;
    if ((double)sent >= due) {
      struct timespec nap = {0, 20000};
      nanosleep(&nap, NULL);
      continue;
    }
    for (int b = 0; b < kBurst && (double)sent < due; ++b) {
      build_connect(d, ++seed);
      if (send(fds[next], d, sizeof d, 0) == (ssize_t)sizeof d) {
        ++sent;
        bytes_sent += sizeof d;
      }
      next = next + 1 == sources ? 0 : next + 1;
    }
  }
  const double seconds = (double)(now_ns() - start) * 1e-9;
  /* Replies still on their way. */
  struct timespec wait = {0, 200000000};
  nanosleep(&wait, NULL);
  uint64_t answered_count = 0;
  for (long i = 0; i < sources; ++i) {
    ssize_t n;
    while ((n = recv(fds[i], in, sizeof in, 0)) > 0) {
      ++received;
      bytes_received += (uint64_t)n;
      answered[i] = 1;
    }
    answered_count += answered[i];
    close(fds[i]);
  }
  printf(
      "flood sent=%llu bytes_sent=%llu received=%llu bytes_received=%llu "
      "sources_answered=%llu seconds=%.3f rate=%.0f\n",
      (unsigned long long)sent, (unsigned long long)bytes_sent, (unsigned long long)received,
      (unsigned long long)bytes_received, (unsigned long long)answered_count, seconds,
      (double)sent / seconds);
  free(fds);
  free(answered);
  return 0;
}
