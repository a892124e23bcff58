// tern::Host: a single-threaded ENet-compatible host over one driver.
//
// The shape of enet_host_*: create, connect, send, service with events, disconnect variants.
//
//   std::string err;
//   auto host = tern::Host::listen(tern::HostOptions{}, *tern::Endpoint::parse("*:7777"), err);
//   tern::Event ev;
//   while (running) {
//     if (!host->service(ev, std::chrono::milliseconds(100))) continue;
//     if (ev.type == tern::EventType::receive)
//       host->send(ev.peer, ev.channel, ev.delivery, ev.packet);   // echo
//   }
#pragma once

#include <tern/endpoint.hpp>
#include <tern/packet.hpp>
#include <tern/secure.hpp>
#include <tern/types.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tern {

namespace rt {
class Driver;
class Clock;
}  // namespace rt

// Which wire protocol a host speaks (DESIGN §3.4). One host speaks one; a server offering both
// runs two hosts on separate ports.
enum class Personality : std::uint8_t {
  enet,  // ENet 1.3, byte for byte
  kcp,   // KCP segments (kcp-go plain and FEC framing): engine/protocol/kcp/README.md
};

// The KCP personality's settings (ikcp's names; engine/protocol/kcp/README.md).
struct KcpOptions {
  std::uint32_t snd_wnd = 128;
  std::uint32_t rcv_wnd = 128;
  int nodelay = 1;
  std::uint32_t interval_ms = 10;
  std::uint32_t fast_resend = 2;
  bool no_cwnd = true;
  bool stream = false;
  bool send_fec = false;  // frame what this host sends with kcp-go's FEC data-shard header
  std::uint32_t dead_link = 20;
  std::uint32_t idle_timeout_ms = 30000;
};

// Secure sessions per listener (WIRE.md, "Secure sessions"): plain: ENet only, tokens
// ignored; optional: a Tern client with a connect token gets an encrypted connection, any
// other client (libenet) a plain one; required: only token holders connect.
enum class Security : std::uint8_t { plain, optional, required };

struct HostOptions {
  std::size_t peer_limit = 4096;
  std::uint32_t channel_limit = 255;
  std::uint32_t incoming_bandwidth = 0;  // bytes/s, 0 = unlimited
  std::uint32_t outgoing_bandwidth = 0;
  std::uint32_t mtu = 1400;
  bool checksum = false;  // ENet's CRC32 mode (enet_crc32); both sides must enable it
  std::uint32_t max_packet_size = 32u << 20;
  std::uint32_t max_waiting_data = 32u << 20;
  std::size_t memory_cap = std::size_t{512} << 20;
  // Per peer: payload bytes queued, in flight or unacknowledged beyond which send() returns
  // SendResult::queue_full (0 = no limit, as in ENet).
  std::size_t max_queued = 0;
  std::uint32_t ping_interval_ms = 500;
  std::uint32_t timeout_limit = 32;
  std::uint32_t timeout_minimum_ms = 5000;
  std::uint32_t timeout_maximum_ms = 30000;
  std::uint64_t random_seed = 0;  // 0 = seeded from the clock
  // Tern's extensions (proto::HostConfig has the details); false behaves exactly as ENet.
  // Only selective_acks, nodelay and delivery_modes show on the wire (in a hello a plain ENet
  // peer ignores).
  bool selective_acks = true;            // one command acknowledges up to 33 reliable ones
  bool fast_retransmit = true;           // resend what later acknowledgements show lost
  bool congestion_window = true;         // after a stall, regrow the window from one MTU
  bool throttle_reliable_window = true;  // ENet's throttle also scales the reliable window
  // KCP's nodelay: timeouts grow x1.5, not x2; resend after `nodelay_resend` later acks; no
  // throttle on the reliable window; a Tern peer acknowledges at once. nodelay_channels
  // limits it to some channels (bit c of word c / 64; all zero: every channel).
  bool nodelay = false;
  std::array<std::uint64_t, 4> nodelay_channels{};
  std::uint32_t nodelay_resend = 2;
  // Delivery::reliable_unordered/_sequenced honoured between Tern peers (else sent as reliable).
  bool delivery_modes = true;
  // With Personality::kcp, sessions are connections: connect(address, _, conv) opens one with
  // conversation `conv` (its connect event comes with the peer's first reply), events carry the
  // conv as `data`, every message is reliable and ordered (channel and delivery are ignored),
  // and disconnect/reset forget the session without a word (KCP has none). peer_limit caps
  // sessions, mtu is the datagram size.
  Personality personality = Personality::enet;
  KcpOptions kcp;
  // Adaptive redundancy between Tern peers (both must turn it on): each datagram carries again
  // the last K unacknowledged reliable messages and repeats recent ack ranges; K follows the
  // measured loss (0 on a clean path) up to redundancy_max_k, and the extra bytes stay within
  // redundancy_budget_percent of the rest, or, with redundancy_high_loss_budget_percent above
  // it, a budget rising with the measured loss to that at 20% (fewer late messages at heavy
  // loss, more bytes at moderate loss).
  bool redundancy = false;
  std::uint32_t redundancy_max_k = 3;
  std::uint32_t redundancy_budget_percent = 30;
  std::uint32_t redundancy_high_loss_budget_percent = 30;
  std::uint32_t redundancy_ack_repeats = 2;
  // Large blocks between Tern peers (send_block; WIRE.md, "Large blocks"): paced slices with a
  // slice-ack bitfield. A receiver holds at most max_block_size bytes of blocks in progress
  // per peer, and refuses a larger block with an answer naming its cap (the sender gets
  // EventType::block_refused). block_rate is the sender's pace in bytes/s; 0: congestion
  // control's pacing rate where both sides run it, else 256 slices per round trip.
  bool blocks = true;
  std::uint32_t max_block_size = 64u << 20;
  std::uint32_t block_rate = 0;
  // Congestion control with pacing between Tern peers (both must leave it on): a BBR-like
  // model of the path's bandwidth and RTT paces bulk reliable data and sizes its window (past
  // ENet's 64 KiB); reliable messages of at most cc_express_bytes go ahead of bulk, past the
  // pacer. With plain ENet peers, ENet's throttle as before.
  bool congestion_control = true;
  std::uint32_t cc_express_bytes = 256;
  std::uint32_t cc_max_window = 8u << 20;
  // Per-channel switches for the extensions above (ChannelRule). nodelay_channels still
  // limits nodelay as before; a rule with nodelay = false takes a channel out of it too.
  // Read once, when the host is made.
  std::vector<ChannelRule> channel_options;
  // The handshake under attack (proto::HostConfig; WIRE.md, "Handshake under attack"). Under a
  // flood of R CONNECTs/s a handshake's entry lives about half_open_capacity / R seconds: keep
  // that above a second, so that a client whose acknowledgement was lost completes with its
  // first ping (ENet pings after 500 ms).
  bool verify_before_peer = true;
  std::size_t half_open_capacity = 65536;
  std::uint32_t half_open_timeout_ms = 10000;
  // Idle pings with Tern peers (WIRE.md, feature bit 5): an idle connection's keep-alive ping
  // every this many ping intervals instead of every one, several times fewer datagrams per idle
  // peer; a dead peer is noticed up to (n - 1) intervals later. 0 or 1: ENet's interval.
  std::uint32_t idle_ping_intervals = 4;
  // Offline discovery (WIRE.md, "Discovery"): answer discovery pings from anyone with the
  // bytes of set_discovery_info(), never more than the ping's size, at most
  // discovery_rate_per_address answers a second per address (any port) and
  // discovery_rate_per_prefix per /24 (IPv4) or /64 (IPv6), bursts of twice that; 0 = no
  // limit. Banned addresses get nothing. Off by default; discover() works either way.
  bool discovery = false;
  // Path MTU discovery between Tern peers (both must turn it on; WIRE.md, "Path MTU
  // discovery"): probe upward from the negotiated MTU (and below it when even that is lost)
  // to path_mtu_max (at most 4096) and send with the largest size that gets through
  // (PeerStats::mtu). Plain ENet peers keep the negotiated MTU.
  bool path_mtu = false;
  std::uint32_t path_mtu_max = 4096;
  double discovery_rate_per_address = 4;
  double discovery_rate_per_prefix = 64;
  // Secure sessions: the policy, the token keys accepted (tern-token keygen; the first two:
  // the current key and, while rotating, the previous one) and the addresses clients connect
  // to, one of which a token must list (empty: the bound address). Token expiry is checked
  // against the system clock.
  Security security = Security::plain;
  std::vector<TokenKey> token_keys;
  std::vector<Endpoint> secure_addresses;
  // Encrypt with AES-256-GCM instead of ChaCha20-Poly1305 when both ends' CPUs have AES-NI
  // (agreed in the handshake; false: never offer or accept it).
  bool secure_aes = true;
  // Socket hosts only.
  int socket_receive_buffer = 4 << 20;
  int socket_send_buffer = 4 << 20;
};

struct HostStats {
  std::uint64_t datagrams_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t datagrams_out = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t messages_in = 0;
  std::uint64_t messages_out = 0;
  std::uint64_t connects = 0;
  std::uint64_t disconnects = 0;
  std::uint64_t timeouts = 0;
  std::uint64_t retransmits = 0;
  std::uint64_t fast_retransmits = 0;  // resent before their timeout: later acks showed them lost
  std::uint64_t nodelay_resends = 0;   // of which by nodelay's count of later acks
  std::uint64_t redundant_sent = 0;    // copies of unacknowledged reliable messages (redundancy)
  std::uint64_t redundant_unreliable_sent = 0;  // of which unreliable or unsequenced
  std::uint64_t acks_repeated = 0;              // ack ranges written again (redundancy)
  std::uint64_t repeated_acks_useful = 0;       // of which acknowledged something still in flight
  std::uint64_t blocks_sent = 0;          // large blocks wholly acknowledged by their receiver
  std::uint64_t blocks_received = 0;      // large blocks delivered here
  std::uint64_t block_slices_sent = 0;    // their slices sent, resends included
  std::uint64_t block_slices_resent = 0;  // of which resends
  std::uint64_t blocks_refused = 0;       // sent blocks the peer refused as above its cap (events)
  std::uint64_t block_timeouts = 0;       // peers timed out for acknowledging no slice of ours
  std::uint64_t paced_datagrams = 0;      // datagrams with bulk data sent under the pacer
  std::uint64_t pacer_waits = 0;          // times the pacer held bulk for a later wake-up
  std::uint64_t cwnd_limited = 0;         // times congestion control's window held bulk back
  std::uint64_t duplicates_received = 0;  // messages received again, not delivered (duplicate)
  std::uint64_t dropped = 0;              // sum of drops_by_reason
  std::size_t peers = 0;
  std::size_t buffered_bytes = 0;
  // Handshakes from sources not yet verified (WIRE.md, "Handshake under attack").
  std::size_t half_open = 0;               // held now
  std::uint64_t half_open_created = 0;     // CONNECTs from unknown sources
  std::uint64_t cookies_sent = 0;          // VERIFY_CONNECTs to them
  std::uint64_t peers_promoted = 0;        // acknowledged: peers made
  std::uint64_t amplification_capped = 0;  // replies withheld: more than the source sent
  std::uint64_t unverified_bytes_in = 0;   // from unverified sources
  std::uint64_t unverified_bytes_out = 0;  // to them
  // Offline discovery (HostOptions::discovery): pings received and their bytes, answered and
  // the answers' bytes (never more than the pings'), answers with the info cut to fit,
  // pings refused (off, banned, over a rate, malformed, queue full) and of which over a rate;
  // our own pings (discover()) and the answers they took.
  std::uint64_t discovery_pings_in = 0;
  std::uint64_t discovery_bytes_in = 0;
  std::uint64_t discovery_pongs_out = 0;
  std::uint64_t discovery_bytes_out = 0;
  std::uint64_t discovery_truncated = 0;
  std::uint64_t discovery_refused = 0;
  std::uint64_t discovery_rate_limited = 0;
  std::uint64_t discovery_pings_out = 0;
  std::uint64_t discovery_answers = 0;
  // Path MTU discovery: probes sent, lost, answered for the peer; sizes adopted; MTUs lowered.
  std::uint64_t pmtu_probes_sent = 0;
  std::uint64_t pmtu_probes_lost = 0;
  std::uint64_t pmtu_probes_answered = 0;
  std::uint64_t pmtu_raised = 0;
  std::uint64_t pmtu_lowered = 0;
  std::vector<std::pair<const char*, std::uint64_t>> drops_by_reason;  // non-zero only
};

class Host {
 public:
  // A host on a kernel UDP socket bound to `bind` ("0.0.0.0:0" for a client, "*:PORT" for a
  // dual-stack server). Returns nullptr with a one-line reason in `error` on failure.
  static std::unique_ptr<Host> listen(const HostOptions& options, const Endpoint& bind,
                                      std::string& error);
  // A host over any driver, with the clock that driver's time runs on (the sim network is
  // its own clock). The clock must outlive the host.
  static std::unique_ptr<Host> over(const HostOptions& options, std::unique_ptr<rt::Driver> driver,
                                    rt::Clock& clock);
  ~Host();
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;

  // Starts connecting; the connect event (or a disconnect with reason timeout/refused)
  // arrives through service(). Invalid handle if the peer limit is reached.
  PeerHandle connect(const Endpoint& address, std::size_t channel_count, std::uint32_t data = 0);
  // connect() with a connect token (tern/secure.hpp, mint_token): every datagram of the
  // connection is encrypted. A server that does not take the token leaves it to time out.
  // No rekeying: after 2^62 datagrams one way the connection ends (reason refused) rather than
  // reuse a nonce (WIRE.md, "Secure sessions").
  PeerHandle connect_secure(const Endpoint& address, std::size_t channel_count, std::uint32_t data,
                            const ConnectToken& token);
  // At the channel's default level (ChannelOptions::priority: medium unless a rule says).
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload);
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                  std::span<const std::byte> payload);
  // send(), and an event of type receipt (data = `receipt`, channel = `channel`) once the peer
  // has acknowledged the whole message. Reliable deliveries only (else not_reliable), ENet
  // personality only (KCP: not_reliable). No receipt comes for a message the connection ends
  // before acknowledging: the disconnect event comes instead. Works with plain ENet peers.
  SendResult send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                               Packet payload, std::uint32_t receipt, Priority priority);
  // At the channel's default level (ChannelOptions::priority), as send() without one.
  SendResult send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                               Packet payload, std::uint32_t receipt);
  // send() at a priority (README, "Priorities"): under a backlog, higher levels go first and
  // lower ones are never starved; a message never passes an earlier one of its own channel.
  // Priority::immediate also sends at once (as flush()). Nothing on the wire changes: plain
  // ENet peers get it too. KCP personality: as send().
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload,
                  Priority priority);
  // A large block, delivered to the peer as one receive event (reliable) once whole. To a
  // Tern peer: paced slices sized to the MTU with a slice-ack bitfield, up to
  // HostOptions::max_block_size (too_large above), one block per channel at a time
  // (block_busy until the previous one is wholly acknowledged: block_in_flight). A block above
  // the receiver's cap ends with an EventType::block_refused event naming the cap; from then
  // on larger blocks to that peer are too_large at once. A peer that acknowledges none of
  // our slices for timeout_maximum is disconnected (DisconnectReason::timeout). To a plain
  // ENet peer: a reliable message in ENet fragments, capped by max_packet_size.
  SendResult send_block(PeerHandle peer, std::uint8_t channel, Packet block);
  bool block_in_flight(PeerHandle peer, std::uint8_t channel) const;
  // Refuses handshakes from `address` (every port) for `duration`; connections already made
  // from it stay (disconnect them to end them). See proto::HostCore::ban.
  void ban(const Endpoint& address, std::chrono::milliseconds duration);
  void unban(const Endpoint& address);
  // Offline discovery (WIRE.md, "Discovery"). A server with HostOptions::discovery answers
  // discovery pings with `info` (copied; at most 4,078 bytes; it may change at any time, e.g.
  // a player count). A client pings `address` (one server, or a broadcast address such as
  // 255.255.255.255:PORT: socket hosts set SO_BROADCAST) asking for up to `info_room` bytes
  // of info back (the ping is padded to that size, as answers are never larger than pings;
  // at most the MTU's worth); the answers arrive while service() runs and are taken with
  // poll_discovery, each with its RTT. Returns the ping's nonce (answers carry it), 0 when
  // too many wait to be sent. A plain ENet server ignores the ping. ENet personality only.
  void set_discovery_info(std::span<const std::byte> info);
  std::uint32_t discover(const Endpoint& address, std::size_t info_room = 512);
  bool poll_discovery(DiscoveryAnswer& answer);
  // Per-peer settings, as enet_peer_timeout, enet_peer_throttle_configure and
  // enet_peer_ping_interval. Timeouts: a connection fails once a command was resent until
  // 2^(attempts-1) >= `limit` and waited `minimum_ms`, or waited `maximum_ms` regardless (0
  // restores ENet's default for that value). The throttle's settings are used here and sent
  // to the peer (THROTTLE_CONFIGURE), which a plain ENet peer adopts too. No effect on stale
  // handles or the KCP personality.
  void set_peer_timeout(PeerHandle peer, std::uint32_t limit, std::uint32_t minimum_ms,
                        std::uint32_t maximum_ms);
  void set_peer_throttle(PeerHandle peer, std::uint32_t interval_ms, std::uint32_t acceleration,
                         std::uint32_t deceleration);
  void set_peer_ping_interval(PeerHandle peer, std::uint32_t interval_ms);
  void disconnect(PeerHandle peer, std::uint32_t data = 0);
  void disconnect_now(PeerHandle peer, std::uint32_t data = 0);  // sends at once, no local event
  void disconnect_later(PeerHandle peer, std::uint32_t data = 0);
  void reset(PeerHandle peer);

  // Sends what is queued, receives what has arrived, runs timers; returns the next event,
  // waiting up to `timeout` for one (like enet_host_service). False when none came in time.
  bool service(Event& event, std::chrono::microseconds timeout);
  // Returns an already-queued event without doing any I/O (like enet_host_check_events).
  bool check_events(Event& event);
  // Sends everything queued now (like enet_host_flush).
  void flush();

  bool peer_stats(PeerHandle peer, PeerStats& out) const;
  PeerState peer_state(PeerHandle peer) const;
  Endpoint peer_address(PeerHandle peer) const;
  // Secure sessions: whether the connection is encrypted; on a server, the user data of the
  // client's token (empty otherwise).
  bool peer_secure(PeerHandle peer) const;
  std::span<const std::uint8_t> peer_user_data(PeerHandle peer) const;
  std::size_t peer_count() const;
  HostStats stats() const;
  Endpoint local_endpoint() const;
  std::uint64_t now_us() const;  // the host's clock
  // When the host next has timer work (retransmit, ping, timeout), on its clock; UINT64_MAX
  // when idle. Lets a caller on virtual time (the sim network) advance exactly that far.
  std::uint64_t next_deadline_us() const;

 private:
  struct Impl;
  explicit Host(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern
