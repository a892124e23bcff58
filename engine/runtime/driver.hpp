// tern::rt::Driver: the one frame-I/O interface every backend implements (DESIGN §6).
//
// The data path is two burst calls. rx_burst never blocks; wait() is the idle policy's only
// blocking point. Frames returned by rx_burst stay valid until the next rx_burst call on the
// same driver. Drivers see datagrams and endpoints, never protocol types.
#pragma once

#include <tern/endpoint.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>

namespace tern::rt {

struct RxFrame {
  Endpoint from;
  std::span<const std::byte> bytes;
};

struct TxFrame {
  Endpoint to;
  std::span<const std::byte> bytes;
};

struct DriverCaps {
  bool dual_stack = false;     // one listener serves IPv4 and IPv6
  bool waitable = true;        // wait() can sleep until traffic or a deadline
  std::size_t max_burst = 64;  // frames per rx_burst/tx_burst call that the backend batches
  std::size_t max_datagram = 65507;
  // A burst shorter than asked for means nothing more is waiting (a socket's recvmmsg). A
  // driver whose receive completes in the background (io_uring) may return a short burst with
  // more right behind it, and is asked again while bursts bring anything.
  bool short_burst_means_empty = true;
};

// The device under a kernel-bypass driver. Only the driver of the port's first queue reports
// it (the others leave it as is), so sums over shards are port totals. Kernel sockets have no
// port of their own and leave it alone.
struct PortStats {
  std::int32_t link = -1;  // -1 not known, 0 down, 1 up
  std::uint32_t link_speed_mbps = 0;
  std::uint64_t rx_packets = 0;
  std::uint64_t tx_packets = 0;
  std::uint64_t rx_missed = 0;   // the device had no room to receive (our rx ring was full)
  std::uint64_t rx_no_mbuf = 0;  // no buffer to receive into
  std::uint64_t rx_errors = 0;
  std::uint64_t tx_errors = 0;
};

struct DriverStats {
  std::uint64_t rx_datagrams = 0;
  std::uint64_t rx_bytes = 0;
  std::uint64_t tx_datagrams = 0;
  std::uint64_t tx_bytes = 0;
  std::uint64_t rx_truncated = 0;  // datagrams larger than the receive buffer
  std::uint64_t tx_dropped = 0;    // refused by the backend (full queue, unreachable)
  // Kernel sockets: datagrams the kernel dropped because our receive buffer was full (read
  // from the socket every 100 ms and on refresh_stats).
  std::uint64_t rx_kernel_dropped = 0;
  std::uint64_t rx_errors = 0;
  std::uint64_t tx_errors = 0;
  // Frames accepted by tx_burst but held for a full transmit queue (a gauge).
  std::uint64_t tx_backlog = 0;
  // System calls the driver made, by the call that made them (kernel drivers; io_uring counts
  // io_uring_enter): a receive that found nothing and a wait that did not sleep count too, so
  // the calls per wake-up show what an idle server pays beyond its datagrams.
  std::uint64_t rx_syscalls = 0;
  std::uint64_t tx_syscalls = 0;
  std::uint64_t wait_syscalls = 0;
  PortStats port;
};

class Driver {
 public:
  virtual ~Driver() = default;

  // Fill up to out.size() frames; returns how many. Never blocks.
  virtual std::size_t rx_burst(std::span<RxFrame> out) = 0;
  // Send the frames; returns how many were handed to the backend (the rest are dropped and
  // counted in tx_dropped: UDP offers no back-pressure contract worth blocking for).
  virtual std::size_t tx_burst(std::span<const TxFrame> frames) = 0;
  // How many frames tx_burst would take now without dropping any. A shard builds no more than
  // this, so a transmit queue that fills (the peer stopped reading for a moment) holds the rest
  // back in the protocol core as delay instead of turning it into loss, which reliable delivery
  // would then repair with retransmissions into the same full queue. Backends that cannot tell
  // (kernel sockets) say "unlimited".
  virtual std::size_t tx_room() const { return std::numeric_limits<std::size_t>::max(); }
  // The shard's clock (steady, µs), given before an iteration's receive and transmit steps:
  // drivers that keep timers of their own (DPDK: ARP, the transmit backlog's give-up) use it
  // instead of reading the clock on every burst. Until it is first called, they read the
  // clock themselves.
  virtual void set_time(std::uint64_t now_us) { (void)now_us; }
  // The owner promises to call rx_burst or wait() soon after every tx_burst (a poll loop does),
  // so a driver may hold a small burst, its bytes copied, and hand it to the kernel with the
  // system call that receive or wait makes anyway (io_uring: one io_uring_enter per wake-up).
  // Off until asked: a caller that sends and then goes away expects the datagrams gone.
  virtual void set_tx_deferred(bool on) { (void)on; }
  // Sleep until a frame may be ready or `timeout_us` passed (0 = just check). Returns early on
  // traffic, and when the wake fd (below) becomes readable. Drivers whose time is virtual (sim)
  // return immediately. A wait that ended without traffic may answer for the rx_burst called
  // right after it (no system call to learn the queue is still empty), so call rx_burst
  // after a wait, not some time later.
  virtual void wait(std::uint64_t timeout_us) = 0;
  // An fd (an eventfd) that other threads make readable to end a wait() early: how a sleeping
  // shard hears about post()ed work and cross-shard messages. The caller owns the fd; the
  // driver reads it empty whenever it finds it readable. -1 watches nothing.
  virtual void set_wake_fd(int fd) = 0;
  // A descriptor that polls readable when rx_burst has frames (kernel sockets: the socket),
  // so an owner with a second driver can sleep on both (a shard's KCP port); -1 when the
  // backend has none to offer.
  virtual int readiness_fd() const { return -1; }

  virtual Endpoint local_endpoint() const = 0;
  virtual DriverCaps caps() const = 0;
  virtual DriverStats stats() const = 0;
  // Brings counters the driver reads only now and then (a port's) up to date; the shard calls
  // it once more before its last report.
  virtual void refresh_stats() {}
  virtual std::string name() const = 0;
};

class Clock;

// The backends in drivers/. Which of them a build has is the factory's business
// (drivers/factory: drv::driver_built); the engine only names them.
enum class DriverKind : std::uint8_t {
  socket,  // kernel UDP sockets, recvmmsg/sendmmsg
  uring,   // io_uring when it can be set up (and is built), else the socket driver
  dpdk,    // one queue pair of the port the process set up with drv::dpdk_init
  sim,     // an address on an in-memory network (tests)
};

// Everything a driver is opened with; each kind reads the fields it needs.
struct DriverSpec {
  DriverKind kind = DriverKind::socket;
  // socket, uring: the address to bind (port 0: ephemeral). dpdk: only the UDP port counts,
  // and it must not be 0 (the address is the port's). sim: the address to attach.
  Endpoint bind;
  bool reuse_port = false;       // socket, uring: SO_REUSEPORT (shards sharing one port)
  int receive_buffer = 4 << 20;  // socket, uring: SO_RCVBUF request
  int send_buffer = 4 << 20;     // socket, uring: SO_SNDBUF request
  std::size_t burst = 64;        // socket, uring: datagrams per system call
  // dpdk: the queue pair to open. Every kind: the shard this driver serves, for messages.
  unsigned queue = 0;
  // sim: the drv::SimNetwork to attach to (a network is its own clock, hence the type).
  Clock* sim_network = nullptr;
};

// Opens a driver on the calling thread (io_uring and DPDK queues belong to the thread that
// opens them). nullptr with a one-line reason in `error` when it cannot.
using DriverOpener = std::unique_ptr<Driver> (*)(const DriverSpec& spec, std::string& error);

// The driver factory. Declared here and defined once, outside the engine, by drivers/factory
// (library tern_driver_factory), so no engine source names a concrete driver: a program that
// opens drivers by kind links the factory (tern_api_dep does, for tern::Host::listen), and a
// shard group is handed it (ShardGroupOptions::open_driver = rt::open_driver) or any other
// DriverOpener.
std::unique_ptr<Driver> open_driver(const DriverSpec& spec, std::string& error);

// A monotonic clock in microseconds. Real hosts use the steady clock; simulated networks
// supply their own virtual time.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual std::uint64_t now_us() = 0;
};

class SteadyClock final : public Clock {
 public:
  std::uint64_t now_us() override;
};

}  // namespace tern::rt
