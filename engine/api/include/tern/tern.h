/* tern.h: the C API of Tern, for other languages and engines.
 *
 * The shape of ENet's enet_host_* and enet_peer_* calls over tern::Host (tern/host.hpp): create
 * a host, connect, service it for events, send with delivery flags, disconnect in three ways,
 * read per-peer and per-host statistics. Pure C (C11), also usable from C++. Link with
 * `pkg-config --cflags --libs tern`.
 *
 *   tern_host* host = tern_host_create(NULL, "0.0.0.0:0", err, sizeof err);
 *   tern_address server;
 *   tern_address_parse("127.0.0.1:7777", &server);
 *   tern_peer peer = tern_host_connect(host, &server, 2, 0);
 *   tern_event ev;
 *   while (tern_host_service(host, &ev, 100) >= 0) {
 *     if (ev.type == TERN_EVENT_CONNECT)
 *       tern_peer_send(host, peer, 0, "hi", 2, TERN_SEND_RELIABLE);
 *     if (ev.type == TERN_EVENT_RECEIVE)
 *       printf("%.*s\n", (int)ev.length, (const char*)ev.data);
 *   }
 *   tern_host_destroy(host);
 *
 * Rules the whole API keeps:
 *  - A host is used by one thread at a time (as an ENetHost); hosts are independent.
 *  - No call throws or aborts: failures come back as a negative tern_result (or NULL / an
 *    invalid handle), and tern_host_last_error() says why in one line.
 *  - Peers are handles by value: a handle to a connection that has ended stays harmless (the
 *    generation no longer matches) and calls on it return TERN_ERROR_NOT_CONNECTED or do nothing.
 *  - A receive event's bytes (tern_event.data) belong to the host and stay valid until the next
 *    tern_host_service / tern_host_check_events / tern_host_destroy on it: copy what you keep.
 */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tern_host tern_host; /* opaque */

/* One connection on one host; compare with tern_peer_equal, test with tern_peer_valid. */
typedef struct tern_peer {
  uint32_t slot;
  uint32_t generation;
} tern_peer;

/* A UDP address: IPv6 bytes in network order (IPv4 as ::ffff:a.b.c.d) and a host-order port. */
typedef struct tern_address {
  uint8_t addr[16];
  uint16_t port;
} tern_address;

typedef enum tern_result {
  TERN_OK = 0,
  TERN_ERROR = -1, /* anything else: tern_host_last_error() says what */
  TERN_ERROR_INVALID_ARGUMENT = -2,
  TERN_ERROR_NOT_CONNECTED = -3, /* peer gone or not in the connected state */
  TERN_ERROR_BAD_CHANNEL = -4,   /* channel >= the connection's channel count */
  TERN_ERROR_TOO_LARGE = -5,     /* above max_packet_size, or more fragments than ENet allows */
  TERN_ERROR_QUEUE_FULL = -6,    /* the peer has max_queued bytes waiting: it is not keeping up */
  TERN_ERROR_NO_MEMORY = -7,
  TERN_ERROR_BLOCK_BUSY = -8 /* tern_peer_send_block: a block is still in flight on the channel */
} tern_result;

/* tern_peer_send_priority: when a message goes out relative to others queued to the peer
 * (sender side only; the wire is unchanged, plain ENet peers get it too). Higher first, lower
 * never starved; a message never passes an earlier one of its own channel. */
typedef enum tern_priority {
  TERN_PRIORITY_IMMEDIATE = 0, /* ahead of everything queued, and sent at once */
  TERN_PRIORITY_HIGH = 1,
  TERN_PRIORITY_MEDIUM = 2, /* tern_peer_send's */
  TERN_PRIORITY_LOW = 3     /* bulk */
} tern_priority;

/* Delivery flags for tern_peer_send, with ENet's values. 0 is unreliable and sequenced: late
 * messages are dropped, never delivered backwards. RELIABLE and UNSEQUENCED exclude each other.
 * Tern always sends an unreliable message larger than one datagram as unreliable fragments
 * (ENet does only with ENET_PACKET_FLAG_UNRELIABLE_FRAGMENT): the flag is accepted, for code
 * ported from ENet, and changes nothing. */
enum {
  TERN_SEND_RELIABLE = 1u << 0,
  TERN_SEND_UNSEQUENCED = 1u << 1,
  TERN_SEND_UNRELIABLE_FRAGMENT = 1u << 3,
  /* Tern's delivery modes (options.delivery_modes; between Tern peers that agreed, else plain
   * reliable): delivered on arrival, or on arrival if newer than any delivered on the channel.
   * Each includes TERN_SEND_RELIABLE (so `flags & TERN_SEND_RELIABLE` still tests a receive
   * event for reliability); the extra bit alone is refused. */
  TERN_SEND_RELIABLE_UNORDERED = (1u << 0) | (1u << 4),
  TERN_SEND_RELIABLE_SEQUENCED = (1u << 0) | (1u << 5)
};

typedef enum tern_event_type {
  TERN_EVENT_NONE = 0,
  TERN_EVENT_CONNECT = 1,
  TERN_EVENT_RECEIVE = 2,
  TERN_EVENT_DISCONNECT = 3,
  TERN_EVENT_RECEIPT = 4, /* tern_peer_send_with_receipt: the peer acknowledged the message */
  /* tern_peer_send_block: the peer refused the block on `channel` as above its cap, given in
   * user_data (bytes); the block is no longer in flight and is not delivered. */
  TERN_EVENT_BLOCK_REFUSED = 5
} tern_event_type;

typedef enum tern_disconnect_reason {
  TERN_REASON_NONE = 0,
  TERN_REASON_REMOTE = 1,        /* the other side disconnected */
  TERN_REASON_LOCAL = 2,         /* this side's tern_peer_disconnect(_later) completed */
  TERN_REASON_TIMEOUT = 3,       /* the peer stopped answering (or never answered a connect) */
  TERN_REASON_REFUSED = 4,       /* the handshake failed */
  TERN_REASON_REPLACED = 5,      /* a new connection from the same address superseded this one */
  TERN_REASON_EVICTED = 6,       /* dropped to keep buffered data under the host's memory cap */
  TERN_REASON_PROTOCOL_ERROR = 7 /* the peer broke the protocol, stranding acknowledged data */
} tern_disconnect_reason;

/* ENet's peer states, in ENet's order. */
typedef enum tern_peer_state {
  TERN_PEER_DISCONNECTED = 0,
  TERN_PEER_CONNECTING,
  TERN_PEER_ACKNOWLEDGING_CONNECT,
  TERN_PEER_CONNECTION_PENDING,
  TERN_PEER_CONNECTION_SUCCEEDED,
  TERN_PEER_CONNECTED,
  TERN_PEER_DISCONNECT_LATER,
  TERN_PEER_DISCONNECTING,
  TERN_PEER_ACKNOWLEDGING_DISCONNECT,
  TERN_PEER_ZOMBIE
} tern_peer_state;

typedef struct tern_event {
  tern_event_type type;
  tern_peer peer;
  tern_address address;          /* the peer's */
  uint8_t channel;               /* receive */
  uint32_t flags;                /* receive: TERN_SEND_* the message was sent with */
  tern_disconnect_reason reason; /* disconnect */
  uint32_t user_data;            /* connect and disconnect: the data the other side passed */
  const uint8_t* data;           /* receive: the message, owned by the host (see above) */
  size_t length;
} tern_event;

/* Per-channel switches (tern::ChannelOptions, README "HostOptions"): what the channels in
 * `channels` (bit c of channels[c / 64]) turn off of the extensions the host runs, for what
 * this host sends on them. 1 follows the host's switch, 0 turns it off there; a channel cannot
 * turn on what its host has off. Local choices: nothing on the wire changes. Start from
 * tern_channel_options_default(). */
typedef struct tern_channel_options {
  uint64_t channels[4];
  int fast_retransmit;    /* 0: a loss waits for its timeout */
  int nodelay;            /* 0: ENet's backoff and resend rule */
  int redundancy;         /* 0: never copied, its acks never repeated */
  int congestion_control; /* 0: neither paced nor windowed by it: ENet's window and throttle */
  int cc_express;         /* 0: small messages are scheduled and paced as bulk */
  int congestion_window;  /* 0: not held to the window regrowing after a stall */
  int delivery_modes;     /* 0: RELIABLE_UNORDERED/_SEQUENCED go as RELIABLE */
  /* tern_peer_send's and tern_peer_send_with_receipt's level (IMMEDIATE is taken as HIGH);
   * tern_host_create refuses a value that is not a tern_priority. */
  tern_priority priority;
} tern_channel_options;

/* At most this many channel rules in tern_host_options. */
#define TERN_MAX_CHANNEL_RULES 8

/* Host settings: start from tern_host_options_default() and change what you need. */
typedef struct tern_host_options {
  size_t peer_limit;
  uint32_t channel_limit;      /* channels accepted per connection, 1..255 */
  uint32_t incoming_bandwidth; /* bytes/s, 0 = unlimited */
  uint32_t outgoing_bandwidth;
  uint32_t mtu; /* clamped to 576..4096 */
  int checksum; /* ENet's CRC32 on every datagram; both sides must agree */
  uint32_t max_packet_size;
  uint32_t max_waiting_data;
  size_t memory_cap;
  size_t max_queued; /* per peer, bytes; 0 = no limit (TERN_ERROR_QUEUE_FULL past it) */
  uint32_t ping_interval_ms;
  uint32_t timeout_limit;
  uint32_t timeout_minimum_ms;
  uint32_t timeout_maximum_ms;
  uint64_t random_seed;      /* 0 = from the clock */
  int socket_receive_buffer; /* bytes */
  int socket_send_buffer;
  /* Tern's extensions. Each is 1 by default; 0 behaves exactly as ENet does. Only
   * selective_acks changes the wire, and only with a Tern peer that offers it too. */
  int selective_acks;           /* one command acknowledges up to 33 reliable commands */
  int fast_retransmit;          /* resend a command later acknowledgements show lost */
  int congestion_window;        /* after a stall, regrow the reliable window from one MTU */
  int throttle_reliable_window; /* ENet's throttle also scales the reliable window */
  /* Negotiated with Tern peers (a plain ENet peer never sees them): KCP's nodelay (0 by
   * default), reliable-unordered/-sequenced delivery (1), adaptive redundancy (0; both sides
   * must turn it on). Congestion control, blocks and the handshake's settings follow below. */
  int nodelay;
  int delivery_modes;
  int redundancy;
  int path_mtu; /* path MTU discovery with Tern peers (0 by default; both sides turn it on) */
  /* Offline discovery: answer discovery pings with tern_host_set_discovery_info's bytes (0 by
   * default), at most this many answers a second per address and per /24 (or /64) prefix. */
  int discovery;
  uint32_t discovery_rate_per_address;
  uint32_t discovery_rate_per_prefix;
  /* The extensions' knobs (tern::HostOptions has the details). */
  uint64_t nodelay_channels[4];       /* the channels nodelay covers, bit c of [c / 64]; 0: all */
  uint32_t nodelay_resend;            /* resend after this many later acks (2) */
  uint32_t redundancy_max_k;          /* copies per message at most (3) */
  uint32_t redundancy_budget_percent; /* extra bytes, % of the rest (30) */
  uint32_t redundancy_high_loss_budget_percent; /* the budget at 20% loss (30) */
  uint32_t redundancy_ack_repeats;              /* (2) */
  int congestion_control;    /* BBR-like pacing and window with Tern peers (1; both sides) */
  uint32_t cc_express_bytes; /* reliable messages up to this go ahead of bulk (256) */
  uint32_t cc_max_window;    /* bytes (8 MiB) */
  int blocks;                /* tern_peer_send_block as paced slices with Tern peers (1) */
  uint32_t max_block_size;   /* bytes of blocks in progress a peer may make this host hold */
  uint32_t block_rate;       /* bytes/s; 0: congestion control's pace, else 256 slices per RTT */
  uint32_t path_mtu_max;     /* path_mtu's ceiling, at most 4096 */
  int verify_before_peer;    /* no peer before the source answers a cookie (1) */
  size_t half_open_capacity;
  uint32_t half_open_timeout_ms;
  uint32_t idle_ping_intervals; /* idle keep-alive pings with Tern peers every n intervals (4) */
  /* Per-channel switches, applied in order (a channel named by several takes the last). */
  tern_channel_options channel_options[TERN_MAX_CHANNEL_RULES];
  size_t channel_option_count; /* at most TERN_MAX_CHANNEL_RULES */

  /* Secure sessions, as a listener (see "Secure sessions" below): the policy (tern_security,
   * TERN_SECURITY_PLAIN by default); the key file whose tokens are accepted (tern-token
   * keygen; NULL: none) and, while rotating keys, the previous one (NULL); the address
   * clients reach this host at, which their tokens must list ("host:port"; NULL: the bound
   * address, so a host bound to a wildcard needs it). The strings are read by tern_host_create,
   * which fails naming the file, line and reason when a key file cannot be read, and fails for a
   * policy other than plain without a key file. */
  int security;
  const char* token_key_file;
  const char* token_key_file_old;
  const char* secure_address;
  /* 1 (default): a secure connection encrypts with AES-256-GCM when both ends' CPUs have AES-NI
   * (agreed in the handshake), else ChaCha20-Poly1305; 0: always ChaCha20-Poly1305. */
  int secure_aes;
} tern_host_options;

/* Secure sessions (engine/protocol/WIRE.md, "Secure sessions"): a token issuer and the
 * servers share a key; the issuer mints a connect token per client, which the client sends
 * with its CONNECT, and every datagram of the connection is then encrypted and authenticated
 * (ChaCha20-Poly1305). Needs Tern built with libsodium: without it minting fails and a policy
 * other than plain refuses every token. */
typedef enum tern_security {
  TERN_SECURITY_PLAIN = 0,    /* ENet only: tokens are not read */
  TERN_SECURITY_OPTIONAL = 1, /* a client with a token is encrypted, any other (libenet) plain */
  TERN_SECURITY_REQUIRED = 2  /* token holders only; any other CONNECT gets no answer */
} tern_security;

enum { TERN_TOKEN_BYTES = 555, TERN_TOKEN_USER_DATA_MAX = 256, TERN_TOKEN_SERVERS_MAX = 8 };

/* The key a token issuer shares with the servers. */
typedef struct tern_token_key {
  uint32_t id;
  uint8_t key[32];
} tern_token_key;

/* What a client holds: the sealed token it sends, and its two session keys in clear. Keep it
 * as secret as a password until it expires. */
typedef struct tern_connect_token {
  uint8_t sealed[TERN_TOKEN_BYTES];
  uint8_t client_to_server[32];
  uint8_t server_to_client[32];
} tern_connect_token;

typedef struct tern_token_request {
  uint64_t client_id;
  const tern_address* servers; /* 1..TERN_TOKEN_SERVERS_MAX addresses it is valid for */
  size_t server_count;
  const void* user_data; /* up to TERN_TOKEN_USER_DATA_MAX bytes (tern-relay: "room=N") */
  size_t user_data_length;
  uint32_t valid_s;   /* seconds from now until it expires; 0: 30 */
  uint32_t timeout_s; /* the connection's idle timeout the server applies; 0: 10 */
} tern_token_request;

typedef struct tern_peer_stats {
  uint32_t rtt_ms; /* smoothed round-trip time */
  uint32_t rtt_variance_ms;
  uint32_t lowest_rtt_ms;
  uint32_t packet_loss; /* mean loss of reliable commands, scaled by 65536 */
  uint32_t packet_loss_variance;
  uint32_t packet_throttle; /* 0..32 */
  uint32_t packet_throttle_limit;
  uint32_t mtu;
  uint32_t window_size;
  uint32_t channel_count;
  uint64_t datagrams_sent;
  uint64_t datagrams_received;
  uint64_t bytes_sent;
  uint64_t bytes_received;
  uint64_t reliable_retransmits;
  uint64_t messages_sent;
  uint64_t messages_received;
  uint32_t reliable_in_transit; /* bytes sent and not yet acknowledged */
  uint32_t queued_outgoing;     /* commands waiting to be sent */
  int selective_acks;           /* 1 when both sides agreed on Tern's selective acks */
  int nodelay;                  /* 1 when immediate acks (nodelay) were agreed */
  int delivery_modes;           /* 1 when the peer honours reliable-unordered/-sequenced */
  int redundancy;               /* 1 when adaptive redundancy was agreed */
  uint32_t redundancy_k;        /* copies each reliable command gets now */
  uint64_t queued_bytes;        /* payload bytes queued, in flight or unacknowledged */
  /* The connection's settings (tern_peer_timeout, tern_peer_throttle_configure,
   * tern_peer_ping_interval, or the other side's throttle configuration). */
  uint32_t ping_interval_ms;
  uint32_t timeout_limit;
  uint32_t timeout_minimum_ms;
  uint32_t timeout_maximum_ms;
  uint32_t throttle_interval_ms;
  uint32_t throttle_acceleration;
  uint32_t throttle_deceleration;
  int congestion_control; /* 1 when congestion control was agreed */
  int blocks;             /* 1 when blocks go to this peer as paced slices */
  int path_mtu;           /* 1 when path MTU discovery was agreed (mtu is what it found) */
} tern_peer_stats;

typedef struct tern_host_stats {
  uint64_t datagrams_in;
  uint64_t bytes_in;
  uint64_t datagrams_out;
  uint64_t bytes_out;
  uint64_t messages_in;
  uint64_t messages_out;
  uint64_t connects;
  uint64_t disconnects;
  uint64_t timeouts;
  uint64_t retransmits;
  uint64_t dropped; /* datagrams and commands refused, every reason together */
  size_t peers;
  size_t buffered_bytes;
  uint64_t fast_retransmits;
  uint64_t redundant_sent;
  /* Offline discovery: pings received, answered, refused (off, banned, over a rate, queue
   * full), answers cut to fit their ping; this host's own pings and the answers they took. */
  uint64_t discovery_pings_in;
  uint64_t discovery_pongs_out;
  uint64_t discovery_refused;
  uint64_t discovery_truncated;
  uint64_t discovery_pings_out;
  uint64_t discovery_answers;
  uint64_t nodelay_resends;           /* of fast_retransmits: by nodelay's count of later acks */
  uint64_t redundant_unreliable_sent; /* of redundant_sent: unreliable or unsequenced */
  uint64_t paced_datagrams;           /* datagrams with bulk data sent under the pacer */
  uint64_t pacer_waits;               /* times the pacer held bulk back */
  uint64_t cwnd_limited;              /* times congestion control's window held bulk back */
  uint64_t blocks_sent;               /* large blocks wholly acknowledged */
  uint64_t blocks_received;
} tern_host_stats;

/* A server's answer to tern_host_discover. `info` belongs to the host and stays valid until
 * the next tern_host_poll_discovery / tern_host_service / tern_host_destroy on it. */
typedef struct tern_discovery_answer {
  tern_address address; /* the server's */
  uint32_t rtt_us;      /* from the ping leaving to this answer arriving */
  uint32_t nonce;       /* what tern_host_discover returned for the ping */
  int truncated;        /* the info was cut to the room the ping asked for */
  const uint8_t* info;
  size_t info_length;
} tern_discovery_answer;

/* "0.1.0": the library's version (not the header's). */
const char* tern_version(void);

tern_host_options tern_host_options_default(void);
/* Every switch 1 (the host's), priority MEDIUM, no channels. */
tern_channel_options tern_channel_options_default(void);

/* A host on a UDP socket bound to `bind`: "0.0.0.0:0" for a client, "*:PORT" for a dual-stack
 * server, "127.0.0.1:PORT", "[::1]:PORT". `options` NULL means the defaults. On failure returns
 * NULL and writes a one-line reason into `error` (when it is not NULL; cut to error_size). */
tern_host* tern_host_create(const tern_host_options* options, const char* bind, char* error,
                            size_t error_size);
void tern_host_destroy(tern_host* host); /* NULL is allowed; peers are dropped silently */

/* Why the last failed call on this host failed ("" when none has); valid until the next call. */
const char* tern_host_last_error(const tern_host* host);

/* Starts connecting with `channel_count` channels (1..255); the connect event (or a disconnect
 * with reason TIMEOUT or REFUSED) comes from tern_host_service. An invalid handle when the
 * peer limit is reached or an argument is bad. */
tern_peer tern_host_connect(tern_host* host, const tern_address* address, size_t channel_count,
                            uint32_t user_data);

/* Sends what is queued, receives, runs timers, and returns 1 with the next event in `event`,
 * waiting up to timeout_ms for one; 0 when none came in time; a negative tern_result on
 * error. Like enet_host_service. */
int tern_host_service(tern_host* host, tern_event* event, uint32_t timeout_ms);
/* An already-queued event without any I/O: 1, or 0 when there is none. */
int tern_host_check_events(tern_host* host, tern_event* event);
/* Sends everything queued now. */
void tern_host_flush(tern_host* host);

/* Queues `length` bytes (copied) on `channel`; they leave with the next service or flush.
 * TERN_OK or a negative tern_result. */
int tern_peer_send(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                   size_t length, uint32_t flags);
/* A reliable tern_peer_send and, once the peer has acknowledged the whole message, an event
 * TERN_EVENT_RECEIPT with user_data = `receipt` and the message's channel. None comes for a
 * message the connection ends before acknowledging (TERN_EVENT_DISCONNECT comes instead). */
int tern_peer_send_with_receipt(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                                size_t length, uint32_t receipt);
/* tern_peer_send at a priority; TERN_ERROR_INVALID_ARGUMENT for an unknown one. */
int tern_peer_send_priority(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                            size_t length, uint32_t flags, tern_priority priority);
/* A large block (copied), delivered to the peer as one reliable TERN_EVENT_RECEIVE once whole.
 * To a Tern peer: paced slices with a slice-ack bitfield, up to 64 MiB; one block per channel
 * at a time (TERN_ERROR_BLOCK_BUSY until the last is wholly acknowledged). A block above the
 * peer's cap ends with TERN_EVENT_BLOCK_REFUSED; once the peer named its cap, larger blocks
 * to it are TERN_ERROR_TOO_LARGE at once. A peer that acknowledges no slice for the maximum
 * timeout is disconnected (TIMEOUT). To a plain ENet peer: a reliable message in ENet
 * fragments, capped by max_packet_size. */
int tern_peer_send_block(tern_host* host, tern_peer peer, uint8_t channel, const void* data,
                         size_t length);
/* 1 while a block sent on the channel to the peer is not wholly acknowledged, else 0. */
int tern_peer_block_in_flight(tern_host* host, tern_peer peer, uint8_t channel);

/* Graceful: queued messages go first, then the disconnect; a disconnect event with reason
 * LOCAL follows once the other side acknowledges (or TIMEOUT). */
void tern_peer_disconnect(tern_host* host, tern_peer peer, uint32_t user_data);
/* At once: one notice to the other side and the peer is forgotten; no local event. */
void tern_peer_disconnect_now(tern_host* host, tern_peer peer, uint32_t user_data);
/* Once everything queued to the peer has been acknowledged, as tern_peer_disconnect. */
void tern_peer_disconnect_later(tern_host* host, tern_peer peer, uint32_t user_data);
/* Forgets the peer without telling it; no event. */
void tern_peer_reset(tern_host* host, tern_peer peer);

/* Per-peer settings, as enet_peer_timeout, enet_peer_throttle_configure (sent to the peer, which
 * adopts it, libenet too) and enet_peer_ping_interval; 0 restores a default. */
void tern_peer_timeout(tern_host* host, tern_peer peer, uint32_t limit, uint32_t minimum_ms,
                       uint32_t maximum_ms);
void tern_peer_throttle_configure(tern_host* host, tern_peer peer, uint32_t interval_ms,
                                  uint32_t acceleration, uint32_t deceleration);
void tern_peer_ping_interval(tern_host* host, tern_peer peer, uint32_t interval_ms);

/* Offline discovery. A server (options.discovery = 1) answers pings with `info` (copied, at
 * most 4078 bytes; change it at any time). A client pings `address` (a server, or a broadcast
 * address) asking for up to `info_room` bytes of info back, and takes the answers that came
 * while it serviced the host with tern_host_poll_discovery (1 with an answer, 0 when none
 * waits). tern_host_discover returns the ping's nonce, 0 on failure. A plain ENet server
 * ignores the ping. */
int tern_host_set_discovery_info(tern_host* host, const void* info, size_t length);
uint32_t tern_host_discover(tern_host* host, const tern_address* address, size_t info_room);
int tern_host_poll_discovery(tern_host* host, tern_discovery_answer* answer);

/* Secure sessions (see tern_security). A key from a key file (lines "id N" and "key <64 hex
 * digits>", as tern-token keygen writes); TERN_OK, or TERN_ERROR with file, line and reason in
 * `error`. */
int tern_token_key_load(const char* path, tern_token_key* key, char* error, size_t error_size);
/* A fresh random key with this id; TERN_ERROR without libsodium. */
int tern_token_key_generate(uint32_t id, tern_token_key* key);
/* Mints a connect token under `key` (the issuer's side; the clock is the system's). TERN_OK,
 * or TERN_ERROR with the reason in `error`. */
int tern_token_mint(const tern_token_key* key, const tern_token_request* request,
                    tern_connect_token* token, char* error, size_t error_size);
/* The line of hex `tern-token mint` prints; TERN_OK or TERN_ERROR_INVALID_ARGUMENT. */
int tern_connect_token_parse(const char* hex, tern_connect_token* token);
/* tern_host_connect with a connect token: everything both ways is encrypted. A server that
 * does not take the token (plain policy, another key, expired, not listed) never answers in a
 * way the client accepts: the attempt ends with a disconnect event of reason TIMEOUT. There is
 * no rekeying: a connection that sent 2^62 datagrams one way ends (reason REFUSED) rather than
 * reuse a nonce, which at 10 million datagrams a second takes 14,600 years. */
tern_peer tern_host_connect_secure(tern_host* host, const tern_address* address,
                                   size_t channel_count, uint32_t user_data,
                                   const tern_connect_token* token);
/* 1 when the connection is encrypted, else 0. */
int tern_peer_secure(const tern_host* host, tern_peer peer);
/* On a server, the user data of the client's token: its length, and *data pointed at bytes
 * valid until the next call on the host (0 and NULL for a plain connection). */
size_t tern_peer_token_user_data(const tern_host* host, tern_peer peer, const uint8_t** data);

/* TERN_OK, or TERN_ERROR_NOT_CONNECTED when the handle names no connection. */
int tern_peer_get_stats(const tern_host* host, tern_peer peer, tern_peer_stats* stats);
tern_peer_state tern_peer_get_state(const tern_host* host, tern_peer peer);
/* TERN_OK, or TERN_ERROR_NOT_CONNECTED when the handle names no connection. */
int tern_peer_get_address(const tern_host* host, tern_peer peer, tern_address* address);

int tern_peer_valid(tern_peer peer);
int tern_peer_equal(tern_peer a, tern_peer b);

void tern_host_get_stats(const tern_host* host, tern_host_stats* stats);
size_t tern_host_peer_count(const tern_host* host);
/* The address the host's socket is bound to (its port, when bound to port 0). */
tern_address tern_host_local_address(const tern_host* host);

/* "1.2.3.4:5", "[::1]:5", "localhost:5", "*:5"; TERN_OK or TERN_ERROR_INVALID_ARGUMENT. */
int tern_address_parse(const char* text, tern_address* address);
/* Writes "1.2.3.4:5" or "[::1]:5", cut to `size` and always terminated; returns the full
 * length, as snprintf does. */
size_t tern_address_format(const tern_address* address, char* out, size_t size);
/* An IPv4 address and port, both in host order. */
tern_address tern_address_ipv4(uint32_t host_order_addr, uint16_t port);

#ifdef __cplusplus
}
#endif

#endif /* TERN_TERN_H */
