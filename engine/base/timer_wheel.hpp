// tern::base::TimerWheel: the shard's hierarchical timing wheel (DESIGN §2 step 8, §4).
//
// Millisecond ticks, 4 levels of 256 slots: level L holds timers whose expiry agrees with the
// wheel's current time in every byte above byte L, filed under byte L of the expiry. That
// covers 2^32 ms (~49.7 days); anything further waits on an overflow list that is revisited
// once per 2^32 ms period. Timers are intrusive, so schedule and cancel are O(1) pointer work
// and never allocate.
//
// advance() does not walk every tick. An occupancy bitmap per level finds the next tick at
// which something can happen (a level-0 slot fires, or an occupied higher slot's range begins
// and must cascade down), and time jumps straight there. An idle wheel therefore costs a few
// bitmap words per advance no matter how many timers wait in it, and a timer is moved at most
// once per level over its life.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace tern::base {

struct TimerLink {
  TimerLink* prev = nullptr;
  TimerLink* next = nullptr;
};

// Embedded in its owner (a peer, a shard). Owned by the caller; the wheel only links it. It
// must stay alive and in place while scheduled.
struct TimerNode : TimerLink {
  std::uint64_t expiry = 0;  // ms, valid while scheduled and inside the expiry callback
  void* owner = nullptr;     // for the caller: who to wake
  std::uint32_t kind = 0;    // for the caller: which of the owner's timers this is
  std::uint16_t where = 0;   // wheel-private: the list this node is on
};

struct TimerWheelStats {
  std::uint64_t timers_fired = 0;
  std::uint64_t cascades = 0;       // timers moved down a level (or out of overflow)
  std::uint64_t slots_visited = 0;  // slots emptied by advance(), firing or cascading
};

class TimerWheel {
 public:
  static constexpr std::uint64_t kNever = std::numeric_limits<std::uint64_t>::max();

  explicit TimerWheel(std::uint64_t now_ms = 0) : now_(now_ms) {
    for (auto& head : heads_) head.prev = head.next = &head;
  }
  // Slot heads are self-referential sentinels.
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  // (Re)schedules `node` to expire at `expiry_ms`. An expiry at or before now() fires on the
  // next advance() (within the current one, when called from an expiry callback).
  void schedule(TimerNode& node, std::uint64_t expiry_ms) {
    if (scheduled(node))
      unlink(node);
    else
      ++pending_;
    node.expiry = expiry_ms;
    place(node);
  }

  // Returns whether the node was pending.
  bool cancel(TimerNode& node) {
    if (!scheduled(node)) return false;
    unlink(node);
    --pending_;
    return true;
  }

  static bool scheduled(const TimerNode& node) { return node.next != nullptr; }

  // Fires, in non-decreasing expiry order, every timer with expiry <= now_ms, then sets now()
  // to now_ms (time never goes backwards). `on_expire(TimerNode&)` receives an unlinked node
  // and may schedule or cancel any timer, this one included; a timer it schedules at or before
  // now_ms fires within this call, so a callback that always reschedules at the current time
  // never returns. Not reentrant: callbacks must not call advance().
  template <class F>
  std::size_t advance(std::uint64_t now_ms, F&& on_expire) {
    std::size_t fired = 0;
    for (;;) {
      fired += fire_due(on_expire);
      if (now_ >= now_ms) break;
      const std::uint64_t tick = next_event_tick();
      if (tick > now_ms) {
        now_ = now_ms;
        break;
      }
      now_ = tick;
      process_tick(tick);
    }
    return fired;
  }

  // The earliest pending expiry, or kNever. May be early (the start of a higher-level slot's
  // range rather than its first timer, or a cancelled timer's overflow period) but never late,
  // so it is a safe poll timeout. Costs at most a few dozen bitmap words.
  std::uint64_t next_expiry() const {
    if (pending_ == 0) return kNever;
    if (!list_empty(kDue)) return due_min_;
    return next_event_tick();
  }

  std::uint64_t now() const { return now_; }
  std::size_t size() const { return pending_; }
  bool empty() const { return pending_ == 0; }
  const TimerWheelStats& stats() const { return stats_; }

 private:
  static constexpr unsigned kLevels = 4;
  static constexpr unsigned kSlotBits = 8;
  static constexpr unsigned kSlots = 1u << kSlotBits;
  static constexpr unsigned kWords = kSlots / 64;
  static constexpr unsigned kWheelBits = kLevels * kSlotBits;  // 32
  static constexpr std::uint16_t kDue = kLevels * kSlots;
  static constexpr std::uint16_t kOverflow = kDue + 1;
  static constexpr std::size_t kLists = kOverflow + 1;

  static unsigned slot_of(std::uint64_t t, unsigned level) {
    return static_cast<unsigned>(t >> (level * kSlotBits)) & (kSlots - 1);
  }

  bool list_empty(std::uint16_t list) const { return heads_[list].next == &heads_[list]; }

  // Files the node relative to now_. Invariant afterwards: a timer at level L sits in a slot
  // strictly after byte L of now_, so slots at or before the current position are empty.
  void place(TimerNode& node) {
    const std::uint64_t e = node.expiry;
    std::uint16_t list;
    if (e <= now_) {
      list = kDue;
      due_min_ = std::min(due_min_, e);
    } else {
      const std::uint64_t diff = e ^ now_;
      if ((diff >> kWheelBits) != 0) {
        list = kOverflow;
        overflow_min_ = std::min(overflow_min_, e);
      } else {
        // The highest differing byte decides the level.
        const unsigned level = static_cast<unsigned>(63 - std::countl_zero(diff)) / kSlotBits;
        const unsigned slot = slot_of(e, level);
        list = static_cast<std::uint16_t>(level * kSlots + slot);
        occupied_[level][slot / 64] |= std::uint64_t{1} << (slot % 64);
      }
    }
    TimerLink& head = heads_[list];
    node.where = list;
    node.prev = head.prev;
    node.next = &head;
    head.prev->next = &node;
    head.prev = &node;
  }

  void unlink(TimerNode& node) {
    node.prev->next = node.next;
    node.next->prev = node.prev;
    node.prev = node.next = nullptr;
    const std::uint16_t list = node.where;
    if (!list_empty(list)) return;
    if (list < kDue) {
      const unsigned slot = list % kSlots;
      occupied_[list / kSlots][slot / 64] &= ~(std::uint64_t{1} << (slot % 64));
    } else if (list == kDue) {
      due_min_ = kNever;
    } else {
      overflow_min_ = kNever;
    }
  }

  // First occupied slot strictly after `slot` at `level`, or kSlots.
  unsigned next_occupied(unsigned level, unsigned slot) const {
    unsigned from = slot + 1;
    while (from < kSlots) {
      const std::uint64_t word = occupied_[level][from / 64] >> (from % 64);
      if (word != 0) return from + static_cast<unsigned>(std::countr_zero(word));
      from = (from / 64 + 1) * 64;
    }
    return kSlots;
  }

  // The first tick after now_ at which a slot fires or cascades, or kNever. Lower levels are
  // tried first: their whole range ends before any higher slot's range begins.
  std::uint64_t next_event_tick() const {
    for (unsigned level = 0; level < kLevels; ++level) {
      const unsigned shift = level * kSlotBits;
      const unsigned slot = next_occupied(level, slot_of(now_, level));
      if (slot == kSlots) continue;
      const std::uint64_t base = (now_ >> (shift + kSlotBits)) << (shift + kSlotBits);
      return base | (std::uint64_t{slot} << shift);
    }
    if (list_empty(kOverflow)) return kNever;
    // Jump whole empty periods at once; overflow_min_ may be stale-low after a cancel, which
    // only costs an early visit.
    const std::uint64_t next_period = ((now_ >> kWheelBits) + 1) << kWheelBits;
    return std::max(next_period, (overflow_min_ >> kWheelBits) << kWheelBits);
  }

  // now_ == tick. Higher levels go first; re-placing relative to `tick` never lands a timer in
  // a slot this tick still has to visit, except level 0's, which is visited last.
  void process_tick(std::uint64_t tick) {
    if ((tick & ((std::uint64_t{1} << kWheelBits) - 1)) == 0 && !list_empty(kOverflow)) {
      overflow_min_ = kNever;
      cascade(kOverflow);
    }
    for (unsigned level = kLevels - 1; level >= 1; --level) {
      const unsigned shift = level * kSlotBits;
      if ((tick & ((std::uint64_t{1} << shift) - 1)) != 0) continue;
      const unsigned slot = slot_of(tick, level);
      if (occupied_[level][slot / 64] & (std::uint64_t{1} << (slot % 64)))
        cascade(static_cast<std::uint16_t>(level * kSlots + slot));
    }
    const unsigned slot0 = slot_of(tick, 0);
    if (occupied_[0][slot0 / 64] & (std::uint64_t{1} << (slot0 % 64))) {
      // Every timer here expires exactly at `tick`: splice the slot onto the due list whole.
      ++stats_.slots_visited;
      occupied_[0][slot0 / 64] &= ~(std::uint64_t{1} << (slot0 % 64));
      TimerLink& from = heads_[slot0];
      for (TimerLink* l = from.next; l != &from; l = l->next)
        static_cast<TimerNode*>(l)->where = kDue;
      due_min_ = std::min(due_min_, tick);
      TimerLink& due = heads_[kDue];
      from.prev->next = &due;
      from.next->prev = due.prev;
      due.prev->next = from.next;
      due.prev = from.prev;
      from.prev = from.next = &from;
    }
  }

  void cascade(std::uint16_t list) {
    ++stats_.slots_visited;
    TimerLink& head = heads_[list];
    TimerLink* l = head.next;
    head.prev = head.next = &head;
    if (list < kDue) {
      const unsigned slot = list % kSlots;
      occupied_[list / kSlots][slot / 64] &= ~(std::uint64_t{1} << (slot % 64));
    }
    while (l != &head) {
      TimerLink* next = l->next;
      ++stats_.cascades;
      place(*static_cast<TimerNode*>(l));
      l = next;
    }
  }

  template <class F>
  std::size_t fire_due(F& on_expire) {
    std::size_t fired = 0;
    TimerLink& due = heads_[kDue];
    while (due.next != &due) {
      auto& node = *static_cast<TimerNode*>(due.next);
      unlink(node);
      --pending_;
      ++fired;
      ++stats_.timers_fired;
      on_expire(node);
    }
    return fired;
  }

  std::uint64_t now_;
  std::size_t pending_ = 0;
  std::uint64_t due_min_ = kNever;
  std::uint64_t overflow_min_ = kNever;
  std::array<std::array<std::uint64_t, kWords>, kLevels> occupied_{};
  std::array<TimerLink, kLists> heads_{};
  TimerWheelStats stats_{};
};

}  // namespace tern::base
