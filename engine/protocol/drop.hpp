// Every datagram or command the core refuses has a name, and every name has a counter
// (the mechanism is engine/base/drop_reasons.hpp, shared with tern::net and tern-relay).
#pragma once

#include "drop_reasons.hpp"

#include <array>
#include <cstddef>
#include <cstdint>

namespace tern::proto {

// clang-format off
#define TERN_DROP_REASONS(X)                                                             \
  X(truncated_header, "datagram shorter than the protocol header")                      \
  X(oversize_datagram, "datagram longer than the maximum MTU")                          \
  X(compressed, "compressed datagram (no compressor negotiated)")                       \
  X(bad_checksum, "CRC32 mismatch")                                                     \
  X(unknown_peer, "non-connect datagram whose address, port and peer ID name no connection") \
  X(bad_session, "session bits do not match the connection")                           \
  X(truncated_command, "command runs past the end of the datagram")                     \
  X(unknown_command, "command number outside 1..12 (1..15 with Tern's extensions on)")   \
  X(unknown_ext_kind, "tern_ext command of a kind this host does not handle")           \
  X(payload_past_datagram, "payload length runs past the end of the datagram")          \
  X(bad_channel, "channel ID past the negotiated channel count")                       \
  X(wrong_state, "command not allowed in the connection's state")                      \
  X(bad_handshake, "connect/verify parameters out of range or inconsistent")             \
  X(peer_limit, "connect refused: peer limit reached")                                 \
  X(duplicate, "already received (duplicate reliable, unsequenced or fragment)")        \
  X(out_of_window, "sequence number outside the receive window")                        \
  X(late_unreliable, "unreliable message older than one already delivered")             \
  X(stale_sequenced, "reliable-sequenced message older than one already delivered")     \
  X(fragment_number_out_of_range, "fragment number not below the fragment count")       \
  X(fragment_count_invalid, "fragment count zero, too large, or above total length")   \
  X(fragment_mismatch, "fragment count/total length changed within one set")            \
  X(fragment_past_total, "fragment data past the set's total length")                  \
  X(message_too_large, "message larger than the maximum packet size")                   \
  X(waiting_data_cap, "peer's buffered incoming data at its cap")                       \
  X(memory_cap, "host-wide buffered data at the configured memory cap")                 \
  X(throttled, "unreliable message dropped by the packet throttle")                    \
  X(over_limit, "unreliable message over the peer's intake rate or bandwidth")         \
  X(unexpected_ack, "acknowledgement for nothing in flight")                            \
  X(extension_not_agreed, "Tern extension command from a peer that did not agree to it") \
  X(unverified, "datagram from a source that has not acknowledged our VERIFY_CONNECT")  \
  X(invalid_cookie, "acknowledgement of a VERIFY_CONNECT with the wrong cookie")       \
  X(expired_cookie, "datagram for a handshake past HostConfig::half_open_timeout_ms") \
  X(rate_limited, "connect or discovery ping over its source's or prefix's rate")      \
  X(connect_shed, "CONNECT unanswered while the host reads far behind its input")      \
  X(banned, "handshake or discovery datagram from a banned address")                  \
  X(block_malformed, "block slice or ack whose sizes, count or length disagree")        \
  X(block_too_large, "block larger than HostConfig::max_block_size")                    \
  X(block_slice_out_of_range, "block slice index not below the slice count")           \
  X(block_mismatch, "block slice naming another block than the one in progress")       \
  X(block_memory, "block refused: the peer's blocks in progress at max_block_size") \
  X(discovery_off, "discovery ping to a host that does not answer them")              \
  X(bad_discovery, "discovery ping or pong too short, or a pong for no ping of ours")  \
  X(bad_pmtu, "path MTU probe or acknowledgement too short or naming an impossible size") \
  X(discovery_queue_full, "discovery answer not queued: too many wait for the flush") \
  X(token_required, "CONNECT without a connect token to a host whose security is required") \
  X(bad_token, "connect token truncated, forged, expired, unknown key or wrong server")  \
  X(token_reused, "connect token already used from another address")                  \
  X(bad_seal, "sealed datagram that does not authenticate, or unsealed from a secure peer") \
  X(replayed, "sealed datagram whose sequence number was already taken or is too old")
// clang-format on

enum class Drop : std::uint8_t { TERN_DROP_REASONS(TERN_DROP_ENUMERATOR) count_ };

inline constexpr std::array kDropReasonTable{TERN_DROP_REASONS(TERN_DROP_REASON)};
constexpr const auto& drop_reasons(Drop) { return kDropReasonTable; }

inline constexpr std::size_t kDropCount = base::kDropReasons<Drop>;
using base::drop_description;
using base::drop_name;
using DropCounters = base::DropCounters<Drop>;

}  // namespace tern::proto
