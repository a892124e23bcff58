// tern::drv::SocketDriver: kernel UDP sockets with recvmmsg/sendmmsg batching.
//
// Binding "0.0.0.0:P" or "1.2.3.4:P" opens an AF_INET socket; "[::]:P" / "*:P" opens an
// AF_INET6 dual-stack listener (IPV6_V6ONLY off) that serves IPv4 peers as ::ffff:a.b.c.d;
// any other IPv6 address opens an AF_INET6 socket. Endpoints are always reported in
// tern::Endpoint form (IPv4 mapped).
#pragma once

#include "driver.hpp"

#include <memory>
#include <string>

namespace tern::drv {

struct SocketOptions {
  Endpoint bind;                 // port 0 = ephemeral
  bool reuse_port = false;       // SO_REUSEPORT (runtime shards share one port)
  bool v6_only = false;          // for IPv6 binds: refuse IPv4-mapped traffic
  int receive_buffer = 4 << 20;  // SO_RCVBUF request
  int send_buffer = 4 << 20;     // SO_SNDBUF request
  std::size_t burst = 64;        // datagrams per recvmmsg/sendmmsg
};

class SocketDriver;
// Opens and binds the socket; on failure returns nullptr and a one-line reason in `error`.
std::unique_ptr<SocketDriver> open_socket_driver(const SocketOptions& options, std::string& error);

}  // namespace tern::drv
