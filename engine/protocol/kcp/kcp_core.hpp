// tern::proto::kcp::KcpCore: the sans-I/O KCP host (DESIGN §3.4), the KCP personality.
//
// Same shape as HostCore: it consumes datagrams and the current time and produces datagrams,
// events and its next deadline; it never makes a system call, reads a clock or blocks.
//
//   core.on_datagram(now, from, bytes);        // for every datagram received
//   while (core.poll_event(ev)) handle(ev);     // connect / receive / disconnect
//   core.send(session, bytes);                  // application traffic
//   n = core.flush(now, batch);                 // timers + datagrams to transmit
//   sleep_until(core.next_deadline_us());
//
// Wire: KCP's 24-byte segment (README.md in this folder), optionally behind kcp-go's 8-byte FEC
// data-shard header. KCP has no connection layer; the session lifecycle is ours (README.md):
// sessions are keyed by (address, port, conv), a first valid PUSH creates one, and one ends on
// a dead link, an idle timeout or the application's disconnect.
#pragma once

#include "drop_reasons.hpp"

#include <tern/endpoint.hpp>
#include <tern/packet.hpp>
#include <tern/types.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

namespace tern::proto::kcp {

inline constexpr std::uint32_t kHeaderSize = 24;
inline constexpr std::uint8_t kCmdPush = 81;
inline constexpr std::uint8_t kCmdAck = 82;
inline constexpr std::uint8_t kCmdWask = 83;
inline constexpr std::uint8_t kCmdWins = 84;
// kcp-go's FEC layer: seqid u32, type u16 (0xf1 data, 0xf2 parity), then for data shards a
// u16 size that counts itself and the KCP bytes after it.
inline constexpr std::uint32_t kFecHeaderSize = 8;
inline constexpr std::uint16_t kFecData = 0xf1;
inline constexpr std::uint16_t kFecParity = 0xf2;
// The largest datagram we build or accept (kcp-go's mtuLimit is 1500).
inline constexpr std::uint32_t kMaxMtu = 1500;

// clang-format off
#define TERN_KCP_DROP_REASONS(X)                                                          \
  X(truncated_segment, "datagram or segment shorter than the 24-byte KCP header")          \
  X(oversize_datagram, "datagram longer than the largest KCP MTU")                        \
  X(bad_command, "command not 81 (PUSH), 82 (ACK), 83 (WASK) or 84 (WINS)")              \
  X(length_past_datagram, "segment len runs past the end of the datagram")              \
  X(giant_length, "segment len above the session's MSS")                                \
  X(wrong_conv, "segment conv differs from the session's (or the datagram's first)")    \
  X(unknown_session, "segment from no session that cannot start one")                  \
  X(session_limit, "new session refused: session limit reached")                      \
  X(out_of_window, "PUSH sn outside the receive window")                               \
  X(duplicate, "PUSH sn already received")                                             \
  X(bad_fragment, "frg inconsistent with the fragments before it, or too many")      \
  X(unexpected_ack, "ACK for nothing in flight")                                       \
  X(fec_truncated, "FEC data shard shorter than its header or its size field")         \
  X(fec_parity, "FEC parity shard with recovery off (fec_groups 0): ignored")              \
  X(fec_mismatch, "FEC shard whose type contradicts the configured shard counts")        \
  X(refused, "segment of a session the application ended, within refused_ms: not acknowledged")
// clang-format on

enum class KcpDrop : std::uint8_t { TERN_KCP_DROP_REASONS(TERN_DROP_ENUMERATOR) count_ };
inline constexpr std::array kKcpDropReasonTable{TERN_KCP_DROP_REASONS(TERN_DROP_REASON)};
constexpr const auto& drop_reasons(KcpDrop) { return kKcpDropReasonTable; }
using KcpDropCounters = base::DropCounters<KcpDrop>;

struct KcpConfig {
  std::size_t session_limit = 4096;
  // Bytes of a datagram (FEC header included when framing is fec); MSS = mtu - 24 (- 8).
  std::uint32_t mtu = 1400;
  std::uint32_t snd_wnd = 128;  // segments
  std::uint32_t rcv_wnd = 128;  // segments; also bounds one message's fragments (< rcv_wnd)
  // KCP's nodelay knobs (ikcp_nodelay): nodelay 0 = normal RTO growth and 100 ms RTO floor,
  // 1 = RTO grows by half and a 30 ms floor, 2 = grows by half the current estimate.
  int nodelay = 1;
  std::uint32_t interval_ms = 10;         // how often a session with data in flight is looked at
  std::uint32_t fast_resend = 2;          // resend after this many later acks, 0 = off
  bool no_cwnd = true;                    // nc: no congestion window (send and remote windows only)
  bool stream = false;                    // stream mode: sends coalesce into full segments
  std::uint32_t dead_link = 20;           // a segment sent this many times ends the session
  std::uint32_t idle_timeout_ms = 30000;  // no valid datagram for this long ends the session
  // Per session: segments queued behind the send window; send() past it returns queue_full.
  std::uint32_t max_queued_segments = 4096;
  // Framing of what this host sends: plain KCP, or behind kcp-go's FEC data-shard header
  // (no parity shards are sent). Both framings are always accepted.
  bool send_fec = false;
  // Receive side of kcp-go's FEC: lost data shards rebuilt from parity (Reed-Solomon, as
  // kcp-go codes it) when the peer uses these shard counts (DialWithOptions(addr, nil, 10, 3)).
  // fec_groups shard groups are collected at a time per core (about 20 KB each); 0 turns
  // recovery off (parity shards are then counted as drops).
  std::uint32_t fec_data_shards = 10;
  std::uint32_t fec_parity_shards = 3;
  std::size_t fec_groups = 32;
  // Sessions the application ended (disconnect) stay refused: their (address, port, conv) is
  // remembered for refused_ms (0: idle_timeout_ms), at most refused_limit of them (the oldest
  // forgotten first), and their segments are dropped (KcpDrop::refused) without an ack or a
  // new session. Otherwise a client that keeps sending would open a new session at once,
  // whose messages would be acknowledged for an application that wants none of them.
  std::size_t refused_limit = 1024;
  std::uint32_t refused_ms = 0;
  // Per session: messages per second (intake_rate) and payload bytes per second
  // (intake_bandwidth) delivered, 0 = no limit; each bucket holds one second's worth, and a
  // message larger than a full byte bucket still passes then. Over them, complete messages wait
  // in the receive window (acknowledged, in order) for the buckets to refill; the window the
  // session advertises shrinks as they pile up and its sender stops at 0 (KCP's own flow
  // control), so nothing is dropped. hold() does the same for as long as the application asks.
  std::uint32_t intake_rate = 0;
  std::uint32_t intake_bandwidth = 0;
  // Per session: payload bytes queued or unacknowledged beyond which send() returns queue_full
  // (0 = no limit): what a receiver that does not keep up can make this host hold.
  std::uint64_t max_queued_bytes = 0;
  std::uint64_t random_seed = 0x6b6370;
};

struct KcpCounters {
  std::uint64_t datagrams_in = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t datagrams_out = 0;
  std::uint64_t bytes_out = 0;
  std::uint64_t segments_in = 0;
  std::uint64_t messages_in = 0;
  std::uint64_t messages_out = 0;
  std::uint64_t sessions_opened = 0;
  std::uint64_t sessions_closed = 0;
  std::uint64_t dead_links = 0;
  std::uint64_t idle_timeouts = 0;
  std::uint64_t protocol_errors = 0;  // sessions ended for a broken fragment countdown
  std::uint64_t retransmits = 0;
  std::uint64_t fast_retransmits = 0;
  std::uint64_t acks_out = 0;
  std::uint64_t window_probes = 0;
  std::uint64_t fec_parity_in = 0;  // parity shards received
  std::uint64_t fec_recovered = 0;  // data shards rebuilt from parity
  std::uint64_t intake_waits = 0;   // a complete message waited for intake_rate/_bandwidth
  std::uint64_t holds = 0;          // hold(session, true) on a session not held
  KcpDropCounters drops;
};

// One datagram built by flush().
struct KcpDatagram {
  Endpoint to;
  std::uint32_t size = 0;
  alignas(64) std::array<std::byte, kMaxMtu> bytes;
  std::span<const std::byte> view() const { return {bytes.data(), size}; }
};

struct KcpSessionStats {
  std::uint32_t conv = 0;
  std::uint32_t srtt_ms = 0;
  std::uint32_t rto_ms = 0;
  std::uint32_t cwnd = 0;
  std::uint32_t remote_wnd = 0;
  std::uint32_t in_flight = 0;     // segments sent and not yet acknowledged
  std::uint32_t queued = 0;        // segments waiting for the send window
  std::uint64_t queued_bytes = 0;  // payload bytes of in_flight and queued segments
  bool fec_seen = false;           // the peer frames with kcp-go's FEC header
  bool held = false;               // hold(session, true)
  std::uint32_t recv_window = 0;   // the receive window it advertises now (segments)
  std::uint32_t waiting = 0;       // received in order, not yet delivered (segments)
};

class KcpCore {
 public:
  explicit KcpCore(const KcpConfig& config);
  ~KcpCore();
  KcpCore(const KcpCore&) = delete;
  KcpCore& operator=(const KcpCore&) = delete;

  void on_datagram(std::uint64_t now_us, const Endpoint& from, std::span<const std::byte> bytes);

  // Client side: opens a session with `conv` to `to`. Sends may start at once; the connect
  // event comes with the first valid segment from the peer. Invalid handle at the limit or
  // when (to, conv) is already a session.
  PeerHandle connect(std::uint64_t now_us, const Endpoint& to, std::uint32_t conv);
  // Message mode: one message, fragmented with frg when above the MSS (at most rcv_wnd - 1
  // fragments, as KCP's receivers require). Stream mode: bytes appended to the stream.
  SendResult send(PeerHandle session, std::span<const std::byte> bytes);
  // KCP has no goodbye: the session is forgotten at once (no event), and its (address, port,
  // conv) refused for KcpConfig::refused_ms, so the peer's segments go unacknowledged until
  // it gives up (its dead link) rather than opening a new session.
  void disconnect(PeerHandle session);
  // Back-pressure through KCP's window: while held, the session's messages are received and
  // acknowledged but not delivered; they wait, in order, in its receive window, which it
  // advertises shrinking until 0, when its sender stops (and probes the window). On release
  // they are delivered at once (events before the next flush), and the reopened window is
  // announced (WINS). Nothing is dropped. Works with any KCP sender.
  void hold(PeerHandle session, bool held);
  bool held(PeerHandle session) const;

  std::size_t flush(std::uint64_t now_us, std::span<KcpDatagram> out);
  bool poll_event(Event& out);
  std::uint64_t next_deadline_us() const;

  bool session_stats(PeerHandle session, KcpSessionStats& out) const;
  std::optional<Endpoint> session_address(PeerHandle session) const;
  std::size_t session_count() const;
  // Segments held by all sessions (send queues, in flight, receive windows, partial messages).
  std::size_t segments_held() const;
  const KcpCounters& counters() const;
  const KcpConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::proto::kcp
