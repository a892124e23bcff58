/* enet-relay-check: a libenet client that checks a relay's room semantics.
 *
 *   enet-relay-check --connect HOST:PORT
 *
 * The relay must run with `--broadcast-rooms 100-199 --max-room-size 3` (enet-relay, or any
 * relay promising the same semantics). All peers live on one client host; libenet keeps
 * several connections per host apart by peer ID. Checks, in order:
 *   1. rooms: three peers join room 7 and one room 8; each sends a reliable message on channel
 *      1, an unreliable one on channel 0 and an unsequenced one on channel 2. Every room-7
 *      member gets exactly the other two members' messages, each once, on the sender's channel
 *      with the sender's delivery; the room-8 peer gets nothing.
 *   2. --max-room-size: a fourth join to room 7 is refused with disconnect data 1.
 *   3. broadcast room 150 (members F, A, B joining in that order): F's message reaches A and B;
 *      A's reaches F only; after F leaves, A is first: A's reaches B, B's reaches A only.
 * Exit status: 0 all passed, 1 a check failed (the reason on stderr), 2 bad usage.
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>

#include "enet_endpoint.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kMaxPeers = 12, kMaxGot = 256, kChannels = 3 };
static const enet_uint32 kDeliveryMask = ENET_PACKET_FLAG_RELIABLE | ENET_PACKET_FLAG_UNSEQUENCED;

typedef struct {
  int to;
  int channel;
  enet_uint32 delivery; /* RELIABLE, UNSEQUENCED or 0 */
  char text[32];
} Got;

static ENetHost* g_host;
static ENetAddress g_server;
static ENetPeer* g_peers[kMaxPeers];
static int g_npeers;
static int g_connected[kMaxPeers], g_disconnected[kMaxPeers];
static enet_uint32 g_disconnect_data[kMaxPeers];
static Got g_got[kMaxGot];
static int g_ngot;

static void fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "enet-relay-check: FAIL: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(1);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* libenet reuses a peer slot once its connection is over, so the newest index wins. */
static int index_of(const ENetPeer* peer) {
  for (int i = g_npeers - 1; i >= 0; --i)
    if (g_peers[i] == peer) return i;
  return -1;
}

static void handle(const ENetEvent* event) {
  int i = index_of(event->peer);
  switch (event->type) {
    case ENET_EVENT_TYPE_CONNECT:
      if (i >= 0) g_connected[i] = 1;
      break;
    case ENET_EVENT_TYPE_DISCONNECT:
      if (i >= 0) {
        g_disconnected[i] = 1;
        g_disconnect_data[i] = event->data;
      }
      break;
    case ENET_EVENT_TYPE_RECEIVE: {
      if (g_ngot == kMaxGot) fail("more than %d messages received", kMaxGot);
      Got* got = &g_got[g_ngot++];
      got->to = i;
      got->channel = event->channelID;
      got->delivery = event->packet->flags & kDeliveryMask;
      size_t n = event->packet->dataLength;
      if (n >= sizeof got->text) n = sizeof got->text - 1;
      memcpy(got->text, event->packet->data, n);
      got->text[n] = '\0';
      enet_packet_destroy(event->packet);
      break;
    }
    case ENET_EVENT_TYPE_NONE: break;
  }
}

/* Services the host for `ms`, or until done() holds when it is given. */
static void pump(uint64_t ms, int (*done)(void)) {
  uint64_t deadline = now_ms() + ms;
  while (now_ms() < deadline) {
    if (done != NULL && done()) return;
    ENetEvent event;
    int got = enet_host_service(g_host, &event, 5);
    while (got > 0) {
      handle(&event);
      got = enet_host_check_events(g_host, &event);
    }
    if (got < 0) fail("enet_host_service failed");
  }
}

static int g_wait_peer;
static int peer_settled(void) {
  return g_connected[g_wait_peer] || g_disconnected[g_wait_peer];
}
static int peer_gone(void) { return g_disconnected[g_wait_peer]; }
static int g_wait_count;
static int got_enough(void) { return g_ngot >= g_wait_count; }

/* Connects a new peer asking for `room`; returns its index once libenet reports the outcome. */
static int join(enet_uint32 room) {
  if (g_npeers == kMaxPeers) fail("too many peers");
  ENetPeer* peer = enet_host_connect(g_host, &g_server, kChannels, room);
  if (peer == NULL) fail("enet_host_connect failed");
  int i = g_npeers++;
  g_peers[i] = peer;
  g_wait_peer = i;
  pump(5000, peer_settled);
  if (!peer_settled()) fail("peer %d (room %u) got no answer to its connect", i, room);
  return i;
}

static void leave(int i) {
  enet_peer_disconnect(g_peers[i], 0);
  g_wait_peer = i;
  pump(5000, peer_gone);
  if (!g_disconnected[i]) fail("peer %d: disconnect not acknowledged", i);
}

static void send_text(int from, int channel, enet_uint32 flags, const char* text) {
  ENetPacket* packet = enet_packet_create(text, strlen(text), flags);
  if (packet == NULL || enet_peer_send(g_peers[from], (enet_uint8)channel, packet) != 0)
    fail("peer %d: enet_peer_send failed", from);
}

/* Waits for `expected` messages in total (since the last reset), then a little longer so
 * that anything extra has a chance to show up too. */
static void collect(int expected) {
  enet_host_flush(g_host);
  g_wait_count = expected;
  pump(5000, got_enough);
  pump(300, NULL);
}

static int count(int to, const char* text, int channel, enet_uint32 delivery) {
  int n = 0;
  for (int k = 0; k < g_ngot; ++k) {
    const Got* got = &g_got[k];
    if (got->to != to || strcmp(got->text, text) != 0) continue;
    if (got->channel != channel || got->delivery != delivery)
      fail("peer %d got '%s' on channel %d with delivery flags %u, expected channel %d flags %u",
           to, text, got->channel, (unsigned)got->delivery, channel, (unsigned)delivery);
    ++n;
  }
  return n;
}

/* `text` (sent reliable on channel 1) must have reached exactly the peers in `to_mask`. */
static void expect_reliable(const char* text, const int* peers, int npeers, unsigned to_mask) {
  for (int k = 0; k < npeers; ++k) {
    int want = (to_mask >> k) & 1u;
    int n = count(peers[k], text, 1, ENET_PACKET_FLAG_RELIABLE);
    if (n != want) fail("peer %d received '%s' %d times, expected %d", peers[k], text, n, want);
  }
}

int main(int argc, char** argv) {
  const char* connect_arg = NULL;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc) {
      connect_arg = argv[++i];
    } else {
      connect_arg = NULL;
      break;
    }
  }
  if (connect_arg == NULL) {
    fprintf(stderr,
            "usage: enet-relay-check --connect HOST:PORT\n"
            "  checks a relay started with --broadcast-rooms 100-199 --max-room-size 3\n");
    return 2;
  }
  if (enet_initialize() != 0) fail("enet_initialize failed");
  atexit(enet_deinitialize);
  if (parse_enet_endpoint(connect_arg, &g_server, 0) != 0) {
    fprintf(stderr, "enet-relay-check: bad --connect '%s'\n", connect_arg);
    return 2;
  }
  g_host = enet_host_create(NULL, kMaxPeers, kChannels, 0, 0);
  if (g_host == NULL) fail("enet_host_create failed");

  /* 1. Rooms 7 and 8, all three deliveries. */
  const enet_uint32 rooms[4] = {7, 7, 7, 8};
  int p[4];
  for (int k = 0; k < 4; ++k) {
    p[k] = join(rooms[k]);
    if (!g_connected[p[k]]) fail("peer %d refused joining room %u", p[k], rooms[k]);
  }
  pump(200, NULL); /* let the relay see the last join before anyone talks */
  struct {
    char kind;
    int channel;
    enet_uint32 flags;
  } const kinds[3] = {{'R', 1, ENET_PACKET_FLAG_RELIABLE},
                      {'U', 0, 0},
                      {'S', 2, ENET_PACKET_FLAG_UNSEQUENCED}};
  for (int k = 0; k < 4; ++k) {
    for (int d = 0; d < 3; ++d) {
      char text[16];
      snprintf(text, sizeof text, "%c%d", kinds[d].kind, k);
      send_text(p[k], kinds[d].channel, kinds[d].flags, text);
    }
  }
  collect(3 * 2 * 3);
  for (int to = 0; to < 4; ++to) {
    for (int from = 0; from < 4; ++from) {
      for (int d = 0; d < 3; ++d) {
        char text[16];
        snprintf(text, sizeof text, "%c%d", kinds[d].kind, from);
        int want = (to != from && rooms[to] == 7 && rooms[from] == 7) ? 1 : 0;
        int n = count(p[to], text, kinds[d].channel, kinds[d].flags & kDeliveryMask);
        if (n != want)
          fail("rooms: peer %d (room %u) received '%s' from peer %d (room %u) %d times, "
               "expected %d",
               to, rooms[to], text, from, rooms[from], n, want);
      }
    }
  }
  if (g_ngot != 3 * 2 * 3) fail("rooms: %d messages received, expected %d", g_ngot, 3 * 2 * 3);
  printf("enet-relay-check: rooms ok (18 copies: room 7 x 3 deliveries, room 8 nothing)\n");

  /* 2. A fourth member of room 7 exceeds --max-room-size 3. */
  int extra = join(7);
  g_wait_peer = extra;
  pump(5000, peer_gone);
  if (!g_disconnected[extra]) fail("max-room-size: a 4th join to room 7 was not refused");
  if (g_disconnect_data[extra] != 1)
    fail("max-room-size: refused with data %u, expected 1", (unsigned)g_disconnect_data[extra]);
  printf("enet-relay-check: max-room-size ok (4th join refused with data 1)\n");

  /* 3. Broadcast room 150: F, A, B join in that order. */
  g_ngot = 0;
  int b[3];
  for (int k = 0; k < 3; ++k) {
    b[k] = join(150);
    if (!g_connected[b[k]]) fail("broadcast: peer %d refused joining room 150", b[k]);
    pump(100, NULL); /* the relay sees the joins in this order */
  }
  send_text(b[0], 1, ENET_PACKET_FLAG_RELIABLE, "F-first");
  collect(2);
  expect_reliable("F-first", b, 3, 0x6); /* A and B */
  send_text(b[1], 1, ENET_PACKET_FLAG_RELIABLE, "A-second");
  collect(3);
  expect_reliable("A-second", b, 3, 0x1); /* F only */
  if (g_ngot != 3) fail("broadcast: %d messages received, expected 3", g_ngot);
  leave(b[0]);
  pump(200, NULL);
  send_text(b[1], 1, ENET_PACKET_FLAG_RELIABLE, "A-first");
  collect(4);
  expect_reliable("A-first", b, 3, 0x4); /* B */
  send_text(b[2], 1, ENET_PACKET_FLAG_RELIABLE, "B-second");
  collect(5);
  expect_reliable("B-second", b, 3, 0x2); /* A only */
  if (g_ngot != 5) fail("broadcast: %d messages received, expected 5", g_ngot);
  printf("enet-relay-check: broadcast ok (first fans out, others reach the first; "
         "succession after the first leaves)\n");

  for (int i = 0; i < g_npeers; ++i)
    if (g_connected[i] && !g_disconnected[i]) enet_peer_disconnect(g_peers[i], 0);
  pump(500, NULL);
  enet_host_destroy(g_host);
  printf("enet-relay-check: ok\n");
  return 0;
}
