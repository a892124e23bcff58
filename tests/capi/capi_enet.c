/* capi_enet: the C API (tern/tern.h) against Debian's libenet, both ways, over loopback.
 *
 * Case 1: a C-API client against a libenet server. Case 2: a libenet client against a C-API
 * server. In each, the server echoes every message back as it came; the client sends
 * kStream messages of each delivery (reliable, unreliable, unsequenced) on their own channels,
 * a fragmented reliable message and a fragmented unreliable one, then disconnects gracefully.
 * Accounting is exact: every echo back, intact, on its channel, with its delivery, reliable
 * and unreliable ones in order, unsequenced ones once each; Tern's per-peer counters agree.
 * libenet's throttle is opened (zero deceleration, which it also sends to the Tern side), so
 * loopback has no reason to shed an unreliable message. Prints one line per failed check.
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>
#include <tern/tern.h>

#include "capi_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A hang guard only: a phase not finished after this long has failed. */
static const double kHangSeconds = 60.0;

enum {
  kKinds = 3,
  kStream = 300,
  kWindow = 32,
  kHeader = 8,
  kChannels = 4,
  kFragChannel = 3,
  kBigReliable = 60000,
  kBigUnreliable = 3000,
  kBigKind = 9, /* the header's kind for the fragmented messages */
};
static const uint32_t kFlags[kKinds] = {TERN_SEND_RELIABLE, 0, TERN_SEND_UNSEQUENCED};

static void put32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}
static uint32_t get32(const uint8_t* p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint8_t pattern(uint32_t seq, size_t i) { return (uint8_t)(seq * 13u + i * 5u + 1u); }
static void fill(uint8_t* buf, size_t len, uint32_t kind, uint32_t seq) {
  put32(buf, kind);
  put32(buf + 4, seq);
  for (size_t i = kHeader; i < len; ++i) buf[i] = pattern(seq, i);
}
static int intact(const uint8_t* buf, size_t len, uint32_t seq) {
  for (size_t i = kHeader; i < len; ++i) {
    if (buf[i] != pattern(seq, i)) return 0;
  }
  return 1;
}

/* One side of a connection, Tern's C API or libenet, behind the same four calls. */
typedef struct node {
  const char* name;
  tern_host* tern;
  tern_peer tern_peer;
  ENetHost* enet;
  ENetPeer* enet_peer;
  ENetPacket* held; /* the last receive event's packet, destroyed on the next service */
} node;

typedef struct node_event {
  tern_event_type type;
  uint8_t channel;
  uint32_t flags; /* TERN_SEND_* */
  uint32_t data;
  const uint8_t* bytes;
  size_t length;
} node_event;

static uint32_t enet_flags(uint32_t flags) {
  if (flags & TERN_SEND_RELIABLE) return ENET_PACKET_FLAG_RELIABLE;
  if (flags & TERN_SEND_UNSEQUENCED) return ENET_PACKET_FLAG_UNSEQUENCED;
  /* Without it libenet turns an unreliable message above the MTU into reliable fragments,
   * where Tern sends unreliable ones. */
  return ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT;
}

static int node_open(node* n, const char* name, int tern, uint16_t* port_out) {
  memset(n, 0, sizeof *n);
  n->name = name;
  if (tern) {
    char error[256];
    n->tern = tern_host_create(NULL, "127.0.0.1:0", error, sizeof error);
    CHECK(n->tern != NULL, "%s: %s", name, error);
    if (n->tern == NULL) return 0;
    *port_out = tern_host_local_address(n->tern).port;
  } else {
    ENetAddress a;
    enet_address_set_host_ip(&a, "127.0.0.1");
    a.port = 0;
    n->enet = enet_host_create(&a, 8, kChannels, 0, 0);
    CHECK(n->enet != NULL, "%s: enet_host_create failed", name);
    if (n->enet == NULL) return 0;
    ENetAddress bound;
    enet_socket_get_address(n->enet->socket, &bound);
    *port_out = bound.port;
  }
  return 1;
}

static void node_close(node* n) {
  if (n->held != NULL) enet_packet_destroy(n->held);
  if (n->tern != NULL) tern_host_destroy(n->tern);
  if (n->enet != NULL) enet_host_destroy(n->enet);
}

static void node_connect(node* n, uint16_t port, uint32_t data) {
  if (n->tern != NULL) {
    tern_address to = tern_address_ipv4(0x7f000001u, port);
    n->tern_peer = tern_host_connect(n->tern, &to, kChannels, data);
    CHECK(tern_peer_valid(n->tern_peer), "%s: connect", n->name);
  } else {
    ENetAddress to;
    enet_address_set_host_ip(&to, "127.0.0.1");
    to.port = port;
    n->enet_peer = enet_host_connect(n->enet, &to, kChannels, data);
    CHECK(n->enet_peer != NULL, "%s: connect", n->name);
  }
}

/* 1 with an event, 0 without one within wait_ms. */
static int node_service(node* n, node_event* ev, uint32_t wait_ms) {
  memset(ev, 0, sizeof *ev);
  if (n->tern != NULL) {
    tern_event te;
    const int r = tern_host_service(n->tern, &te, wait_ms);
    CHECK(r >= 0, "%s: service: %s", n->name, tern_host_last_error(n->tern));
    if (r <= 0) return 0;
    if (te.type == TERN_EVENT_CONNECT) n->tern_peer = te.peer;
    ev->type = te.type;
    ev->channel = te.channel;
    ev->flags = te.flags;
    ev->data = te.user_data;
    ev->bytes = te.data;
    ev->length = te.length;
    return 1;
  }
  if (n->held != NULL) {
    enet_packet_destroy(n->held);
    n->held = NULL;
  }
  ENetEvent e;
  const int r = enet_host_service(n->enet, &e, wait_ms);
  CHECK(r >= 0, "%s: enet_host_service failed", n->name);
  if (r <= 0) return 0;
  switch (e.type) {
    case ENET_EVENT_TYPE_CONNECT:
      n->enet_peer = e.peer;
      /* Keeps both sides' throttles open: loopback then has no reason to drop anything. */
      enet_peer_throttle_configure(e.peer, ENET_PEER_PACKET_THROTTLE_INTERVAL,
                                   ENET_PEER_PACKET_THROTTLE_ACCELERATION, 0);
      ev->type = TERN_EVENT_CONNECT;
      ev->data = e.data;
      return 1;
    case ENET_EVENT_TYPE_RECEIVE:
      n->held = e.packet;
      ev->type = TERN_EVENT_RECEIVE;
      ev->channel = e.channelID;
      ev->flags = (e.packet->flags & ENET_PACKET_FLAG_RELIABLE)      ? TERN_SEND_RELIABLE
                  : (e.packet->flags & ENET_PACKET_FLAG_UNSEQUENCED) ? TERN_SEND_UNSEQUENCED
                                                                     : 0;
      ev->bytes = e.packet->data;
      ev->length = e.packet->dataLength;
      return 1;
    case ENET_EVENT_TYPE_DISCONNECT:
      ev->type = TERN_EVENT_DISCONNECT;
      ev->data = e.data;
      return 1;
    default: return 0;
  }
}

static void node_send(node* n, uint8_t channel, const void* bytes, size_t length, uint32_t flags) {
  if (n->tern != NULL) {
    const int r = tern_peer_send(n->tern, n->tern_peer, channel, bytes, length, flags);
    CHECK(r == TERN_OK, "%s: send: %d %s", n->name, r, tern_host_last_error(n->tern));
  } else {
    ENetPacket* p = enet_packet_create(bytes, length, enet_flags(flags));
    CHECK(p != NULL && enet_peer_send(n->enet_peer, channel, p) == 0, "%s: enet_peer_send",
          n->name);
  }
}

static void node_disconnect(node* n, uint32_t data) {
  if (n->tern != NULL) {
    tern_peer_disconnect(n->tern, n->tern_peer, data);
  } else {
    enet_peer_disconnect(n->enet_peer, data);
  }
}

/* The server's side of a pass: echo every message as it came; note a disconnect and its data. */
static void serve(node* server, int* disconnected, uint32_t* disconnect_data) {
  node_event ev;
  while (node_service(server, &ev, 0) > 0) {
    if (ev.type == TERN_EVENT_RECEIVE) {
      node_send(server, ev.channel, ev.bytes, ev.length, ev.flags);
    } else if (ev.type == TERN_EVENT_DISCONNECT) {
      *disconnected = 1;
      *disconnect_data = ev.data;
    }
  }
}

static void run(int tern_is_server) {
  const char* label =
      tern_is_server ? "libenet client -> C-API server" : "C-API client -> libenet server";
  node server, client;
  uint16_t port = 0, unused = 0;
  const int ok = node_open(&server, "server", tern_is_server, &port) &&
                 node_open(&client, "client", !tern_is_server, &unused);
  if (!ok) {
    node_close(&client);
    node_close(&server);
    return;
  }
  int server_disconnected = 0;
  uint32_t server_disconnect_data = 0;
  node_connect(&client, port, 42);

  /* Connect. The server's event carries the client's data. */
  int server_up = 0, client_up = 0;
  double start = seconds();
  while ((!server_up || !client_up) && seconds() - start < kHangSeconds) {
    node_event ev;
    while (node_service(&server, &ev, 0) > 0) {
      if (ev.type == TERN_EVENT_CONNECT) {
        server_up = 1;
        CHECK(ev.data == 42, "%s: connect data %u", label, ev.data);
      }
    }
    if (node_service(&client, &ev, 2) > 0 && ev.type == TERN_EVENT_CONNECT) client_up = 1;
  }
  CHECK(server_up && client_up, "%s: no connection (server %d, client %d)", label, server_up,
        client_up);

  /* Streams and the two fragmented messages, echoed. */
  uint32_t sent[kKinds] = {0}, got[kKinds] = {0}, next[kKinds] = {0}, outstanding = 0;
  static uint8_t seen[kStream];
  memset(seen, 0, sizeof seen);
  int big_reliable = 0, big_unreliable = 0, bigs_sent = 0;
  static uint8_t big[kBigReliable];
  start = seconds();
  while (server_up && client_up && seconds() - start < kHangSeconds) {
    if (got[0] == kStream && got[1] == kStream && got[2] == kStream && big_reliable &&
        big_unreliable) {
      break;
    }
    for (uint32_t k = 0; k < kKinds && outstanding < kWindow; ++k) {
      if (sent[k] == kStream) continue;
      uint8_t buf[80];
      const size_t len = kHeader + sent[k] % 64;
      fill(buf, len, k, sent[k]);
      node_send(&client, (uint8_t)k, buf, len, kFlags[k]);
      ++sent[k];
      ++outstanding;
    }
    if (!bigs_sent) {
      bigs_sent = 1;
      fill(big, kBigReliable, kBigKind, 1);
      node_send(&client, kFragChannel, big, kBigReliable, TERN_SEND_RELIABLE);
      fill(big, kBigUnreliable, kBigKind, 2);
      node_send(&client, kFragChannel, big, kBigUnreliable, TERN_SEND_UNRELIABLE_FRAGMENT);
    }
    serve(&server, &server_disconnected, &server_disconnect_data);
    node_event ev;
    while (node_service(&client, &ev, 1) > 0) {
      if (ev.type != TERN_EVENT_RECEIVE) continue;
      CHECK(ev.length >= kHeader, "%s: short message", label);
      const uint32_t kind = get32(ev.bytes), seq = get32(ev.bytes + 4);
      if (kind == kBigKind) {
        if (seq == 1) {
          big_reliable = 1;
          CHECK(ev.length == kBigReliable && ev.flags == TERN_SEND_RELIABLE &&
                    ev.channel == kFragChannel && intact(ev.bytes, ev.length, 1),
                "%s: fragmented reliable: %zu bytes, flags %u", label, ev.length, ev.flags);
        } else {
          CHECK(!big_unreliable, "%s: fragmented unreliable twice", label);
          big_unreliable = 1;
          CHECK(seq == 2 && ev.length == kBigUnreliable && ev.flags == 0 &&
                    ev.channel == kFragChannel && intact(ev.bytes, ev.length, 2),
                "%s: fragmented unreliable: %zu bytes, flags %u", label, ev.length, ev.flags);
        }
        continue;
      }
      CHECK(kind < kKinds && seq < kStream && ev.channel == kind && ev.flags == kFlags[kind] &&
                intact(ev.bytes, ev.length, seq),
            "%s: kind %u seq %u channel %u flags %u", label, kind, seq, ev.channel, ev.flags);
      if (kind >= kKinds || seq >= kStream) continue;
      --outstanding;
      ++got[kind];
      if (kind == 2) {
        CHECK(!seen[seq], "%s: unsequenced %u twice", label, seq);
        seen[seq] = 1;
      } else {
        /* Exact accounting: in order and none missing, so each is the next one. */
        CHECK(seq == next[kind], "%s: %s seq %u, expected %u", label,
              kind == 0 ? "reliable" : "unreliable", seq, next[kind]);
        next[kind] = seq + 1;
      }
    }
  }
  for (uint32_t k = 0; k < kKinds; ++k) {
    CHECK(got[k] == kStream, "%s: kind %u: %u of %u echoed", label, k, got[k], kStream);
  }
  CHECK(big_reliable && big_unreliable, "%s: fragmented echoes: reliable %d, unreliable %d", label,
        big_reliable, big_unreliable);
  printf("%s: %u + %u + %u messages and 2 fragmented ones echoed\n", label, got[0], got[1], got[2]);

  /* Tern's own counters agree with the exact count. */
  node* t = tern_is_server ? &server : &client;
  tern_peer_stats ps;
  CHECK(tern_peer_get_stats(t->tern, t->tern_peer, &ps) == TERN_OK, "%s: no stats", label);
  const uint64_t total = 3u * kStream + 2u;
  CHECK(ps.messages_sent == total && ps.messages_received == total,
        "%s: Tern counted %llu sent, %llu received, expected %llu each", label,
        (unsigned long long)ps.messages_sent, (unsigned long long)ps.messages_received,
        (unsigned long long)total);
  CHECK(ps.selective_acks == 0, "%s: selective acks agreed with libenet", label);
  CHECK(ps.channel_count == kChannels, "%s: %u channels", label, ps.channel_count);

  /* A graceful disconnect from the client, with data. */
  node_disconnect(&client, 9);
  int client_down = 0;
  start = seconds();
  while ((!client_down || !server_disconnected) && seconds() - start < kHangSeconds) {
    serve(&server, &server_disconnected, &server_disconnect_data);
    node_event ev;
    if (node_service(&client, &ev, 2) > 0 && ev.type == TERN_EVENT_DISCONNECT) client_down = 1;
  }
  CHECK(client_down && server_disconnected && server_disconnect_data == 9,
        "%s: disconnect: client %d, server %d with data %u", label, client_down,
        server_disconnected, server_disconnect_data);
  node_close(&client);
  node_close(&server);
}

int main(void) {
  if (enet_initialize() != 0) {
    printf("enet_initialize failed\n");
    return 1;
  }
  run(0);
  run(1);
  enet_deinitialize();
  if (g_failures != 0) {
    printf("capi_enet: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("capi_enet: all checks passed\n");
  return 0;
}
