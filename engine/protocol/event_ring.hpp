// The protocol core's queue of events for the application.
#pragma once

#include <tern/types.hpp>

#include <cstddef>
#include <utility>
#include <vector>

namespace tern::proto {

// A growable ring of events: amortised allocation-free once sized.
class EventRing {
 public:
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  void push(Event&& ev) { append() = std::move(ev); }
  // The next free slot, for the caller to fill in place (every field: the slot holds whatever
  // event last passed through it, with its packet already moved out).
  Event& append() {
    if (count_ == ring_.size()) grow();
    Event& slot = ring_[(head_ + count_) & (ring_.size() - 1)];
    ++count_;
    return slot;
  }
  bool pop(Event& out) {
    if (count_ == 0) return false;
    // The move leaves the slot's packet empty, which is all a free slot needs: assigning a
    // fresh Event on top would cost a store-forwarding stall per event.
    out = std::move(ring_[head_]);
    head_ = (head_ + 1) & (ring_.size() - 1);
    --count_;
    return true;
  }

 private:
  void grow() {
    std::vector<Event> bigger(ring_.empty() ? 64 : ring_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) {
      bigger[i] = std::move(ring_[(head_ + i) & (ring_.size() - 1)]);
    }
    ring_ = std::move(bigger);
    head_ = 0;
  }
  std::vector<Event> ring_;
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace tern::proto
