// Conversions between tern::Endpoint and the kernel's socket addresses, shared by every
// driver that talks to kernel sockets (socket, uring).
#pragma once

#include <tern/endpoint.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstring>

namespace tern::drv {

// Endpoint -> sockaddr for a socket of the given family. Returns 0 when the destination cannot
// be reached from this socket (IPv6 from an AF_INET socket, IPv4 from a v6-only one).
inline socklen_t endpoint_to_sockaddr(const Endpoint& e, bool ipv6, bool dual_stack,
                                      sockaddr_storage& out) {
  if (!ipv6) {
    if (!e.is_v4()) return 0;
    auto& sin = reinterpret_cast<sockaddr_in&>(out);
    sin = sockaddr_in{};
    sin.sin_family = AF_INET;
    sin.sin_port = htons(e.port);
    sin.sin_addr.s_addr = htonl(e.v4_host_order());
    return sizeof(sockaddr_in);
  }
  if (e.is_v4() && !dual_stack) return 0;
  auto& sin6 = reinterpret_cast<sockaddr_in6&>(out);
  sin6 = sockaddr_in6{};
  sin6.sin6_family = AF_INET6;
  sin6.sin6_port = htons(e.port);
  // Endpoint already keeps IPv4 as ::ffff:a.b.c.d, which is what a dual-stack socket expects.
  std::memcpy(&sin6.sin6_addr, e.addr.data(), 16);
  return sizeof(sockaddr_in6);
}

// sockaddr -> Endpoint. `name` may be unaligned (io_uring places it inside a receive buffer),
// so it is copied before being read as a struct. False for other families or short names.
inline bool sockaddr_to_endpoint(const void* name, std::size_t len, Endpoint& out) {
  sockaddr_storage ss{};
  if (len > sizeof ss || len < sizeof(sa_family_t)) return false;
  std::memcpy(&ss, name, len);
  if (ss.ss_family == AF_INET && len >= sizeof(sockaddr_in)) {
    const auto& sin = reinterpret_cast<const sockaddr_in&>(ss);
    out = Endpoint::v4(ntohl(sin.sin_addr.s_addr), ntohs(sin.sin_port));
    return true;
  }
  if (ss.ss_family == AF_INET6 && len >= sizeof(sockaddr_in6)) {
    const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(ss);
    out = Endpoint{};
    std::memcpy(out.addr.data(), &sin6.sin6_addr, 16);
    out.port = ntohs(sin6.sin6_port);
    return true;
  }
  return false;
}

}  // namespace tern::drv
