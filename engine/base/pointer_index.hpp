// PointerIndex: a map from a 64-bit key to a pointer, for finding one object among many that
// some list already holds.
//
// The protocol core keeps the reliable commands it has transmitted in a list in send order,
// which is what retransmission wants, and must find the one an acknowledgement names. ENet
// walks that list; once acknowledgements go missing, the commands behind them stay at the
// front until they time out and every later acknowledgement walks past them, so the cost per
// acknowledgement grows with the backlog exactly when the host is already overloaded. This
// index keeps that lookup constant.
//
// Open addressing with linear probing at a load of at most 1/2, and deletion by shifting the
// following run back (no tombstones, so a table with constant churn stays fast). Keys are
// hashed with splitmix64, so keys that differ in a few low bits (sequence numbers) spread out.
// The table only grows, doubling when half full: it ends at the high-water mark of live
// entries, and inserting allocates only when it passes a new one.
#pragma once

#include "mix.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::base {

template <class T>
class PointerIndex {
 public:
  explicit PointerIndex(std::size_t initial_capacity = 256) {
    std::size_t c = 16;
    while (c < initial_capacity) c *= 2;
    slots_.assign(c, Slot{});
  }

  // Adds or replaces the entry for `key`. `value` must not be null.
  void insert(std::uint64_t key, T* value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    place(key, value);
  }

  T* find(std::uint64_t key) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = home(key);; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.value == nullptr) return nullptr;
      if (s.key == key) return s.value;
    }
  }

  // True if `key` was there.
  bool erase(std::uint64_t key) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = home(key);
    for (;; i = (i + 1) & mask) {
      if (slots_[i].value == nullptr) return false;
      if (slots_[i].key == key) break;
    }
    // Backward shift: pull later entries of the run into the hole unless that would move one
    // before its home bucket.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask; slots_[j].value != nullptr; j = (j + 1) & mask) {
      const std::size_t h = home(slots_[j].key);
      // Is h cyclically in (hole, j]? Then the entry must stay where it is.
      const bool stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return slots_.size(); }

 private:
  struct Slot {
    std::uint64_t key = 0;
    T* value = nullptr;  // null: empty
  };

  std::size_t home(std::uint64_t key) const {
    return static_cast<std::size_t>(mix64(key)) & (slots_.size() - 1);
  }

  void place(std::uint64_t key, T* value) {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = home(key);; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.value == nullptr) {
        s = Slot{key, value};
        ++size_;
        return;
      }
      if (s.key == key) {
        s.value = value;
        return;
      }
    }
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old) {
      if (s.value != nullptr) place(s.key, s.value);
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace tern::base
