/* enet-relay-member: libenet clients for the relay's operations tests, each on its own ENet
 * host (its own socket, so its own address and port, as kicks and bans need), driven by lines
 * on stdin:
 *
 *   connect ROOM BIND_IP   a new client bound to BIND_IP (the kernel picks the port) connects
 *                          with connect data ROOM; prints "connected ID PORT" once it is up
 *   send ID N BYTES        client ID sends N reliable messages of BYTES bytes on channel 0
 *   quit                   (or end of input)
 *
 * and prints "disconnected ID data=D" when a client's connection ends (D: the relay's
 * disconnect data; 0 when the attempt timed out). IDs count from 0 in connect order.
 *
 *   enet-relay-member HOST:PORT */
#include <enet/enet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CLIENTS 64

static ENetHost* hosts[MAX_CLIENTS];
static ENetPeer* peers[MAX_CLIENTS];
static int count;
static ENetAddress relay;

static void command(char* line) {
  unsigned room, id, n, bytes;
  char ip[64];
  if (sscanf(line, "connect %u %63s", &room, ip) == 2) {
    ENetAddress bind;
    if (count == MAX_CLIENTS || enet_address_set_host_ip(&bind, ip) != 0) {
      printf("error connect %s\n", ip);
      return;
    }
    bind.port = 0;
    ENetHost* h = enet_host_create(&bind, 1, 2, 0, 0);
    if (h == NULL) {
      printf("error host %s\n", ip);
      return;
    }
    hosts[count] = h;
    peers[count] = enet_host_connect(h, &relay, 2, room);
    ++count;
  } else if (sscanf(line, "send %u %u %u", &id, &n, &bytes) == 3) {
    if (id >= (unsigned)count || peers[id] == NULL || bytes == 0 || bytes > 65536) {
      printf("error send %u\n", id);
      return;
    }
    for (unsigned i = 0; i < n; ++i) {
      ENetPacket* p = enet_packet_create(NULL, bytes, ENET_PACKET_FLAG_RELIABLE);
      memset(p->data, (int)(i & 0xff), bytes);
      enet_peer_send(peers[id], 0, p);
    }
  } else if (strncmp(line, "quit", 4) == 0) {
    exit(0);
  } else {
    printf("error unknown command\n");
  }
}

static void service(void) {
  for (int i = 0; i < count; ++i) {
    ENetEvent ev;
    while (hosts[i] != NULL && enet_host_service(hosts[i], &ev, 0) > 0) {
      if (ev.type == ENET_EVENT_TYPE_CONNECT) {
        printf("connected %d %u\n", i, (unsigned)hosts[i]->address.port);
      } else if (ev.type == ENET_EVENT_TYPE_DISCONNECT) {
        printf("disconnected %d data=%u\n", i, (unsigned)ev.data);
        peers[i] = NULL;
      } else if (ev.type == ENET_EVENT_TYPE_RECEIVE) {
        enet_packet_destroy(ev.packet);
      }
    }
  }
  fflush(stdout);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: enet-relay-member HOST:PORT\n");
    return 2;
  }
  char host[64];
  const char* colon = strrchr(argv[1], ':');
  if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof host) return 2;
  memcpy(host, argv[1], (size_t)(colon - argv[1]));
  host[colon - argv[1]] = '\0';
  if (enet_initialize() != 0 || enet_address_set_host_ip(&relay, host) != 0) return 2;
  relay.port = (enet_uint16)atoi(colon + 1);
  char buf[4096];
  size_t have = 0;
  for (;;) {
    struct pollfd p = {0, POLLIN, 0};
    if (poll(&p, 1, 2) > 0) {
      const ssize_t n = read(0, buf + have, sizeof buf - 1 - have);
      if (n <= 0) return 0;
      have += (size_t)n;
      buf[have] = '\0';
      char* nl;
      while ((nl = strchr(buf, '\n')) != NULL) {
        *nl = '\0';
        command(buf);
        const size_t used = (size_t)(nl - buf) + 1;
        memmove(buf, nl + 1, have - used + 1);
        have -= used;
      }
      if (have == sizeof buf - 1) have = 0; /* a line too long for anything: dropped */
    }
    service();
  }
}
