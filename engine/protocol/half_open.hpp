// Handshakes from sources that have not yet proven they receive our datagrams (WIRE.md,
// "Handshake under attack"): what a CONNECT asked for, kept until the client acknowledges our
// VERIFY_CONNECT, apart from the peers, so that a flood of CONNECTs from forged sources takes
// no peer slot. Fixed capacity, taken on the first CONNECT from a stranger (a host that only
// connects out never pays for it); sets of kWays entries chosen by a keyed hash of the source
// address, so one source's handshakes share a set and a sender cannot aim at another's.
#pragma once

#include "wire.hpp"

#include <tern/endpoint.hpp>

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
    set_mask_ = sets - 1;
  }

  // The set for a source, from a keyed hash of its address and port.
  HalfOpen* set_for(std::uint64_t hash) { return &entries_[(hash & set_mask_) * kWays]; }

  // A free entry in the set, else its oldest (evicted: `evicted` is set).
  HalfOpen& claim(HalfOpen* set, bool& evicted) {
    HalfOpen* oldest = set;
    for (std::size_t i = 0; i < kWays; ++i) {
      if (!set[i].used()) {
        evicted = false;
        ++size_;
        return set[i];
      }
      if (set[i].created_ms < oldest->created_ms) oldest = &set[i];
    }
    evicted = true;
    return *oldest;
  }

  void release(HalfOpen& e) {
    if (!e.used()) return;
    e.created_ms = 0;
    --size_;
  }

 private:
  std::vector<HalfOpen> entries_;
  std::size_t set_mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace tern::proto
