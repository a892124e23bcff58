/* enet-relay-flood: bursts of reliable messages from many libenet clients through a relay,
 * checked for loss, duplicates and order.
 *
 *   enet-relay-flood --connect HOST:PORT [--rooms R] [--room-size M] [--messages N]
 *                    [--stall-first on] [--seconds S]
 *
 * R rooms of M clients join the relay (room r+1 by connect data), each client with its own
 * ENet host, so its own UDP port: the relay's shards (SO_REUSEPORT) get a share each. Once all
 * are connected, every client queues N reliable 8-byte messages on channel 0 at once (sender
 * number and sequence number, little-endian) and all hosts are serviced round robin. Every
 * member must receive the other M-1 members' N messages exactly once and in order per sender.
 *
 * --stall-first on: the first member of room 1 stops servicing its host once everyone is
 * connected (it neither sends, reads nor acknowledges), as a client that hangs would. The relay
 * must disconnect it (data 2, "could not keep up") while the rest of its room gets everything
 * from the others; what it did receive is checked for order too.
 *
 * Prints one line: "flood rooms=R room_size=M messages=N expected=E received=X missing=Y
 * out_of_order=Z duplicates=D complete=C/K disconnected=U" and exits 0 when every member that
 * was not stalled got everything in order and none was disconnected; 1 otherwise; 2 on bad
 * usage. Bounded by --seconds (default 60).
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>

#include "enet_endpoint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  ENetHost* host;
  ENetPeer* peer;
  int room;
  int connected;
  int disconnected;
  enet_uint32 disconnect_data;
  uint32_t* next_seq; /* by sender number: the sequence number expected next */
  uint64_t received, out_of_order, duplicates;
} Client;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void put_u32(enet_uint8* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (enet_uint8)(v >> (8 * i));
}

static uint32_t get_u32(const enet_uint8* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

static int usage(const char* why) {
  fprintf(stderr,
          "enet-relay-flood: %s\n"
          "usage: enet-relay-flood --connect HOST:PORT [--rooms R] [--room-size M]\n"
          "                        [--messages N] [--stall-first on] [--seconds S]\n",
          why);
  return 2;
}

static void service(Client* c, int total) {
  ENetEvent ev;
  while (enet_host_service(c->host, &ev, 0) > 0) {
    switch (ev.type) {
      case ENET_EVENT_TYPE_CONNECT: c->connected = 1; break;
      case ENET_EVENT_TYPE_DISCONNECT:
        c->disconnected = 1;
        c->disconnect_data = ev.data;
        break;
      case ENET_EVENT_TYPE_RECEIVE: {
        if (ev.packet->dataLength == 8) {
          const uint32_t sender = get_u32(ev.packet->data);
          const uint32_t seq = get_u32(ev.packet->data + 4);
          if (sender < (uint32_t)total) {
            ++c->received;
            if (seq < c->next_seq[sender]) {
              ++c->duplicates;
            } else {
              if (seq != c->next_seq[sender]) ++c->out_of_order;
              c->next_seq[sender] = seq + 1;
            }
          }
        }
        enet_packet_destroy(ev.packet);
        break;
      }
      default: break;
    }
  }
}

int main(int argc, char** argv) {
  const char* target = NULL;
  int rooms = 4, room_size = 8, messages = 300, stall_first = 0, seconds = 60;
  for (int i = 1; i < argc; ++i) {
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--connect") == 0 && v) {
      target = v;
    } else if (strcmp(argv[i], "--rooms") == 0 && v) {
      rooms = atoi(v);
    } else if (strcmp(argv[i], "--room-size") == 0 && v) {
      room_size = atoi(v);
    } else if (strcmp(argv[i], "--messages") == 0 && v) {
      messages = atoi(v);
    } else if (strcmp(argv[i], "--stall-first") == 0 && v) {
      stall_first = strcmp(v, "on") == 0;
    } else if (strcmp(argv[i], "--seconds") == 0 && v) {
      seconds = atoi(v);
    } else {
      return usage("unknown or incomplete argument");
    }
    ++i;
  }
  if (target == NULL) return usage("--connect is required");
  if (rooms < 1 || room_size < 2 || messages < 1 || seconds < 1 || rooms * room_size > 4096) {
    return usage("out-of-range counts");
  }
  if (enet_initialize() != 0) {
    fprintf(stderr, "enet-relay-flood: enet_initialize failed\n");
    return 1;
  }
  ENetAddress server;
  if (parse_enet_endpoint(target, &server, 0) != 0) return usage("bad HOST:PORT");

  const int total = rooms * room_size;
  Client* clients = calloc((size_t)total, sizeof(Client));
  for (int i = 0; i < total; ++i) {
    Client* c = &clients[i];
    c->room = i / room_size;
    c->next_seq = calloc((size_t)total, sizeof(uint32_t));
    c->host = enet_host_create(NULL, 1, 1, 0, 0);
    if (c->host == NULL) {
      fprintf(stderr, "enet-relay-flood: enet_host_create failed\n");
      return 1;
    }
    c->peer = enet_host_connect(c->host, &server, 1, (enet_uint32)(c->room + 1));
  }
  const uint64_t deadline = now_ms() + (uint64_t)seconds * 1000u;
  int all = 0;
  while (!all && now_ms() < deadline) {
    all = 1;
    for (int i = 0; i < total; ++i) {
      service(&clients[i], total);
      all = all && clients[i].connected && !clients[i].disconnected;
    }
    struct timespec pause = {0, 1000000};
    nanosleep(&pause, NULL);
  }
  if (!all) {
    fprintf(stderr, "enet-relay-flood: not every client connected\n");
    return 1;
  }
  /* Joins reach every shard before anyone speaks. */
  for (uint64_t settle = now_ms() + 300; now_ms() < settle;) {
    for (int i = 0; i < total; ++i) service(&clients[i], total);
  }

  for (int i = stall_first ? 1 : 0; i < total; ++i) {
    for (int seq = 0; seq < messages; ++seq) {
      enet_uint8 body[8];
      put_u32(body, (uint32_t)i);
      put_u32(body + 4, (uint32_t)seq);
      enet_peer_send(clients[i].peer, 0, enet_packet_create(body, 8, ENET_PACKET_FLAG_RELIABLE));
    }
  }
  /* What member i must receive: the others' messages, the stalled client sending none. */
#define EXPECTED_FOR(i) \
  ((uint64_t)(room_size - 1 - (stall_first && (i) / room_size == 0 ? 1 : 0)) * (uint64_t)messages)
  int done = 0;
  while (!done && now_ms() < deadline) {
    done = 1;
    for (int i = 0; i < total; ++i) {
      if (stall_first && i == 0) continue;
      service(&clients[i], total);
      done = done && (clients[i].received >= EXPECTED_FOR(i) || clients[i].disconnected);
    }
  }
  /* Anything extra (duplicates) shows up now; then the stalled client looks at its mail. */
  for (uint64_t settle = now_ms() + 300; now_ms() < settle;) {
    for (int i = stall_first ? 1 : 0; i < total; ++i) service(&clients[i], total);
  }
  if (stall_first) {
    for (uint64_t wake = now_ms() + 3000; now_ms() < wake && !clients[0].disconnected;) {
      service(&clients[0], total);
      struct timespec pause = {0, 1000000};
      nanosleep(&pause, NULL);
    }
  }

  uint64_t expected = 0, received = 0, out_of_order = 0, duplicates = 0, missing = 0;
  int complete = 0, disconnected = 0, checked = 0;
  for (int i = 0; i < total; ++i) {
    Client* c = &clients[i];
    out_of_order += c->out_of_order;
    duplicates += c->duplicates;
    if (stall_first && i == 0) continue;
    ++checked;
    const uint64_t want = EXPECTED_FOR(i);
    expected += want;
    received += c->received;
    if (c->received < want) missing += want - c->received;
    if (c->received == want && c->out_of_order == 0 && c->duplicates == 0) {
      ++complete;
    } else {
      fprintf(stderr,
              "enet-relay-flood: client %d (room %d): received %llu of %llu, out of order %llu, "
              "duplicates %llu%s\n",
              i, c->room + 1, (unsigned long long)c->received, (unsigned long long)want,
              (unsigned long long)c->out_of_order, (unsigned long long)c->duplicates,
              c->disconnected ? ", disconnected" : "");
    }
    if (c->disconnected) {
      ++disconnected;
      fprintf(stderr, "enet-relay-flood: client %d (room %d) disconnected with data %u\n", i,
              c->room + 1, c->disconnect_data);
    }
  }
  printf(
      "flood rooms=%d room_size=%d messages=%d expected=%llu received=%llu missing=%llu "
      "out_of_order=%llu duplicates=%llu complete=%d/%d disconnected=%d",
      rooms, room_size, messages, (unsigned long long)expected, (unsigned long long)received,
      (unsigned long long)missing, (unsigned long long)out_of_order, (unsigned long long)duplicates,
      complete, checked, disconnected);
  if (stall_first) {
    printf(" stalled_received=%llu stalled_disconnected=%d stalled_data=%u",
           (unsigned long long)clients[0].received, clients[0].disconnected,
           clients[0].disconnected ? clients[0].disconnect_data : 0u);
  }
  printf("\n");
  fflush(stdout);
  const int ok = complete == checked && disconnected == 0 && out_of_order == 0 && duplicates == 0;
  for (int i = 0; i < total; ++i) {
    enet_host_destroy(clients[i].host);
    free(clients[i].next_seq);
  }
  free(clients);
  enet_deinitialize();
  return ok ? 0 : 1;
}
