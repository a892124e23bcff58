// Intrusive doubly linked lists and a chunked free-list pool: the core's queues never
// allocate per command once warm (DESIGN §2).
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace tern::proto {

// T has `T* prev_` and `T* next_` members.
template <class T>
class IntrusiveList {
 public:
  bool empty() const { return head_ == nullptr; }
  std::size_t size() const { return size_; }
  T* front() const { return head_; }
  T* back() const { return tail_; }

  void push_back(T* n) { insert_after(tail_, n); }
  void push_front(T* n) { insert_after(nullptr, n); }

  // Inserts `n` after `pos`; pos == nullptr inserts at the front.
  void insert_after(T* pos, T* n) {
    n->prev_ = pos;
    n->next_ = pos != nullptr ? pos->next_ : head_;
    if (n->next_ != nullptr) {
      n->next_->prev_ = n;
    } else {
      tail_ = n;
    }
    if (pos != nullptr) {
      pos->next_ = n;
    } else {
      head_ = n;
    }
    ++size_;
  }

  void remove(T* n) {
    if (n->prev_ != nullptr) {
      n->prev_->next_ = n->next_;
    } else {
      head_ = n->next_;
    }
    if (n->next_ != nullptr) {
      n->next_->prev_ = n->prev_;
    } else {
      tail_ = n->prev_;
    }
    n->prev_ = n->next_ = nullptr;
    --size_;
  }

  T* pop_front() {
    T* n = head_;
    if (n != nullptr) remove(n);
    return n;
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
  std::size_t size_ = 0;
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

  void grow() {
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
