// Intrusive doubly linked lists and a chunked free-list pool: the core's queues never
// allocate per command once warm (DESIGN §2).
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tern::proto {

// T has `T* prev_` and `T* next_` members; the first node's prev_ and the last node's next_
// are nullptr. The list keeps both ends, so push_back() touches only the last node: a peer's
// in-flight list gains commands at its back on every flush while its front is the oldest
// command waiting for an acknowledgement, which has long left the cache (reaching the back
// through the front cost a relay a miss per peer per flush). size() walks the list.
template <class T>
class IntrusiveList {
 public:
  bool empty() const { return head_ == nullptr; }
  T* front() const { return head_; }
  T* back() const { return tail_; }
  // The node before `n`, or nullptr at the front.
  static T* prev(const T* n) { return n->prev_; }
  // The node after `n`, or nullptr at the back.
  static T* next(const T* n) { return n->next_; }
  std::size_t size() const {
    std::size_t n = 0;
    for (const T* c = head_; c != nullptr; c = c->next_) ++n;
    return n;
  }

  void push_back(T* n) { insert_after(tail_, n); }
  void push_front(T* n) { insert_after(nullptr, n); }

  // Inserts `n` after `pos`; pos == nullptr inserts at the front.
  void insert_after(T* pos, T* n) {
    T* after = pos != nullptr ? pos->next_ : head_;
    n->prev_ = pos;
    n->next_ = after;
    (pos != nullptr ? pos->next_ : head_) = n;
    (after != nullptr ? after->prev_ : tail_) = n;
  }

  void remove(T* n) {
    (n->prev_ != nullptr ? n->prev_->next_ : head_) = n->next_;
    (n->next_ != nullptr ? n->next_->prev_ : tail_) = n->prev_;
    n->prev_ = n->next_ = nullptr;
  }

  T* pop_front() {
    T* n = head_;
    if (n != nullptr) remove(n);
    return n;
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
};

// Objects are constructed on get() and destroyed on put(); their storage is recycled.
//
// The free slots are kept as a stack of pointers, not as a list threaded through the slots:
// popping a list reads the slot it pops (for the next link), and a slot freed long ago has
// left the cache. A relay frees commands as acknowledgements come in and takes them as
// messages fan out, in separate bursts, so its pops dig that deep: the list's read was 17%
// of tern-relay's time at 800 Hz on memif. The stack's top is one hot line, and the slot
// handed out a few gets later is prefetched for the constructor that will write it.
template <class T>
class Pool {
 public:
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() = default;  // chunks free their storage; live objects must be put() back first

  // Always inlined: a call costs as much as its few loads and stores, and the pools are taken
  // from on the per-packet path (a peer's queues block, each queued command).
  template <class... Args>
  [[gnu::always_inline]] T* get(Args&&... args) {
    if (free_count_ == 0) grow();
    Slot* s = free_[--free_count_];
    if (free_count_ >= kPrefetchAhead) __builtin_prefetch(free_[free_count_ - kPrefetchAhead], 1);
    ++live_;
    return new (s->storage) T(std::forward<Args>(args)...);
  }

  void put(T* obj) {
    obj->~T();
    // Never overflows: the stack has room for every slot of every chunk.
    free_[free_count_++] = reinterpret_cast<Slot*>(obj);
    --live_;
  }

  std::size_t live() const { return live_; }

 private:
  struct Slot {
    alignas(T) unsigned char storage[sizeof(T)];
  };
  static constexpr std::size_t kChunk = 256;
  static constexpr std::size_t kPrefetchAhead = 4;

  // Out of line: inlined, the chunk's allocation made every get() save and restore registers
  // it only needs once per 256 objects.
  [[gnu::noinline]] void grow() {
    auto chunk = std::make_unique<Slot[]>(kChunk);
    const std::size_t slots = (chunks_.size() + 1) * kChunk;
    if (slots > free_capacity_) {
      // Doubling: a host under overload grows by thousands of chunks, and re-sizing the
      // stack for each would cost quadratic time exactly then.
      const std::size_t capacity = std::max(slots, 2 * free_capacity_);
      auto stack = std::make_unique_for_overwrite<Slot*[]>(capacity);
      std::copy_n(free_.get(), free_count_, stack.get());
      free_ = std::move(stack);
      free_capacity_ = capacity;
    }
    // Pushed last to first, so get() hands them out in address order.
    for (std::size_t i = kChunk; i-- > 0;) free_[free_count_++] = &chunk[i];
    chunks_.push_back(std::move(chunk));
  }

  std::vector<std::unique_ptr<Slot[]>> chunks_;
  std::unique_ptr<Slot*[]> free_;  // room for every slot; [0, free_count_) are free
  std::size_t free_count_ = 0;
  std::size_t free_capacity_ = 0;
  std::size_t live_ = 0;
};

}  // namespace tern::proto
