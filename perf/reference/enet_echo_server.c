/* enet-echo-server: the echo server a user would write with plain libenet.
 *
 * It is the reference Tern's `tern-ping --serve` is measured against, so it does what an
 * ordinary libenet application does and nothing clever: one host, enet_host_service() in a
 * loop, every received packet sent straight back to its sender on the same channel with the
 * same delivery flags.
 *
 *   enet-echo-server --listen HOST:PORT [--peers N] [--checksum]
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>

#include "enet_endpoint.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

static void usage(FILE* out) {
  fprintf(out,
          "usage: enet-echo-server --listen HOST:PORT [--peers N] [--checksum]\n"
          "  Echoes every packet back to its sender (same channel, same delivery) until\n"
          "  SIGINT/SIGTERM. HOST may be a name, an IPv4 address, '*' or 0.0.0.0.\n");
}
int main(int argc, char** argv) {
  const char* listen_arg = NULL;
  unsigned long peers = 64;
  int checksum = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
      listen_arg = argv[++i];
    } else if (strcmp(argv[i], "--peers") == 0 && i + 1 < argc) {
      char* end = NULL;
      peers = strtoul(argv[++i], &end, 10);
      /* ENet's peer ID is 12 bits and 0xFFF is reserved. */
      if (*end != '\0' || peers == 0 || peers > ENET_PROTOCOL_MAXIMUM_PEER_ID) {
        fprintf(stderr, "enet-echo-server: --peers must be 1..%d\n", ENET_PROTOCOL_MAXIMUM_PEER_ID);
        return 2;
      }
    } else if (strcmp(argv[i], "--checksum") == 0) {
      checksum = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (listen_arg == NULL) {
    usage(stderr);
    return 2;
  }

  if (enet_initialize() != 0) {
    fprintf(stderr, "enet-echo-server: enet_initialize failed\n");
    return 1;
  }
  atexit(enet_deinitialize);

  ENetAddress address;
  if (parse_enet_endpoint(listen_arg, &address, 1) != 0) {
    fprintf(stderr, "enet-echo-server: bad --listen '%s'\n", listen_arg);
    return 2;
  }
  ENetHost* host =
      enet_host_create(&address, (size_t)peers, ENET_PROTOCOL_MAXIMUM_CHANNEL_COUNT, 0, 0);
  if (host == NULL) {
    fprintf(stderr, "enet-echo-server: cannot listen on %s\n", listen_arg);
    return 1;
  }
  if (checksum) host->checksum = enet_crc32;

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  /* Scripts wait for this line before starting clients. */
  fprintf(stderr, "enet-echo-server: listening on %s (port %u)%s\n", listen_arg,
          (unsigned)host->address.port, checksum ? " with checksums" : "");

  unsigned long long echoed = 0, connects = 0, disconnects = 0;
  int rc = 0;
  while (!g_stop) {
    ENetEvent event;
    /* A bounded wait so a signal that lands between checks is noticed promptly; libenet
     * itself retries the wait on EINTR. */
    int got = enet_host_service(host, &event, 100);
    if (got < 0) {
      fprintf(stderr, "enet-echo-server: enet_host_service failed\n");
      rc = 1;
      break;
    }
    while (got > 0) {
      switch (event.type) {
        case ENET_EVENT_TYPE_CONNECT: ++connects; break;
        case ENET_EVENT_TYPE_RECEIVE: {
          /* The received packet keeps the flags libenet decoded it with (RELIABLE,
           * UNSEQUENCED, UNRELIABLE_FRAGMENT or none), so handing the same packet back
           * repeats the sender's delivery and costs no copy. enet_peer_send takes ownership
           * on success only. */
          ENetPacket* packet = event.packet;
          if (enet_peer_send(event.peer, event.channelID, packet) != 0) {
            enet_packet_destroy(packet);
          } else {
            ++echoed;
          }
          break;
        }
        case ENET_EVENT_TYPE_DISCONNECT: ++disconnects; break;
        case ENET_EVENT_TYPE_NONE: break;
      }
      /* Drain what this service call already decoded before sleeping again. */
      got = enet_host_check_events(host, &event);
      if (got < 0) {
        rc = 1;
        break;
      }
    }
  }

  for (size_t i = 0; i < host->peerCount; ++i) {
    ENetPeer* peer = &host->peers[i];
    if (peer->state == ENET_PEER_STATE_CONNECTED) enet_peer_disconnect_now(peer, 0);
  }
  enet_host_flush(host);
  enet_host_destroy(host);
  fprintf(stderr, "enet-echo-server: %llu connects, %llu disconnects, %llu messages echoed\n",
          connects, disconnects, echoed);
  return rc;
}
