// Intrusive doubly linked lists and a chunked free-list pool: the core's queues never
// allocate per command once warm (DESIGN §2).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
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

// Objects kept in runs of consecutive slots, one run per owner at a time: an owner's objects,
// taken one after another, sit one after another in memory. A relay queues each message's
// copies to several members at once, and a pool handing out slots in order gives consecutive
// slots to different members: one member's queue, walked when its datagram is written, is
// then one line per command scattered over the pool, a miss each when the queue is deep and
// cold. In a run they are neighbours, and the next one is prefetched when one is taken.
//
// A run goes back to the pool when its last object does and the owner has moved on to
// another run; the owner's current run, emptied, is written again from its start, so a light
// owner keeps reusing the same few lines. An object keeps its whole run alive: memory is at
// most a run per live object, plus one per owner.
//
// Runs sit in chunks aligned to their size, and the first run of each chunk holds the live
// counts of the others: an object finds its count by masking its address, and the counts of
// many runs share a line. (A count in each run's own first line was a miss of its own at
// every put, a round trip after the run was written.)
template <class T, std::size_t RunSlots>
class RunPool {
  static_assert(std::has_single_bit(RunSlots));
  struct alignas(T) Slot {
    unsigned char storage[sizeof(T)];
  };
  static_assert(std::has_single_bit(sizeof(Slot)));
  static constexpr std::size_t kRunBytes = RunSlots * sizeof(Slot);
  static constexpr std::size_t kRunsPerChunk = 64;
  static constexpr std::size_t kChunkBytes = kRunsPerChunk * kRunBytes;

  struct alignas(kRunBytes) Run {
    Slot slots[RunSlots];
  };
  struct alignas(kChunkBytes) Chunk {
    Run runs[kRunsPerChunk];  // runs[0] holds `live` (below), the others objects
    using Counts = std::array<std::uint32_t, kRunsPerChunk>;
    Counts& live() { return *std::launder(reinterpret_cast<Counts*>(&runs[0])); }
  };
  static_assert(kRunsPerChunk * sizeof(std::uint32_t) <= kRunBytes);

 public:
  // An owner's place: the run its next object goes into (null: none yet) and the slot.
  struct Cursor {
    Run* run = nullptr;
    std::uint32_t next = 0;
  };

  RunPool() = default;
  RunPool(const RunPool&) = delete;
  RunPool& operator=(const RunPool&) = delete;
  ~RunPool() = default;

  template <class... Args>
  [[gnu::always_inline]] T* get(Cursor& owner, Args&&... args) {
    if (owner.run == nullptr || owner.next == RunSlots) [[unlikely]]
      next_run(owner);
    Slot* s = &owner.run->slots[owner.next++];
    // The owner's next object goes there; a relay's member takes it a fan-out or more later,
    // long enough for the line (written a round trip ago, or never) to arrive.
    if (owner.next != RunSlots) __builtin_prefetch(&owner.run->slots[owner.next], 1);
    ++live_of(s);
    ++live_;
    return new (s->storage) T(std::forward<Args>(args)...);
  }

  void put(Cursor& owner, T* obj) {
    obj->~T();
    --live_;
    if (--live_of(obj) != 0) return;
    Run* r = run_of(obj);
    if (r == owner.run) {
      owner.next = 0;
    } else {
      free_runs_.push_back(r);  // never reallocates: reserved in grow()
    }
  }

  // The owner is going away: every object it took must have been put back.
  void release(Cursor& owner) {
    if (Run* r = owner.run) {
      if (live_of(r) == 0) free_runs_.push_back(r);
      owner = Cursor{};
    }
  }

  std::size_t live() const { return live_; }
  std::size_t runs_held() const { return chunks_.size() * (kRunsPerChunk - 1) - free_runs_.size(); }
  static constexpr std::size_t objects_per_run() { return RunSlots; }

 private:
  static std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }
  static Run* run_of(const void* p) {
    return reinterpret_cast<Run*>(address(p) & ~(kRunBytes - 1));
  }
  static std::uint32_t& live_of(const void* p) {
    Chunk* c = reinterpret_cast<Chunk*>(address(p) & ~(kChunkBytes - 1));
    return c->live()[(address(p) & (kChunkBytes - 1)) / kRunBytes];
  }

  // The owner's run is full (put() starts an emptied current run over, so it still holds
  // objects and goes back when the last of them does), or it has none.
  [[gnu::noinline]] void next_run(Cursor& owner) {
    if (free_runs_.empty()) grow();
    owner.run = free_runs_.back();
    owner.next = 0;
    free_runs_.pop_back();
  }

  void grow() {
    auto chunk = std::make_unique_for_overwrite<Chunk>();
    new (&chunk->runs[0]) typename Chunk::Counts{};
    // Doubling: an owner set under overload grows by many chunks, and re-sizing for each
    // would cost quadratic time exactly then.
    const std::size_t runs = (chunks_.size() + 1) * kRunsPerChunk;
    if (runs > free_runs_.capacity()) free_runs_.reserve(std::max(runs, 2 * free_runs_.capacity()));
    for (std::size_t i = kRunsPerChunk; i-- > 1;) free_runs_.push_back(&chunk->runs[i]);
    chunks_.push_back(std::move(chunk));
  }

  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<Run*> free_runs_;
  std::size_t live_ = 0;
};

}  // namespace tern::proto
