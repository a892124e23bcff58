// Intrusive doubly linked lists and a chunked free-list pool: the core's queues never
// allocate per command once warm (DESIGN §2).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tern::proto {

// T has `T* prev_` and `T* next_` members. The head is one pointer: the first node's prev_
// points at the last node (so back() and push_back() are O(1)), and the last node's next_ is
// nullptr, so forward walks follow next_ to nullptr. Walk backwards with prev(), which stops
// at the front. Empty lists cost 8 bytes and nothing else; size() walks the list.
template <class T>
class IntrusiveList {
 public:
  bool empty() const { return head_ == nullptr; }
  T* front() const { return head_; }
  T* back() const { return head_ != nullptr ? head_->prev_ : nullptr; }
  // The node before `n`, or nullptr at the front.
  T* prev(const T* n) const { return n == head_ ? nullptr : n->prev_; }
  // The node after `n`, or nullptr at the back.
  static T* next(const T* n) { return n->next_; }
  std::size_t size() const {
    std::size_t n = 0;
    for (const T* c = head_; c != nullptr; c = c->next_) ++n;
    return n;
  }

  void push_back(T* n) { insert_after(back(), n); }
  void push_front(T* n) { insert_after(nullptr, n); }

  // Inserts `n` after `pos`; pos == nullptr inserts at the front.
  void insert_after(T* pos, T* n) {
    if (pos == nullptr) {
      n->next_ = head_;
      if (head_ != nullptr) {
        n->prev_ = head_->prev_;
        head_->prev_ = n;
      } else {
        n->prev_ = n;
      }
      head_ = n;
      return;
    }
    n->prev_ = pos;
    n->next_ = pos->next_;
    if (pos->next_ != nullptr) {
      pos->next_->prev_ = n;
    } else {
      head_->prev_ = n;  // the new last node
    }
    pos->next_ = n;
  }

  void remove(T* n) {
    if (n == head_) {
      head_ = n->next_;
      if (head_ != nullptr) head_->prev_ = n->prev_;
    } else {
      n->prev_->next_ = n->next_;
      if (n->next_ != nullptr) {
        n->next_->prev_ = n->prev_;
      } else {
        head_->prev_ = n->prev_;  // n was the last node
      }
    }
    n->prev_ = n->next_ = nullptr;
  }

  T* pop_front() {
    T* n = head_;
    if (n != nullptr) remove(n);
    return n;
  }

 private:
  T* head_ = nullptr;
};

// Objects are constructed on get() and destroyed on put(); their storage is recycled.
template <class T>
class Pool {
 public:
  Pool() = default;
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  ~Pool() = default;  // chunks free their storage; live objects must be put() back first

  template <class... Args>
  T* get(Args&&... args) {
    if (free_ == nullptr) grow();
    Slot* s = free_;
    free_ = s->next;
    ++live_;
    return new (s->storage) T(std::forward<Args>(args)...);
  }

  void put(T* obj) {
    obj->~T();
    Slot* s = reinterpret_cast<Slot*>(obj);
    s->next = free_;
    free_ = s;
    --live_;
  }

  std::size_t live() const { return live_; }

 private:
  union Slot {
    Slot* next;
    alignas(T) unsigned char storage[sizeof(T)];
  };
  static constexpr std::size_t kChunk = 256;

  // Out of line: inlined, the chunk's allocation made every get() save and restore registers
  // it only needs once per 256 objects.
  [[gnu::noinline]] void grow() {
    auto chunk = std::make_unique<Slot[]>(kChunk);
    for (std::size_t i = 0; i < kChunk; ++i) {
      chunk[i].next = free_;
      free_ = &chunk[i];
    }
    chunks_.push_back(std::move(chunk));
  }

  std::vector<std::unique_ptr<Slot[]>> chunks_;
  Slot* free_ = nullptr;
  std::size_t live_ = 0;
};

}  // namespace tern::proto
