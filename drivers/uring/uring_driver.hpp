// tern::drv::UringDriver: one UDP socket driven through io_uring (DESIGN §6).
//
// Receive is a single multishot recvmsg that the kernel keeps filling from a provided buffer
// ring, so a quiet socket costs no syscall per datagram and a busy one costs one
// io_uring_enter per rx_burst. Transmit prepares one sendmsg per frame and submits the burst
// once. Bind semantics are the socket driver's (the socket is opened by it, see the .cpp).
//
// The ring is set up single-issuer with deferred task run: open the driver on the thread that
// polls it (the shard's own thread) and call it from no other.
#pragma once

#include "driver.hpp"
#include "socket_driver.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

namespace tern::drv {

struct UringOptions {
  SocketOptions socket;              // bind address, SO_REUSEPORT, buffers; burst = max_burst
  unsigned ring_entries = 256;       // submission queue size
  unsigned cq_entries = 0;           // 0 = room for every buffer plus two rings of sends
  unsigned buffer_count = 1024;      // provided receive buffers; rounded up to a power of two
  std::size_t buffer_size = 8192;    // payload bytes per receive buffer (larger = rx_truncated)
  bool sqpoll = false;               // a kernel thread polls the submission queue
  unsigned sqpoll_idle_ms = 1000;    // how long that thread spins before it sleeps
  bool force_fail_for_test = false;  // make open fail as if io_uring were unavailable
};

// What io_uring adds to rt::DriverStats: the events that explain a gap in reception.
struct UringStats {
  std::uint64_t rx_no_buffers = 0;  // multishot recv ended because the buffer ring ran dry
  std::uint64_t rx_rearms = 0;      // multishot recv submitted again after it ended
  std::uint64_t cq_overflows = 0;   // completions the kernel had to hold back (CQ was full)
  unsigned setup_flags = 0;         // IORING_SETUP_* the kernel accepted
};

// Opens the socket and the ring; on failure returns nullptr and a one-line reason in `error`.
std::unique_ptr<rt::Driver> open_uring_driver(const UringOptions& options, std::string& error);

// io_uring when it can be set up, else the socket driver with the same socket options; the
// fallback is announced with one line on stderr. nullptr (and `error`) only when neither opens.
std::unique_ptr<rt::Driver> open_best_driver(const UringOptions& options, std::string& error);

class UringDriver final : public rt::Driver {
 public:
  ~UringDriver() override;
  UringDriver(const UringDriver&) = delete;
  UringDriver& operator=(const UringDriver&) = delete;

  std::size_t rx_burst(std::span<rt::RxFrame> out) override;
  std::size_t tx_burst(std::span<const rt::TxFrame> frames) override;
  void wait(std::uint64_t timeout_us) override;
  void set_wake_fd(int fd) override;
  void set_tx_deferred(bool on) override;

  Endpoint local_endpoint() const override { return local_; }
  rt::DriverCaps caps() const override;
  rt::DriverStats stats() const override { return stats_; }
  void set_time(std::uint64_t now_us) override;
  void refresh_stats() override;
  std::string name() const override { return "uring"; }

  UringStats uring_stats() const { return ustats_; }

 private:
  struct State;  // ring, buffer ring and scratch arrays; keeps liburing out of this header

  explicit UringDriver(std::unique_ptr<State> state);
  friend std::unique_ptr<rt::Driver> open_uring_driver(const UringOptions&, std::string&);

  void recycle_held();
  void arm_receive();
  void reap();
  void reap_one(std::uint64_t user_data, std::int32_t res, std::uint32_t flags);
  bool frame_from(std::uint16_t bid, std::int32_t res, rt::RxFrame& frame);
  void give_back(std::uint16_t bid);
  void publish_buffers();
  void enter_for_rx();
  bool hold_small_burst(std::span<const rt::TxFrame> frames, std::size_t& handed);
  void submit_held();

  std::unique_ptr<State> s_;
  Endpoint local_;
  rt::DriverStats stats_;
  KernelDropPoll drop_poll_;
  UringStats ustats_;
};

}  // namespace tern::drv
