// tern::proto::HostCore: the sans-I/O ENet 1.3 host.
//
// It consumes datagrams and the current time, and produces datagrams, events and its next
// deadline. It never makes a system call, never reads a clock and never blocks; the caller
// (tern::Host, a runtime shard, a test on simulated time) owns I/O and time.
//
//   core.on_datagram(now, from, bytes);        // for every datagram received
//   while (core.poll_event(ev)) handle(ev);     // connect / receive / disconnect
//   core.send(peer, channel, delivery, packet); // application traffic
//   n = core.flush(now, batch);                 // timers + datagrams to transmit
//   sleep_until(core.next_deadline_us());
//
// Peers are keyed by source address (IPv4/IPv6 alike); the 12-bit peer ID is kept on the
// wire for ENet's sake but does not limit the number of peers.
#pragma once

#include "drop.hpp"
#include "secure/secure.hpp"
#include "wire.hpp"

#include <tern/endpoint.hpp>
#include <tern/packet.hpp>
#include <tern/types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace tern::proto {

// Secure sessions (WIRE.md, "Secure sessions"), per listener: plain: ENet only, tokens are
// ignored; optional: a Tern client with a connect token gets an encrypted connection, any
// other client a plain one; required: only token holders connect.
enum class Security : std::uint8_t { plain, optional, required };

// A set of channel IDs, one bit each: bit c of word c / 64.
using ChannelSet = ChannelMask;

constexpr bool in_channel_set(const ChannelSet& set, std::uint8_t channel) {
  return ((set[channel / 64] >> (channel % 64)) & 1) != 0;
}

// Per-channel switches (HostConfig::channels): the channels on which an extension the host
// runs is off for what this host sends. Each is the sender's own choice: nothing on the wire
// says which channels a switch covers, and the receiver needs no word of it (a channel whose
// delivery modes are off simply sends its messages as plain reliable). The system channel
// (ENet's 0xFF: connect, disconnect, pings) always follows the host's setting. All zero (the
// default): every extension as the host's switch says, on every channel.
struct ChannelSwitches {
  ChannelSet no_fast_retransmit{};  // a loss there waits for its timeout (as ENet)
  ChannelSet no_nodelay{};          // ENet's backoff and resend rule there (nodelay_channels too)
  // Its reliable messages are never copied, its unreliable ones never kept for copies, and
  // the acks of the peer's commands on it never repeated.
  ChannelSet no_redundancy{};
  // Its reliable messages are neither paced nor held by the model's window: ENet's window
  // and throttle, against all the connection has in flight, as with a peer that did not
  // agree. Not the express lane either.
  ChannelSet no_congestion_control{};
  ChannelSet no_express{};            // its small messages are scheduled and paced as bulk
  ChannelSet no_congestion_window{};  // not held to the window regrowing after a stall
  ChannelSet no_delivery_modes{};     // reliable_unordered/_sequenced go as reliable
  // The level of send() without a priority (medium where neither): high or low.
  ChannelSet priority_high{};
  ChannelSet priority_low{};
};

// tern::ChannelRule list (HostOptions::channel_options) as switches: rule by rule, the last
// rule naming a channel deciding all of its switches. Immediate as a default level is high.
ChannelSwitches channel_switches(std::span<const ChannelRule> rules);

struct HostConfig {
  std::size_t peer_limit = 4096;                   // simultaneous connections (any number)
  std::uint32_t channel_limit = kMaxChannelCount;  // channels accepted per connection
  std::uint32_t incoming_bandwidth = 0;            // bytes/s this host can receive, 0 = unlimited
  std::uint32_t outgoing_bandwidth = 0;            // bytes/s this host can send, 0 = unlimited
  std::uint32_t mtu = kDefaultMtu;
  bool checksum = false;  // CRC32 on every datagram (both sides must agree)
  std::uint32_t max_packet_size = kDefaultMaxPacketSize;
  std::uint32_t max_waiting_data = kDefaultMaxWaitingData;  // per peer: reassembly + undelivered
  // Host-wide cap on buffered incoming data. Fragment reassembly may use three quarters of it,
  // so whole messages always find room; when the cap is hit, the connection holding the most
  // undelivered data is evicted (disconnect event with reason `evicted`).
  std::size_t memory_cap = std::size_t{512} << 20;
  // Per peer: payload bytes queued, in flight or awaiting acknowledgement beyond which send()
  // refuses a reliable message with SendResult::queue_full (0 = no limit, as in ENet); an
  // unreliable or unsequenced one is refused past half of it, so a backlog sheds those first.
  // What a receiver that does not keep up can make this host hold.
  std::size_t max_queued = 0;
  // Per peer, while its intake is held (hold_intake): new reliable commands kept, unacknowledged,
  // for delivery on release. Past it they are not kept either; the sender resends them.
  std::uint32_t max_withheld = 256;
  // Per peer: messages per second (intake_rate) and payload bytes per second
  // (intake_bandwidth) taken from it, 0 = no limit; each bucket holds one second's worth. Metered
  // before the acknowledgement: a reliable message over the limit is neither kept nor
  // acknowledged (its sender resends it, by when the bucket has refilled), an unreliable or
  // unsequenced one is dropped (Drop::over_limit). A fragmented message is metered once, whole,
  // by its first fragment. A message larger than a full byte bucket still passes then.
  std::uint32_t intake_rate = 0;
  std::uint32_t intake_bandwidth = 0;
  // Delayed acknowledgement: acks for a connected peer to which nothing else is queued wait up
  // to this long for a message to ride with, instead of leaving at once in a datagram of their
  // own (ENet's behaviour, 0). A client that sends on a tick, like a game calling
  // enet_host_service once a frame, then acknowledges in the datagrams it sends anyway: half
  // the datagrams both ways in a relay's fan-out. The peer's RTT estimate, and so its
  // retransmission timeout, grows by up to the delay.
  std::uint32_t ack_delay_ms = 0;
  // Tern's selective acks (WIRE.md, "Extensions"): offered in a hello with every connect and
  // accepted from connecting Tern peers. Where both sides agree, one command acknowledges up
  // to 33 reliable commands of a channel instead of one each. A plain ENet peer never sees
  // more than the hello, which it ignores. false (with delivery_modes, nodelay and
  // congestion_control off too): behave exactly as ENet (no hello).
  bool selective_acks = true;
  // A message delivered straight from its datagram (whole, and in order or not ordered)
  // arrives as a view of the datagram's bytes (Event::lent) instead of a copy in a Packet.
  // Only for callers that take every event before the bytes they passed to on_datagram are
  // reused, as runtime shards do (they drain the events after each receive burst). Messages
  // held back for ordering or rebuilt from fragments still come as Packets. A secure session's
  // datagrams are opened into the core's own buffer, whose views stay valid until the next
  // on_datagram after the last event was taken.
  bool lend_payloads = false;
  // Fast retransmit (sender side only; nothing on the wire changes): a reliable command still
  // unacknowledged when an acknowledgement arrives for one sent more than a quarter of the RTT
  // (at least 2 ms) after it is resent at once, instead of waiting out its retransmission
  // timeout, as KCP's fast resend does. The receiver acknowledges every reliable command it
  // takes, in arrival order, so that one was lost (or reordered by more than the margin). Its
  // timeout is not doubled (the path is delivering), and only acks of commands sent once set
  // the mark (an ack of a resent command may be for either copy). false: resend only on
  // timeouts, as ENet does.
  bool fast_retransmit = true;
  // A congestion window on top of ENet's throttle (sender side only; nothing on the wire
  // changes): after a retransmission timeout with nothing sent as late acknowledged (a stall,
  // not a loss on a path that delivers), a connection sends one MTU of reliable data and
  // regrows the window by what is acknowledged (doubling each round trip) until it reaches
  // ENet's largest window. ENet resends everything that timed out at once; when the timeout
  // came from delay rather than loss (a receiver that is briefly overloaded), that doubles the
  // receiver's work just as it falls behind, and with the window an ack of the original
  // usually arrives first. false: resend as ENet does.
  bool congestion_window = true;
  // A floor under the retransmission timeout, ms (sender side only; nothing on the wire
  // changes). ENet's timeout is RTT + 4 x variance in whole milliseconds, so on a path of
  // well under a millisecond (loopback, memif, one rack) it is 2-5 ms, and a receiver that
  // stalls that long (descheduled, or busy with a burst) has everything in flight resent to
  // it: duplicates to take and acknowledge just as it falls behind. A floor above such
  // stalls keeps them to the delay they cost. A command that was lost while later ones
  // arrived is still resent at once by fast_retransmit; the floor delays only a loss at the
  // tail of a burst. 0: ENet's timeout as computed.
  std::uint32_t min_rto_ms = 0;
  // ENet's packet throttle scales the reliable send window with it (sender side only; nothing
  // on the wire changes): each acknowledgement whose RTT exceeds the last interval's lowest by
  // two variances takes 2/32 off, down to one MTU in flight, and it grows back only on RTTs no
  // higher than that lowest. Where RTTs rise because the receiver has work queued (a client
  // that fell behind for a moment, a relay's loaded peer), not because a link is congested,
  // the window then caps delivery below what is offered (one MTU per RTT), the queue stays
  // and so do the RTTs: the connection does not recover. false: the reliable window is the
  // negotiated window (and the congestion window after a stall); the throttle still drops
  // unreliable messages as in ENet.
  bool throttle_reliable_window = true;
  // Nodelay (KCP's answer to latency under loss; WIRE.md, "Extensions"). For the channels it
  // covers, a reliable command's retransmission timeout grows x1.5 per expiry instead of x2,
  // and a command is resent as soon as `nodelay_resend` acknowledgements have arrived for
  // commands sent after it (KCP's `resend`) instead of by fast_retransmit's time rule. With
  // it on, the throttle never shrinks the reliable window (throttle_reliable_window), and
  // the hello asks a Tern peer to acknowledge at once (no ack_delay_ms either way). All of
  // that but the hello is the sender's own: it works the same with a plain ENet peer.
  bool nodelay = false;
  // The channels nodelay covers when `nodelay` is on, one bit per channel ID (bit c of word
  // c / 64); all zero: every channel. A game stream on one channel and bulk data on another
  // can so keep ENet's backoff for the bulk.
  std::array<std::uint64_t, 4> nodelay_channels{};
  std::uint32_t nodelay_resend = 2;  // 0: the time rule of fast_retransmit on these channels too
  // Delivery::reliable_unordered and reliable_sequenced (WIRE.md, "Extensions"): offered in the
  // hello; where agreed, a reliable command carries its mode in two command bits ENet leaves
  // unused, and the receiver delivers it on arrival (sequenced: only if newer than any it
  // delivered on the channel). To a peer that did not agree they go as plain reliable.
  bool delivery_modes = true;
  // Adaptive redundancy (WIRE.md, "Extensions"; negotiated, both sides must turn it on). Each
  // datagram to the peer carries again the last K reliable commands still unacknowledged, and
  // the last ack ranges written are repeated in the next `redundancy_ack_repeats` datagrams,
  // so one lost datagram costs neither a retransmission timeout nor an acknowledgement. K
  // follows the loss this connection measures (0 while it sees none) up to
  // `redundancy_max_k`; the extra bytes never exceed the budget, a percentage of the bytes
  // the datagrams carry without them: `redundancy_budget_percent` while the loss estimate is
  // below 5%, rising to `redundancy_high_loss_budget_percent` at 20%. Needs
  // selective_acks on both sides to measure loss from acknowledgements and to repeat them.
  bool redundancy = false;
  std::uint32_t redundancy_max_k = 3;            // at most 8 are used
  std::uint32_t redundancy_budget_percent = 30;  // at most 100 is used
  // The budget at a loss estimate of 20% and above (linear from redundancy_budget_percent at
  // 5%): there a copy saves a round trip or two per loss, and most of the p99. At or below
  // redundancy_budget_percent (the default): a flat budget. 100 took loss_compare's 20% p99
  // from 192 to 108 ms but its bytes at 5% from 1.16x to 1.40x libenet's (the estimate reads
  // copies as losses and climbs with them).
  std::uint32_t redundancy_high_loss_budget_percent = 30;
  std::uint32_t redundancy_ack_repeats = 2;
  // Large blocks (send_block; WIRE.md, "Large blocks"), offered in the hello. Between Tern
  // peers that agreed, a block goes as slices sized to the MTU, paced, acknowledged by a
  // 256-slice bitfield and resent until all arrived; one block in flight per channel each way.
  // A receiver holds at most max_block_size bytes of blocks in progress per peer (a slice
  // naming a larger block, or one past it, is dropped; a larger block's sender is told the
  // cap with block_refused and its block ends with EventType::block_refused), each buffer
  // taken when the block's first slice arrives. block_rate: the sender's pace in bytes/s (0:
  // congestion control's pacing rate and window where agreed, else 256 slices per round
  // trip, what the ack bitfield covers). A peer that acknowledges no slice of ours for
  // timeout_maximum is timed out.
  bool blocks = true;
  std::uint32_t max_block_size = 64u << 20;
  std::uint32_t block_rate = 0;
  // Congestion control with pacing (WIRE.md, "Extensions"; negotiated, both sides must turn
  // it on). Between Tern peers that agree, the sender estimates the path's bottleneck
  // bandwidth (windowed max of per-round delivery rates) and minimum RTT, paces its bulk
  // reliable data at a gain of that bandwidth on the timer wheel and keeps at most twice the
  // bandwidth-delay product in flight, in place of ENet's 64 KiB window and its throttle.
  // Reliable messages of at most `cc_express_bytes` (whole, on a channel with no bulk
  // waiting) bypass the pacer and the window and go ahead of queued bulk, so game traffic
  // never waits behind a transfer. `cc_max_window` caps the window (what a receiver may have
  // to buffer behind a loss). With a plain ENet peer, or where not agreed: ENet's throttle.
  bool congestion_control = true;
  std::uint32_t cc_express_bytes = 256;
  std::uint32_t cc_max_window = 8u << 20;
  // Per-channel switches for the extensions above (ChannelSwitches). Selective acks, blocks,
  // path MTU discovery and the handshake stay per connection: an ack range, a block's slices
  // and a probe are not a channel's messages.
  ChannelSwitches channels;
  // Defaults for new connections (ENet's names and values).
  std::uint32_t ping_interval_ms = kPingInterval;
  std::uint32_t timeout_limit = kTimeoutLimit;
  std::uint32_t timeout_minimum_ms = kTimeoutMinimum;
  std::uint32_t timeout_maximum_ms = kTimeoutMaximum;
  std::uint32_t throttle_interval_ms = kPacketThrottleInterval;
  std::uint32_t throttle_acceleration = kPacketThrottleAcceleration;
  std::uint32_t throttle_deceleration = kPacketThrottleDeceleration;
  std::uint64_t random_seed = 0x7465726e;  // connect IDs and handshake cookies
  // No peer before return routability (WIRE.md, "Handshake under attack"): a CONNECT from an
  // unknown source is answered with a VERIFY_CONNECT, once per CONNECT and never larger than
  // what the source sent, and becomes a peer only when the source acknowledges it from the
  // same address and port. Until then it is one entry of a bounded table (half_open_capacity
  // entries, the oldest of a set evicted when it is full), expiring after half_open_timeout_ms.
  // Unmodified ENet clients connect as before. false: ENet's handshake, where every CONNECT
  // takes a peer slot at once and the VERIFY_CONNECT is resent on a timer.
  bool verify_before_peer = true;
  std::size_t half_open_capacity = 65536;
  std::uint32_t half_open_timeout_ms = 10000;
  // CONNECTs from unknown sources per second per address (any port) and per prefix (/24 IPv4,
  // /64 IPv6), each bucket `burst` deep; 0 = no limit (the default). Over either, a CONNECT is
  // dropped unanswered (Drop::rate_limited). Buckets live in a table of
  // source_table_capacity entries (the least recently used of a set is reused).
  double connect_rate_per_address = 0;
  double connect_burst_per_address = 8;
  double connect_rate_per_prefix = 0;
  double connect_burst_per_prefix = 64;
  std::size_t source_table_capacity = 65536;
  // Bans (HostCore::ban) held at once, in sets of 16; a full set forgets its soonest-ending
  // ban (ban() says so). A quarter of it in use displaces none in practice.
  std::size_t ban_capacity = 16384;
  // Offline discovery (WIRE.md, "Discovery"). Off by default: a host answers discovery pings
  // from anyone only when its application asks to be found. An answer carries the bytes of
  // set_discovery_info(), cut to what the ping paid for in padding, so it is never larger
  // than the ping; banned sources get nothing, and answers per address (any port) and per
  // prefix are limited by token buckets (rate per second, burst deep; 0 = no limit) in the
  // source table the connect limits use. Pings and pongs wait for the next flush in a queue
  // of discovery_queue entries; past it they are refused (counted). A client's discover()
  // works whatever `discovery` says; its pings take answers for discovery_timeout_ms.
  bool discovery = false;
  // Path MTU discovery (WIRE.md, "Path MTU discovery"; negotiated, both sides must run it):
  // each side probes its direction with padded datagrams, first at the negotiated MTU, then
  // by binary search up to pmtu_max (at most kMaxMtu, 4096: the largest datagram Tern's
  // receive path takes), and sends with the largest size acknowledged (datagrams and
  // fragments); below the negotiated MTU when even that is lost (down to 576), and back to
  // 576 and a new search when large datagrams stop getting through while small ones do.
  // Plain ENet peers keep the negotiated MTU.
  bool pmtu = false;
  std::uint32_t pmtu_max = kMaxMtu;
  // Idle pings (WIRE.md, "Extensions", feature bit 5; negotiated, both sides must offer it):
  // between Tern peers, the connecting side's keep-alive ping goes after this many ping
  // intervals of silence instead of one (the accepting side, which answers those pings and
  // adds its own every 4 intervals, is unchanged), so an idle connection costs that many
  // times fewer datagrams. Timeouts are unchanged (ENet's minimum and limit count from the
  // ping); a dead server is noticed up to (n - 1) intervals later. 0 or 1: never offered;
  // plain ENet peers keep ENet's interval, and so does a host with every other extension off
  // (it sends no hello).
  std::uint32_t idle_ping_intervals = 4;
  double discovery_rate_per_address = 4;
  double discovery_burst_per_address = 8;
  double discovery_rate_per_prefix = 64;
  double discovery_burst_per_prefix = 128;
  std::size_t discovery_queue = 256;
  std::uint32_t discovery_timeout_ms = 5000;
  // Secure sessions (WIRE.md, "Secure sessions"): the policy, the token keys accepted (two
  // during a rotation), and the addresses clients reach this host at (a token must list
  // one). Needs verify_before_peer and HostCore::set_unix_time (token expiry is wall time).
  Security security = Security::plain;
  sec::KeyRing token_keys{};
  std::array<Endpoint, 4> secure_addresses{};
  std::size_t secure_address_count = 0;
  // Token-carrying handshakes awaiting the client's answer (keys, challenge, user data);
  // the oldest is reused when full.
  std::size_t secure_pending_capacity = 4096;
  // Offer (client) and accept (server) AES-256-GCM for the session where this CPU has AES-NI:
  // several times cheaper per datagram than ChaCha20-Poly1305 there. Either side without it,
  // or false, keeps ChaCha20-Poly1305.
  bool secure_aes = true;
};

struct HostCounters {
  std::uint64_t datagrams_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t datagrams_out = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t commands_in = 0;
  std::uint64_t messages_in = 0;   // delivered to the application
  std::uint64_t messages_out = 0;  // accepted by send()
  std::uint64_t connects = 0;
  std::uint64_t disconnects = 0;
  std::uint64_t timeouts = 0;
  // DISCONNECTs of connections already ended, acknowledged again (our first ack was lost).
  std::uint64_t disconnects_reacknowledged = 0;
  std::uint64_t retransmits = 0;
  std::uint64_t fast_retransmits = 0;  // commands found lost by later acks (fast_retransmit)
  std::uint64_t nodelay_resends = 0;   // of which found by nodelay's count of later acks
  // Retransmission timeouts put off: due by the clock, not yet by input_read_until.
  std::uint64_t timeouts_deferred = 0;
  std::uint64_t acks_out = 0;
  // Redundancy: copies of unacknowledged reliable commands carried in later datagrams, ack
  // ranges written again, and the repeats that acknowledged something not yet acknowledged.
  std::uint64_t redundant_sent = 0;
  std::uint64_t redundant_unreliable_sent = 0;  // of which unreliable or unsequenced
  std::uint64_t acks_repeated = 0;
  std::uint64_t repeated_acks_useful = 0;
  std::uint64_t pings_out = 0;  // keep-alive pings queued after a silence
  // Large blocks: wholly acknowledged to us / delivered to the application, slices sent
  // (resends included) and resent, acks sent.
  std::uint64_t blocks_sent = 0;
  std::uint64_t blocks_received = 0;
  std::uint64_t block_slices_sent = 0;
  std::uint64_t block_slices_resent = 0;
  std::uint64_t block_acks_out = 0;
  // Large blocks we sent that the peer refused as above its cap (an event each), and peers
  // timed out for acknowledging none of our slices for timeout_maximum.
  std::uint64_t blocks_refused = 0;
  std::uint64_t block_timeouts = 0;
  // Congestion control: datagrams that carried bulk reliable data under the pacer, times the
  // pacer held bulk back until a later wake-up, and times the window held it back.
  std::uint64_t paced_datagrams = 0;
  std::uint64_t pacer_waits = 0;
  std::uint64_t cwnd_limited = 0;
  std::uint64_t peer_timer_runs = 0;  // peers whose timers fired (work done for idle peers)
  std::uint64_t evictions = 0;        // connections dropped to honour memory_cap
  std::uint64_t queue_full = 0;       // sends refused for max_queued
  std::uint64_t intake_withheld = 0;  // reliable commands kept unacknowledged (hold_intake)
  std::uint64_t intake_refused = 0;   // not even kept: past max_withheld or a new fragment set
  std::uint64_t intake_over_limit =
      0;  // reliable messages not acknowledged: intake_rate/_bandwidth
  // The handshake under attack (HostConfig::verify_before_peer).
  std::uint64_t half_open_created = 0;      // CONNECTs from unknown sources given an entry
  std::uint64_t half_open_evicted = 0;      // entries pushed out by newer ones
  std::uint64_t cookies_sent = 0;           // VERIFY_CONNECTs sent to unverified sources
  std::uint64_t cookies_invalid = 0;        // acks naming an entry with the wrong cookie
  std::uint64_t cookies_expired = 0;        // datagrams for an entry past half_open_timeout_ms
  std::uint64_t amplification_capped = 0;   // replies not sent: more than the source sent us
  std::uint64_t connects_rate_limited = 0;  // CONNECTs over a per-source or prefix limit
  std::uint64_t connects_shed = 0;          // CONNECTs unanswered under shed_connects()
  std::uint64_t connects_banned = 0;        // datagrams from banned sources, unanswered
  std::uint64_t replies_dropped = 0;        // more unconnected replies waiting than kept
  std::uint64_t peers_promoted = 0;         // entries turned into peers by their ack
  std::uint64_t unverified_bytes_in = 0;    // from sources while unverified
  std::uint64_t unverified_bytes_out = 0;   // to them
  // Offline discovery: pings received (answered or not, and their bytes), answered (pongs and
  // their bytes, never more than the pings'), of which with the info cut to fit, refused
  // (off, banned, over a rate, malformed, queue full), of which over a rate; our own pings
  // and the answers they took.
  std::uint64_t discovery_pings_in = 0;
  std::uint64_t discovery_bytes_in = 0;
  std::uint64_t discovery_pongs_out = 0;
  std::uint64_t discovery_bytes_out = 0;
  std::uint64_t discovery_truncated = 0;
  std::uint64_t discovery_refused = 0;
  std::uint64_t discovery_rate_limited = 0;
  std::uint64_t discovery_pings_out = 0;
  std::uint64_t discovery_answers = 0;
  // Path MTU discovery: probes sent, probes that timed out, probes of the peer's answered,
  // sizes adopted (acknowledged probes that changed the MTU) and MTUs lowered (the negotiated
  // one lost, or a path that shrank).
  std::uint64_t pmtu_probes_sent = 0;
  std::uint64_t pmtu_probes_lost = 0;
  std::uint64_t pmtu_probes_answered = 0;
  std::uint64_t pmtu_raised = 0;
  std::uint64_t pmtu_lowered = 0;
  // Secure sessions.
  std::uint64_t tokens_accepted = 0;  // valid tokens answered with a sealed VERIFY_CONNECT
  std::uint64_t tokens_refused = 0;   // expired, forged, unknown key, wrong server, reused
  std::uint64_t sealed_out = 0;       // datagrams sealed
  std::uint64_t opened_in = 0;        // sealed datagrams that authenticated
  std::size_t half_open = 0;          // entries now
  std::size_t buffered_bytes = 0;     // incoming data held for reassembly/ordering/delivery
  std::size_t reassembly_bytes = 0;   // of which incomplete fragment sets
  DropCounters drops;
};

// One datagram to transmit, built in place by flush(): view() is bytes[offset, offset + size).
// The commands are written first, after room for the largest header; the header, whose size
// is known only then, goes right before them, so the datagram starts `offset` bytes in
// rather than being moved to the front.
struct OutDatagram {
  Endpoint to;
  std::uint32_t size = 0;
  std::uint32_t offset = 0;
  alignas(64) std::array<std::byte, kMaxMtu + 8> bytes;
  std::span<const std::byte> view() const { return {bytes.data() + offset, size}; }
};

class HostCore {
 public:
  explicit HostCore(const HostConfig& config);
  ~HostCore();
  HostCore(const HostCore&) = delete;
  HostCore& operator=(const HostCore&) = delete;

  // ---- input -----------------------------------------------------------------------------
  void on_datagram(std::uint64_t now_us, const Endpoint& from, std::span<const std::byte> bytes);

  // ---- application -----------------------------------------------------------------------
  // Starts a handshake; the connect event arrives once it completes. channel_count is clamped
  // to 1..255. Returns an invalid handle when the peer limit is reached.
  PeerHandle connect(std::uint64_t now_us, const Endpoint& to, std::size_t channel_count,
                     std::uint32_t data);
  // connect() with a connect token (tern/secure.hpp): the CONNECT carries the sealed token
  // and `salt` (16 random bytes, new for every call: the session keys derive from it), and
  // every later datagram both ways is sealed. Nothing in clear is taken from the server, so
  // against a server that does not take the token the connect times out.
  PeerHandle connect_secure(std::uint64_t now_us, const Endpoint& to, std::size_t channel_count,
                            std::uint32_t data, std::span<const std::uint8_t> sealed_token,
                            const sec::Key& client_to_server, const sec::Key& server_to_client,
                            const std::array<std::uint8_t, 16>& salt);
  // Wall time for token expiry: `unix_s` is the Unix time at `now_us` (HostCore time).
  void set_unix_time(std::uint64_t now_us, std::uint64_t unix_s);
  // Queues a message. Messages above the MTU are fragmented (reliable fragments for reliable
  // and unsequenced, unreliable fragments for unreliable delivery). The core holds a reference
  // to the payload until the message is acknowledged (or dropped) and lets go of it at its
  // next flush(), together with the other references it let go of meanwhile. Scheduled at
  // the channel's default level (ChannelSwitches::priority_high/_low), as send_with_receipt
  // and send_many are.
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload);
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                  std::span<const std::byte> payload);
  // send(), and once the peer has acknowledged every command of the message, an event of type
  // receipt with `data` = `receipt` (only for reliable deliveries: not_reliable otherwise). No
  // receipt comes for a message the connection ends before acknowledging; the disconnect
  // event says so.
  SendResult send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                               Packet payload, std::uint32_t receipt);
  // send() with the message scheduled at `priority` (README, "Priorities"): higher levels go
  // out first, lower ones are never starved, and a message never passes an earlier one of its
  // own channel. Sender side only: nothing on the wire changes. Immediate sorts ahead of
  // everything queued; the caller flushes at once (tern::Host does).
  SendResult send(PeerHandle peer, std::uint8_t channel, Delivery delivery, Packet payload,
                  Priority priority);
  SendResult send_with_receipt(PeerHandle peer, std::uint8_t channel, Delivery delivery,
                               Packet payload, std::uint32_t receipt, Priority priority);
  // A large block (WIRE.md, "Large blocks"): to a peer that agreed kFeatureBlocks, paced
  // slices with a slice-ack bitfield, delivered there as one receive event (reliable) when
  // whole; block_busy while the previous block on this channel is not wholly acknowledged,
  // too_large above max_block_size. To any other peer: a reliable message (ENet fragments),
  // capped by max_packet_size.
  SendResult send_block(PeerHandle peer, std::uint8_t channel, Packet block);
  // A block sent on the channel to the peer is not yet wholly acknowledged.
  bool block_in_flight(PeerHandle peer, std::uint8_t channel) const;
  // One message to each of `peers` except `skip` (a relay's fan-out, the sender skipped): the
  // same as send() to each in turn, but the payload's reference count rises once for all of
  // them. Returns how many accepted it.
  // `deepest`, when given, is raised to the largest queued_bytes() among the peers it went to.
  std::size_t send_many(std::span<const PeerHandle> peers, std::uint8_t channel, Delivery delivery,
                        const Packet& payload, PeerHandle skip = {},
                        std::size_t* deepest = nullptr);
  // Back-pressure before the acknowledgement. While held, the peer's new reliable commands are
  // kept (up to HostConfig::max_withheld) but neither delivered nor acknowledged, so its own
  // send window soon stops it; its retransmissions of them are not acknowledged either. On
  // release they are acknowledged and delivered in order, at once. Everything else it sends
  // (acks, unreliable messages, pings) is handled as usual. Works with any ENet sender.
  void hold_intake(PeerHandle peer, bool held);
  bool intake_held(PeerHandle peer) const;
  // While on, every CONNECT is dropped unanswered (Drop::connect_shed). For a runtime reading far
  // behind its input: under a connect flood the answers are most of its work, so shedding them lets
  // it catch up, and a handshake it answers then completes before newer CONNECTs push its entry out
  // of the half-open table (WIRE.md, "Handshake under attack"). Clients resend a CONNECT left
  // unanswered.
  void shed_connects(bool on);
  // Every datagram that reached the runtime before `now_us` has been passed to on_datagram (its
  // receive step found the input empty). Until then an acknowledgement may be waiting unread in
  // our own input queue, so retransmission timeouts are judged at this time, not at the clock:
  // a runtime reading far behind its input would otherwise resend what its peers already
  // acknowledged, and every resend earns another ack to read. Runtimes that never call it are
  // judged by the clock. The lag is capped at kMaxInputLagMs: under sustained overload the
  // input is never found empty, and a copy lost on the way (a receiver's full socket) must
  // still be resent within about a second, not only once the overload ends.
  void input_read_until(std::uint64_t now_us);
  static constexpr std::uint64_t kMaxInputLagMs = 1000;
  // Graceful: queued data is discarded, a reliable disconnect is sent, and a disconnect event
  // (reason local) follows the acknowledgement or a timeout.
  void disconnect(PeerHandle peer, std::uint32_t data);
  // Refuses handshakes from `address` (any port) until `until_us` (HostCore time); datagrams of
  // connections already made from it are not affected (disconnect them to end them).
  // With prefix_bits < 128, every address whose first prefix_bits bits (of the 128-bit form,
  // IPv4 mapped into ::ffff:0:0/96: an IPv4 /24 is 120) match `address`'s.
  // False when a running ban of another address had to make room (HostConfig::ban_capacity).
  bool ban(const Endpoint& address, std::uint64_t until_us, unsigned prefix_bits = 128);
  void unban(const Endpoint& address, unsigned prefix_bits = 128);
  // Whether a ban running at now_us covers the address (its own, or one of a prefix of it).
  bool banned(const Endpoint& address, std::uint64_t now_us) const;
  struct BanEntry {
    Endpoint address;  // port 0, bits past prefix_bits zeroed
    unsigned prefix_bits = 128;
    std::uint64_t until_us = 0;
  };
  // The bans running at now_us (for listings; allocates).
  std::vector<BanEntry> bans(std::uint64_t now_us) const;
  // Sends one unreliable disconnect on the next flush and forgets the peer; no local event.
  void disconnect_now(PeerHandle peer, std::uint32_t data);
  // Disconnects gracefully once all queued outgoing data has been acknowledged.
  void disconnect_later(PeerHandle peer, std::uint32_t data);
  // Forgets the peer silently; the other side will time out.
  void reset(PeerHandle peer);
  // Queues a ping (normally automatic every ping_interval of silence).
  void ping(PeerHandle peer);
  void configure_throttle(PeerHandle peer, std::uint32_t interval_ms, std::uint32_t acceleration,
                          std::uint32_t deceleration);
  void configure_timeouts(PeerHandle peer, std::uint32_t limit, std::uint32_t minimum_ms,
                          std::uint32_t maximum_ms);
  void set_ping_interval(PeerHandle peer, std::uint32_t interval_ms);
  // Changes the host's bandwidth; peers are told on the next bandwidth throttle pass.
  void set_bandwidth_limit(std::uint32_t incoming, std::uint32_t outgoing);

  // ---- offline discovery (WIRE.md, "Discovery") -------------------------------------------
  // What this host's discovery answers carry (copied; at most kMaxDiscoveryInfo bytes), and
  // whether it answers at all (HostConfig::discovery).
  void set_discovery_info(std::span<const std::byte> info);
  void set_discovery(bool on);
  // Queues a discovery ping to `to` (one server, or a broadcast address) padded so that an
  // answer may carry `info_room` bytes of info (at most what the MTU leaves). Returns the
  // ping's nonce, 0 when the queue is full. Answers come through poll_discovery.
  std::uint32_t discover(std::uint64_t now_us, const Endpoint& to, std::size_t info_room);
  bool poll_discovery(DiscoveryAnswer& out);

  // ---- output ----------------------------------------------------------------------------
  // Fires due timers (retransmits, pings, timeouts, throttle epochs) and writes datagrams into
  // `out`. Returns how many were written; if that equals out.size(), call again.
  std::size_t flush(std::uint64_t now_us, std::span<OutDatagram> out);
  bool poll_event(Event& out);
  // When flush() next has work: now_us-ish if something is queued, the earliest timer
  // otherwise, UINT64_MAX when completely idle.
  std::uint64_t next_deadline_us() const;

  // ---- inspection ------------------------------------------------------------------------
  bool peer_stats(PeerHandle peer, PeerStats& out) const;
  PeerState peer_state(PeerHandle peer) const;  // disconnected for stale handles
  std::optional<Endpoint> peer_address(PeerHandle peer) const;
  std::uint32_t peer_connect_data(PeerHandle peer) const;
  // Payload bytes queued to the peer, in flight or awaiting acknowledgement (its backlog); 0
  // for stale handles.
  std::size_t queued_bytes(PeerHandle peer) const;
  std::size_t peer_count() const;
  // Secure sessions: whether the connection seals its datagrams; on the server side, the
  // token's client id and user data (empty for a plain connection or a stale handle).
  bool peer_secure(PeerHandle peer) const;
  // A secure connection whose handshake agreed AES-256-GCM (HostConfig::secure_aes).
  bool peer_secure_aes(PeerHandle peer) const;
  std::uint64_t peer_client_id(PeerHandle peer) const;
  std::span<const std::uint8_t> peer_user_data(PeerHandle peer) const;
  const HostCounters& counters() const;
  const HostConfig& config() const;
  // sizeof the per-connection record (perf/idle_memory.cpp); its side blocks come on top.
  static std::size_t sizeof_peer();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::proto
