#include "core_io.hpp"

#include <algorithm>

namespace tern::rt {

CoreIo::CoreIo(proto::HostCore& core, Driver& driver)
    : core_(core),
      driver_(driver),
      caps_(driver.caps()),
      chunk_max_(std::clamp<std::size_t>(caps_.max_burst, 1, kBatch)),
      rx_(kBatch),
      out_(kBatch),
      tx_(kBatch) {}

std::size_t CoreIo::receive(std::uint64_t now) {
  return receive(
      now, [](std::span<RxFrame> frames) { return frames.size(); }, [] {});
}

void CoreIo::transmit(std::uint64_t now) {
  for (;;) {
    const std::size_t room = std::min(out_.size(), driver_.tx_room());
    if (room == 0) {
      ++tx_waits_;
      return;
    }
    const std::size_t n = core_.flush(now, std::span<proto::OutDatagram>(out_).first(room));
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

KcpIo::KcpIo(proto::kcp::KcpCore& core, Driver& driver)
    : core_(core),
      driver_(driver),
      caps_(driver.caps()),
      chunk_max_(std::clamp<std::size_t>(caps_.max_burst, 1, kBatch)),
      rx_(kBatch),
      out_(kBatch),
      tx_(kBatch) {}

void KcpIo::transmit(std::uint64_t now) {
  for (;;) {
    const std::size_t room = std::min(out_.size(), driver_.tx_room());
    if (room == 0) {
      ++tx_waits_;
      return;
    }
    const std::size_t n = core_.flush(now, std::span<proto::kcp::KcpDatagram>(out_).first(room));
    for (std::size_t sent = 0; sent < n; sent += chunk_max_) {
      const std::size_t chunk = std::min(chunk_max_, n - sent);
      for (std::size_t i = 0; i < chunk; ++i) {
        tx_[i].to = out_[sent + i].to;
        tx_[i].bytes = out_[sent + i].view();
      }
      driver_.tx_burst(std::span<const TxFrame>(tx_.data(), chunk));
    }
    if (n < room) return;
  }
}

}  // namespace tern::rt
