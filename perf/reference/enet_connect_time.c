/* enet-connect-time: how long new libenet clients take to connect, e.g. during a connect flood
 * (perf/connect_flood.py). N clients, each its own ENet host on its own loopback address
 * (127.B.0.1 onwards, so no per-address limit of the server's counts them together), start
 * their connects at once; each one's time is from enet_host_connect() to its connect event.
 *
 *   enet-connect-time --target HOST:PORT [--clients N] [--timeout-ms T] [--base B]
 *
 * Prints, once every client connected or T ms passed:
 *
 *   connect clients=N connected=N failed=N p50_ms=X p90_ms=X max_ms=X
 *
 * (a client that did not connect in time counts as failed, not in the percentiles). Then
 * disconnects them all. */
#define _POSIX_C_SOURCE 200809L
#include <enet/enet.h>

#include "enet_endpoint.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kMaxClients = 4000 };

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  const char* target = NULL;
  long clients = 100, timeout_ms = 10000, base = 88;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--target") == 0) {
      target = argv[i + 1];
    } else if (strcmp(argv[i], "--clients") == 0) {
      clients = atol(argv[i + 1]);
    } else if (strcmp(argv[i], "--timeout-ms") == 0) {
      timeout_ms = atol(argv[i + 1]);
    } else if (strcmp(argv[i], "--base") == 0) {
      base = atol(argv[i + 1]);
    } else {
      target = NULL;
      break;
    }
  }
  ENetAddress to;
  if (argc % 2 == 0 || target == NULL || parse_enet_endpoint(target, &to, 0) != 0 || clients < 1 ||
      clients > kMaxClients || timeout_ms < 1 || timeout_ms > 600000 || base < 1 || base > 254) {
    fprintf(stderr,
            "usage: enet-connect-time --target HOST:PORT [--clients N (1..%d, default 100)]\n"
            "                         [--timeout-ms T (default 10000)] [--base B (127.B.x.y, "
            "default 88)]\n",
            kMaxClients);
    return 2;
  }
  if (enet_initialize() != 0) return 1;
  ENetHost** hosts = calloc((size_t)clients, sizeof *hosts);
  double* started = calloc((size_t)clients, sizeof *started);
  double* took = calloc((size_t)clients, sizeof *took);
  int* done = calloc((size_t)clients, sizeof *done);
  if (!hosts || !started || !took || !done) return 1;
  for (long i = 0; i < clients; ++i) {
    ENetAddress bind = {0};
    bind.host = htonl((127u << 24) | ((uint32_t)base << 16) | (uint32_t)(i + 1));
    hosts[i] = enet_host_create(&bind, 1, 2, 0, 0);
    if (hosts[i] == NULL) {
      fprintf(stderr, "enet-connect-time: cannot create client %ld\n", i);
      return 1;
    }
  }
  for (long i = 0; i < clients; ++i) {
    started[i] = now_ms();
    if (enet_host_connect(hosts[i], &to, 2, 0) == NULL) return 1;
    enet_host_flush(hosts[i]);
  }
  long connected = 0;
  const double deadline = now_ms() + (double)timeout_ms;
  while (connected < clients && now_ms() < deadline) {
    int idle = 1;
    for (long i = 0; i < clients; ++i) {
      ENetEvent ev;
      while (enet_host_service(hosts[i], &ev, 0) > 0) {
        idle = 0;
        if (ev.type == ENET_EVENT_TYPE_CONNECT && !done[i]) {
          took[connected++] = now_ms() - started[i];
          done[i] = 1;
        } else if (ev.type == ENET_EVENT_TYPE_RECEIVE) {
          enet_packet_destroy(ev.packet);
        }
      }
    }
    if (idle) {
      struct timespec nap = {0, 200000};
      nanosleep(&nap, NULL);
    }
  }
  qsort(took, (size_t)connected, sizeof *took, by_value);
  const double p50 = connected ? took[(connected - 1) / 2] : 0;
  const double p90 = connected ? took[(connected * 9 - 1) / 10] : 0;
  const double max = connected ? took[connected - 1] : 0;
  printf("connect clients=%ld connected=%ld failed=%ld p50_ms=%.1f p90_ms=%.1f max_ms=%.1f\n",
         clients, connected, clients - connected, p50, p90, max);
  fflush(stdout);
  for (long i = 0; i < clients; ++i) {
    if (hosts[i]->peers[0].state == ENET_PEER_STATE_CONNECTED) {
      enet_peer_disconnect_now(&hosts[i]->peers[0], 0);
    }
    enet_host_destroy(hosts[i]);
  }
  enet_deinitialize();
  free(hosts);
  free(started);
  free(took);
  free(done);
  return 0;
}
