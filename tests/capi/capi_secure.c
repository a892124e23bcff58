/* capi_secure: secure sessions through the C API, from C, over loopback. A server whose policy
 * is required (key file written here, as tern-token keygen would) takes a client that mints a
 * token under the same key: both sides see an encrypted connection, the server reads the
 * token's user data, and reliable messages go both ways intact. A token minted under another
 * key and a plain CONNECT get no answer (the attempts end by timeout), and a token from
 * tern_connect_token_parse (tern-token mint's line) works like a minted one. Bad options are
 * refused by tern_host_create with the file and reason. Prints one line per failed check and
 * exits 1 if any failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <tern/tern.h>

#include "capi_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Services both hosts until the client has an event of `type` (returned in *out) or `limit`
 * seconds pass (a hang guard, not an assertion on time). The server's events are handled:
 * connects remembered in *server_peer, receives echoed back reliably. */
static int wait_client(tern_host* server, tern_host* client, tern_event_type type, double limit,
                       tern_event* out, tern_peer* server_peer, int* server_connects) {
  const double end = seconds() + limit;
  tern_event ev;
  while (seconds() < end) {
    while (tern_host_service(server, &ev, 1) == 1) {
      if (ev.type == TERN_EVENT_CONNECT) {
        *server_peer = ev.peer;
        ++*server_connects;
      } else if (ev.type == TERN_EVENT_RECEIVE) {
        tern_peer_send(server, ev.peer, ev.channel, ev.data, ev.length, TERN_SEND_RELIABLE);
      }
    }
    if (tern_host_service(client, &ev, 2) == 1 && ev.type == type) {
      *out = ev;
      return 1;
    }
  }
  return 0;
}

static void hex(const uint8_t* p, size_t n, char* out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  out[2 * n] = '\0';
}

/* A client host with short timeouts, so an unanswered connect ends soon; aes 0: it never
 * offers AES-256-GCM, so its sessions are ChaCha20-Poly1305. */
static tern_host* make_client_with(int aes) {
  char err[256];
  tern_host_options o = tern_host_options_default();
  o.secure_aes = aes;
  o.timeout_limit = 4;
  o.timeout_minimum_ms = 300;
  o.timeout_maximum_ms = 1500;
  tern_host* h = tern_host_create(&o, "127.0.0.1:0", err, sizeof err);
  CHECK(h != NULL, "client: %s", err);
  return h;
}

static tern_host* make_client(void) { return make_client_with(1); }

int main(void) {
  char err[512];
  char key_path[64];
  snprintf(key_path, sizeof key_path, "/tmp/tern-capi-secure-%d.key", (int)getpid());

  tern_token_key key;
  if (tern_token_key_generate(7, &key) != TERN_OK) {
    printf("SKIP: built without libsodium\n");
    return 77;
  }
  {
    char key_hex[65];
    hex(key.key, sizeof key.key, key_hex);
    FILE* f = fopen(key_path, "w");
    CHECK(f != NULL, "cannot write %s", key_path);
    if (f == NULL) return 1;
    fprintf(f, "# capi_secure\nid 7\nkey %s\n", key_hex);
    fclose(f);
  }
  tern_token_key loaded;
  CHECK(tern_token_key_load(key_path, &loaded, err, sizeof err) == TERN_OK, "%s", err);
  CHECK(loaded.id == 7 && memcmp(loaded.key, key.key, sizeof key.key) == 0, "key file read back");

  /* Refused options: required without a key file; a key file that is not one. */
  tern_host_options so = tern_host_options_default();
  so.security = TERN_SECURITY_REQUIRED;
  CHECK(tern_host_create(&so, "127.0.0.1:0", err, sizeof err) == NULL &&
            strstr(err, "token_key_file") != NULL,
        "required without a key: %s", err);
  so.token_key_file = "/nonexistent/tern.key";
  CHECK(tern_host_create(&so, "127.0.0.1:0", err, sizeof err) == NULL &&
            strstr(err, "/nonexistent/tern.key") != NULL,
        "missing key file: %s", err);
  so.token_key_file = key_path;
  tern_host* server = tern_host_create(&so, "127.0.0.1:0", err, sizeof err);
  CHECK(server != NULL, "server: %s", err);
  tern_host* client = make_client();
  if (server == NULL || client == NULL) return 1;
  tern_address at = tern_host_local_address(server);

  /* A token for this server, with user data. */
  tern_token_request req;
  memset(&req, 0, sizeof req);
  req.client_id = 42;
  req.servers = &at;
  req.server_count = 1;
  req.user_data = "room=9";
  req.user_data_length = 6;
  tern_connect_token token;
  CHECK(tern_token_mint(&key, &req, &token, err, sizeof err) == TERN_OK, "mint: %s", err);
  req.server_count = 0;
  tern_connect_token bad;
  CHECK(tern_token_mint(&key, &req, &bad, err, sizeof err) == TERN_ERROR && err[0] != '\0',
        "mint without servers refused: %s", err);
  req.server_count = 1;

  tern_peer server_peer = {0, 0};
  int server_connects = 0;
  tern_event ev;
  tern_peer peer = tern_host_connect_secure(client, &at, 2, 5, &token);
  CHECK(tern_peer_valid(peer), "connect_secure: %s", tern_host_last_error(client));
  CHECK(wait_client(server, client, TERN_EVENT_CONNECT, 10, &ev, &server_peer, &server_connects),
        "secure connect never completed");
  /* The server's connect event comes with the client's acknowledgement, after the client's. */
  {
    const double end = seconds() + 10;
    while (server_connects == 0 && seconds() < end) {
      wait_client(server, client, TERN_EVENT_NONE, 0.01, &ev, &server_peer, &server_connects);
    }
  }
  CHECK(server_connects == 1, "server connects: %d", server_connects);
  CHECK(tern_peer_secure(client, peer) == 1, "client side not secure");
  CHECK(tern_peer_secure(server, server_peer) == 1, "server side not secure");
  const uint8_t* ud = NULL;
  size_t ud_len = tern_peer_token_user_data(server, server_peer, &ud);
  CHECK(ud_len == 6 && ud != NULL && memcmp(ud, "room=9", 6) == 0, "user data: %zu bytes", ud_len);
  CHECK(tern_peer_token_user_data(client, peer, &ud) == 0 && ud == NULL,
        "a client has no token user data to read");

  /* 100 reliable messages of 1..1000 bytes, echoed: each comes back intact and in order. */
  enum { kMessages = 100 };
  unsigned char msg[1000];
  for (int i = 0; i < kMessages; ++i) {
    size_t len = 1 + (size_t)(i * 97) % sizeof msg;
    memset(msg, i, len);
    CHECK(tern_peer_send(client, peer, 1, msg, len, TERN_SEND_RELIABLE) == TERN_OK, "send %d", i);
  }
  int echoed = 0;
  while (echoed < kMessages &&
         wait_client(server, client, TERN_EVENT_RECEIVE, 10, &ev, &server_peer, &server_connects)) {
    size_t len = 1 + (size_t)(echoed * 97) % sizeof msg;
    memset(msg, echoed, len);
    CHECK(ev.length == len && memcmp(ev.data, msg, len) == 0 && ev.channel == 1,
          "echo %d: %zu bytes", echoed, ev.length);
    ++echoed;
  }
  CHECK(echoed == kMessages, "echoed %d of %d", echoed, kMessages);
  tern_peer_stats st;
  CHECK(tern_peer_get_stats(client, peer, &st) == TERN_OK && st.mtu < 1400,
        "a secure connection's MTU leaves room for the seal: %u", st.mtu);

  /* tern-token mint's line parses into the same token. */
  {
    char line[2 * (TERN_TOKEN_BYTES + 64) + 2];
    hex(token.sealed, TERN_TOKEN_BYTES, line);
    hex(token.client_to_server, 32, line + 2 * TERN_TOKEN_BYTES);
    hex(token.server_to_client, 32, line + 2 * TERN_TOKEN_BYTES + 64);
    strcat(line, "\n");
    tern_connect_token parsed;
    CHECK(tern_connect_token_parse(line, &parsed) == TERN_OK &&
              memcmp(&parsed, &token, sizeof token) == 0,
          "parse of the printed token");
    CHECK(tern_connect_token_parse("abcd", &parsed) == TERN_ERROR_INVALID_ARGUMENT,
          "a short line refused");
  }

  /* A client that does not offer AES-256-GCM: ChaCha20-Poly1305, the same echo. */
  {
    CHECK(tern_host_options_default().secure_aes == 1, "AES offered by default");
    tern_host* cc = make_client_with(0);
    if (cc == NULL) return 1;
    tern_connect_token t2;
    CHECK(tern_token_mint(&key, &req, &t2, err, sizeof err) == TERN_OK, "mint: %s", err);
    tern_peer p = tern_host_connect_secure(cc, &at, 2, 0, &t2);
    int before_cc = server_connects;
    CHECK(wait_client(server, cc, TERN_EVENT_CONNECT, 10, &ev, &server_peer, &server_connects),
          "ChaCha client never connected");
    CHECK(tern_peer_secure(cc, p) == 1, "ChaCha client not secure");
    CHECK(tern_peer_send(cc, p, 0, "chacha", 6, TERN_SEND_RELIABLE) == TERN_OK, "send");
    CHECK(wait_client(server, cc, TERN_EVENT_RECEIVE, 10, &ev, &server_peer, &server_connects) &&
              ev.length == 6 && memcmp(ev.data, "chacha", 6) == 0,
          "ChaCha echo");
    CHECK(server_connects == before_cc + 1, "server connects: %d", server_connects);
    tern_host_destroy(cc);
  }

  /* A token under another key, and a plain CONNECT: no answer, the attempts time out. */
  tern_token_key other;
  CHECK(tern_token_key_generate(7, &other) == TERN_OK, "generate");
  tern_connect_token forged;
  CHECK(tern_token_mint(&other, &req, &forged, err, sizeof err) == TERN_OK, "mint: %s", err);
  tern_host* c2 = make_client();
  tern_host* c3 = make_client();
  if (c2 == NULL || c3 == NULL) return 1;
  tern_peer p2 = tern_host_connect_secure(c2, &at, 2, 0, &forged);
  tern_peer p3 = tern_host_connect(c3, &at, 2, 0);
  CHECK(tern_peer_valid(p2) && tern_peer_valid(p3), "connects started");
  int before = server_connects;
  CHECK(wait_client(server, c2, TERN_EVENT_DISCONNECT, 30, &ev, &server_peer, &server_connects) &&
            ev.reason == TERN_REASON_TIMEOUT,
        "forged token: expected a timeout, reason %d", (int)ev.reason);
  CHECK(wait_client(server, c3, TERN_EVENT_DISCONNECT, 30, &ev, &server_peer, &server_connects) &&
            ev.reason == TERN_REASON_TIMEOUT,
        "plain connect: expected a timeout, reason %d", (int)ev.reason);
  CHECK(server_connects == before, "the server took a connection it must refuse");

  tern_host_destroy(c3);
  tern_host_destroy(c2);
  tern_host_destroy(client);
  tern_host_destroy(server);
  unlink(key_path);
  if (g_failures != 0) {
    printf("%d check(s) failed\n", g_failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
