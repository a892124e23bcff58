/* enet-relay: the game relay a user would write with plain libenet, the baseline for Tern's.
 *
 *   enet-relay --listen HOST:PORT [--peers N] [--channels N]
 *              [--broadcast-rooms A-B[,C-D...]] [--max-room-size N] [--quiet]
 *
 * A client joins the room named by the 32-bit data of its connect (0 = no room). Every
 * message a member sends goes to every other member of its room, on the same channel with the
 * same delivery and the same payload. In a broadcast room (an id inside a --broadcast-rooms
 * range) only the first member (the earliest-joined one still present) fans out to everyone;
 * the others' messages go to the first member only. Single-threaded: one host,
 * enet_host_service() with a 1 ms wait, decoded events drained with enet_host_check_events().
 *
 * Prints "relaying HOST:PORT" (the bound address) once ready; on SIGUSR1, "status
 * peers_in_use=N connected=N" (slots in any state but disconnected, and connected ones); on
 * SIGINT/SIGTERM disconnects every peer gracefully (up to 2 s for the acknowledgements) and
 * prints
 *
 *   relayed signal=N peers=N rooms=N messages_in=N copies_out=N dropped=N refused=N
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>

#include "enet_endpoint.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t g_signal = 0;

static void on_signal(int sig) { g_signal = sig; }

/* SIGUSR1: one status line (perf/connect_flood.py counts the slots a connect flood holds). */
static volatile sig_atomic_t g_status = 0;
static void on_status(int sig) {
  (void)sig;
  g_status = 1;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: enet-relay --listen HOST:PORT [--peers N] [--channels N]\n"
          "                  [--broadcast-rooms A-B[,C-D...]] [--max-room-size N] [--quiet]\n"
          "  Relays every message a client sends to the other members of its room (the\n"
          "  32-bit data of its connect; 0 = no room), same channel, same delivery, until\n"
          "  SIGINT/SIGTERM. HOST may be a name, an IPv4 address, '*' or 0.0.0.0.\n"
          "  --peers N            connections, 1..%d (default %d)\n"
          "  --channels N         channels per connection, 1..%d (default %d)\n"
          "  --broadcast-rooms R  room id ranges A-B (comma separated) where only the first\n"
          "                       member fans out; the others reach the first member only\n"
          "  --max-room-size N    refuse (disconnect data 1) a join beyond N members\n"
          "  --quiet              no per-connection log lines on stderr\n"
          "exit status: 0 after a signal, 1 cannot listen / I/O error, 2 bad usage\n",
          ENET_PROTOCOL_MAXIMUM_PEER_ID, ENET_PROTOCOL_MAXIMUM_PEER_ID,
          ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT, ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT);
}

static int parse_ulong(const char* text, unsigned long min, unsigned long max, unsigned long* out) {
  char* end = NULL;
  errno = 0;
  unsigned long v = strtoul(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || v < min || v > max)
    return -1;
  *out = v;
  return 0;
}

/* ---- broadcast ranges ----------------------------------------------------------------- */

typedef struct {
  uint32_t lo, hi;
} Range;

typedef struct {
  Range* items;
  size_t count;
} RangeList;

/* "A-B[,C-D...]" with A <= B, each a 32-bit room id. Returns 0, or -1 when malformed. */
static int parse_ranges(const char* text, RangeList* out) {
  for (const char* p = text; *p != '\0';) {
    char* end = NULL;
    if (*p < '0' || *p > '9') return -1;
    errno = 0;
    unsigned long long lo = strtoull(p, &end, 10);
    if (errno != 0 || *end != '-' || lo > UINT32_MAX) return -1;
    p = end + 1;
    if (*p < '0' || *p > '9') return -1;
    unsigned long long hi = strtoull(p, &end, 10);
    if (errno != 0 || (*end != ',' && *end != '\0') || hi > UINT32_MAX || hi < lo) return -1;
    Range* grown = realloc(out->items, (out->count + 1) * sizeof *grown);
    if (grown == NULL) return -1;
    out->items = grown;
    out->items[out->count++] = (Range){(uint32_t)lo, (uint32_t)hi};
    p = end;
    if (*p == ',') {
      ++p;
      if (*p == '\0') return -1;
    }
  }
  return out->count > 0 ? 0 : -1;
}

static int in_ranges(const RangeList* ranges, uint32_t id) {
  for (size_t i = 0; i < ranges->count; ++i)
    if (id >= ranges->items[i].lo && id <= ranges->items[i].hi) return 1;
  return 0;
}

/* ---- rooms ------------------------------------------------------------------------------
 * A room is a member array in join order (members[0] is the first member). Rooms come from a
 * pool of one per peer (a room is never empty, so there are at most as many rooms as peers)
 * and keep their member array when recycled, so joining allocates only when a room grows
 * past any earlier size. The id -> room map is open addressing with linear probing and
 * backward-shift deletion, at most half full. */

typedef struct Room {
  uint32_t id;
  int broadcast;
  size_t count, cap;
  ENetPeer** members;
  struct Room* next_free;
} Room;

typedef struct {
  Room** slots;
  size_t mask;
  Room* pool;
  Room* free_list;
} RoomMap;

static size_t room_hash(uint32_t id, size_t mask) {
  /* murmur3's finalizer: ids are often small consecutive numbers. */
  id ^= id >> 16;
  id *= 0x85ebca6bu;
  id ^= id >> 13;
  id *= 0xc2b2ae35u;
  id ^= id >> 16;
  return (size_t)id & mask;
}

static int rooms_init(RoomMap* map, size_t peers) {
  size_t cap = 16;
  while (cap < 2 * peers) cap *= 2;
  map->slots = calloc(cap, sizeof *map->slots);
  map->pool = calloc(peers, sizeof *map->pool);
  if (map->slots == NULL || map->pool == NULL) return -1;
  map->mask = cap - 1;
  map->free_list = NULL;
  for (size_t i = peers; i-- > 0;) {
    map->pool[i].next_free = map->free_list;
    map->free_list = &map->pool[i];
  }
  return 0;
}

static size_t rooms_slot(const RoomMap* map, uint32_t id) {
  size_t i = room_hash(id, map->mask);
  while (map->slots[i] != NULL && map->slots[i]->id != id) i = (i + 1) & map->mask;
  return i;
}

/* The room `id`, created empty if absent (NULL when out of memory). */
static Room* rooms_get(RoomMap* map, uint32_t id, int* created) {
  size_t i = rooms_slot(map, id);
  *created = 0;
  if (map->slots[i] != NULL) return map->slots[i];
  Room* room = map->free_list;
  if (room == NULL) return NULL; /* cannot happen: one room per connected peer at most */
  map->free_list = room->next_free;
  room->id = id;
  room->count = 0;
  room->next_free = NULL;
  map->slots[i] = room;
  *created = 1;
  return room;
}

static void rooms_erase(RoomMap* map, Room* room) {
  size_t i = rooms_slot(map, room->id);
  map->slots[i] = NULL;
  for (size_t j = (i + 1) & map->mask; map->slots[j] != NULL; j = (j + 1) & map->mask) {
    size_t home = room_hash(map->slots[j]->id, map->mask);
    /* Move the entry at j into the hole at i unless its home lies cyclically in (i, j]. */
    int stays = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      map->slots[i] = map->slots[j];
      map->slots[j] = NULL;
      i = j;
    }
  }
  room->next_free = map->free_list;
  map->free_list = room;
}

static int room_add(Room* room, ENetPeer* peer) {
  if (room->count == room->cap) {
    size_t cap = room->cap ? room->cap * 2 : 8;
    ENetPeer** grown = realloc(room->members, cap * sizeof *grown);
    if (grown == NULL) return -1;
    room->members = grown;
    room->cap = cap;
  }
  room->members[room->count++] = peer;
  return 0;
}

/* Removes `peer` keeping join order (the next earliest becomes first). 0 if it was there. */
static int room_remove(Room* room, ENetPeer* peer) {
  for (size_t i = 0; i < room->count; ++i) {
    if (room->members[i] == peer) {
      memmove(&room->members[i], &room->members[i + 1],
              (room->count - i - 1) * sizeof *room->members);
      --room->count;
      return 0;
    }
  }
  return -1;
}

/* ---- relay ------------------------------------------------------------------------------ */

typedef struct {
  ENetHost* host;
  RoomMap rooms;
  RangeList broadcast;
  size_t max_room_size; /* 0 = unlimited */
  int quiet;
  unsigned long long peers, rooms_created, messages_in, copies_out, dropped, refused;
  size_t connected;
} Relay;

static void log_peer(const Relay* r, const ENetPeer* peer, const char* what, uint32_t room,
                     size_t members) {
  if (r->quiet) return;
  char ip[64];
  if (enet_address_get_host_ip(&peer->address, ip, sizeof ip) != 0) strcpy(ip, "?");
  fprintf(stderr, "enet-relay: %s:%u %s room %u (%zu members)\n", ip,
          (unsigned)peer->address.port, what, (unsigned)room, members);
}

static void on_connect(Relay* r, ENetPeer* peer, uint32_t room_id) {
  peer->data = NULL;
  if (room_id == 0) {
    ++r->peers;
    ++r->connected;
    log_peer(r, peer, "joined", 0, 0);
    return;
  }
  int created = 0;
  Room* room = rooms_get(&r->rooms, room_id, &created);
  if (room != NULL && r->max_room_size != 0 && room->count >= r->max_room_size) {
    ++r->refused;
    log_peer(r, peer, "refused: full", room_id, room->count);
    enet_peer_disconnect_now(peer, 1);
    return;
  }
  if (room == NULL || room_add(room, peer) != 0) {
    if (room != NULL && created) rooms_erase(&r->rooms, room);
    ++r->refused;
    fprintf(stderr, "enet-relay: out of memory joining room %u\n", (unsigned)room_id);
    enet_peer_disconnect_now(peer, 1);
    return;
  }
  if (created) {
    room->broadcast = in_ranges(&r->broadcast, room_id);
    ++r->rooms_created;
  }
  peer->data = room;
  ++r->peers;
  ++r->connected;
  log_peer(r, peer, "joined", room_id, room->count);
}

static void on_disconnect(Relay* r, ENetPeer* peer) {
  Room* room = peer->data;
  peer->data = NULL;
  if (r->connected > 0) --r->connected;
  if (room == NULL) {
    log_peer(r, peer, "left", 0, 0);
    return;
  }
  uint32_t id = room->id;
  if (room_remove(room, peer) != 0) return; /* not a member: nothing to undo */
  size_t left = room->count;
  if (left == 0) rooms_erase(&r->rooms, room);
  log_peer(r, peer, "left", id, left);
}

/* Forwards the received packet itself: libenet decoded it with the flags of its delivery
 * (RELIABLE, UNSEQUENCED, UNRELIABLE_FRAGMENT or none), exactly what enet_packet_create with
 * the same flags would give, and enet_peer_send only takes a reference, so one packet serves
 * every recipient with no copy and no allocation here. */
static void on_receive(Relay* r, ENetPeer* from, enet_uint8 channel, ENetPacket* packet) {
  ++r->messages_in;
  Room* room = from->data;
  size_t sent = 0;
  if (room != NULL) {
    ENetPeer* first = room->members[0];
    if (room->broadcast && from != first) {
      if (enet_peer_send(first, channel, packet) == 0)
        ++sent;
      else
        ++r->dropped;
    } else {
      for (size_t i = 0; i < room->count; ++i) {
        ENetPeer* to = room->members[i];
        if (to == from) continue;
        if (enet_peer_send(to, channel, packet) == 0)
          ++sent;
        else
          ++r->dropped;
      }
    }
  }
  if (sent == 0 && (room == NULL || room->count <= 1)) ++r->dropped; /* nobody to send to */
  r->copies_out += sent;
  if (packet->referenceCount == 0) enet_packet_destroy(packet);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int main(int argc, char** argv) {
  const char* listen_arg = NULL;
  unsigned long peers = ENET_PROTOCOL_MAXIMUM_PEER_ID;
  unsigned long channels = ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT;
  unsigned long max_room_size = 0;
  Relay r;
  memset(&r, 0, sizeof r);
  for (int i = 1; i < argc; ++i) {
    const char* arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (strcmp(arg, "--listen") == 0 && value != NULL) {
      listen_arg = value;
      ++i;
    } else if (strcmp(arg, "--peers") == 0 && value != NULL) {
      /* ENet's peer ID is 12 bits and 0xFFF is reserved. */
      ok = parse_ulong(value, 1, ENET_PROTOCOL_MAXIMUM_PEER_ID, &peers) == 0;
      ++i;
    } else if (strcmp(arg, "--channels") == 0 && value != NULL) {
      ok = parse_ulong(value, 1, ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT, &channels) == 0;
      ++i;
    } else if (strcmp(arg, "--broadcast-rooms") == 0 && value != NULL) {
      ok = parse_ranges(value, &r.broadcast) == 0;
      ++i;
    } else if (strcmp(arg, "--max-room-size") == 0 && value != NULL) {
      ok = parse_ulong(value, 1, ENET_PROTOCOL_MAXIMUM_PEER_ID, &max_room_size) == 0;
      ++i;
    } else if (strcmp(arg, "--quiet") == 0) {
      r.quiet = 1;
    } else if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      ok = 0;
    }
    if (!ok) {
      if (argv[i] == value) /* an option's value was rejected */
        fprintf(stderr, "enet-relay: bad %s '%s'\n", arg, value);
      else
        fprintf(stderr, "enet-relay: bad argument '%s'\n", arg);
      usage(stderr);
      return 2;
    }
  }
  if (listen_arg == NULL) {
    usage(stderr);
    return 2;
  }
  r.max_room_size = (size_t)max_room_size;

  if (enet_initialize() != 0) {
    fprintf(stderr, "enet-relay: enet_initialize failed\n");
    return 1;
  }
  atexit(enet_deinitialize);

  ENetAddress address;
  if (parse_enet_endpoint(listen_arg, &address, 1) != 0) {
    fprintf(stderr, "enet-relay: bad --listen '%s'\n", listen_arg);
    usage(stderr);
    return 2;
  }
  if (rooms_init(&r.rooms, (size_t)peers) != 0) {
    fprintf(stderr, "enet-relay: out of memory\n");
    return 1;
  }
  /* Bandwidth unlimited (0, 0): libenet throttles nothing itself. */
  r.host = enet_host_create(&address, (size_t)peers, (size_t)channels, 0, 0);
  if (r.host == NULL) {
    fprintf(stderr, "enet-relay: cannot listen on %s\n", listen_arg);
    return 1;
  }

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sa.sa_handler = on_status;
  sigaction(SIGUSR1, &sa, NULL);

  ENetAddress bound = r.host->address;
  if (enet_socket_get_address(r.host->socket, &bound) != 0) bound = r.host->address;
  char ip[64];
  if (enet_address_get_host_ip(&bound, ip, sizeof ip) != 0) strcpy(ip, "0.0.0.0");
  /* Scripts wait for this line before starting clients. */
  printf("relaying %s:%u\n", ip, (unsigned)bound.port);
  fflush(stdout);

  int rc = 0;
  while (!g_signal) {
    if (g_status) {
      g_status = 0;
      size_t in_use = 0, connected = 0;
      for (size_t i = 0; i < r.host->peerCount; ++i) {
        const ENetPeerState st = r.host->peers[i].state;
        in_use += st != ENET_PEER_STATE_DISCONNECTED;
        connected += st == ENET_PEER_STATE_CONNECTED;
      }
      printf("status peers_in_use=%zu connected=%zu\n", in_use, connected);
      fflush(stdout);
    }
    ENetEvent event;
    /* 1 ms bounds only an idle wait: the wait ends as soon as the socket is readable. */
    int got = enet_host_service(r.host, &event, 1);
    while (got > 0) {
      switch (event.type) {
        case ENET_EVENT_TYPE_CONNECT: on_connect(&r, event.peer, event.data); break;
        case ENET_EVENT_TYPE_RECEIVE:
          on_receive(&r, event.peer, event.channelID, event.packet);
          break;
        case ENET_EVENT_TYPE_DISCONNECT: on_disconnect(&r, event.peer); break;
        case ENET_EVENT_TYPE_NONE: break;
      }
      /* Drain what this service call already decoded before waiting again. */
      got = enet_host_check_events(r.host, &event);
    }
    if (got < 0) {
      fprintf(stderr, "enet-relay: enet_host_service failed\n");
      rc = 1;
      break;
    }
  }

  /* Graceful shutdown: every peer is asked to disconnect (after what is already queued for
   * it), and the host is serviced up to 2 s for the acknowledgements. */
  for (size_t i = 0; i < r.host->peerCount; ++i) {
    ENetPeer* peer = &r.host->peers[i];
    if (peer->state != ENET_PEER_STATE_DISCONNECTED) enet_peer_disconnect(peer, 0);
  }
  uint64_t deadline = now_ms() + 2000;
  while (r.connected > 0 && now_ms() < deadline) {
    ENetEvent event;
    int got = enet_host_service(r.host, &event, 10);
    while (got > 0) {
      if (event.type == ENET_EVENT_TYPE_DISCONNECT) {
        on_disconnect(&r, event.peer);
      } else if (event.type == ENET_EVENT_TYPE_RECEIVE) {
        ++r.messages_in;
        ++r.dropped;
        enet_packet_destroy(event.packet);
      } else if (event.type == ENET_EVENT_TYPE_CONNECT) {
        /* A handshake that finished just now: it is told to go too. */
        ++r.connected;
        event.peer->data = NULL;
        enet_peer_disconnect(event.peer, 0);
      }
      got = enet_host_check_events(r.host, &event);
    }
    if (got < 0) break;
  }
  enet_host_flush(r.host);
  enet_host_destroy(r.host);

  printf("relayed signal=%d peers=%llu rooms=%llu messages_in=%llu copies_out=%llu dropped=%llu "
         "refused=%llu\n",
         (int)g_signal, r.peers, r.rooms_created, r.messages_in, r.copies_out, r.dropped,
         r.refused);
  fflush(stdout);

  for (size_t i = 0; i < (size_t)peers; ++i) free(r.rooms.pool[i].members);
  free(r.rooms.pool);
  free(r.rooms.slots);
  free(r.broadcast.items);
  return rc;
}
