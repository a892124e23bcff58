/* enet-echo-check: checks an ENet echo server (tern-ping --serve) with a real libenet client.
 *
 *   enet-echo-check --connect HOST:PORT [--checksum]
 *
 * Over one connection: every delivery mode on several channels, unreliable fragments, a
 * 256 KiB reliable message split into fragments, and a graceful disconnect. Every echo must
 * come back intact, on its channel, with its delivery, and in the order that delivery
 * promises; on loopback nothing may go missing. Prints one PASS/FAIL line per check and
 * exits 0 only if all pass (1 on a failed check, 2 on bad arguments).
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
  kChannelCount = 8,
  kStreamMessages = 200, /* per channel and delivery */
  kMaxOutstanding = 96,  /* bounded in flight: loopback then has no reason to drop */
  kFragmented = 6,
  kFragmentedSize = 4000,
  kFragmentChannel = 2,
  kBulkSize = 256 * 1024,
  kBulkChannel = 5,
  kHeaderBytes = 8,
};

static const uint8_t kStreamChannels[] = {0, 1, 4, 7};
#define NUM_STREAM_CHANNELS (sizeof kStreamChannels / sizeof kStreamChannels[0])

enum delivery { RELIABLE = 0, UNRELIABLE = 1, UNSEQUENCED = 2 };
static const char* const kDeliveryNames[] = {"reliable", "unreliable", "unsequenced"};

enum kind { KIND_STREAM = 0, KIND_FRAGMENTED = 1, KIND_BULK = 2, KIND_COUNT = 3 };
static const uint8_t kKindBytes[] = {'S', 'U', 'B'};

static const uint32_t kDisconnectData = 0xB1E0C11Eu;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- payloads ------------------------------------------------------------------------------
 * [0] kind  [1] delivery  [2] channel  [3] 0x5A  [4..7] sequence (big-endian)  [8..] pattern
 * The pattern mixes every header field with the byte position (including its high bits), so a
 * misplaced fragment or a swapped message cannot pass. */

struct header {
  uint8_t kind_byte;
  uint8_t delivery;
  uint8_t channel;
  uint32_t seq;
};

static uint8_t pattern_byte(const struct header* h, size_t i) {
  uint32_t x = (uint32_t)i;
  return (uint8_t)(x * 17u + (x >> 8) * 5u + (x >> 16) * 3u + h->seq * 131u + h->channel * 7u +
                   h->kind_byte + h->delivery * 11u);
}

static size_t stream_size(uint32_t seq) { return kHeaderBytes + (seq * 37u) % 300u; }

static ENetPacket* make_packet(const struct header* h, size_t size) {
  enet_uint32 flags = 0;
  switch (h->delivery) {
    case RELIABLE: flags = ENET_PACKET_FLAG_RELIABLE; break;
    /* Keeps messages above the MTU unreliable; libenet upgrades them to reliable otherwise. */
    case UNRELIABLE: flags = ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT; break;
    default: flags = ENET_PACKET_FLAG_UNSEQUENCED; break;
  }
  ENetPacket* p = enet_packet_create(NULL, size, flags);
  if (p == NULL) return NULL;
  uint8_t* b = p->data;
  b[0] = h->kind_byte;
  b[1] = h->delivery;
  b[2] = h->channel;
  b[3] = 0x5A;
  b[4] = (uint8_t)(h->seq >> 24);
  b[5] = (uint8_t)(h->seq >> 16);
  b[6] = (uint8_t)(h->seq >> 8);
  b[7] = (uint8_t)h->seq;
  for (size_t i = kHeaderBytes; i < size; ++i) b[i] = pattern_byte(h, i);
  return p;
}

/* ---- results ------------------------------------------------------------------------------- */

static int g_failures = 0;
static int g_reported = 0;

static void failure(const char* fmt, ...) {
  ++g_failures;
  /* A systematic fault repeats for every message; the first ones say enough. */
  if (++g_reported > 30) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("  failure: ", stdout);
  vprintf(fmt, ap);
  fputc('\n', stdout);
  va_end(ap);
}

static int check_result(const char* name, int failures_before) {
  int ok = g_failures == failures_before;
  printf("%s: %s\n", ok ? "PASS" : "FAIL", name);
  fflush(stdout);
  return ok;
}

/* ---- what has come back --------------------------------------------------------------------- */

struct stream {
  uint32_t next; /* reliable: the sequence expected next */
  uint32_t last; /* unreliable: the latest delivered */
  uint32_t count;
  uint8_t seen[kStreamMessages]; /* unsequenced */
};

static struct stream g_streams[KIND_COUNT][3][256];
static size_t g_received = 0;
static int g_disconnected = 0;
static uint32_t g_disconnect_data = 0;

static int kind_index(uint8_t kind_byte) {
  for (int k = 0; k < KIND_COUNT; ++k) {
    if (kKindBytes[k] == kind_byte) return k;
  }
  return -1;
}

static void on_receive(const ENetEvent* ev) {
  const uint8_t* b = ev->packet->data;
  size_t n = ev->packet->dataLength;
  ++g_received;
  int kind = n >= kHeaderBytes ? kind_index(b[0]) : -1;
  if (kind < 0 || b[3] != 0x5A || b[1] > UNSEQUENCED) {
    failure("malformed echo of %zu bytes on channel %u", n, (unsigned)ev->channelID);
    return;
  }
  struct header h = {
      b[0], b[1], b[2],
      ((uint32_t)b[4] << 24) | ((uint32_t)b[5] << 16) | ((uint32_t)b[6] << 8) | b[7]};
  for (size_t i = kHeaderBytes; i < n; ++i) {
    if (b[i] != pattern_byte(&h, i)) {
      failure("%c/%s/ch%u seq %u: byte %zu of %zu is %u, expected %u", h.kind_byte,
              kDeliveryNames[h.delivery], (unsigned)h.channel, h.seq, i, n, (unsigned)b[i],
              (unsigned)pattern_byte(&h, i));
      return;
    }
  }
  if (ev->channelID != h.channel) {
    failure("%c/%s seq %u sent on channel %u came back on channel %u", h.kind_byte,
            kDeliveryNames[h.delivery], h.seq, (unsigned)h.channel, (unsigned)ev->channelID);
  }
  int got_delivery = (ev->packet->flags & ENET_PACKET_FLAG_RELIABLE)      ? RELIABLE
                     : (ev->packet->flags & ENET_PACKET_FLAG_UNSEQUENCED) ? UNSEQUENCED
                                                                          : UNRELIABLE;
  if (got_delivery != h.delivery) {
    failure("%c/ch%u seq %u sent %s came back %s", h.kind_byte, (unsigned)h.channel, h.seq,
            kDeliveryNames[h.delivery], kDeliveryNames[got_delivery]);
  }
  struct stream* s = &g_streams[kind][h.delivery][h.channel];
  switch (h.delivery) {
    case RELIABLE:
      if (h.seq != s->next) {
        failure("reliable %c/ch%u: seq %u came back where %u was due", h.kind_byte,
                (unsigned)h.channel, h.seq, s->next);
      }
      s->next = h.seq + 1;
      break;
    case UNRELIABLE:
      if (s->count > 0 && h.seq <= s->last) {
        failure("unreliable %c/ch%u: seq %u came back after seq %u", h.kind_byte,
                (unsigned)h.channel, h.seq, s->last);
      }
      s->last = h.seq;
      break;
    default:
      if (h.seq < kStreamMessages) {
        if (s->seen[h.seq]) {
          failure("unsequenced %c/ch%u: seq %u came back twice", h.kind_byte, (unsigned)h.channel,
                  h.seq);
        }
        s->seen[h.seq] = 1;
      }
      break;
  }
  ++s->count;
}

static ENetHost* g_host = NULL;
static ENetPeer* g_peer = NULL;

/* One service call; returns -1 if libenet itself failed. */
static int pump(enet_uint32 wait_ms) {
  ENetEvent ev;
  int got = enet_host_service(g_host, &ev, wait_ms);
  if (got <= 0) return got;
  switch (ev.type) {
    case ENET_EVENT_TYPE_RECEIVE:
      on_receive(&ev);
      enet_packet_destroy(ev.packet);
      break;
    case ENET_EVENT_TYPE_DISCONNECT:
      g_disconnected = 1;
      g_disconnect_data = ev.data;
      g_peer = NULL;
      break;
    default: break;
  }
  return got;
}

static int send_message(uint8_t kind, uint8_t delivery, uint8_t channel, uint32_t seq,
                        size_t size) {
  struct header h = {kKindBytes[kind], delivery, channel, seq};
  ENetPacket* p = make_packet(&h, size);
  if (p == NULL || g_peer == NULL || enet_peer_send(g_peer, channel, p) != 0) {
    if (p != NULL) enet_packet_destroy(p);
    failure("could not send %c/%s/ch%u seq %u", h.kind_byte, kDeliveryNames[delivery],
            (unsigned)channel, seq);
    return -1;
  }
  return 0;
}

/* Services until `expected` echoes have arrived in total, or nothing has come back for
 * `quiet_ms` (a lost echo must not hang the check). */
static void wait_echoes(size_t expected, uint64_t quiet_ms) {
  size_t seen = g_received;
  uint64_t last_progress = now_ms();
  while (g_received < expected && !g_disconnected) {
    if (pump(1) < 0) return;
    if (g_received != seen) {
      seen = g_received;
      last_progress = now_ms();
    } else if (now_ms() - last_progress > quiet_ms) {
      return;
    }
  }
}

static void usage(FILE* out) {
  fprintf(out, "usage: enet-echo-check --connect HOST:PORT [--checksum]\n");
}

int main(int argc, char** argv) {
  const char* connect_arg = NULL;
  int checksum = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc) {
      connect_arg = argv[++i];
    } else if (strcmp(argv[i], "--checksum") == 0) {
      checksum = 1;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (connect_arg == NULL) {
    usage(stderr);
    return 2;
  }
  ENetAddress server;
  {
    const char* colon = strrchr(connect_arg, ':');
    char host[256];
    char* end = NULL;
    size_t len = colon != NULL ? (size_t)(colon - connect_arg) : 0;
    errno = 0;
    unsigned long port = colon != NULL ? strtoul(colon + 1, &end, 10) : 0;
    if (colon == NULL || len == 0 || len >= sizeof host || errno != 0 || *end != '\0' ||
        port == 0 || port > 65535) {
      fprintf(stderr, "enet-echo-check: bad --connect '%s'\n", connect_arg);
      return 2;
    }
    memcpy(host, connect_arg, len);
    host[len] = '\0';
    if (enet_initialize() != 0) {
      fprintf(stderr, "enet-echo-check: enet_initialize failed\n");
      return 1;
    }
    atexit(enet_deinitialize);
    if (enet_address_set_host(&server, host) != 0) {
      fprintf(stderr, "enet-echo-check: cannot resolve '%s'\n", host);
      return 2;
    }
    server.port = (enet_uint16)port;
  }

  g_host = enet_host_create(NULL, 1, kChannelCount, 0, 0);
  if (g_host == NULL) {
    fprintf(stderr, "enet-echo-check: enet_host_create failed\n");
    return 1;
  }
  if (checksum) g_host->checksum = enet_crc32;
  printf("enet-echo-check: %s%s\n", connect_arg, checksum ? " (CRC32 checksums)" : "");

  /* ---- connect: libenet retransmits the handshake, so a server still starting is fine. */
  int before = g_failures;
  g_peer = enet_host_connect(g_host, &server, kChannelCount, 0);
  int connected = 0;
  if (g_peer != NULL) {
    uint64_t deadline = now_ms() + 5000;
    while (!connected && !g_disconnected && now_ms() < deadline) {
      ENetEvent ev;
      int got = enet_host_service(g_host, &ev, 10);
      if (got < 0) break;
      if (got > 0 && ev.type == ENET_EVENT_TYPE_CONNECT) connected = 1;
      if (got > 0 && ev.type == ENET_EVENT_TYPE_DISCONNECT) g_disconnected = 1;
      if (got > 0 && ev.type == ENET_EVENT_TYPE_RECEIVE) enet_packet_destroy(ev.packet);
    }
  }
  if (!connected) {
    failure("no connection within 5 s");
    check_result("connect", before);
    enet_host_destroy(g_host);
    return 1;
  }
  /* The packet throttle drops unreliable messages whenever the RTT rises, as it does on a
   * loaded machine; this check wants every echo. Zero deceleration keeps our throttle open,
   * and the THROTTLE_CONFIGURE command libenet sends for it keeps the server's open too. */
  enet_peer_throttle_configure(g_peer, ENET_PEER_PACKET_THROTTLE_INTERVAL,
                               ENET_PEER_PACKET_THROTTLE_ACCELERATION, 0);
  if (g_peer->channelCount != kChannelCount) {
    failure("negotiated %zu channels, asked for %d", g_peer->channelCount, kChannelCount);
  }
  check_result("connect (8 channels)", before);

  /* ---- every delivery on several channels, interleaved as a game would send them. */
  before = g_failures;
  size_t expected = 0;
  for (uint32_t seq = 0; seq < kStreamMessages && !g_disconnected; ++seq) {
    for (size_t c = 0; c < NUM_STREAM_CHANNELS; ++c) {
      for (uint8_t d = RELIABLE; d <= UNSEQUENCED; ++d) {
        if (send_message(KIND_STREAM, d, kStreamChannels[c], seq, stream_size(seq)) == 0) {
          ++expected;
        }
      }
    }
    pump(0);
    uint64_t last_progress = now_ms();
    size_t seen = g_received;
    while (expected - (g_received < expected ? g_received : expected) > kMaxOutstanding &&
           !g_disconnected) {
      if (pump(1) < 0) break;
      if (g_received != seen) {
        seen = g_received;
        last_progress = now_ms();
      } else if (now_ms() - last_progress > 3000) {
        break;
      }
    }
  }
  wait_echoes(expected, 3000);
  for (size_t c = 0; c < NUM_STREAM_CHANNELS; ++c) {
    for (int d = RELIABLE; d <= UNSEQUENCED; ++d) {
      uint32_t got = g_streams[KIND_STREAM][d][kStreamChannels[c]].count;
      if (got != kStreamMessages) {
        failure("%s channel %u: %u of %d echoes came back", kDeliveryNames[d],
                (unsigned)kStreamChannels[c], got, kStreamMessages);
      }
    }
  }
  check_result("reliable/unreliable/unsequenced on channels 0,1,4,7: all echoed, in order", before);

  /* ---- unreliable messages above the MTU travel as unreliable fragments. */
  before = g_failures;
  size_t target = g_received + kFragmented;
  for (uint32_t seq = 0; seq < kFragmented && !g_disconnected; ++seq) {
    send_message(KIND_FRAGMENTED, UNRELIABLE, kFragmentChannel, seq, kFragmentedSize);
    pump(1);
  }
  wait_echoes(target, 3000);
  uint32_t frag_got = g_streams[KIND_FRAGMENTED][UNRELIABLE][kFragmentChannel].count;
  if (frag_got != kFragmented) {
    failure("%u of %d unreliable %d-byte messages came back", frag_got, kFragmented,
            kFragmentedSize);
  }
  check_result("unreliable fragments (4000-byte messages)", before);

  /* ---- one reliable message of 256 KiB, about 190 fragments at the default MTU. */
  before = g_failures;
  target = g_received + 1;
  if (!g_disconnected) send_message(KIND_BULK, RELIABLE, kBulkChannel, 0, kBulkSize);
  {
    uint64_t deadline = now_ms() + 15000;
    while (g_received < target && !g_disconnected && now_ms() < deadline) {
      if (pump(1) < 0) break;
    }
  }
  if (g_streams[KIND_BULK][RELIABLE][kBulkChannel].count != 1) {
    failure("256 KiB echo did not come back intact within 15 s");
  }
  check_result("256 KiB reliable message (fragmented) echoed intact", before);

  /* ---- graceful disconnect: libenet reports it only once the server acknowledged it. */
  before = g_failures;
  if (g_disconnected) {
    failure("the server disconnected us (data %u) before we asked", g_disconnect_data);
  } else {
    enet_peer_disconnect(g_peer, kDisconnectData);
    uint64_t deadline = now_ms() + 5000;
    while (!g_disconnected && now_ms() < deadline) {
      if (pump(10) < 0) break;
    }
    if (!g_disconnected) failure("disconnect not acknowledged within 5 s");
  }
  check_result("graceful disconnect acknowledged", before);

  if (g_peer != NULL) enet_peer_reset(g_peer);
  enet_host_destroy(g_host);
  printf("%s: %d failure%s\n", g_failures == 0 ? "ALL PASSED" : "FAILED", g_failures,
         g_failures == 1 ? "" : "s");
  return g_failures == 0 ? 0 : 1;
}
