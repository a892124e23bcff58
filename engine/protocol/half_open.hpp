// Handshakes from sources that have not yet proven they receive our datagrams (WIRE.md,
// "Handshake under attack"): what a CONNECT asked for, kept until the client acknowledges our
// VERIFY_CONNECT, apart from the peers, so that a flood of CONNECTs from forged sources takes
// no peer slot. Fixed capacity, taken on the first CONNECT from a stranger (a host that only
// connects out never pays for it); each handshake in one of two sets of kWays entries chosen by
// a keyed hash of its source address, port and promised peer ID, so a sender cannot aim at
// another's sets.
#pragma once

#include "wire.hpp"

#include <tern/endpoint.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tern::proto {

struct HalfOpen {
  Endpoint address;
  std::uint16_t peer_id = 0;       // the ID our VERIFY_CONNECT gave it (its headers carry it)
  std::uint16_t cookie = 0;        // the VERIFY_CONNECT's sent time; the ack echoes it
  std::uint8_t in_session = 0;     // what its headers carry
  std::uint8_t out_session = 0;    // what ours carry
  std::uint32_t features = 0;      // Tern hello: what both sides have, 0: no hello
  std::uint32_t window = 0;        // as answered
  std::uint64_t created_ms = 0;    // 0: the entry is free
  std::uint64_t cookie_ms = 0;     // when the last VERIFY_CONNECT was issued (RTT sample)
  std::uint32_t bytes_in = 0;      // from this source while unverified
  std::uint32_t bytes_out = 0;     // to it: never above bytes_in (no amplification)
  Connect connect{};               // what it asked for (clamped channel count and MTU)
  std::uint32_t secure_slot = 0;   // secure sessions: its SecurePending + 1, 0: plain
  std::uint32_t secure_stamp = 0;  // that entry's stamp while it is this handshake's

  bool used() const { return created_ms != 0; }
};

// Sets of kWays entries; a handshake may sit in either of two sets its hash names. Each set
// has one cache line of index beside its entries: per way a tag from the source's hash (0:
// free) and the low bits of when it was created. A CONNECT flood's datagram, which finds no
// entry of its own and takes a free or the oldest way of its two sets, reads those two lines
// and writes one entry, not the sets' kilobytes.
class HalfOpenTable {
 public:
  static constexpr std::size_t kWays = 8;

  bool allocated() const { return !entries_.empty(); }
  std::size_t capacity() const { return entries_.size(); }
  std::size_t size() const { return size_; }

  // Rounded up to whole sets, a power of two of them.
  void allocate(std::size_t capacity) {
    std::size_t sets = 1;
    while (sets * kWays < capacity) sets *= 2;
    entries_.assign(sets * kWays, HalfOpen{});
    index_.assign(sets, SetIndex{});
    set_mask_ = sets - 1;
  }

  // The used entry of `hash`'s sets (a keyed hash of its source) that `match` accepts, or null.
  template <class Match>
  HalfOpen* find(std::uint64_t hash, Match&& match) {
    const std::size_t first = first_set(hash);
    const std::size_t second = second_set(hash);
    // A stranger's CONNECT (a flood's) reads both lines: both misses at once, not one by one.
    __builtin_prefetch(&index_[second]);
    if (HalfOpen* e = find_in(first, tag(hash), match)) return e;
    return second != first ? find_in(second, tag(hash), match) : nullptr;
  }

  // A free entry in one of `hash`'s two sets (the one with more free ways), else the older of
  // their oldest entries (evicted: `evicted` is set); the caller fills it in, `created_ms` as
  // given. Two candidate sets: a burst of genuine handshakes (thousands of clients
  // reconnecting at once to a shard that falls behind) fills no set past its 8 ways where one
  // choice overflowed a few sets in every such burst, evicting a handshake whose client
  // already had its VERIFY_CONNECT and believed itself connected.
  HalfOpen& claim(std::uint64_t hash, std::uint64_t created_ms, bool& evicted) {
    const std::size_t first = first_set(hash);
    const std::size_t second = second_set(hash);
    const Choice a = look(first);
    const Choice b = second != first ? look(second) : a;
    const bool take_b =
        b.free > a.free || (b.free == 0 && a.free == 0 && b.oldest_ms < a.oldest_ms);
    const std::size_t set = take_b ? second : first;
    const Choice& c = take_b ? b : a;
    evicted = c.free == 0;
    if (!evicted) ++size_;
    SetIndex& ix = index_[set];
    ix.tag[c.way] = tag(hash);
    ix.created[c.way] = static_cast<std::uint32_t>(created_ms);
    return entries_[set * kWays + c.way];
  }

  void release(HalfOpen& e) {
    if (!e.used()) return;
    e.created_ms = 0;
    const auto at = static_cast<std::size_t>(&e - entries_.data());
    index_[at / kWays].tag[at % kWays] = 0;
    --size_;
  }

 private:
  struct alignas(64) SetIndex {
    std::array<std::uint32_t, kWays> tag{};
    std::array<std::uint32_t, kWays> created{};
  };
  static std::uint32_t tag(std::uint64_t hash) {
    return static_cast<std::uint32_t>(hash >> 32) | 1;
  }
  std::size_t first_set(std::uint64_t hash) const { return hash & set_mask_; }
  // From the tag's bits, remixed: independent of the first set's low bits.
  std::size_t second_set(std::uint64_t hash) const {
    return static_cast<std::size_t>(((hash >> 32) * 0x9E3779B97F4A7C15ull) >> 32) & set_mask_;
  }

  template <class Match>
  HalfOpen* find_in(std::size_t set, std::uint32_t t, Match& match) {
    const SetIndex& ix = index_[set];
    for (std::size_t i = 0; i < kWays; ++i) {
      if (ix.tag[i] == t && match(entries_[set * kWays + i])) return &entries_[set * kWays + i];
    }
    return nullptr;
  }

  // A set's free ways and the way a claim there takes: its first free one, else its oldest.
  struct Choice {
    std::size_t free = 0;
    std::size_t way = 0;
    std::uint32_t oldest_ms = 0;
  };
  Choice look(std::size_t set) const {
    const SetIndex& ix = index_[set];
    Choice c;
    for (std::size_t i = 0; i < kWays; ++i) {
      if (ix.tag[i] == 0) {
        if (c.free++ == 0) c.way = i;
      } else if (c.free == 0 && ix.created[i] < ix.created[c.way]) {
        // Ages in 32-bit milliseconds: across a wrap (49 days) one eviction picks another way.
        c.way = i;
      }
    }
    c.oldest_ms = ix.created[c.way];
    return c;
  }

  std::vector<HalfOpen> entries_;
  std::vector<SetIndex> index_;
  std::size_t set_mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace tern::proto
