// tern::drv::SocketDriver: kernel UDP sockets with recvmmsg/sendmmsg batching.
//
// Binding "0.0.0.0:P" or "1.2.3.4:P" opens an AF_INET socket; "[::]:P" / "*:P" opens an
// AF_INET6 dual-stack listener (IPV6_V6ONLY off) that serves IPv4 peers as ::ffff:a.b.c.d;
// any other IPv6 address opens an AF_INET6 socket. Endpoints are always reported in
// tern::Endpoint form (IPv4 mapped).
#pragma once

#include "driver.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
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

// The datagrams the kernel has dropped for socket `fd` because its receive buffer was full
// (SO_MEMINFO); 0 when the kernel cannot tell.
std::uint64_t kernel_receive_drops(int fd);

// Reads kernel_receive_drops into `stats` at most every 100 ms of the shard's clock: the drivers'
// set_time hook, so the per-packet path makes no extra system call.
struct KernelDropPoll {
  std::uint64_t next_us = 0;
  void poll(int fd, std::uint64_t now_us, rt::DriverStats& stats) {
    if (now_us < next_us) return;
    next_us = now_us + 100'000;
    stats.rx_kernel_dropped = kernel_receive_drops(fd);
  }
};

class SocketDriver;
// Opens and binds the socket; on failure returns nullptr and a one-line reason in `error`.
std::unique_ptr<SocketDriver> open_socket_driver(const SocketOptions& options, std::string& error);

class SocketDriver final : public rt::Driver {
 public:
  // ENet's largest MTU is 4096; a slot twice that leaves room for extensions, and anything
  // bigger is not ours: the kernel truncates it and rx_burst drops it as rx_truncated.
  static constexpr std::size_t kRxSlotBytes = 8192;
  // recvmmsg/sendmmsg refuse vectors longer than UIO_MAXIOV.
  static constexpr std::size_t kMaxBurst = 1024;

  ~SocketDriver() override;
  SocketDriver(const SocketDriver&) = delete;
  SocketDriver& operator=(const SocketDriver&) = delete;

  std::size_t rx_burst(std::span<rt::RxFrame> out) override;
  std::size_t tx_burst(std::span<const rt::TxFrame> frames) override;
  void wait(std::uint64_t timeout_us) override;
  void set_wake_fd(int fd) override { wake_fd_ = fd; }
  int readiness_fd() const override { return fd_; }

  Endpoint local_endpoint() const override { return local_; }
  rt::DriverCaps caps() const override;
  rt::DriverStats stats() const override { return stats_; }
  void set_time(std::uint64_t now_us) override { drop_poll_.poll(fd_, now_us, stats_); }
  void refresh_stats() override { stats_.rx_kernel_dropped = kernel_receive_drops(fd_); }
  std::string name() const override { return "socket"; }

  // Beyond rt::Driver: the descriptor, for callers that multiplex several drivers in one
  // poll set, and the receive buffer the kernel actually granted (it may clamp the request).
  int fd() const { return fd_; }
  int receive_buffer_bytes() const;

 private:
  struct Batch;  // mmsghdr vectors and receive slots; keeps <sys/socket.h> out of this header

  SocketDriver(int fd, bool ipv6, bool dual_stack, std::size_t burst, const Endpoint& local);
  friend std::unique_ptr<SocketDriver> open_socket_driver(const SocketOptions&, std::string&);

  // Sends up to burst_ frames; `wait_budget` bounds how often this tx_burst call may sleep
  // on a full socket buffer before it gives up and drops.
  std::size_t send_chunk(std::span<const rt::TxFrame> frames, int& wait_budget);

  int fd_ = -1;
  int wake_fd_ = -1;  // not owned
  bool ipv6_ = false;
  bool dual_stack_ = false;
  std::size_t burst_ = 64;
  // The last wait() saw the socket not readable (it woke on its deadline or the wake fd): the
  // rx_burst right after it returns nothing without asking the kernel, and the next wait()
  // looks again. Cleared by that rx_burst.
  bool rx_known_empty_ = false;
  // Receive entries whose msg_namelen the kernel overwrote in the last recvmmsg.
  std::size_t rx_names_used_ = 0;
  Endpoint local_;
  rt::DriverStats stats_;
  KernelDropPoll drop_poll_;
  std::unique_ptr<Batch> batch_;
};

}  // namespace tern::drv
