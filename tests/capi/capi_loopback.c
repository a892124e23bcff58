/* capi_loopback: the C API (tern/tern.h) from C, two Tern hosts over loopback in one thread.
 *
 * Streams in every delivery with sequence numbers in the payloads (reliable: all, in order;
 * unreliable: never backwards or twice; unsequenced: never twice), fragmented messages both
 * ways, the three disconnects and reset and the events each one gives, flush and check_events,
 * per-peer and per-host counters against what was sent, the extension switches as the peers report
 * them, and the error codes of bad calls. Prints one line per failed check and exits 1 if any
 * failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <tern/tern.h>

#include "capi_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A hang guard only: a loop that has not finished after this long has failed. */
static const double kHangSeconds = 30.0;

enum { kKinds = 3, kStream = 300, kWindow = 32, kHeader = 8, kBig = 100000, kUnreliableBig = 5000 };
static const uint32_t kFlags[kKinds] = {TERN_SEND_RELIABLE, 0, TERN_SEND_UNSEQUENCED};
static const char* const kNames[kKinds] = {"reliable", "unreliable", "unsequenced"};

static void put32(uint8_t* p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
static uint32_t get32(const uint8_t* p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
/* Payload byte i of message `seq`: a receiver recomputes it, so a corrupted byte is found. */
static uint8_t pattern(uint32_t seq, size_t i) { return (uint8_t)(seq * 31u + i * 7u); }

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

typedef struct pair {
  tern_host* server;
  tern_host* client;
  tern_peer to_server; /* on the client */
  tern_peer to_client; /* on the server */
} pair;

/* Services the server for whatever it has, echoing each message back as it came. */
static void serve_echo(pair* p) {
  tern_event ev;
  while (tern_host_service(p->server, &ev, 0) > 0) {
    if (ev.type == TERN_EVENT_CONNECT) p->to_client = ev.peer;
    if (ev.type == TERN_EVENT_RECEIVE) {
      CHECK(tern_peer_send(p->server, ev.peer, ev.channel, ev.data, ev.length, ev.flags) == TERN_OK,
            "echo refused: %s", tern_host_last_error(p->server));
    }
  }
}

static int open_pair(pair* p, const tern_host_options* server_options,
                     const tern_host_options* client_options, uint32_t connect_data) {
  char error[256];
  memset(p, 0, sizeof *p);
  p->server = tern_host_create(server_options, "127.0.0.1:0", error, sizeof error);
  CHECK(p->server != NULL, "server: %s", error);
  p->client = tern_host_create(client_options, "127.0.0.1:0", error, sizeof error);
  CHECK(p->client != NULL, "client: %s", error);
  if (p->server == NULL || p->client == NULL) return 0;
  tern_address to = tern_host_local_address(p->server);
  CHECK(to.port != 0, "the server reports no port");
  p->to_server = tern_host_connect(p->client, &to, 4, connect_data);
  CHECK(tern_peer_valid(p->to_server), "connect: %s", tern_host_last_error(p->client));
  CHECK(tern_peer_get_state(p->client, p->to_server) == TERN_PEER_CONNECTING, "state %d",
        (int)tern_peer_get_state(p->client, p->to_server));

  /* Both sides see the connect; the server's event carries the client's data and address. */
  int server_connected = 0, client_connected = 0;
  const double start = seconds();
  while ((!server_connected || !client_connected) && seconds() - start < kHangSeconds) {
    tern_event ev;
    if (tern_host_service(p->server, &ev, 0) > 0 && ev.type == TERN_EVENT_CONNECT) {
      server_connected = 1;
      p->to_client = ev.peer;
      CHECK(ev.user_data == connect_data, "connect data %u", ev.user_data);
      tern_address client_address = tern_host_local_address(p->client);
      CHECK(memcmp(&ev.address.addr, &client_address.addr, 16) == 0 &&
                ev.address.port == client_address.port,
            "the server sees the client at another address");
    }
    if (tern_host_service(p->client, &ev, 5) > 0 && ev.type == TERN_EVENT_CONNECT) {
      client_connected = 1;
      CHECK(tern_peer_equal(ev.peer, p->to_server), "the connect event names another peer");
    }
  }
  CHECK(server_connected && client_connected, "no connect (server %d, client %d)", server_connected,
        client_connected);
  return server_connected && client_connected;
}

static void close_pair(pair* p) {
  tern_host_destroy(p->client);
  tern_host_destroy(p->server);
}

/* kStream messages of every delivery, up to kWindow unanswered at a time, all echoed. */
static void streams(void) {
  pair p;
  if (!open_pair(&p, NULL, NULL, 77)) return close_pair(&p);
  uint32_t sent[kKinds] = {0}, got[kKinds] = {0}, next_reliable = 0;
  int64_t last_unreliable = -1;
  static uint8_t seen_unsequenced[kStream];
  memset(seen_unsequenced, 0, sizeof seen_unsequenced);
  /* An unreliable message the throttle shed never comes back: after this many passes with
   * nothing received, whatever is unanswered counts as lost (the window opens again). */
  enum { kQuietPasses = 200 };
  uint32_t outstanding = 0, quiet = 0;
  const double start = seconds();
  while (seconds() - start < kHangSeconds) {
    int all_sent = 1;
    for (uint32_t k = 0; k < kKinds; ++k) all_sent &= sent[k] == kStream;
    if (all_sent && got[0] == kStream && (outstanding == 0 || quiet >= kQuietPasses)) break;
    if (quiet >= kQuietPasses) outstanding = 0, quiet = 0;
    for (uint32_t k = 0; k < kKinds && outstanding < kWindow; ++k) {
      if (sent[k] == kStream) continue;
      uint8_t buf[64];
      const size_t len = kHeader + (sent[k] % 50);
      fill(buf, len, k, sent[k]);
      CHECK(tern_peer_send(p.client, p.to_server, (uint8_t)k, buf, len, kFlags[k]) == TERN_OK,
            "send %s: %s", kNames[k], tern_host_last_error(p.client));
      ++sent[k];
      ++outstanding;
    }
    serve_echo(&p);
    tern_event ev;
    ++quiet;
    while (tern_host_service(p.client, &ev, 1) > 0) {
      if (ev.type != TERN_EVENT_RECEIVE) continue;
      quiet = 0;
      CHECK(ev.length >= kHeader, "short message");
      const uint32_t kind = get32(ev.data), seq = get32(ev.data + 4);
      CHECK(kind < kKinds && ev.channel == kind && ev.flags == kFlags[kind],
            "kind %u on channel %u with flags %u", kind, ev.channel, ev.flags);
      CHECK(seq < kStream && intact(ev.data, ev.length, seq), "%s seq %u damaged", kNames[kind % 3],
            seq);
      if (kind >= kKinds || seq >= kStream) continue;
      if (outstanding > 0) --outstanding;
      ++got[kind];
      if (kind == 0) {
        CHECK(seq == next_reliable, "reliable seq %u, expected %u", seq, next_reliable);
        next_reliable = seq + 1;
      } else if (kind == 1) {
        CHECK((int64_t)seq > last_unreliable, "unreliable seq %u after %lld", seq,
              (long long)last_unreliable);
        last_unreliable = seq;
      } else {
        CHECK(!seen_unsequenced[seq], "unsequenced seq %u twice", seq);
        seen_unsequenced[seq] = 1;
      }
    }
  }
  /* Reliable: every one. The others may be shed by the packet throttle on a loaded machine
   * (ENet's rule), so they are held to "never twice, never backwards", and to having arrived. */
  CHECK(got[0] == kStream, "reliable: %u of %u", got[0], kStream);
  CHECK(got[1] > 0 && got[1] <= kStream, "unreliable: %u of %u", got[1], kStream);
  CHECK(got[2] > 0 && got[2] <= kStream, "unsequenced: %u of %u", got[2], kStream);
  printf("streams: reliable %u, unreliable %u, unsequenced %u of %u each\n", got[0], got[1], got[2],
         kStream);

  /* Counters: the client sent 3 x kStream messages and took back what the lines above counted. */
  tern_peer_stats ps;
  CHECK(tern_peer_get_stats(p.client, p.to_server, &ps) == TERN_OK, "no peer stats");
  CHECK(ps.messages_sent == 3u * kStream, "messages_sent %llu",
        (unsigned long long)ps.messages_sent);
  CHECK(ps.messages_received == (uint64_t)got[0] + got[1] + got[2], "messages_received %llu",
        (unsigned long long)ps.messages_received);
  CHECK(ps.channel_count == 4 && ps.mtu == 1400, "channels %u, mtu %u", ps.channel_count, ps.mtu);
  CHECK(ps.datagrams_sent > 0 && ps.bytes_received > 0, "no traffic counted");
  CHECK(ps.selective_acks == 1, "selective acks not agreed between two Tern hosts");
  tern_host_stats hs;
  tern_host_get_stats(p.client, &hs);
  CHECK(hs.messages_out == 3u * kStream && hs.peers == 1 && hs.connects == 1,
        "host: messages_out %llu, peers %zu, connects %llu", (unsigned long long)hs.messages_out,
        hs.peers, (unsigned long long)hs.connects);
  CHECK(tern_host_peer_count(p.server) == 1, "server peers %zu", tern_host_peer_count(p.server));
  close_pair(&p);
}

/* A reliable message of kBig bytes and unreliable ones of kUnreliableBig, both fragmented. */
static void fragments(void) {
  pair p;
  if (!open_pair(&p, NULL, NULL, 0)) return close_pair(&p);
  static uint8_t big[kBig];
  fill(big, sizeof big, 0, 1234);
  CHECK(tern_peer_send(p.client, p.to_server, 1, big, sizeof big, TERN_SEND_RELIABLE) == TERN_OK,
        "send big");
  uint8_t mid[kUnreliableBig];
  fill(mid, sizeof mid, 1, 99);
  CHECK(tern_peer_send(p.client, p.to_server, 2, mid, sizeof mid, TERN_SEND_UNRELIABLE_FRAGMENT) ==
            TERN_OK,
        "send unreliable fragments");
  int got_big = 0;
  const double start = seconds();
  while (!got_big && seconds() - start < kHangSeconds) {
    serve_echo(&p);
    tern_event ev;
    while (tern_host_service(p.client, &ev, 1) > 0) {
      if (ev.type != TERN_EVENT_RECEIVE) continue;
      if (ev.length == kBig) {
        got_big = 1;
        CHECK(ev.channel == 1 && ev.flags == TERN_SEND_RELIABLE && get32(ev.data + 4) == 1234 &&
                  intact(ev.data, ev.length, 1234),
              "big message damaged");
      } else {
        CHECK(ev.length == kUnreliableBig && ev.flags == 0 && intact(ev.data, ev.length, 99),
              "unreliable fragments: %zu bytes, flags %u", ev.length, ev.flags);
      }
    }
  }
  CHECK(got_big, "the %d-byte reliable message never came back", kBig);
  close_pair(&p);
}

/* A large block and a high-priority message, both echoed (the block as one message); a second
 * block on the same channel is refused while the first is in flight; an unknown priority is
 * refused. */
static void priorities_and_blocks(void) {
  pair p;
  if (!open_pair(&p, NULL, NULL, 0)) return close_pair(&p);
  enum { kBlock = 300000 };
  static uint8_t block[kBlock];
  fill(block, sizeof block, 0, 4321);
  CHECK(tern_peer_send_block(p.client, p.to_server, 1, block, sizeof block) == TERN_OK,
        "send_block: %s", tern_host_last_error(p.client));
  CHECK(tern_peer_block_in_flight(p.client, p.to_server, 1) == 1, "no block in flight");
  CHECK(tern_peer_send_block(p.client, p.to_server, 1, block, 10) == TERN_ERROR_BLOCK_BUSY,
        "a second block on the channel was not refused");
  uint8_t small[64];
  fill(small, sizeof small, 0, 77);
  CHECK(tern_peer_send_priority(p.client, p.to_server, 0, small, sizeof small, TERN_SEND_RELIABLE,
                                TERN_PRIORITY_HIGH) == TERN_OK,
        "send_priority: %s", tern_host_last_error(p.client));
  CHECK(tern_peer_send_priority(p.client, p.to_server, 0, small, sizeof small, TERN_SEND_RELIABLE,
                                (tern_priority)7) == TERN_ERROR_INVALID_ARGUMENT,
        "an unknown priority was taken");
  int got_block = 0, got_small = 0;
  const double start = seconds();
  while (!(got_block && got_small) && seconds() - start < kHangSeconds) {
    serve_echo(&p);
    tern_event ev;
    while (tern_host_service(p.client, &ev, 1) > 0) {
      if (ev.type != TERN_EVENT_RECEIVE) continue;
      if (ev.length == kBlock) {
        got_block = 1;
        CHECK(ev.channel == 1 && intact(ev.data, ev.length, 4321), "block damaged");
      } else {
        got_small = 1;
        CHECK(ev.channel == 0 && ev.length == sizeof small && intact(ev.data, ev.length, 77),
              "high-priority message damaged");
      }
    }
  }
  CHECK(got_block && got_small, "echo missing (block %d, message %d)", got_block, got_small);
  close_pair(&p);
}

/* Waits for the next event of `type` on `host` while servicing `other`; 1 when it came. */
static int await(tern_host* host, tern_host* other, tern_event_type type, tern_event* out) {
  const double start = seconds();
  while (seconds() - start < kHangSeconds) {
    tern_event ev;
    if (other != NULL) {
      while (tern_host_service(other, &ev, 0) > 0) {
      }
    }
    if (tern_host_service(host, out, 2) > 0 && out->type == type) return 1;
  }
  return 0;
}

static void disconnects(void) {
  tern_event ev;
  pair p;
  /* Graceful: LOCAL on this side, REMOTE with the data on the other. */
  if (open_pair(&p, NULL, NULL, 0)) {
    tern_peer_disconnect(p.client, p.to_server, 5);
    CHECK(await(p.server, p.client, TERN_EVENT_DISCONNECT, &ev), "server: no disconnect");
    CHECK(ev.reason == TERN_REASON_REMOTE && ev.user_data == 5 &&
              tern_peer_equal(ev.peer, p.to_client),
          "server: reason %d data %u", (int)ev.reason, ev.user_data);
    CHECK(await(p.client, p.server, TERN_EVENT_DISCONNECT, &ev), "client: no disconnect");
    CHECK(ev.reason == TERN_REASON_LOCAL, "client: reason %d", (int)ev.reason);
    /* The handle is stale now: calls on it are refused, never crash. */
    CHECK(tern_peer_send(p.client, p.to_server, 0, "x", 1, TERN_SEND_RELIABLE) ==
              TERN_ERROR_NOT_CONNECTED,
          "send on a closed peer");
    tern_peer_stats ps;
    CHECK(tern_peer_get_stats(p.client, p.to_server, &ps) == TERN_ERROR_NOT_CONNECTED, "stats");
    tern_address a;
    CHECK(tern_peer_get_address(p.client, p.to_server, &a) == TERN_ERROR_NOT_CONNECTED, "address");
  }
  close_pair(&p);

  /* Now: the other side hears of it; this side gets no event and forgets the peer at once. */
  if (open_pair(&p, NULL, NULL, 0)) {
    tern_peer_disconnect_now(p.client, p.to_server, 6);
    CHECK(tern_peer_get_state(p.client, p.to_server) == TERN_PEER_DISCONNECTED, "state %d",
          (int)tern_peer_get_state(p.client, p.to_server));
    CHECK(tern_host_peer_count(p.client) == 0, "client still counts the peer");
    CHECK(await(p.server, NULL, TERN_EVENT_DISCONNECT, &ev), "server: no disconnect");
    CHECK(ev.reason == TERN_REASON_REMOTE && ev.user_data == 6, "server: reason %d data %u",
          (int)ev.reason, ev.user_data);
    CHECK(tern_host_service(p.client, &ev, 20) == 0, "client: event %d after disconnect_now",
          (int)ev.type);
  }
  close_pair(&p);

  /* Reset: forgotten here without a word or an event; the other side is not told. */
  if (open_pair(&p, NULL, NULL, 0)) {
    tern_peer_reset(p.client, p.to_server);
    CHECK(tern_peer_get_state(p.client, p.to_server) == TERN_PEER_DISCONNECTED &&
              tern_host_peer_count(p.client) == 0,
          "reset: state %d, %zu peers", (int)tern_peer_get_state(p.client, p.to_server),
          tern_host_peer_count(p.client));
    CHECK(tern_host_service(p.client, &ev, 20) == 0, "client: event %d after reset", (int)ev.type);
    CHECK(tern_host_service(p.server, &ev, 20) == 0 &&
              tern_peer_get_state(p.server, p.to_client) == TERN_PEER_CONNECTED,
          "server: told of a reset (event %d)", (int)ev.type);
  }
  close_pair(&p);

  /* Later: everything queued arrives first, in order, then the disconnect. */
  if (open_pair(&p, NULL, NULL, 0)) {
    enum { kQueued = 50 };
    for (uint32_t i = 0; i < kQueued; ++i) {
      uint8_t buf[kHeader + 16];
      fill(buf, sizeof buf, 0, i);
      CHECK(
          tern_peer_send(p.client, p.to_server, 0, buf, sizeof buf, TERN_SEND_RELIABLE) == TERN_OK,
          "queue %u", i);
    }
    tern_peer_disconnect_later(p.client, p.to_server, 8);
    CHECK(tern_peer_get_state(p.client, p.to_server) == TERN_PEER_DISCONNECT_LATER, "state %d",
          (int)tern_peer_get_state(p.client, p.to_server));
    uint32_t next = 0;
    int disconnected = 0;
    const double start = seconds();
    while (!disconnected && seconds() - start < kHangSeconds) {
      while (tern_host_service(p.client, &ev, 0) > 0) {
      }
      while (!disconnected && tern_host_service(p.server, &ev, 2) > 0) {
        if (ev.type == TERN_EVENT_RECEIVE) {
          CHECK(get32(ev.data + 4) == next, "queued seq %u, expected %u", get32(ev.data + 4), next);
          ++next;
        } else if (ev.type == TERN_EVENT_DISCONNECT) {
          disconnected = 1;
          CHECK(ev.user_data == 8 && ev.reason == TERN_REASON_REMOTE, "reason %d data %u",
                (int)ev.reason, ev.user_data);
        }
      }
    }
    CHECK(disconnected && next == kQueued, "disconnected %d after %u of %d messages", disconnected,
          next, kQueued);
  }
  close_pair(&p);
}

/* A connect nobody answers ends in a disconnect with reason TIMEOUT. */
static void connect_timeout(void) {
  char error[256];
  tern_host_options o = tern_host_options_default();
  o.timeout_minimum_ms = 200;
  o.timeout_maximum_ms = 400;
  o.timeout_limit = 2;
  tern_host* client = tern_host_create(&o, "127.0.0.1:0", error, sizeof error);
  tern_host* silent = tern_host_create(NULL, "127.0.0.1:0", error, sizeof error);
  CHECK(client != NULL && silent != NULL, "create: %s", error);
  if (client != NULL && silent != NULL) {
    /* `silent` is never serviced: the connect's datagrams wait in its socket unread. */
    tern_address to = tern_host_local_address(silent);
    tern_peer peer = tern_host_connect(client, &to, 1, 0);
    tern_event ev;
    CHECK(await(client, NULL, TERN_EVENT_DISCONNECT, &ev), "no disconnect");
    CHECK(ev.reason == TERN_REASON_TIMEOUT && tern_peer_equal(ev.peer, peer), "reason %d",
          (int)ev.reason);
  }
  tern_host_destroy(client);
  tern_host_destroy(silent);
}

/* Extension switches reach the connection: one side without selective acks, none agreed. */
static void extensions(void) {
  tern_host_options plain = tern_host_options_default();
  CHECK(plain.selective_acks == 1 && plain.fast_retransmit == 1 && plain.congestion_window == 1 &&
            plain.throttle_reliable_window == 1,
        "defaults");
  plain.selective_acks = 0;
  plain.fast_retransmit = 0;
  plain.congestion_window = 0;
  plain.throttle_reliable_window = 0;
  pair p;
  if (open_pair(&p, NULL, &plain, 0)) {
    tern_peer_stats ps;
    CHECK(tern_peer_get_stats(p.client, p.to_server, &ps) == TERN_OK && ps.selective_acks == 0,
          "client agreed selective acks with them off");
    CHECK(tern_peer_get_stats(p.server, p.to_client, &ps) == TERN_OK && ps.selective_acks == 0,
          "server agreed selective acks with a client that has them off");
  }
  close_pair(&p);
  /* Checksums on one side only: the other drops every datagram, so no connection. */
  tern_host_options crc = tern_host_options_default();
  crc.checksum = 1;
  crc.timeout_minimum_ms = 200;
  crc.timeout_maximum_ms = 400;
  crc.timeout_limit = 2;
  char error[256];
  tern_host* server = tern_host_create(NULL, "127.0.0.1:0", error, sizeof error);
  tern_host* client = tern_host_create(&crc, "127.0.0.1:0", error, sizeof error);
  if (server != NULL && client != NULL) {
    tern_address to = tern_host_local_address(server);
    tern_host_connect(client, &to, 1, 0);
    tern_event ev;
    CHECK(await(client, server, TERN_EVENT_DISCONNECT, &ev) && ev.reason == TERN_REASON_TIMEOUT,
          "a checksummed client connected to a plain server");
    tern_host_stats hs;
    tern_host_get_stats(server, &hs);
    CHECK(hs.connects == 0 && hs.dropped > 0, "server: connects %llu dropped %llu",
          (unsigned long long)hs.connects, (unsigned long long)hs.dropped);
  }
  tern_host_destroy(client);
  tern_host_destroy(server);
}

/* flush sends what is queued without servicing; check_events hands out what is queued
 * without any I/O. */
static void flush_and_check_events(void) {
  pair p;
  if (open_pair(&p, NULL, NULL, 0)) {
    tern_event ev;
    CHECK(tern_host_check_events(p.server, &ev) == 0 && ev.type == TERN_EVENT_NONE,
          "an event out of nothing");
    CHECK(tern_peer_send(p.client, p.to_server, 0, "flushed", 7, TERN_SEND_RELIABLE) == TERN_OK,
          "send");
    tern_host_flush(p.client);
    /* The datagram is in the server's socket: only a service (I/O) finds it. */
    int got = 0;
    const double start = seconds();
    while (!got && seconds() - start < kHangSeconds) {
      CHECK(tern_host_check_events(p.server, &ev) == 0, "check_events did I/O");
      got = tern_host_service(p.server, &ev, 5) > 0;
    }
    CHECK(got && ev.type == TERN_EVENT_RECEIVE && ev.length == 7 &&
              memcmp(ev.data, "flushed", 7) == 0,
          "the flushed message did not arrive (event %d)", (int)ev.type);
  }
  close_pair(&p);
}

static void bad_calls(void) {
  char error[256];
  CHECK(tern_host_create(NULL, "not an address", error, sizeof error) == NULL && error[0] != '\0',
        "a bad bind address was taken");
  CHECK(tern_host_create(NULL, NULL, error, sizeof error) == NULL, "a NULL bind was taken");
  /* A short error buffer is cut, still terminated. */
  char tiny[4];
  CHECK(tern_host_create(NULL, "nope", tiny, sizeof tiny) == NULL && strlen(tiny) == 3, "tiny");

  tern_address a;
  CHECK(tern_address_parse("127.0.0.1:7777", &a) == TERN_OK && a.port == 7777, "parse");
  char text[64];
  CHECK(tern_address_format(&a, text, sizeof text) == strlen("127.0.0.1:7777") &&
            strcmp(text, "127.0.0.1:7777") == 0,
        "format: %s", text);
  tern_address b = tern_address_ipv4(0x7f000001u, 7777);
  CHECK(memcmp(&a.addr, &b.addr, 16) == 0 && a.port == b.port, "ipv4() differs from parse()");
  CHECK(tern_address_parse("[::1]:9", &a) == TERN_OK && a.addr[15] == 1 && a.port == 9, "v6");
  CHECK(tern_address_parse("1.2.3:4", &a) == TERN_ERROR_INVALID_ARGUMENT, "bad address parsed");
  CHECK(strcmp(tern_version(), "") != 0, "no version");

  pair p;
  if (open_pair(&p, NULL, NULL, 0)) {
    CHECK(tern_peer_send(p.client, p.to_server, 0, "x", 1,
                         TERN_SEND_RELIABLE | TERN_SEND_UNSEQUENCED) == TERN_ERROR_INVALID_ARGUMENT,
          "reliable + unsequenced taken");
    CHECK(tern_peer_send(p.client, p.to_server, 0, "x", 1, 1u << 7) == TERN_ERROR_INVALID_ARGUMENT,
          "unknown flag taken");
    CHECK(tern_host_last_error(p.client)[0] != '\0', "no reason for the refusal");
    CHECK(tern_peer_send(p.client, p.to_server, 4, "x", 1, TERN_SEND_RELIABLE) ==
              TERN_ERROR_BAD_CHANNEL,
          "channel 4 of 4 taken");
    CHECK(tern_peer_send(p.client, p.to_server, 0, NULL, 1, 0) == TERN_ERROR_INVALID_ARGUMENT,
          "NULL data taken");
    CHECK(tern_peer_send(p.client, p.to_server, 0, NULL, 0, TERN_SEND_RELIABLE) == TERN_OK,
          "an empty message refused");
    tern_peer none = {0xffffffffu, 0};
    CHECK(!tern_peer_valid(none), "invalid handle valid");
    CHECK(tern_peer_send(p.client, none, 0, "x", 1, 0) == TERN_ERROR_NOT_CONNECTED, "no peer");
    tern_address to = tern_host_local_address(p.server);
    CHECK(!tern_peer_valid(tern_host_connect(p.client, &to, 0, 0)), "0 channels taken");
    CHECK(!tern_peer_valid(tern_host_connect(p.client, &to, 256, 0)), "256 channels taken");
    CHECK(!tern_peer_valid(tern_host_connect(p.client, NULL, 1, 0)), "NULL address taken");
    CHECK(tern_host_service(p.client, NULL, 0) == TERN_ERROR_INVALID_ARGUMENT, "NULL event");
  }
  close_pair(&p);

  /* The peer limit: a host of one peer refuses a second connect. */
  tern_host_options one = tern_host_options_default();
  one.peer_limit = 1;
  tern_host* h = tern_host_create(&one, "127.0.0.1:0", error, sizeof error);
  if (h != NULL) {
    tern_address x = tern_address_ipv4(0x7f000001u, 9), y = tern_address_ipv4(0x7f000001u, 10);
    CHECK(tern_peer_valid(tern_host_connect(h, &x, 1, 0)), "first connect");
    CHECK(!tern_peer_valid(tern_host_connect(h, &y, 1, 0)) && tern_host_last_error(h)[0] != '\0',
          "a second connect past the peer limit");
  }
  tern_host_destroy(h);
  tern_host_destroy(NULL);
}

int main(void) {
  bad_calls();
  streams();
  fragments();
  priorities_and_blocks();
  disconnects();
  flush_and_check_events();
  connect_timeout();
  extensions();
  if (g_failures != 0) {
    printf("capi_loopback: %d check(s) failed\n", g_failures);
    return 1;
  }
  printf("capi_loopback: all checks passed\n");
  return 0;
}
