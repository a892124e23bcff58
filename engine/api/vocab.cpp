// Formatting and parsing for the vocabulary types (tern/endpoint.hpp, tern/types.hpp).
#include <tern/endpoint.hpp>
#include <tern/types.hpp>

#include <arpa/inet.h>

#include <charconv>
#include <cstdio>

namespace tern {

std::string Endpoint::to_string() const {
  char buf[INET6_ADDRSTRLEN + 16];
  if (is_v4()) {
    std::snprintf(buf, sizeof buf, "%u.%u.%u.%u:%u", addr[12], addr[13], addr[14], addr[15], port);
    return buf;
  }
  char host[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, addr.data(), host, sizeof host);
  std::snprintf(buf, sizeof buf, "[%s]:%u", host, port);
  return buf;
}

std::optional<Endpoint> Endpoint::parse(std::string_view text) {
  std::string_view host;
  std::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return std::nullopt;
    }
    host = text.substr(1, close - 1);
    port_text = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return std::nullopt;  // bare IPv6 needs []
  }
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535 ||
      port_text.empty()) {
    return std::nullopt;
  }
  Endpoint e;
  e.port = static_cast<std::uint16_t>(port);
  if (host == "*" || host == "::") return e;  // IPv6 any: a dual-stack listener
  if (host == "localhost") return Endpoint::v4(0x7f000001u, e.port);
  const std::string host_str(host);
  in_addr a4{};
  if (::inet_pton(AF_INET, host_str.c_str(), &a4) == 1)
    return Endpoint::v4(ntohl(a4.s_addr), e.port);
  in6_addr a6{};
  if (::inet_pton(AF_INET6, host_str.c_str(), &a6) == 1) {
    std::memcpy(e.addr.data(), &a6, 16);
    return e;
  }
  return std::nullopt;
}

const char* to_string(Delivery d) {
  switch (d) {
    case Delivery::reliable: return "reliable";
    case Delivery::unreliable: return "unreliable";
    case Delivery::unsequenced: return "unsequenced";
    case Delivery::reliable_unordered: return "reliable_unordered";
    case Delivery::reliable_sequenced: return "reliable_sequenced";
  }
  return "unknown";
}

const char* to_string(DisconnectReason r) {
  switch (r) {
    case DisconnectReason::none: return "none";
    case DisconnectReason::remote: return "remote";
    case DisconnectReason::local: return "local";
    case DisconnectReason::timeout: return "timeout";
    case DisconnectReason::refused: return "refused";
    case DisconnectReason::replaced: return "replaced";
    case DisconnectReason::evicted: return "evicted";
    case DisconnectReason::protocol_error: return "protocol_error";
  }
  return "unknown";
}

const char* to_string(PeerState s) {
  switch (s) {
    case PeerState::disconnected: return "disconnected";
    case PeerState::connecting: return "connecting";
    case PeerState::acknowledging_connect: return "acknowledging_connect";
    case PeerState::connection_pending: return "connection_pending";
    case PeerState::connection_succeeded: return "connection_succeeded";
    case PeerState::connected: return "connected";
    case PeerState::disconnect_later: return "disconnect_later";
    case PeerState::disconnecting: return "disconnecting";
    case PeerState::acknowledging_disconnect: return "acknowledging_disconnect";
    case PeerState::zombie: return "zombie";
  }
  return "unknown";
}

const char* to_string(SendResult r) {
  switch (r) {
    case SendResult::ok: return "ok";
    case SendResult::not_connected: return "not_connected";
    case SendResult::bad_channel: return "bad_channel";
    case SendResult::too_large: return "too_large";
    case SendResult::queue_full: return "queue_full";
    case SendResult::not_reliable: return "not_reliable";
    case SendResult::block_busy: return "block_busy";
  }
  return "unknown";
}

}  // namespace tern
