/* enet-relay-drain: connects N libenet peers (one host) to a relay in room ROOM, prints
 * "connected N", then waits up to 20 s for the relay to disconnect them and prints how many
 * disconnects it saw. Exit 0 when all N were disconnected by the relay, 1 otherwise.
 *
 *   enet-relay-drain HOST:PORT N ROOM */
#include <enet/enet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: enet-relay-drain HOST:PORT N ROOM\n");
    return 2;
  }
  char host[64];
  const char* colon = strrchr(argv[1], ':');
  if (colon == NULL || (size_t)(colon - argv[1]) >= sizeof host) return 2;
  memcpy(host, argv[1], (size_t)(colon - argv[1]));
  host[colon - argv[1]] = '\0';
  const int n = atoi(argv[2]);
  const unsigned room = (unsigned)strtoul(argv[3], NULL, 10);
  if (n <= 0 || n > 64 || enet_initialize() != 0) return 2;
  ENetHost* h = enet_host_create(NULL, (size_t)n, 2, 0, 0);
  ENetAddress to;
  if (h == NULL || enet_address_set_host_ip(&to, host) != 0) return 1;
  to.port = (enet_uint16)atoi(colon + 1);
  for (int i = 0; i < n; ++i) enet_host_connect(h, &to, 2, room);
  int connected = 0, disconnected = 0;
  ENetEvent ev;
  enet_uint32 start = enet_time_get();
  while (connected < n && enet_time_get() - start < 10000) {
    if (enet_host_service(h, &ev, 10) > 0) {
      if (ev.type == ENET_EVENT_TYPE_CONNECT) ++connected;
      if (ev.type == ENET_EVENT_TYPE_RECEIVE) enet_packet_destroy(ev.packet);
    }
  }
  printf("connected %d\n", connected);
  fflush(stdout);
  start = enet_time_get();
  while (disconnected < n && enet_time_get() - start < 20000) {
    if (enet_host_service(h, &ev, 10) > 0) {
      if (ev.type == ENET_EVENT_TYPE_DISCONNECT) ++disconnected;
      if (ev.type == ENET_EVENT_TYPE_RECEIVE) enet_packet_destroy(ev.packet);
    }
  }
  printf("remote_disconnects=%d\n", disconnected);
  enet_host_destroy(h);
  enet_deinitialize();
  return disconnected == n ? 0 : 1;
}
