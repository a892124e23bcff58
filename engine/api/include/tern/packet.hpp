// tern::Packet: a reference-counted, pooled payload buffer.
//
// A message is written once and shared by reference: the fragments of one large message,
// the copies a relay fans out, and the event handed to the application all point at the same
// buffer. Buffers come from per-thread size-class free lists (64 B .. 4 MiB), so steady-state
// traffic does not touch the heap; larger buffers go straight to the allocator.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <span>
#include <utility>

namespace tern {

namespace detail {

struct PacketBuffer {
  std::atomic<std::uint32_t> refs;
  std::uint32_t size;
  std::uint32_t capacity;
  std::uint8_t size_class;  // kUnpooled for direct allocations
  PacketBuffer* next_free;
  std::byte* data() { return reinterpret_cast<std::byte*>(this + 1); }
};
static_assert(sizeof(PacketBuffer) % 8 == 0);

// Asks the CPU for the cache line at `p` (any address, null included: a prefetch never
// faults). GCC drops __builtin_prefetch from loops that do nothing else, which is exactly
// where a prefetch pass lives, so x86 gets the instruction itself.
inline void prefetch_line(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 (%0)" : : "r"(p));
#else
  __builtin_prefetch(p);
#endif
}

inline constexpr std::uint8_t kUnpooled = 0xff;
inline constexpr std::size_t kMinClassBytes = 64;
inline constexpr std::size_t kClassCount = 17;  // 64 B << 16 = 4 MiB

struct PacketFreeLists {
  PacketBuffer* head[kClassCount] = {};
  std::size_t cached_bytes = 0;
  std::size_t cache_limit = std::size_t{64} << 20;
  std::size_t live_buffers = 0;
  std::size_t live_bytes = 0;
  ~PacketFreeLists() {
    for (auto*& h : head) {
      while (h != nullptr) {
        PacketBuffer* next = h->next_free;
        ::operator delete (h, std::align_val_t{64});
        h = next;
      }
    }
  }
};

inline PacketFreeLists& free_lists() {
  thread_local PacketFreeLists lists;
  return lists;
}

inline std::uint8_t size_class_for(std::size_t size) {
  std::size_t cls_bytes = kMinClassBytes;
  for (std::uint8_t cls = 0; cls < kClassCount; ++cls, cls_bytes <<= 1) {
    if (size <= cls_bytes) return cls;
  }
  return kUnpooled;
}

inline PacketBuffer* acquire_buffer(std::size_t size) {
  auto& lists = free_lists();
  const std::uint8_t cls = size_class_for(size);
  PacketBuffer* buf = nullptr;
  std::size_t capacity = size;
  if (cls != kUnpooled) {
    capacity = kMinClassBytes << cls;
    buf = lists.head[cls];
    if (buf != nullptr) {
      lists.head[cls] = buf->next_free;
      lists.cached_bytes -= capacity;
      // A receive burst takes buffers one after another, and past a few hundred messages
      // between flushes the list's next buffer has left the cache: ask for it now, while
      // this one is filled, rather than stall on its link at the next take.
      prefetch_line(buf->next_free);
    }
  }
  if (buf == nullptr) {
    void* raw = ::operator new (sizeof(PacketBuffer) + capacity, std::align_val_t{64});
    buf = static_cast<PacketBuffer*>(raw);
  }
  buf->refs.store(1, std::memory_order_relaxed);
  buf->size = static_cast<std::uint32_t>(size);
  buf->capacity = static_cast<std::uint32_t>(capacity);
  buf->size_class = cls;
  buf->next_free = nullptr;
  ++lists.live_buffers;
  lists.live_bytes += capacity;
  return buf;
}

inline void release_buffer(PacketBuffer* buf) {
  auto& lists = free_lists();
  --lists.live_buffers;
  lists.live_bytes -= buf->capacity;
  if (buf->size_class != kUnpooled && lists.cached_bytes + buf->capacity <= lists.cache_limit) {
    buf->next_free = lists.head[buf->size_class];
    lists.head[buf->size_class] = buf;
    lists.cached_bytes += buf->capacity;
    return;
  }
  ::operator delete (buf, std::align_val_t{64});
}

}  // namespace detail

class Packet {
 public:
  Packet() = default;
  // Uninitialised payload of `size` bytes.
  static Packet allocate(std::size_t size) { return Packet(detail::acquire_buffer(size)); }
  static Packet copy_of(std::span<const std::byte> bytes) {
    Packet p = allocate(bytes.size());
    if (!bytes.empty()) std::memcpy(p.buf_->data(), bytes.data(), bytes.size());
    return p;
  }

  Packet(const Packet& other) : buf_(other.buf_) {
    if (buf_ != nullptr) buf_->refs.fetch_add(1, std::memory_order_relaxed);
  }
  Packet(Packet&& other) noexcept : buf_(std::exchange(other.buf_, nullptr)) {}
  Packet& operator=(const Packet& other) {
    if (this != &other) {
      Packet tmp(other);
      std::swap(buf_, tmp.buf_);
    }
    return *this;
  }
  Packet& operator=(Packet&& other) noexcept {
    if (this != &other) {
      reset();
      buf_ = std::exchange(other.buf_, nullptr);
    }
    return *this;
  }
  ~Packet() { reset(); }

  // The empty case stays inline: most packets that go out of scope were moved from, and a call
  // for each (the release path is too large to inline everywhere) was ~4% of the instructions
  // of an unsequenced echo (BM_EchoUnsequenced under callgrind).
  void reset() {
    if (buf_ != nullptr) drop_reference();
  }

  explicit operator bool() const { return buf_ != nullptr; }
  // Asks the CPU to bring the buffer's first line (reference count, size, first bytes) into
  // the cache, for code that will touch many buffers in turn and can ask for them all first.
  void prefetch() const { detail::prefetch_line(buf_); }
  // The same for a reader about to copy `length` payload bytes from `offset` on: the lines
  // holding the first of them and the last of the first 64. Reads nothing of the buffer, so a
  // cold one costs no miss here.
  void prefetch_payload(std::size_t offset, std::size_t length) const {
    if (buf_ == nullptr || length == 0) return;
    const std::byte* first = buf_->data() + offset;
    detail::prefetch_line(first);
    detail::prefetch_line(first + std::min<std::size_t>(length, 64) - 1);
  }
  std::size_t size() const { return buf_ != nullptr ? buf_->size : 0; }
  std::span<const std::byte> bytes() const {
    return buf_ != nullptr ? std::span<const std::byte>(buf_->data(), buf_->size)
                           : std::span<const std::byte>();
  }
  std::span<std::byte> mutable_bytes() {
    return buf_ != nullptr ? std::span<std::byte>(buf_->data(), buf_->size)
                           : std::span<std::byte>();
  }
  std::uint32_t use_count() const {
    return buf_ != nullptr ? buf_->refs.load(std::memory_order_relaxed) : 0;
  }

  // Bytes held by live packets allocated and released on this thread (a buffer released on
  // another thread is counted there: meaningful for single-threaded checks only).
  static std::size_t thread_live_bytes() { return detail::free_lists().live_bytes; }

  // References for a fan-out, taken in one atomic add where copying the packet n times would
  // take n (a locked read-modify-write each, ~7 ns). Each take() hands out one of them;
  // whatever is not taken is returned, again in one step, when the Shares go away. The
  // packet the shares were taken from must outlive them.
  class Shares {
   public:
    Shares(const Packet& from, std::uint32_t n) : buf_(from.buf_), left_(from.buf_ ? n : 0) {
      if (left_ != 0) buf_->refs.fetch_add(left_, std::memory_order_relaxed);
    }
    Shares(const Shares&) = delete;
    Shares& operator=(const Shares&) = delete;
    ~Shares() {
      // `from` still holds its own reference, so this never drops the last one.
      if (left_ != 0) buf_->refs.fetch_sub(left_, std::memory_order_acq_rel);
    }
    std::uint32_t left() const { return left_; }
    // One of the references as a packet; with none left, a copy of `from` (one more add).
    Packet take() {
      if (buf_ == nullptr) return Packet();
      if (left_ == 0) {
        buf_->refs.fetch_add(1, std::memory_order_relaxed);
      } else {
        --left_;
      }
      return Packet(buf_);
    }

   private:
    detail::PacketBuffer* buf_;
    std::uint32_t left_;
  };

  // For rings that carry trivially copyable descriptors between threads: into_raw() gives up
  // this packet's reference as a bare pointer, from_raw() takes it back exactly once.
  detail::PacketBuffer* into_raw() && { return std::exchange(buf_, nullptr); }
  static Packet from_raw(detail::PacketBuffer* raw) { return Packet(raw); }
  // Drops n references given up with into_raw() in one step (one locked subtract, or none
  // when they are the last): for code that collects the references it lets go of and finds
  // several to the same buffer, as a relay does when the copies of one message are
  // acknowledged.
  static void release_raw(detail::PacketBuffer* raw, std::uint32_t n) {
    if (raw == nullptr || n == 0) return;
    if (raw->refs.load(std::memory_order_acquire) == n ||
        raw->refs.fetch_sub(n, std::memory_order_acq_rel) == n) {
      detail::release_buffer(raw);
    }
  }

 private:
  explicit Packet(detail::PacketBuffer* buf) : buf_(buf) {}

  [[gnu::noinline]] void drop_reference() {
    if (last_reference()) detail::release_buffer(buf_);
    buf_ = nullptr;
  }

  // True when the reference being dropped was the last one. A sole owner skips the locked
  // read-modify-write: nobody else holds a reference to copy, so the count cannot rise
  // under us, and the acquire load orders the other threads' earlier releases before ours
  // as the decrement would. Most buffers (a received message, the last copy a relay fans
  // out) die this way.
  bool last_reference() const {
    if (buf_->refs.load(std::memory_order_acquire) == 1) return true;
    return buf_->refs.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }

  detail::PacketBuffer* buf_ = nullptr;
};

}  // namespace tern
