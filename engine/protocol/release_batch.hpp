// The message references the protocol core lets go of, dropped several at a time.
#pragma once

#include <tern/packet.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace tern::proto {

// Message references the core lets go of (acknowledged or dropped commands), held until
// flush() and dropped several at a time: a relay's copies of one message to different members
// are acknowledged within the same few receive bursts, and dropping each alone costs a locked
// subtract on a line that has usually left the cache. A direct-mapped table: a buffer already
// in its slot gains a count, any other evicts it (dropping what it holds).
class ReleaseBatch {
 public:
  static constexpr std::size_t kSlots = 256;

  ReleaseBatch() = default;
  ReleaseBatch(const ReleaseBatch&) = delete;
  ReleaseBatch& operator=(const ReleaseBatch&) = delete;
  ~ReleaseBatch() { flush(); }

  void add(detail::PacketBuffer* raw) {
    // Buffers are 64-byte aligned: the bits above the alignment spread them over the slots.
    const std::size_t i = (reinterpret_cast<std::uintptr_t>(raw) >> 6) % kSlots;
    Slot& s = slots_[i];
    if (s.raw == raw) {
      ++s.count;
      return;
    }
    if (s.raw != nullptr) {
      Packet::release_raw(s.raw, s.count);
    } else {
      used_[used_n_++] = static_cast<std::uint16_t>(i);
    }
    s.raw = raw;
    s.count = 1;
  }

  void flush() {
    for (std::size_t k = 0; k < used_n_; ++k) {
      Slot& s = slots_[used_[k]];
      Packet::release_raw(s.raw, s.count);
      s.raw = nullptr;
      s.count = 0;
    }
    used_n_ = 0;
  }

 private:
  struct Slot {
    detail::PacketBuffer* raw = nullptr;
    std::uint32_t count = 0;
  };
  std::array<Slot, kSlots> slots_{};
  std::array<std::uint16_t, kSlots> used_{};  // occupied slots, so flush() visits only those
  std::size_t used_n_ = 0;
};

}  // namespace tern::proto
