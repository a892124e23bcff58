/* echo.c: the C API end to end, in one process. A server host echoes what it receives; a
 * client host connects to it, sends one reliable message and waits for the echo. The top
 * README shows this file; tests/capi builds it in the tree and tests/install against an
 * installed Tern, with nothing but `pkg-config --cflags --libs tern`.
 *
 *   cc -std=c11 echo.c $(pkg-config --cflags --libs tern) -o echo && ./echo
 */
#include <tern/tern.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  char error[256];
  tern_host* server = tern_host_create(NULL, "127.0.0.1:0", error, sizeof error);
  tern_host* client = tern_host_create(NULL, "127.0.0.1:0", error, sizeof error);
  if (server == NULL || client == NULL) {
    fprintf(stderr, "echo: %s\n", error);
    return 1;
  }
  /* The server's port was picked by the kernel: ask the host for it. */
  tern_address to = tern_host_local_address(server);
  tern_peer peer = tern_host_connect(client, &to, 1, 0);

  const char hello[] = "hello, tern";
  int done = 0;
  for (int round = 0; round < 500 && !done; ++round) { /* gives up after ~5 s */
    tern_event ev;
    /* The server: echo every message on its channel, with its delivery. */
    while (tern_host_service(server, &ev, 0) > 0) {
      if (ev.type == TERN_EVENT_RECEIVE) {
        tern_peer_send(server, ev.peer, ev.channel, ev.data, ev.length, ev.flags);
      }
    }
    /* The client: send once connected, stop when the echo is back. */
    while (!done && tern_host_service(client, &ev, 10) > 0) {
      if (ev.type == TERN_EVENT_CONNECT) {
        tern_peer_send(client, peer, 0, hello, sizeof hello, TERN_SEND_RELIABLE);
      } else if (ev.type == TERN_EVENT_RECEIVE) {
        printf("echo: %.*s\n", (int)ev.length, (const char*)ev.data);
        done = ev.length == sizeof hello && memcmp(ev.data, hello, sizeof hello) == 0;
      }
    }
  }
  tern_peer_stats stats;
  if (done && tern_peer_get_stats(client, peer, &stats) == TERN_OK) {
    printf("echo: round trip %u ms, %llu datagrams sent\n", stats.rtt_ms,
           (unsigned long long)stats.datagrams_sent);
  }
  tern_peer_disconnect_now(client, peer, 0);
  tern_host_destroy(client);
  tern_host_destroy(server);
  return done ? 0 : 1;
}
