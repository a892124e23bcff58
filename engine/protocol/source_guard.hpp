// Per-source CONNECT limits and bans (issue 29 item 3): token buckets per source address and
// per prefix (/24 IPv4, /64 IPv6), and a ban list with expiry, both in fixed tables taken on
// first use, in sets of kWays chosen by the caller's keyed hash. They apply to handshakes
// only: an established connection's datagrams never look here.
#pragma once

#include <tern/endpoint.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tern::proto {

class SourceGuard {
 public:
  static constexpr std::size_t kWays = 4;
  // Bans are set by operators, not by traffic: larger sets, so that a list of capacity / 4
  // bans displaces none (a set overflows with odds near 1e-6).
  static constexpr std::size_t kBanWays = 16;

  // The address part of a source (its port zeroed), or its prefix.
  static Endpoint address_of(const Endpoint& e) {
    Endpoint a = e;
    a.port = 0;
    return a;
  }
  static Endpoint prefix_of(const Endpoint& e) {
    Endpoint a = address_of(e);
    if (e.is_v4()) {
      a.addr[15] = 0;  // /24
    } else {
      std::fill(a.addr.begin() + 8, a.addr.end(), std::uint8_t{0});  // /64
    }
    a.port = 1;  // a prefix key never equals an address key
    return a;
  }

  // A token bucket: `rate` per second, `burst` deep. True when it pays for one more CONNECT.
  bool take(const Endpoint& key, std::uint64_t hash, std::uint64_t now_ms, double rate,
            double burst, std::size_t capacity) {
    if (buckets_.empty()) buckets_.assign(sets_for(capacity) * kWays, Bucket{});
    Bucket* set = &buckets_[(hash % (buckets_.size() / kWays)) * kWays];
    Bucket* b = nullptr;
    Bucket* oldest = set;
    for (std::size_t i = 0; i < kWays; ++i) {
      if (set[i].last_ms != 0 && set[i].key == key) b = &set[i];
      if (set[i].last_ms < oldest->last_ms) oldest = &set[i];
    }
    if (b == nullptr) {  // a new source, or one forgotten: a full bucket
      b = oldest;
      b->key = key;
      b->tokens = burst;
    } else {
      const double seconds = static_cast<double>(now_ms - b->last_ms) / 1000.0;
      b->tokens = std::min(burst, b->tokens + seconds * rate);
    }
    b->last_ms = std::max<std::uint64_t>(now_ms, 1);
    if (b->tokens < 1) return false;
    b->tokens -= 1;
    return true;
  }

  // The key a ban of `bits` leading bits of `address` is stored under: the address with the
  // rest zeroed, and in the port the length (0 for a whole address), so a prefix ban never
  // equals an address ban or a rate bucket's key. IPv4 lengths count the ::ffff:0:0/96 part.
  static Endpoint ban_key(const Endpoint& address, unsigned bits) {
    Endpoint k = address_of(address);
    if (bits >= 128) return k;
    for (unsigned i = 0; i < 16; ++i) {
      const unsigned keep = bits > i * 8 ? std::min(8u, bits - i * 8) : 0;
      k.addr[i] &= static_cast<std::uint8_t>(0xff00u >> keep);
    }
    k.port = static_cast<std::uint16_t>(0x8000u | bits);
    return k;
  }
  static unsigned key_bits(const Endpoint& key) {
    return key.port == 0 ? 128u : static_cast<unsigned>(key.port & 0xff);
  }

  // Bans the key (ban_key) until `until_ms`; a full set loses its soonest-ending ban. False
  // when that was another key's ban still running at `now_ms` (displaced).
  bool ban(const Endpoint& key, std::uint64_t hash, std::uint64_t until_ms, std::size_t capacity,
           std::uint64_t now_ms) {
    const unsigned bits = key_bits(key);
    if (bits < 128) prefix_lengths_[bits / 64] |= std::uint64_t{1} << (bits % 64);
    const Endpoint& address = key;
    if (bans_.empty()) bans_.assign(ban_sets_for(capacity) * kBanWays, Ban{});
    Ban* set = &bans_[(hash % (bans_.size() / kBanWays)) * kBanWays];
    Ban* slot = set;
    for (std::size_t i = 0; i < kBanWays; ++i) {
      if (set[i].until_ms != 0 && set[i].address == address) {
        slot = &set[i];
        break;
      }
      if (set[i].until_ms < slot->until_ms) slot = &set[i];
    }
    const bool displaced = slot->until_ms > now_ms && !(slot->address == address);
    slot->address = address;
    slot->until_ms = until_ms;
    return !displaced;
  }

  void unban(const Endpoint& address, std::uint64_t hash) {
    if (Ban* b = find_ban(address, hash)) b->until_ms = 0;
  }

  bool banned(const Endpoint& address, std::uint64_t hash, std::uint64_t now_ms) const {
    const Ban* b = find_ban(address, hash);
    return b != nullptr && b->until_ms > now_ms;
  }

  bool has_bans() const { return !bans_.empty(); }

  // Whether a ban of the source's address, or of a prefix of it, runs at `now_ms`. `hash` maps
  // a key to its hash (the caller's keyed hash). Prefix lengths ever banned are each looked
  // up: few in practice, and only handshake datagrams ask.
  template <class Hash>
  bool covers(const Endpoint& from, std::uint64_t now_ms, const Hash& hash) const {
    const Endpoint a = address_of(from);
    if (banned(a, hash(a), now_ms)) return true;
    for (unsigned w = 0; w < 2; ++w) {
      for (std::uint64_t m = prefix_lengths_[w]; m != 0; m &= m - 1) {
        const auto bits = static_cast<unsigned>(w * 64 + __builtin_ctzll(m));
        const Endpoint k = ban_key(a, bits);
        if (banned(k, hash(k), now_ms)) return true;
      }
    }
    return false;
  }

  // Calls f(key, until_ms) for each ban running at `now_ms`.
  template <class F>
  void for_each_ban(std::uint64_t now_ms, F&& f) const {
    for (const Ban& b : bans_) {
      if (b.until_ms > now_ms) f(b.address, b.until_ms);
    }
  }

 private:
  struct Bucket {
    Endpoint key;
    double tokens = 0;
    std::uint64_t last_ms = 0;  // 0: free
  };
  struct Ban {
    Endpoint address;
    std::uint64_t until_ms = 0;  // 0: free
  };

  static std::size_t sets_for(std::size_t capacity) {
    return std::max<std::size_t>(1, (capacity + kWays - 1) / kWays);
  }
  static std::size_t ban_sets_for(std::size_t capacity) {
    return std::max<std::size_t>(1, (capacity + kBanWays - 1) / kBanWays);
  }

  Ban* find_ban(const Endpoint& address, std::uint64_t hash) {
    return const_cast<Ban*>(std::as_const(*this).find_ban(address, hash));
  }
  const Ban* find_ban(const Endpoint& address, std::uint64_t hash) const {
    if (bans_.empty()) return nullptr;
    const Ban* set = &bans_[(hash % (bans_.size() / kBanWays)) * kBanWays];
    for (std::size_t i = 0; i < kBanWays; ++i) {
      if (set[i].until_ms != 0 && set[i].address == address) return &set[i];
    }
    return nullptr;
  }

  std::vector<Bucket> buckets_;
  std::vector<Ban> bans_;
  std::uint64_t prefix_lengths_[2] = {0, 0};  // bit n: some ban of an n-bit prefix was set
};

}  // namespace tern::proto
