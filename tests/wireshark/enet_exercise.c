/* enet-exercise: one libenet connection that puts every ENet 1.3 command on the wire, so a
 * capture of it can check the Wireshark dissector (tests/wireshark/README.md).
 *
 *   enet-exercise --connect HOST:PORT [--checksum]
 *
 * Against an echo server (tern-ping --serve): CONNECT carrying kConnectData, THROTTLE_CONFIGURE
 * with kThrottle*, PING, one message of each delivery (reliable, unreliable, unsequenced, a
 * reliable message cut into SEND_FRAGMENTs, an unreliable one cut into
 * SEND_UNRELIABLE_FRAGMENTs), every one echoed back, then BANDWIDTH_LIMIT (libenet sends it
 * after its first once-a-second bandwidth pass following a connect) and DISCONNECT carrying
 * kDisconnectData. The server's side adds VERIFY_CONNECT and the ACKNOWLEDGEs.
 *
 * Every payload byte is payload_byte(channel, i), so a check can recompute what it must see.
 * Exits 0 when every step completed, 1 when one did not within its deadline, 2 on bad
 * arguments.
 */
#define _POSIX_C_SOURCE 200809L

#include <enet/enet.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
  kChannels = 5,
  kSmall = 32,
  kLarge = 3000,       /* above the default MTU: fragments */
  kDeadlineMs = 30000, /* generous: fails only a hung exchange */
};
static const uint32_t kConnectData = 0x7E57DA7Au;
static const uint32_t kDisconnectData = 0x0000D15Cu;
static const uint32_t kThrottleInterval = 1000, kThrottleAcceleration = 3,
                      kThrottleDeceleration = 4;

struct send_spec {
  uint8_t channel;
  size_t size;
  enet_uint32 flags;
  const char* name;
};
/* Channel i carries exactly one message, so echoes are told apart by channel. */
static const struct send_spec kSends[] = {
    {0, kSmall, ENET_PACKET_FLAG_RELIABLE, "reliable"},
    {1, kSmall, 0, "unreliable"},
    {2, kSmall, ENET_PACKET_FLAG_UNSEQUENCED, "unsequenced"},
    {3, kLarge, ENET_PACKET_FLAG_RELIABLE, "reliable fragments"},
    {4, kLarge, ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT, "unreliable fragments"},
};
#define NUM_SENDS (sizeof kSends / sizeof kSends[0])

static uint8_t payload_byte(uint8_t channel, size_t i) {
  return (uint8_t)(0xA0u + channel * 16u + (unsigned)(i % 7u) + (unsigned)(i / 256u));
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int usage(void) {
  fprintf(stderr, "usage: enet-exercise --connect HOST:PORT [--checksum]\n");
  return 2;
}

static int fail(const char* what) {
  printf("FAIL: %s\n", what);
  return 1;
}

int main(int argc, char** argv) {
  const char* target = NULL;
  int checksum = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--connect") == 0 && i + 1 < argc) {
      target = argv[++i];
    } else if (strcmp(argv[i], "--checksum") == 0) {
      checksum = 1;
    } else {
      return usage();
    }
  }
  if (target == NULL) return usage();
  char host_text[256];
  const char* colon = strrchr(target, ':');
  if (colon == NULL || colon == target || (size_t)(colon - target) >= sizeof host_text) {
    return usage();
  }
  memcpy(host_text, target, (size_t)(colon - target));
  host_text[colon - target] = '\0';
  char* end = NULL;
  unsigned long port = strtoul(colon + 1, &end, 10);
  if (*end != '\0' || port == 0 || port > 65535) return usage();

  if (enet_initialize() != 0) return fail("enet_initialize");
  ENetAddress address;
  if (enet_address_set_host(&address, host_text) != 0) return fail("resolve host");
  address.port = (enet_uint16)port;
  ENetHost* host = enet_host_create(NULL, 1, kChannels, 0, 0);
  if (host == NULL) return fail("enet_host_create");
  if (checksum) host->checksum = enet_crc32;

  ENetPeer* peer = enet_host_connect(host, &address, kChannels, kConnectData);
  if (peer == NULL) return fail("enet_host_connect");
  const uint64_t deadline = now_ms() + kDeadlineMs;
  ENetEvent event;
  int connected = 0;
  while (!connected && now_ms() < deadline) {
    if (enet_host_service(host, &event, 50) > 0 && event.type == ENET_EVENT_TYPE_CONNECT) {
      connected = 1;
    }
  }
  if (!connected) return fail("connect");
  printf("connected\n");
  const enet_uint32 epoch_at_connect = host->bandwidthThrottleEpoch;

  enet_peer_throttle_configure(peer, kThrottleInterval, kThrottleAcceleration,
                               kThrottleDeceleration);
  enet_peer_ping(peer);
  for (size_t s = 0; s < NUM_SENDS; ++s) {
    ENetPacket* p = enet_packet_create(NULL, kSends[s].size, kSends[s].flags);
    if (p == NULL) return fail("enet_packet_create");
    for (size_t i = 0; i < kSends[s].size; ++i) p->data[i] = payload_byte(kSends[s].channel, i);
    if (enet_peer_send(peer, kSends[s].channel, p) != 0) return fail("enet_peer_send");
  }

  /* Done when every echo is back, libenet's bandwidth pass has run since the connect (it
   * queues BANDWIDTH_LIMIT then), and nothing reliable is left unacknowledged. */
  int echoed[NUM_SENDS] = {0};
  size_t echoes = 0;
  while (now_ms() < deadline) {
    const int bandwidth_done =
        host->bandwidthThrottleEpoch != epoch_at_connect && !host->recalculateBandwidthLimits;
    if (echoes == NUM_SENDS && bandwidth_done && enet_list_empty(&peer->sentReliableCommands) &&
        enet_list_empty(&peer->outgoingCommands)) {
      break;
    }
    if (enet_host_service(host, &event, 20) <= 0 || event.type != ENET_EVENT_TYPE_RECEIVE) {
      continue;
    }
    const uint8_t ch = event.channelID;
    int ok = ch < NUM_SENDS && !echoed[ch] && event.packet->dataLength == kSends[ch].size;
    for (size_t i = 0; ok && i < event.packet->dataLength; ++i) {
      ok = event.packet->data[i] == payload_byte(ch, i);
    }
    enet_packet_destroy(event.packet);
    if (!ok) return fail("an echo differs from what was sent");
    echoed[ch] = 1;
    ++echoes;
    printf("echo: %s\n", kSends[ch].name);
  }
  if (echoes != NUM_SENDS) return fail("not every message was echoed");
  if (now_ms() >= deadline) return fail("bandwidth pass or acknowledgements");

  enet_peer_disconnect(peer, kDisconnectData);
  int disconnected = 0;
  while (!disconnected && now_ms() < deadline) {
    if (enet_host_service(host, &event, 50) > 0) {
      if (event.type == ENET_EVENT_TYPE_DISCONNECT) disconnected = 1;
      if (event.type == ENET_EVENT_TYPE_RECEIVE) enet_packet_destroy(event.packet);
    }
  }
  if (!disconnected) return fail("disconnect");
  printf("disconnected\n");
  enet_host_destroy(host);
  enet_deinitialize();
  return 0;
}
