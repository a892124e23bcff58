// tern::rt::SpscRing: the bounded cross-shard ring (DESIGN §4, STYLE habit 6).
//
// Exactly one producer thread and one consumer thread. Indices grow without bound and are
// masked on use, so "full" and "empty" need no spare slot and 64-bit counters never wrap in
// practice. Each side keeps a private copy of the other side's index and reloads the shared one
// only when the copy says the ring is full (producer) or empty (consumer): in steady state a
// side touches the other's cache line once per lap, not once per item.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <span>
#include <type_traits>

namespace tern::rt {

template <class T, std::size_t Capacity>
class SpscRing {
  static_assert(Capacity >= 2 && (Capacity & (Capacity - 1)) == 0,
                "capacity must be a power of two so indices can be masked");
  static_assert(std::is_trivially_copyable_v<T>,
                "rings carry small descriptors; payloads travel by reference");
  static_assert(std::is_default_constructible_v<T>);

 public:
  using value_type = T;
  static constexpr std::size_t capacity() { return Capacity; }

  SpscRing() = default;
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  // Producer side.
  bool try_push(const T& item) {
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_cache_ == Capacity) {
      head_cache_ = head_.load(std::memory_order_acquire);
      if (tail - head_cache_ == Capacity) return false;
    }
    slots_[tail & kMask] = item;
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Pushes as many leading items as fit and publishes them with a single release store, so the
  // consumer's cache line sees one write per batch. Returns how many were pushed.
  std::size_t push_batch(std::span<const T> items) {
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    std::size_t free = Capacity - (tail - head_cache_);
    if (free < items.size()) {
      head_cache_ = head_.load(std::memory_order_acquire);
      free = Capacity - (tail - head_cache_);
    }
    const std::size_t n = std::min(free, items.size());
    if (n == 0) return 0;
    copy_in(tail, items.first(n));
    tail_.store(tail + n, std::memory_order_release);
    return n;
  }

  // Consumer side.
  bool try_pop(T& out) {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    if (head == tail_cache_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head == tail_cache_) return false;
    }
    out = slots_[head & kMask];
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Pops up to out.size() items and releases their slots with a single store.
  std::size_t pop_batch(std::span<T> out) {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    std::size_t avail = tail_cache_ - head;
    if (avail < out.size()) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      avail = tail_cache_ - head;
    }
    const std::size_t n = std::min(avail, out.size());
    if (n == 0) return 0;
    copy_out(head, out.first(n));
    head_.store(head + n, std::memory_order_release);
    return n;
  }

  // Either side (or a monitor). Exact only when both sides are quiescent.
  std::size_t size_approx() const {
    // Head first: the tail read afterwards is at least as new, so the difference cannot go
    // negative; it can overshoot while the consumer races ahead, hence the clamp.
    const std::size_t head = head_.load(std::memory_order_acquire);
    const std::size_t tail = tail_.load(std::memory_order_acquire);
    return std::min(tail - head, Capacity);
  }
  bool empty() const { return size_approx() == 0; }

 private:
  static constexpr std::size_t kMask = Capacity - 1;
  // Destructive interference size, spelled out: GCC warns that
  // std::hardware_destructive_interference_size may differ between translation units.
  static constexpr std::size_t kCacheLine = 64;

  void copy_in(std::size_t tail, std::span<const T> items) {
    const std::size_t start = tail & kMask;
    const std::size_t first = std::min(items.size(), Capacity - start);
    std::copy_n(items.data(), first, slots_ + start);
    std::copy_n(items.data() + first, items.size() - first, slots_);
  }

  void copy_out(std::size_t head, std::span<T> out) {
    const std::size_t start = head & kMask;
    const std::size_t first = std::min(out.size(), Capacity - start);
    std::copy_n(slots_ + start, first, out.data());
    std::copy_n(slots_, out.size() - first, out.data() + first);
  }

  // Producer-owned line: the index it publishes and its stale view of the consumer.
  alignas(kCacheLine) std::atomic<std::size_t> tail_{0};
  std::size_t head_cache_ = 0;
  // Consumer-owned line, mirrored.
  alignas(kCacheLine) std::atomic<std::size_t> head_{0};
  std::size_t tail_cache_ = 0;
  // Slots start on a fresh line so the first descriptors do not share one with head_.
  alignas(kCacheLine) T slots_[Capacity]{};
};

}  // namespace tern::rt
