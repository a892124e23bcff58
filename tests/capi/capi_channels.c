/* capi_channels: the extension settings and per-channel switches of tern_host_options, from C,
 * over loopback. The defaults mirror tern::HostOptions; a client with congestion control off
 * is not agreed it; a rule turning delivery modes off on channel 1 sends RELIABLE_UNORDERED
 * there as RELIABLE while channel 0 keeps the mode; a rule turning the express lane off on
 * channel 0 has small reliable messages there paced, where a client without the rule sends
 * them past the pacer. Prints one line per failed check and exits 1 if any failed.
 */
#define _POSIX_C_SOURCE 200809L

#include <tern/tern.h>

#include "capi_check.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* What the server received, per channel: count and the flags of each message. */
typedef struct received {
  int count[2];
  uint32_t flags[2][64];
} received;

static void take(const tern_event* ev, received* got) {
  if (ev->type != TERN_EVENT_RECEIVE || ev->channel > 1) return;
  int* n = &got->count[ev->channel];
  if (*n < 64) got->flags[ev->channel][*n] = ev->flags;
  ++*n;
}

/* Services both hosts until `done` messages arrived at the server or `limit` seconds pass (a
 * hang guard: nothing asserts on how long it took). */
static void pump(tern_host* client, tern_host* server, received* got, int done, double limit) {
  const double end = seconds() + limit;
  tern_event ev;
  while (seconds() < end && got->count[0] + got->count[1] < done) {
    while (tern_host_service(server, &ev, 1) == 1) take(&ev, got);
    while (tern_host_service(client, &ev, 1) == 1) {
    }
  }
}

/* Connects `client` to `server`; returns the server as the client sees it (invalid on failure). */
static tern_peer connect_to(tern_host* client, tern_host* server) {
  tern_address at = tern_host_local_address(server);
  tern_address to = tern_address_ipv4(0x7f000001, at.port);
  tern_peer peer = tern_host_connect(client, &to, 2, 0);
  int client_up = 0, server_up = 0;
  const double end = seconds() + 10.0;
  tern_event ev;
  while (seconds() < end && !(client_up && server_up)) {
    if (tern_host_service(server, &ev, 1) == 1 && ev.type == TERN_EVENT_CONNECT) server_up = 1;
    if (tern_host_service(client, &ev, 1) == 1 && ev.type == TERN_EVENT_CONNECT) client_up = 1;
  }
  if (!client_up || !server_up) {
    tern_peer invalid = {0, 0};
    return invalid;
  }
  return peer;
}

int main(void) {
  char err[256];
  tern_host_options d = tern_host_options_default();
  CHECK(d.congestion_control == 1 && d.cc_express_bytes == 256 && d.cc_max_window == 8u << 20,
        "congestion control defaults %d %u %u", d.congestion_control, d.cc_express_bytes,
        d.cc_max_window);
  CHECK(d.blocks == 1 && d.max_block_size == 64u << 20 && d.block_rate == 0, "block defaults");
  CHECK(d.redundancy_max_k == 3 && d.redundancy_budget_percent == 30 &&
            d.redundancy_high_loss_budget_percent == 30 && d.redundancy_ack_repeats == 2,
        "redundancy defaults");
  CHECK(d.nodelay_resend == 2 && d.nodelay_channels[0] == 0, "nodelay defaults");
  CHECK(d.path_mtu_max == 4096 && d.verify_before_peer == 1 && d.half_open_capacity == 65536 &&
            d.half_open_timeout_ms == 10000 && d.idle_ping_intervals == 4,
        "pmtu and handshake defaults");
  CHECK(d.channel_option_count == 0, "no channel rules by default");
  tern_channel_options c = tern_channel_options_default();
  CHECK(c.fast_retransmit == 1 && c.nodelay == 1 && c.redundancy == 1 &&
            c.congestion_control == 1 && c.cc_express == 1 && c.congestion_window == 1 &&
            c.delivery_modes == 1 && c.priority == TERN_PRIORITY_MEDIUM,
        "channel option defaults");

  /* A rule's priority outside the enumerators, or more rules than there is room for, is
   * refused by name. */
  tern_host_options bad = tern_host_options_default();
  bad.channel_options[0] = tern_channel_options_default();
  bad.channel_options[0].channels[0] = 1u;
  bad.channel_options[0].priority = (tern_priority)9;
  bad.channel_option_count = 1;
  CHECK(tern_host_create(&bad, "127.0.0.1:0", err, sizeof err) == NULL &&
            strstr(err, "channel_options[0].priority") != NULL,
        "unknown priority accepted (%s)", err);
  bad.channel_options[0].priority = TERN_PRIORITY_LOW;
  bad.channel_option_count = TERN_MAX_CHANNEL_RULES + 1;
  CHECK(tern_host_create(&bad, "127.0.0.1:0", err, sizeof err) == NULL &&
            strstr(err, "channel_option_count") != NULL,
        "too many rules accepted (%s)", err);

  tern_host* server = tern_host_create(NULL, "127.0.0.1:0", err, sizeof err);
  CHECK(server != NULL, "%s", err);

  /* Delivery modes off on channel 1, the express lane off on channel 0. */
  tern_host_options ro = tern_host_options_default();
  ro.channel_options[0] = tern_channel_options_default();
  ro.channel_options[0].channels[0] = 1u << 1;
  ro.channel_options[0].delivery_modes = 0;
  ro.channel_options[1] = tern_channel_options_default();
  ro.channel_options[1].channels[0] = 1u << 0;
  ro.channel_options[1].cc_express = 0;
  ro.channel_option_count = 2;
  tern_host* ruled = tern_host_create(&ro, "127.0.0.1:0", err, sizeof err);
  CHECK(ruled != NULL, "%s", err);
  tern_host* plain = tern_host_create(NULL, "127.0.0.1:0", err, sizeof err);
  CHECK(plain != NULL, "%s", err);
  tern_host_options no_cc = tern_host_options_default();
  no_cc.congestion_control = 0;
  tern_host* without_cc = tern_host_create(&no_cc, "127.0.0.1:0", err, sizeof err);
  CHECK(without_cc != NULL, "%s", err);
  if (server == NULL || ruled == NULL || plain == NULL || without_cc == NULL) return 1;

  tern_peer to_ruled = connect_to(ruled, server);
  tern_peer to_plain = connect_to(plain, server);
  tern_peer to_without = connect_to(without_cc, server);
  CHECK(tern_peer_valid(to_ruled) && tern_peer_valid(to_plain) && tern_peer_valid(to_without),
        "connect");

  tern_peer_stats ps;
  CHECK(tern_peer_get_stats(ruled, to_ruled, &ps) == TERN_OK && ps.congestion_control == 1 &&
            ps.delivery_modes == 1 && ps.blocks == 1,
        "agreed: cc %d, modes %d, blocks %d", ps.congestion_control, ps.delivery_modes, ps.blocks);
  CHECK(tern_peer_get_stats(without_cc, to_without, &ps) == TERN_OK && ps.congestion_control == 0,
        "congestion control agreed although off");

  /* A mode's bit without RELIABLE, or both modes, is refused. */
  CHECK(tern_peer_send(ruled, to_ruled, 0, "x", 1,
                       TERN_SEND_RELIABLE_UNORDERED & ~(uint32_t)TERN_SEND_RELIABLE) ==
            TERN_ERROR_INVALID_ARGUMENT,
        "a mode without RELIABLE accepted");
  CHECK(tern_peer_send(ruled, to_ruled, 0, "x", 1,
                       TERN_SEND_RELIABLE_UNORDERED | TERN_SEND_RELIABLE_SEQUENCED) ==
            TERN_ERROR_INVALID_ARGUMENT,
        "both modes accepted");

  received got;
  memset(&got, 0, sizeof got);
  enum { kEach = 20 };
  char msg[100];
  memset(msg, 'm', sizeof msg);
  for (int i = 0; i < kEach; ++i) {
    CHECK(tern_peer_send(ruled, to_ruled, 0, msg, sizeof msg, TERN_SEND_RELIABLE_UNORDERED) ==
              TERN_OK,
          "send 0");
    CHECK(tern_peer_send(ruled, to_ruled, 1, msg, sizeof msg, TERN_SEND_RELIABLE_UNORDERED) ==
              TERN_OK,
          "send 1");
  }
  pump(ruled, server, &got, 2 * kEach, 10.0);
  CHECK(got.count[0] == kEach && got.count[1] == kEach, "received %d and %d", got.count[0],
        got.count[1]);
  for (int i = 0; i < kEach && i < got.count[0]; ++i) {
    CHECK(got.flags[0][i] == TERN_SEND_RELIABLE_UNORDERED, "channel 0 flags %#x", got.flags[0][i]);
  }
  for (int i = 0; i < kEach && i < got.count[1]; ++i) {
    CHECK(got.flags[1][i] == TERN_SEND_RELIABLE, "channel 1 flags %#x", got.flags[1][i]);
  }
  tern_host_stats hs;
  tern_host_get_stats(ruled, &hs);
  CHECK(hs.paced_datagrams > 0, "small messages on channel 0 not paced without the express lane");

  memset(&got, 0, sizeof got);
  for (int i = 0; i < kEach; ++i) {
    CHECK(tern_peer_send(plain, to_plain, 0, msg, sizeof msg, TERN_SEND_RELIABLE) == TERN_OK,
          "send plain");
  }
  pump(plain, server, &got, kEach, 10.0);
  CHECK(got.count[0] == kEach, "received %d", got.count[0]);
  tern_host_get_stats(plain, &hs);
  CHECK(hs.paced_datagrams == 0, "%llu datagrams paced on the express lane",
        (unsigned long long)hs.paced_datagrams);

  tern_host_destroy(without_cc);
  tern_host_destroy(plain);
  tern_host_destroy(ruled);
  tern_host_destroy(server);
  if (g_failures == 0) printf("capi_channels: all checks passed\n");
  return g_failures == 0 ? 0 : 1;
}
