/* enet-mixed-member: libenet members of one tern-relay room for the mixed-room test
 * (run_relay_mixed.py), each on its own ENet host. Lines on stdin drive it:
 *
 *   go      every client sends its MESSAGES reliable messages on channel 0
 *   quit    report and exit
 *
 * It prints "joined" once every client is connected, "done" once every client has received
 * MESSAGES messages from every other member of the room, and at quit one line per client
 * ("client ID: N copies from K senders, in order") then exits 0, or 1 if any copy came twice,
 * out of order, from outside the room, or is missing.
 *
 * A message is ID u32 LE, SEQ u32 LE, then filler up to a size that varies with SEQ. A
 * 5-byte "hello" (a kcp-go member's first message under room_rule "conv") is ignored.
 *
 *   enet-mixed-member HOST:PORT ROOM MESSAGES ID,ID,... ROOM_ID,ROOM_ID,...
 * (the first list: this process's clients; the second: every member of the room) */
#include <enet/enet.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_IDS 64

static unsigned parse_ids(const char* text, unsigned* out) {
  unsigned n = 0;
  const char* p = text;
  while (*p != '\0' && n < MAX_IDS) {
    out[n++] = (unsigned)strtoul(p, (char**)&p, 10);
    if (*p == ',') ++p;
  }
  return n;
}

static uint32_t rd32(const unsigned char* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: enet-mixed-member HOST:PORT ROOM MESSAGES IDS ROOM_IDS\n");
    return 2;
  }
  char host[64];
  const char* colon = strrchr(argv[1], ':');
  if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof host) return 2;
  memcpy(host, argv[1], (size_t)(colon - argv[1]));
  host[colon - argv[1]] = '\0';
  ENetAddress relay;
  if (enet_initialize() != 0 || enet_address_set_host_ip(&relay, host) != 0) return 2;
  relay.port = (enet_uint16)atoi(colon + 1);
  const unsigned room = (unsigned)atoi(argv[2]);
  const unsigned messages = (unsigned)atoi(argv[3]);
  unsigned mine[MAX_IDS], all[MAX_IDS];
  const unsigned n = parse_ids(argv[4], mine);
  const unsigned members = parse_ids(argv[5], all);

  ENetHost* hosts[MAX_IDS];
  ENetPeer* peers[MAX_IDS];
  int connected[MAX_IDS] = {0};
  /* next[c][k]: the sequence number client c expects next from member all[k]. */
  static unsigned next[MAX_IDS][MAX_IDS];
  unsigned long copies[MAX_IDS] = {0};
  int errors = 0;
  for (unsigned c = 0; c < n; ++c) {
    hosts[c] = enet_host_create(NULL, 1, 2, 0, 0);
    if (hosts[c] == NULL) return 2;
    peers[c] = enet_host_connect(hosts[c], &relay, 2, room);
  }
  int joined = 0, done = 0, sending = 0;
  unsigned sent = 0;
  for (;;) {
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, 1) > 0) {
      char line[64];
      if (fgets(line, sizeof line, stdin) == NULL || strncmp(line, "quit", 4) == 0) break;
      if (strncmp(line, "go", 2) == 0) sending = 1;
    }
    /* A few messages per client per pass, so sending and receiving interleave. */
    for (unsigned burst = 0; sending && sent < messages && burst < 8; ++burst, ++sent) {
      for (unsigned c = 0; c < n; ++c) {
        const size_t size = 8 + (sent * 37) % 200;
        ENetPacket* pk = enet_packet_create(NULL, size, ENET_PACKET_FLAG_RELIABLE);
        memset(pk->data, (int)(sent & 0xff), size);
        const uint32_t id = mine[c], seq = sent;
        for (int b = 0; b < 4; ++b) {
          pk->data[b] = (enet_uint8)(id >> (8 * b));
          pk->data[4 + b] = (enet_uint8)(seq >> (8 * b));
        }
        enet_peer_send(peers[c], 0, pk);
      }
    }
    for (unsigned c = 0; c < n; ++c) {
      ENetEvent ev;
      while (enet_host_service(hosts[c], &ev, 0) > 0) {
        if (ev.type == ENET_EVENT_TYPE_CONNECT) {
          connected[c] = 1;
        } else if (ev.type == ENET_EVENT_TYPE_DISCONNECT) {
          fprintf(stderr, "client %u: disconnected, data %u\n", mine[c], (unsigned)ev.data);
          ++errors;
          connected[c] = 0;
        } else if (ev.type == ENET_EVENT_TYPE_RECEIVE && ev.packet->dataLength == 5 &&
                   memcmp(ev.packet->data, "hello", 5) == 0) {
          /* A kcp-go member's first message under room_rule "conv": not counted. */
          enet_packet_destroy(ev.packet);
        } else if (ev.type == ENET_EVENT_TYPE_RECEIVE) {
          const unsigned char* d = ev.packet->data;
          unsigned k = members;
          if (ev.packet->dataLength >= 8) {
            const uint32_t from = rd32(d), seq = rd32(d + 4);
            for (k = 0; k < members && all[k] != from; ++k) {
            }
            if (k == members || from == mine[c]) {
              fprintf(stderr, "client %u: copy from %u, not another member\n", mine[c], from);
              ++errors;
            } else if (seq != next[c][k]) {
              fprintf(stderr, "client %u: from %u got seq %u, expected %u\n", mine[c], from, seq,
                      next[c][k]);
              ++errors;
              next[c][k] = seq + 1;
            } else {
              ++next[c][k];
            }
          } else {
            ++errors;
          }
          ++copies[c];
          enet_packet_destroy(ev.packet);
        }
      }
    }
    if (!joined) {
      int all_up = 1;
      for (unsigned c = 0; c < n; ++c) all_up = all_up && connected[c];
      if (all_up) {
        joined = 1;
        printf("joined\n");
        fflush(stdout);
      }
    }
    if (joined && !done) {
      int complete = 1;
      for (unsigned c = 0; c < n && complete; ++c) {
        for (unsigned k = 0; k < members; ++k) {
          if (all[k] != mine[c] && next[c][k] < messages) complete = 0;
        }
      }
      if (complete) {
        done = 1;
        printf("done\n");
        fflush(stdout);
      }
    }
  }
  for (unsigned c = 0; c < n; ++c) {
    unsigned senders = 0;
    for (unsigned k = 0; k < members; ++k) {
      if (all[k] == mine[c]) continue;
      if (next[c][k] != messages) {
        fprintf(stderr, "client %u: %u of %u from %u\n", mine[c], next[c][k], messages, all[k]);
        ++errors;
      }
      ++senders;
    }
    printf("libenet client %u: %lu copies from %u senders, %s\n", mine[c], copies[c], senders,
           errors == 0 ? "each in order, once" : "ERRORS");
    enet_peer_disconnect_now(peers[c], 0);
    enet_host_flush(hosts[c]);
    enet_host_destroy(hosts[c]);
  }
  fflush(stdout);
  enet_deinitialize();
  return errors == 0 ? 0 : 1;
}
