/* capi_discovery: offline discovery and per-peer settings through the C API, from C, over
 * loopback. A server with discovery on answers a client's ping with its info (unicast, then to
 * the loopback broadcast address when the system delivers it), a server with it off stays
 * silent, and tern_peer_timeout / tern_peer_throttle_configure / tern_peer_ping_interval show in
 * both sides' statistics (the throttle through THROTTLE_CONFIGURE). Prints one line per failed
 * check and exits 1 if any failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <tern/tern.h>

#include "capi_check.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* Services all three hosts until the client has an answer or `limit` seconds pass (a hang
 * guard: nothing asserts on how long it took). Returns how many answers came. */
static int answers(tern_host* client, tern_host* a, tern_host* b, double limit,
                   tern_discovery_answer* first, char* info, size_t info_size) {
  const double end = seconds() + limit;
  int n = 0;
  tern_event ev;
  while (seconds() < end && n == 0) {
    tern_host_service(a, &ev, 1);
    tern_host_service(b, &ev, 1);
    tern_host_service(client, &ev, 5);
    tern_discovery_answer ans;
    while (tern_host_poll_discovery(client, &ans) == 1) {
      if (n++ == 0) {
        *first = ans;
        size_t len = ans.info_length < info_size - 1 ? ans.info_length : info_size - 1;
        memcpy(info, ans.info, len);
        info[len] = '\0';
      }
    }
  }
  return n;
}

int main(void) {
  char err[256];
  tern_host_options so = tern_host_options_default();
  so.discovery = 1;
  tern_host* server = tern_host_create(&so, "0.0.0.0:0", err, sizeof err);
  CHECK(server != NULL, "%s", err);
  tern_host* quiet = tern_host_create(NULL, "127.0.0.1:0", err, sizeof err);
  CHECK(quiet != NULL, "%s", err);
  tern_host* client = tern_host_create(NULL, "0.0.0.0:0", err, sizeof err);
  CHECK(client != NULL, "%s", err);
  if (server == NULL || quiet == NULL || client == NULL) return 1;
  const char* info = "name=capi\nplayers=2\n";
  CHECK(tern_host_set_discovery_info(server, info, strlen(info)) == TERN_OK, "set info");
  CHECK(tern_host_set_discovery_info(quiet, "quiet", 5) == TERN_OK, "set info");

  tern_address at = tern_host_local_address(server);
  tern_address to = tern_address_ipv4(0x7f000001, at.port);
  uint32_t nonce = tern_host_discover(client, &to, 256);
  CHECK(nonce != 0, "discover: %s", tern_host_last_error(client));
  tern_discovery_answer got;
  char text[512];
  int n = answers(client, server, quiet, 10.0, &got, text, sizeof text);
  CHECK(n == 1, "%d answers", n);
  if (n == 1) {
    CHECK(got.nonce == nonce, "nonce %u, sent %u", got.nonce, nonce);
    CHECK(strcmp(text, info) == 0, "info '%s'", text);
    CHECK(!got.truncated, "truncated");
    CHECK(got.address.port == at.port, "port %u", got.address.port);
  }

  /* Discovery off: nothing comes back, and the refusal is counted. */
  tern_address quiet_at = tern_host_local_address(quiet);
  CHECK(tern_host_discover(client, &quiet_at, 64) != 0, "discover");
  n = answers(client, server, quiet, 1.0, &got, text, sizeof text);
  CHECK(n == 0, "%d answers from a host with discovery off", n);
  tern_host_stats qs;
  tern_host_get_stats(quiet, &qs);
  CHECK(qs.discovery_refused == 1, "refused %llu", (unsigned long long)qs.discovery_refused);

  /* The loopback broadcast address reaches a server bound to the wildcard address. */
  tern_address bcast = tern_address_ipv4(0x7fffffff, at.port);
  nonce = tern_host_discover(client, &bcast, 256);
  CHECK(nonce != 0, "broadcast discover");
  n = answers(client, server, quiet, 10.0, &got, text, sizeof text);
  CHECK(n == 1, "%d answers to a broadcast ping", n);
  if (n == 1) CHECK(strcmp(text, info) == 0, "info '%s'", text);

  tern_host_stats ss;
  tern_host_get_stats(server, &ss);
  CHECK(ss.discovery_pongs_out == 2, "pongs %llu", (unsigned long long)ss.discovery_pongs_out);
  tern_host_stats cs;
  tern_host_get_stats(client, &cs);
  CHECK(cs.discovery_answers == 2, "answers %llu", (unsigned long long)cs.discovery_answers);

  /* Per-peer settings on a connection. */
  tern_peer peer = tern_host_connect(client, &to, 1, 0);
  tern_peer at_server = {0xffffffffu, 0};
  int client_up = 0;
  const double end = seconds() + 10.0;
  tern_event ev;
  while (seconds() < end && (!client_up || !tern_peer_valid(at_server))) {
    if (tern_host_service(server, &ev, 1) == 1 && ev.type == TERN_EVENT_CONNECT) {
      at_server = ev.peer;
    }
    if (tern_host_service(client, &ev, 1) == 1 && ev.type == TERN_EVENT_CONNECT) client_up = 1;
  }
  CHECK(client_up && tern_peer_valid(at_server), "connected");
  tern_peer_timeout(client, peer, 8, 1000, 4000);
  tern_peer_ping_interval(client, peer, 200);
  tern_peer_throttle_configure(server, at_server, 2000, 5, 6);
  tern_peer_stats ps;
  CHECK(tern_peer_get_stats(client, peer, &ps) == TERN_OK, "stats");
  CHECK(ps.timeout_limit == 8 && ps.timeout_minimum_ms == 1000 && ps.timeout_maximum_ms == 4000,
        "timeouts %u %u %u", ps.timeout_limit, ps.timeout_minimum_ms, ps.timeout_maximum_ms);
  CHECK(ps.ping_interval_ms == 200, "ping interval %u", ps.ping_interval_ms);
  const double until = seconds() + 10.0;
  while (seconds() < until) {
    tern_host_service(server, &ev, 1);
    tern_host_service(client, &ev, 1);
    tern_peer_get_stats(client, peer, &ps);
    if (ps.throttle_interval_ms == 2000) break;
  }
  CHECK(ps.throttle_interval_ms == 2000 && ps.throttle_acceleration == 5 &&
            ps.throttle_deceleration == 6,
        "throttle %u %u %u", ps.throttle_interval_ms, ps.throttle_acceleration,
        ps.throttle_deceleration);

  tern_host_destroy(client);
  tern_host_destroy(quiet);
  tern_host_destroy(server);
  if (g_failures != 0) return 1;
  printf("capi_discovery: all checks passed\n");
  return 0;
}
