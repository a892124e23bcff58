/* raw-udp-echo: the kernel ceiling for Tern's echo benchmarks. Every datagram is sent back
 * to its sender unchanged, in batches of recvmmsg/sendmmsg, with no protocol at all: what
 * Tern costs is measured against this.
 *
 *   raw-udp-echo --listen HOST:PORT [--burst N] [--busy-poll]
 *
 * Runs until SIGINT/SIGTERM, then prints its counters on one line. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "udp_address.h"

enum { kMaxBurst = 256, kSlot = 8192 };

static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: raw-udp-echo --listen HOST:PORT [--burst N] [--busy-poll]\n"
          "  HOST is an IPv4 address, or [IPv6] (\"[::]\" listens dual-stack)\n"
          "  --burst N     datagrams per recvmmsg/sendmmsg (1..%d, default 64)\n"
          "  --busy-poll   spin on the socket instead of sleeping in poll()\n",
          kMaxBurst);
}

int main(int argc, char** argv) {
  const char* listen_text = NULL;
  int burst = 64;
  int busy_poll = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
      listen_text = argv[++i];
    } else if (strcmp(argv[i], "--burst") == 0 && i + 1 < argc) {
      burst = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--busy-poll") == 0) {
      busy_poll = 1;
    } else if (strcmp(argv[i], "--help") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  struct sockaddr_storage bind_addr;
  socklen_t bind_len = listen_text != NULL ? parse_address(listen_text, &bind_addr) : 0;
  if (bind_len == 0 || burst < 1 || burst > kMaxBurst) {
    usage(stderr);
    return 2;
  }

  int fd = socket(bind_addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    perror("raw-udp-echo: socket");
    return 1;
  }
  int off = 0;
  if (bind_addr.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  int buf = 4 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof buf);
  setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof buf);
  if (bind(fd, (struct sockaddr*)&bind_addr, bind_len) != 0) {
    fprintf(stderr, "raw-udp-echo: cannot bind %s: %s\n", listen_text, strerror(errno));
    return 1;
  }
  struct sockaddr_storage actual;
  socklen_t actual_len = sizeof actual;
  getsockname(fd, (struct sockaddr*)&actual, &actual_len);
  char shown[INET6_ADDRSTRLEN];
  unsigned port;
  if (actual.ss_family == AF_INET6) {
    inet_ntop(AF_INET6, &((struct sockaddr_in6*)&actual)->sin6_addr, shown, sizeof shown);
    port = ntohs(((struct sockaddr_in6*)&actual)->sin6_port);
    printf("serving [%s]:%u\n", shown, port);
  } else {
    inet_ntop(AF_INET, &((struct sockaddr_in*)&actual)->sin_addr, shown, sizeof shown);
    port = ntohs(((struct sockaddr_in*)&actual)->sin_port);
    printf("serving %s:%u\n", shown, port);
  }
  fflush(stdout);

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  static unsigned char slots[kMaxBurst][kSlot];
  static struct sockaddr_storage names[kMaxBurst];
  static struct iovec iov[kMaxBurst];
  static struct mmsghdr msgs[kMaxBurst];
  unsigned long long datagrams = 0, bytes = 0, send_errors = 0, truncated = 0;

  while (!g_stop) {
    for (int i = 0; i < burst; ++i) {
      iov[i].iov_base = slots[i];
      iov[i].iov_len = kSlot;
      memset(&msgs[i], 0, sizeof msgs[i]);
      msgs[i].msg_hdr.msg_name = &names[i];
      msgs[i].msg_hdr.msg_namelen = sizeof names[i];
      msgs[i].msg_hdr.msg_iov = &iov[i];
      msgs[i].msg_hdr.msg_iovlen = 1;
    }
    int got = recvmmsg(fd, msgs, (unsigned)burst, MSG_DONTWAIT, NULL);
    if (got <= 0) {
      if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        perror("raw-udp-echo: recvmmsg");
        break;
      }
      if (!busy_poll) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        poll(&p, 1, 100); /* wakes for SIGTERM within 100 ms even without traffic */
      }
      continue;
    }
    /* Echo in place: the received lengths and source addresses become the send vector. */
    int keep = 0;
    for (int i = 0; i < got; ++i) {
      if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) {
        ++truncated;
        continue;
      }
      iov[i].iov_len = msgs[i].msg_len;
      bytes += msgs[i].msg_len;
      if (keep != i) {
        msgs[keep] = msgs[i];
      }
      msgs[keep].msg_hdr.msg_iov = &iov[i];
      ++keep;
    }
    datagrams += (unsigned long long)keep;
    int sent = 0;
    while (sent < keep) {
      int r = sendmmsg(fd, msgs + sent, (unsigned)(keep - sent), 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        ++send_errors; /* skip the datagram the error belongs to, never stall the loop */
        ++sent;
        continue;
      }
      sent += r;
    }
  }
  printf("served datagrams=%llu bytes=%llu truncated=%llu send_errors=%llu\n", datagrams, bytes,
         truncated, send_errors);
  close(fd);
  return 0;
}
