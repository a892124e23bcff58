// tern::rt::CoreIo: the receive and transmit steps of DESIGN §2 for one protocol core over one
// driver. Each shard runs them every poll iteration and tern::Host::service on every pass, so
// there is one receive loop and one transmit loop, and both honour the driver's transmit room.
// rt::KcpIo is the same two steps for the KCP personality's core (a shard's second listener):
// both are CoreIoFor, over the core and the datagram type its flush() fills.
//
// The I/O batches are allocated once, when the driver is attached; receive() and transmit()
// never touch the heap. The driver is called through rt::Driver, once per burst of up to
// kBatch frames, never per datagram.
#pragma once

#include "driver.hpp"
#include "host_core.hpp"
#include "kcp/kcp_core.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tern::rt {

struct CoreIoLimits {
  // Frames per rx_burst and datagrams per flush(): one burst of the drivers' batching.
  static constexpr std::size_t kBatch = 64;
  // Receive bursts per receive() call before timers and transmission get a turn, so a flooded
  // socket cannot starve the acks and retransmits of peers already connected. A receive reads
  // at most kMinRxBursts x kBatch datagrams while the input keeps running dry, so a burst of
  // traffic (a game tick's datagrams from every client) is answered in slices, not read whole
  // before the first answer goes out. Each receive that stops at its limit doubles the limit,
  // up to kMaxRxBursts (a few milliseconds of work, reached only while the input never runs
  // dry): past its capacity a relay's cost per copy falls with the messages read between
  // flushes, as each member's datagram carries more copies, and with fewer bursts an
  // overloaded socket relay fell into resending (perf/JOURNAL.md, 2026-11-26 and 2026-11-27).
  static constexpr std::size_t kMinRxBursts = 32;
  static constexpr std::size_t kMaxRxBursts = 128;
  // A short burst at least this long still counts as traffic that goes on (rx_more): under
  // load the next datagrams are on their way, and one more rx_burst fetches them for one
  // system call where a wait that returns at once and then the rx_burst cost two. Shorter
  // bursts are what an idle server's wake-ups find, and those go back to sleep.
  static constexpr std::size_t kDenseBurst = 8;
};

// Core: on_datagram(now, from, bytes) and flush(now, span<Datagram>) -> count; Datagram: `to`
// and view().
template <class Core, class Datagram>
class CoreIoFor : public CoreIoLimits {
 public:
  // Both must outlive this object. Reads the driver's capabilities once: they do not change.
  CoreIoFor(Core& core, Driver& driver)
      : core_(core),
        driver_(driver),
        caps_(driver.caps()),
        chunk_max_(std::clamp<std::size_t>(caps_.max_burst, 1, kBatch)),
        rx_(kBatch),
        out_(kBatch),
        tx_(kBatch) {}
  CoreIoFor(const CoreIoFor&) = delete;
  CoreIoFor& operator=(const CoreIoFor&) = delete;

  // Steps 1 and 4-5: up to the current burst limit (until one comes back empty, or short from a
  // driver whose short_burst_means_empty holds), each one's datagrams into the core at `now`.
  // `keep(frames)` sees every non-empty burst first and returns how many frames, moved to the
  // front in order, go on (a payload filter); `after_burst()` runs after each non-empty burst,
  // while its frames are still valid (step 6: the shard hands the events over there). Returns
  // the frames received.
  template <class Keep, class AfterBurst>
  std::size_t receive(std::uint64_t now, Keep&& keep, AfterBurst&& after_burst) {
    std::span<RxFrame> rx(rx_);
    std::size_t total = 0;
    for (std::size_t burst = 0; burst < rx_burst_limit_; ++burst) {
      const std::size_t n = driver_.rx_burst(rx);
      // Frames stay valid only until the next rx_burst, so each burst is consumed whole here.
      const std::size_t kept = n != 0 ? keep(rx.first(n)) : 0;
      for (std::size_t i = 0; i < kept; ++i) core_.on_datagram(now, rx[i].from, rx[i].bytes);
      if (n != 0) after_burst();
      total += n;
      if (n == 0 || (n < rx.size() && caps_.short_burst_means_empty)) {
        rx_more_ = n >= kDenseBurst;
        rx_burst_limit_ = kMinRxBursts;
        rx_behind_ = 0;
        // The input was found empty: whatever arrived before `now` has been read, acks
        // included. A receive that stops at the burst limit leaves the core's horizon where
        // it was, so it does not time out commands whose acks may be waiting unread.
        if constexpr (requires { core_.input_read_until(now); }) core_.input_read_until(now);
        return total;
      }
    }
    rx_more_ = true;
    rx_burst_limit_ = std::min(kMaxRxBursts, rx_burst_limit_ * 2);
    rx_behind_ += total;
    return total;
  }
  // Every frame to the core, nothing between bursts.
  std::size_t receive(std::uint64_t now) {
    return receive(
        now, [](std::span<RxFrame> frames) { return frames.size(); }, [] {});
  }

  // Steps 8-10: the core's timers and datagrams, built no faster than the driver's tx_room()
  // takes them and handed to tx_burst in chunks of its max_burst. What does not fit waits in
  // the core (dirty peers resume where they stopped) for a later call, after rx_burst has given
  // the driver a chance to drain; tx_waits() counts the calls put off that way.
  void transmit(std::uint64_t now) {
    for (;;) {
      const std::size_t room = std::min(out_.size(), driver_.tx_room());
      if (room == 0) {
        ++tx_waits_;
        return;
      }
      const std::size_t n = core_.flush(now, std::span<Datagram>(out_).first(room));
      for (std::size_t sent = 0; sent < n; sent += chunk_max_) {
        const std::size_t chunk = std::min(chunk_max_, n - sent);
        for (std::size_t i = 0; i < chunk; ++i) {
          tx_[i].to = out_[sent + i].to;
          tx_[i].bytes = out_[sent + i].view();
        }
        // Refusals are counted in the driver's stats; loss is the protocol's job.
        driver_.tx_burst(std::span<const TxFrame>(tx_.data(), chunk));
      }
      if (n < room) return;
    }
  }

  std::uint64_t tx_waits() const { return tx_waits_; }
  // Whether the last receive() may have left datagrams behind or is likely to find more at
  // once: it stopped at its burst limit, or its last burst, though short, held kDenseBurst or
  // more. A poll loop goes round again without sleeping while this holds; once it does not,
  // another rx_burst before the next wait would likely find the queue as empty as it just was
  // (a second recvmmsg returning EAGAIN on every wake-up of an idle server).
  bool rx_more() const { return rx_more_; }
  // Datagrams read since a receive() last found the input empty: how far input has been
  // arriving at least as fast as it is read (0 after any receive that drained it).
  std::size_t rx_behind() const { return rx_behind_; }
  const DriverCaps& caps() const { return caps_; }

 private:
  Core& core_;
  Driver& driver_;
  const DriverCaps caps_;
  const std::size_t chunk_max_;
  std::vector<RxFrame> rx_;
  std::vector<Datagram> out_;
  std::vector<TxFrame> tx_;
  std::uint64_t tx_waits_ = 0;
  std::size_t rx_burst_limit_ = kMinRxBursts;
  std::size_t rx_behind_ = 0;
  bool rx_more_ = false;
};

using CoreIo = CoreIoFor<proto::HostCore, proto::OutDatagram>;
using KcpIo = CoreIoFor<proto::kcp::KcpCore, proto::kcp::KcpDatagram>;

// Compiled once, in core_io.cpp.
extern template class CoreIoFor<proto::HostCore, proto::OutDatagram>;
extern template class CoreIoFor<proto::kcp::KcpCore, proto::kcp::KcpDatagram>;

}  // namespace tern::rt
