/* enet-loss-peer: the libenet side of perf/loss_compare.
 *
 *   enet-loss-peer recv --listen HOST:PORT [--timeout S]
 *   enet-loss-peer send --connect HOST:PORT --workload game|bulk|block [--hz N] [--duration S]
 *                       [--warmup S] [--size B] [--bytes N] [--channels N] [--timeout S]
 *
 * Messages, the receiver's JSON report and the ending are those of perf/loss_peer.cpp and
 * perf/reference/kcp_loss_peer.go (perf/README.md, "Latency under loss"): a 17-byte header
 * (sequence u32, channel u8, kind u8, size u16, CLOCK_MONOTONIC send stamp u64, channel count
 * u8; little-endian), reliable on its channel. After its data each channel carries an end
 * message whose sequence field is how many data messages preceded it; once every channel has
 * ended the receiver prints its report and disconnects, which lets the sender go.
 * A game stream's first --warmup seconds (default 1) are sent as warm-up messages (kind 2):
 * delivered and checked like the rest but left out of the latencies, so that the figures are
 * those of a connection whose round-trip estimate has settled, not of its first second.
 * block: one reliable message of --bytes bytes (header first) on channel 0, which libenet
 * sends as ENet fragments: the same data as tern-loss-peer's block workload.
 * Exit 0 when the run finished (delivery is judged by the caller from the report), 1 on a
 * connection or I/O failure, 2 on a bad command line.
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

enum { kHeaderBytes = 17, kKindData = 0, kKindEnd = 1, kKindWarmup = 2, kMaxChannels = 255 };

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void put_u16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_u64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get_le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: enet-loss-peer recv --listen HOST:PORT [--timeout S]\n"
          "       enet-loss-peer send --connect HOST:PORT --workload game|bulk|block [--hz N]\n"
          "                           [--duration S] [--warmup S] [--size B] [--bytes N] "
          "[--channels N]\n"
          "                           [--timeout S]\n");
}

struct Options {
  int send;
  const char* address;
  int bulk;
  int block;
  double hz, duration, warmup, timeout;
  unsigned long size, total, channels;
};

static int parse(int argc, char** argv, struct Options* o) {
  if (argc < 2) return -1;
  if (strcmp(argv[1], "send") == 0) {
    o->send = 1;
  } else if (strcmp(argv[1], "recv") != 0) {
    return -1;
  }
  o->address = o->send ? NULL : "127.0.0.1:0";
  o->hz = 60;
  o->duration = 10;
  o->warmup = 1;
  o->timeout = 120;
  o->size = 64;
  o->total = 4u << 20;
  o->channels = 2;
  for (int i = 2; i < argc; i += 2) {
    if (i + 1 >= argc) return -1;
    const char* k = argv[i];
    const char* v = argv[i + 1];
    char* end = NULL;
    if (strcmp(k, "--listen") == 0 || strcmp(k, "--connect") == 0) {
      o->address = v;
    } else if (strcmp(k, "--workload") == 0) {
      if (strcmp(v, "game") != 0 && strcmp(v, "bulk") != 0 && strcmp(v, "block") != 0) return -1;
      o->bulk = strcmp(v, "bulk") == 0;
      o->block = strcmp(v, "block") == 0;
    } else if (strcmp(k, "--warmup") == 0) {
      o->warmup = strtod(v, &end);
      if (end == v || *end != '\0' || !(o->warmup >= 0)) return -1;
    } else if (strcmp(k, "--hz") == 0 || strcmp(k, "--duration") == 0 ||
               strcmp(k, "--timeout") == 0) {
      double d = strtod(v, &end);
      if (end == v || *end != '\0' || !(d > 0)) return -1;
      *(strcmp(k, "--hz") == 0         ? &o->hz
        : strcmp(k, "--duration") == 0 ? &o->duration
                                       : &o->timeout) = d;
    } else if (strcmp(k, "--size") == 0 || strcmp(k, "--bytes") == 0 ||
               strcmp(k, "--channels") == 0) {
      errno = 0;
      unsigned long n = strtoul(v, &end, 10);
      if (errno != 0 || end == v || *end != '\0') return -1;
      *(strcmp(k, "--size") == 0    ? &o->size
        : strcmp(k, "--bytes") == 0 ? &o->total
                                    : &o->channels) = n;
    } else {
      return -1;
    }
  }
  if (o->address == NULL || o->size < kHeaderBytes || o->size > 65535 || o->channels < 1 ||
      o->channels > kMaxChannels)
    return -1;
  return 0;
}

static int run_recv(const struct Options* o) {
  ENetAddress bind;
  if (parse_enet_endpoint(o->address, &bind, 1) != 0) {
    fprintf(stderr, "enet-loss-peer: bad --listen %s\n", o->address);
    return 2;
  }
  ENetHost* host = enet_host_create(&bind, 1, kMaxChannels, 0, 0);
  if (host == NULL) {
    fprintf(stderr, "enet-loss-peer: cannot listen on %s\n", o->address);
    return 1;
  }
  ENetAddress local;
  enet_socket_get_address(host->socket, &local);
  printf("listening 127.0.0.1:%u\n", (unsigned)local.port);
  fflush(stdout);

  size_t cap = 1 << 16, count = 0, nlat = 0;
  uint32_t* lat = malloc(cap * sizeof *lat);
  uint32_t next[kMaxChannels] = {0};
  unsigned char ended[kMaxChannels] = {0};
  int channels = -1, ends = 0, in_order = 1, timed_out = 0, disconnected = 0;
  uint64_t expected = 0, bytes = 0, first_send = 0, last_recv = 0, order_errors = 0;
  ENetPeer* peer = NULL;
  uint64_t deadline = now_ns() + (uint64_t)(o->timeout * 1e9);
  ENetEvent ev;
  while (channels < 0 || ends < channels) {
    if (now_ns() > deadline) {
      timed_out = 1;
      break;
    }
    int r = enet_host_service(host, &ev, 1);
    if (r < 0) {
      fprintf(stderr, "enet-loss-peer: enet_host_service failed\n");
      return 1;
    }
    if (r == 0) continue;
    if (ev.type == ENET_EVENT_TYPE_CONNECT) {
      peer = ev.peer;
    } else if (ev.type == ENET_EVENT_TYPE_DISCONNECT) {
      /* libenet gave the connection up (its timeouts under heavy loss): the run ends here. */
      timed_out = disconnected = 1;
      break;
    } else if (ev.type == ENET_EVENT_TYPE_RECEIVE) {
      uint64_t now = now_ns();
      const uint8_t* d = ev.packet->data;
      if (ev.packet->dataLength >= kHeaderBytes) {
        uint32_t seq = (uint32_t)get_le(d, 4);
        uint8_t ch = d[4];
        uint64_t stamp = get_le(d + 8, 8);
        if (ch != ev.channelID) in_order = 0;
        if (d[5] == kKindEnd) {
          if (!ended[ch]) ++ends;
          ended[ch] = 1;
          channels = d[16];
          expected += seq;
          if (next[ch] != seq) in_order = 0;
        } else {
          if (seq != next[ch]) {
            in_order = 0;
            ++order_errors;
          }
          next[ch] = seq + 1;
          if (count == 0 || stamp < first_send) first_send = stamp;
          if (nlat == cap) {
            cap *= 2;
            lat = realloc(lat, cap * sizeof *lat);
          }
          ++count;
          if (d[5] != kKindWarmup) lat[nlat++] = (uint32_t)((now - stamp) / 1000);
          bytes += ev.packet->dataLength;
          last_recv = now;
        }
      } else {
        in_order = 0;
      }
      enet_packet_destroy(ev.packet);
    }
  }
  if (count != expected) in_order = 0;
  printf("{\"stack\":\"libenet\",\"received\":%zu,\"expected\":%" PRIu64
         ",\"in_order\":%s,\"bytes\":%" PRIu64 ",\"first_send_ns\":%" PRIu64
         ",\"last_recv_ns\":%" PRIu64 ",\"order_errors\":%" PRIu64
         ",\"timed_out\":%s,\"disconnected\":%s,\"channels_done\":%d,\"latencies_us\":[",
         count, expected, in_order ? "true" : "false", bytes, first_send, last_recv, order_errors,
         timed_out ? "true" : "false", disconnected ? "true" : "false", ends);
  for (size_t i = 0; i < nlat; ++i) printf(i ? ",%u" : "%u", lat[i]);
  printf("]}\n");
  fflush(stdout);
  free(lat);
  if (peer != NULL && !timed_out) {
    /* The sender leaves when it sees this disconnect, after which nothing is owed. */
    enet_peer_disconnect_later(peer, 0);
    uint64_t until = now_ns() + 3000000000u;
    while (now_ns() < until && enet_host_service(host, &ev, 10) >= 0) {
      if (ev.type == ENET_EVENT_TYPE_DISCONNECT) break;
    }
  }
  enet_host_destroy(host);
  return 0;
}

static int run_send(const struct Options* o) {
  ENetAddress to;
  if (parse_enet_endpoint(o->address, &to, 0) != 0) {
    fprintf(stderr, "enet-loss-peer: bad --connect %s\n", o->address);
    return 2;
  }
  ENetHost* host = enet_host_create(NULL, 1, o->channels, 0, 0);
  if (host == NULL) return 1;
  ENetPeer* peer = enet_host_connect(host, &to, o->channels, 0);
  ENetEvent ev;
  uint64_t deadline = now_ns() + (uint64_t)(o->timeout * 1e9);
  int connected = 0;
  while (!connected && now_ns() < deadline) {
    if (enet_host_service(host, &ev, 10) > 0 && ev.type == ENET_EVENT_TYPE_CONNECT) connected = 1;
  }
  if (!connected) {
    fprintf(stderr, "enet-loss-peer: cannot connect to %s\n", o->address);
    return 1;
  }
  uint8_t* msg = calloc(1, o->size);
  uint32_t seqs[kMaxChannels] = {0};
  int lost = 0;
#define SEND(ch, kind)                                                           \
  do {                                                                           \
    put_u32(msg, seqs[ch]);                                                      \
    msg[4] = (uint8_t)(ch);                                                      \
    msg[5] = (kind);                                                             \
    put_u16(msg + 6, (uint16_t)o->size);                                         \
    put_u64(msg + 8, now_ns());                                                  \
    msg[16] = (uint8_t)o->channels;                                              \
    ENetPacket* p = enet_packet_create(msg, o->size, ENET_PACKET_FLAG_RELIABLE); \
    if (enet_peer_send(peer, (enet_uint8)(ch), p) != 0) {                        \
      fprintf(stderr, "enet-loss-peer: enet_peer_send failed\n");                \
      return 1;                                                                  \
    }                                                                            \
  } while (0)
  /* Services until `until`, watching for the receiver going away. */
#define SERVICE_UNTIL(until)                                                           \
  do {                                                                                 \
    for (;;) {                                                                         \
      uint64_t n = now_ns();                                                           \
      if (n >= (until)) break;                                                         \
      uint64_t wait_ms = ((until)-n) / 1000000u;                                       \
      int r = enet_host_service(host, &ev, (enet_uint32)wait_ms);                      \
      if (r > 0 && ev.type == ENET_EVENT_TYPE_DISCONNECT) {                            \
        lost = 1;                                                                      \
        break;                                                                         \
      }                                                                                \
      if (r > 0 && ev.type == ENET_EVENT_TYPE_RECEIVE) enet_packet_destroy(ev.packet); \
    }                                                                                  \
  } while (0)
  if (o->block) {
    uint8_t* block = calloc(1, o->total < kHeaderBytes ? kHeaderBytes : o->total);
    put_u32(block, seqs[0]);
    block[5] = kKindData;
    put_u64(block + 8, now_ns());
    block[16] = (uint8_t)o->channels;
    ENetPacket* p = enet_packet_create(block, o->total < kHeaderBytes ? kHeaderBytes : o->total,
                                       ENET_PACKET_FLAG_RELIABLE);
    free(block);
    if (p == NULL || enet_peer_send(peer, 0, p) != 0) {
      fprintf(stderr, "enet-loss-peer: enet_peer_send failed\n");
      return 1;
    }
    ++seqs[0];
    enet_host_flush(host);
  } else if (o->bulk) {
    for (unsigned long sent = 0; sent < o->total; sent += o->size) {
      unsigned long ch = (sent / o->size) % o->channels;
      SEND(ch, kKindData);
      ++seqs[ch];
    }
    enet_host_flush(host);
  } else {
    uint64_t start = now_ns(), period = (uint64_t)(1e9 / o->hz);
    unsigned long warm = (unsigned long)(o->warmup * o->hz);
    unsigned long ticks = warm + (unsigned long)(o->duration * o->hz);
    for (unsigned long t = 0; t < ticks && !lost; ++t) {
      SERVICE_UNTIL(start + t * period);
      for (unsigned long ch = 0; ch < o->channels; ++ch) {
        SEND(ch, t < warm ? kKindWarmup : kKindData);
        ++seqs[ch];
      }
      enet_host_flush(host);
    }
  }
  for (unsigned long ch = 0; ch < o->channels; ++ch) SEND(ch, kKindEnd);
  enet_host_flush(host);
  SERVICE_UNTIL(deadline);
  free(msg);
  enet_host_destroy(host);
  if (!lost) {
    fprintf(stderr, "enet-loss-peer: the receiver did not finish within --timeout\n");
    return 1;
  }
  printf("sent %u\n", seqs[0]);
  return 0;
}

int main(int argc, char** argv) {
  struct Options o;
  memset(&o, 0, sizeof o);
  if (parse(argc, argv, &o) != 0) {
    usage(stderr);
    return 2;
  }
  if (enet_initialize() != 0) return 1;
  int rc = o.send ? run_send(&o) : run_recv(&o);
  enet_deinitialize();
  return rc;
}
