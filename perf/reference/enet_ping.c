/* enet-ping: ping-pong round-trip times over plain libenet, the baseline for tern-ping.
 *
 *   enet-ping --connect HOST:PORT [--count N] [--size B]
 *             [--reliable|--unreliable|--unsequenced] [--channel C] [--warmup N]
 *             [--checksum] [--timeout-ms T] [--loss-timeout-ms T]
 *
 * One message is outstanding at a time; its round trip is measured with CLOCK_MONOTONIC from
 * just before enet_peer_send() to the moment enet_host_service() returns its echo. Options,
 * defaults, percentile method (nearest rank) and the output line are tern-ping's, so the two
 * are compared like for like and scripts parse both the same way:
 *
 *   rtt_us p50=X p90=X p99=X p99.9=X max=X count=N lost=N delivery=NAME size=B
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>

#include "enet_endpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kHeaderBytes = 4 };

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: enet-ping --connect HOST:PORT [--count N] [--size B]\n"
          "                 [--reliable|--unreliable|--unsequenced] [--channel C]\n"
          "                 [--warmup N] [--checksum] [--timeout-ms T] [--loss-timeout-ms T]\n"
          "  Ping-pong against an echo server (enet-echo-server or tern-ping --serve), one\n"
          "  message outstanding; prints RTT percentiles in microseconds:\n"
          "    rtt_us p50=X p90=X p99=X p99.9=X max=X count=N lost=N delivery=NAME size=B\n"
          "  --count N            measured pings (default 10000)\n"
          "  --size B             payload bytes, at least 4 (default 64)\n"
          "  --channel C          channel 0..254 (default 0)\n"
          "  --warmup N           unmeasured pings first (default 100)\n"
          "  --timeout-ms T       give up connecting after T ms (default 5000)\n"
          "  --loss-timeout-ms T  an unreliable/unsequenced ping unanswered after T ms\n"
          "                       (default 200) is counted lost and a new one sent\n"
          "  --checksum           ENet CRC32 on every datagram (both sides must agree)\n"
          "exit status: 0 success, 1 cannot connect / server lost / I/O error, 2 bad usage\n");
}

static int parse_ulong(const char* text, unsigned long min, unsigned long max, unsigned long* out) {
  char* end = NULL;
  errno = 0;
  unsigned long v = strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < min || v > max) return -1;
  *out = v;
  return 0;
}

/* The sequence number leads the payload so a late echo of a ping already given up as lost
 * is recognised and not mistaken for the answer to the current one; the rest is a pattern
 * derived from it so a corrupted echo is noticed. */
static void fill_payload(uint8_t* buf, size_t size, uint32_t seq) {
  uint8_t header[kHeaderBytes] = {(uint8_t)(seq >> 24), (uint8_t)(seq >> 16), (uint8_t)(seq >> 8),
                                  (uint8_t)seq};
  for (size_t i = 0; i < size; ++i) {
    buf[i] = i < kHeaderBytes ? header[i] : (uint8_t)(seq * 31u + i * 7u);
  }
}

static int payload_seq(const uint8_t* buf, size_t size, uint32_t* seq) {
  if (size < kHeaderBytes) return -1;
  *seq = ((uint32_t)buf[0] << 24) | ((uint32_t)buf[1] << 16) | ((uint32_t)buf[2] << 8) | buf[3];
  return 0;
}

static int payload_intact(const uint8_t* buf, size_t size, uint32_t seq) {
  for (size_t i = kHeaderBytes; i < size; ++i) {
    if (buf[i] != (uint8_t)(seq * 31u + i * 7u)) return 0;
  }
  return 1;
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted sample: the smallest value with at least p of the
 * samples at or below it. */
static uint64_t percentile(const uint64_t* sorted, size_t n, double p) {
  /* The epsilon keeps a rank that is an integer in theory (99.9% of 1000) from becoming
   * the next one through floating-point error. */
  double rank = p * (double)n - 1e-9;
  size_t idx = (size_t)rank;
  if ((double)idx < rank) ++idx;
  if (idx == 0) idx = 1;
  if (idx > n) idx = n;
  return sorted[idx - 1];
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

int main(int argc, char** argv) {
  const char* connect_arg = NULL;
  unsigned long count = 10000, size = 64, loss_timeout_ms = 200, warmup = 100, channel = 0;
  unsigned long connect_timeout_ms = 5000;
  const char* delivery_name = "reliable";
  enet_uint32 flags = ENET_PACKET_FLAG_RELIABLE;
  int reliable = 1;
  int checksum = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (strcmp(a, "--connect") == 0 && i + 1 < argc) {
      connect_arg = argv[++i];
    } else if (strcmp(a, "--count") == 0 && i + 1 < argc) {
      if (parse_ulong(argv[++i], 1, 100000000ul, &count) != 0) {
        fprintf(stderr, "enet-ping: bad --count\n");
        return 2;
      }
    } else if (strcmp(a, "--size") == 0 && i + 1 < argc) {
      if (parse_ulong(argv[++i], kHeaderBytes, 32ul << 20, &size) != 0) {
        fprintf(stderr, "enet-ping: --size must be %d..%lu\n", kHeaderBytes, 32ul << 20);
        return 2;
      }
    } else if (strcmp(a, "--warmup") == 0 && i + 1 < argc) {
      if (parse_ulong(argv[++i], 0, 100000000ul, &warmup) != 0) {
        fprintf(stderr, "enet-ping: bad --warmup\n");
        return 2;
      }
    } else if (strcmp(a, "--channel") == 0 && i + 1 < argc) {
      if (parse_ulong(argv[++i], 0, ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT - 1, &channel) != 0) {
        fprintf(stderr, "enet-ping: --channel must be 0..%d\n",
                ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT - 1);
        return 2;
      }
    } else if (strcmp(a, "--timeout-ms") == 0 && i + 1 < argc) {
      if (parse_ulong(argv[++i], 1, 3600000ul, &connect_timeout_ms) != 0) {
        fprintf(stderr, "enet-ping: bad --timeout-ms\n");
        return 2;
      }
    } else if (strcmp(a, "--loss-timeout-ms") == 0 && i + 1 < argc) {
      if (parse_ulong(argv[++i], 1, 60000, &loss_timeout_ms) != 0) {
        fprintf(stderr, "enet-ping: bad --loss-timeout-ms\n");
        return 2;
      }
    } else if (strcmp(a, "--reliable") == 0) {
      flags = ENET_PACKET_FLAG_RELIABLE;
      reliable = 1;
      delivery_name = "reliable";
    } else if (strcmp(a, "--unreliable") == 0) {
      /* UNRELIABLE_FRAGMENT keeps a --size above the MTU unreliable; without it libenet
       * silently upgrades large unreliable packets to reliable fragments. */
      flags = ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT;
      reliable = 0;
      delivery_name = "unreliable";
    } else if (strcmp(a, "--unsequenced") == 0) {
      flags = ENET_PACKET_FLAG_UNSEQUENCED | ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT;
      reliable = 0;
      delivery_name = "unsequenced";
    } else if (strcmp(a, "--checksum") == 0) {
      checksum = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (connect_arg == NULL) {
    usage(stderr);
    return 2;
  }

  if (enet_initialize() != 0) {
    fprintf(stderr, "enet-ping: enet_initialize failed\n");
    return 1;
  }
  atexit(enet_deinitialize);

  ENetAddress server;
  if (parse_enet_endpoint(connect_arg, &server, 0) != 0) {
    fprintf(stderr, "enet-ping: bad --connect '%s'\n", connect_arg);
    return 2;
  }
  ENetHost* host = enet_host_create(NULL, 1, channel + 1, 0, 0);
  if (host == NULL) {
    fprintf(stderr, "enet-ping: enet_host_create failed\n");
    return 1;
  }
  if (checksum) host->checksum = enet_crc32;

  uint64_t* samples = malloc(count * sizeof *samples);
  uint8_t* payload = malloc(size);
  if (samples == NULL || payload == NULL) {
    fprintf(stderr, "enet-ping: out of memory\n");
    return 1;
  }

  ENetPeer* peer = enet_host_connect(host, &server, channel + 1, 0);
  if (peer == NULL) {
    fprintf(stderr, "enet-ping: enet_host_connect failed\n");
    enet_host_destroy(host);
    return 1;
  }
  ENetEvent event;
  int connected = 0;
  const uint64_t connect_deadline = now_ns() + (uint64_t)connect_timeout_ms * 1000000u;
  while (!connected && now_ns() < connect_deadline) {
    int got = enet_host_service(host, &event, 50);
    if (got < 0) break;
    if (got == 0) continue;
    if (event.type == ENET_EVENT_TYPE_CONNECT)
      connected = 1;
    else if (event.type == ENET_EVENT_TYPE_DISCONNECT)
      break;
    else if (event.type == ENET_EVENT_TYPE_RECEIVE)
      enet_packet_destroy(event.packet);
  }
  if (!connected) {
    fprintf(stderr, "enet-ping: could not connect to %s\n", connect_arg);
    enet_peer_reset(peer);
    enet_host_destroy(host);
    return 1;
  }

  /* A reliable echo that has not come back in this long means the server or the
   * connection is broken; libenet would time the peer out eventually, but later. */
  const uint64_t reliable_give_up_ns = 10000000000ull;
  const uint64_t loss_timeout_ns = (uint64_t)loss_timeout_ms * 1000000u;
  unsigned long lost = 0, lost_total = 0, late = 0, corrupt = 0;
  uint32_t seq = 0;
  size_t done = 0;           /* measured pings */
  size_t answered_total = 0; /* including the warmup */
  int failed = 0;
  while (done < count && !failed) {
    ++seq;
    fill_payload(payload, size, seq);
    ENetPacket* packet = enet_packet_create(payload, size, flags);
    const uint64_t t0 = now_ns();
    if (packet == NULL || enet_peer_send(peer, (enet_uint8)channel, packet) != 0) {
      fprintf(stderr, "enet-ping: enet_peer_send failed\n");
      if (packet != NULL) enet_packet_destroy(packet);
      failed = 1;
      break;
    }
    enet_host_flush(host);
    const uint64_t deadline = t0 + (reliable ? reliable_give_up_ns : loss_timeout_ns);
    int answered = 0;
    while (!answered && !failed) {
      const uint64_t t = now_ns();
      if (t >= deadline) break;
      /* libenet's timeout is in whole milliseconds; the wait returns as soon as the socket
       * is readable, so 1 ms only bounds how long a silent wait lasts before re-checking
       * the deadline. */
      int got = enet_host_service(host, &event, 1);
      if (got < 0) {
        fprintf(stderr, "enet-ping: enet_host_service failed\n");
        failed = 1;
        break;
      }
      if (got == 0) continue;
      if (event.type == ENET_EVENT_TYPE_DISCONNECT) {
        fprintf(stderr, "enet-ping: server disconnected after %zu pings\n", done);
        peer = NULL;
        failed = 1;
        break;
      }
      if (event.type != ENET_EVENT_TYPE_RECEIVE) continue;
      const uint64_t t1 = now_ns();
      uint32_t echo_seq = 0;
      if (payload_seq(event.packet->data, event.packet->dataLength, &echo_seq) != 0) {
        ++corrupt;
      } else if (echo_seq != seq) {
        ++late;
      } else if (event.packet->dataLength != size ||
                 !payload_intact(event.packet->data, event.packet->dataLength, seq)) {
        ++corrupt;
      } else {
        if (answered_total++ >= warmup) samples[done++] = t1 - t0;
        answered = 1;
      }
      enet_packet_destroy(event.packet);
    }
    if (!answered && !failed) {
      if (reliable) {
        fprintf(stderr, "enet-ping: reliable echo %" PRIu32 " not answered in %llu s\n", seq,
                (unsigned long long)(reliable_give_up_ns / 1000000000u));
        failed = 1;
      } else {
        if (answered_total >= warmup) ++lost;
        if (++lost_total > count + warmup) {
          /* Everything is being lost: the server is gone, not a lossy link. */
          fprintf(stderr, "enet-ping: more pings lost (%lu) than requested; giving up\n",
                  lost_total);
          failed = 1;
        }
      }
    }
  }

  if (peer != NULL) {
    enet_peer_disconnect(peer, 0);
    const uint64_t bye_deadline = now_ns() + 1000000000ull;
    int gone = 0;
    while (!gone && now_ns() < bye_deadline) {
      int got = enet_host_service(host, &event, 10);
      if (got < 0) break;
      if (got > 0 && event.type == ENET_EVENT_TYPE_RECEIVE) enet_packet_destroy(event.packet);
      if (got > 0 && event.type == ENET_EVENT_TYPE_DISCONNECT) gone = 1;
    }
    if (!gone) enet_peer_reset(peer);
  }
  enet_host_destroy(host);

  if (corrupt > 0) {
    fprintf(stderr, "enet-ping: %lu corrupted echoes\n", corrupt);
    failed = 1;
  }
  if (done > 0) {
    qsort(samples, done, sizeof *samples, cmp_u64);
    printf(
        "rtt_us p50=%.1f p90=%.1f p99=%.1f p99.9=%.1f max=%.1f count=%zu lost=%lu "
        "delivery=%s size=%lu\n",
        us(percentile(samples, done, 0.50)), us(percentile(samples, done, 0.90)),
        us(percentile(samples, done, 0.99)), us(percentile(samples, done, 0.999)),
        us(samples[done - 1]), done, lost, delivery_name, size);
    fflush(stdout);
  }
  if (late > 0) fprintf(stderr, "enet-ping: %lu late echoes of pings counted lost\n", late);
  free(samples);
  free(payload);
  return failed ? 1 : 0;
}
