// Named drop reasons and their counters: the one mechanism behind tern::net::Drop (frames),
// tern::proto::Drop (datagrams and commands) and tern::relay::RelayDrop (messages and connects).
// Each layer lists its own reasons once, as an X-macro of (name, description), and gets an
// enum, the names, the descriptions and a counters type from it:
//
//   #define MY_DROPS(X) X(too_short, "shorter than the header") X(...)
//   enum class MyDrop : std::uint8_t { MY_DROPS(TERN_DROP_ENUMERATOR) count_ };
//   inline constexpr std::array kMyDropReasons{MY_DROPS(TERN_DROP_REASON)};
//   constexpr const auto& drop_reasons(MyDrop) { return kMyDropReasons; }  // found by ADL
//
// The names are what metrics, stop summaries and tests print, so a reason's name is its API.
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tern::base {

struct DropReason {
  const char* name;
  const char* description;
};

#define TERN_DROP_ENUMERATOR(name, text) name,
#define TERN_DROP_REASON(name, text) ::tern::base::DropReason{#name, text},

// An enum class whose enumerators 0..count_-1 are reasons, named by drop_reasons(E) (one
// DropReason per reason, declared next to E so argument-dependent lookup finds it).
template <class E>
concept DropEnum = std::is_enum_v<E> && requires(E e) {
  E::count_;
  { drop_reasons(e).size() } -> std::convertible_to<std::size_t>;
};

template <DropEnum E>
inline constexpr std::size_t kDropReasons = static_cast<std::size_t>(E::count_);

// A value past the last reason (count_, used as "no drop") reads "unknown".
template <DropEnum E>
constexpr const char* drop_name(E d) {
  static_assert(drop_reasons(E{}).size() == kDropReasons<E>, "one DropReason per reason");
  const auto i = static_cast<std::size_t>(d);
  return i < kDropReasons<E> ? drop_reasons(d)[i].name : "unknown";
}

template <DropEnum E>
constexpr const char* drop_description(E d) {
  const auto i = static_cast<std::size_t>(d);
  return i < kDropReasons<E> ? drop_reasons(d)[i].description : "unknown";
}

// One counter per reason. With Counter = std::atomic<std::uint64_t> one thread counts and any
// thread reads (relaxed): the writer adds with a load and a store, not a locked add, because
// nobody else writes.
template <DropEnum E, class Counter = std::uint64_t>
struct DropCounters {
  static constexpr bool kShared = !std::is_integral_v<Counter>;

  std::array<Counter, kDropReasons<E>> by_reason{};

  void add(E d, std::uint64_t n = 1) {
    Counter& c = by_reason[static_cast<std::size_t>(d)];
    if constexpr (kShared) {
      c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      c += n;
    }
  }
  std::uint64_t operator[](E d) const { return read(by_reason[static_cast<std::size_t>(d)]); }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (const Counter& c : by_reason) t += read(c);
    return t;
  }

 private:
  static std::uint64_t read(const Counter& c) {
    if constexpr (kShared) {
      return c.load(std::memory_order_relaxed);
    } else {
      return c;
    }
  }
};

}  // namespace tern::base
