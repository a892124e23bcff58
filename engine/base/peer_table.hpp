// PeerTable: a shard's map from a remote Endpoint and a 12-bit local peer ID (PeerKey) to a
// small value (usually a peer slot index).
//
// The ID is there because ENet lets one client socket hold several connections to the same
// server: they share the source address and port and differ only in the peer ID the server
// assigned, which every datagram's header carries. A key without an ID (the Endpoint alone
// converts to one with ID 0) serves callers that have one entry per address.
//
// Every datagram costs one lookup here, and sources are chosen by whoever sends to us, so the
// table is built for three things: a miss is as cheap as a hit (unknown and spoofed sources are
// the common case under attack), the per-packet path never allocates, and an attacker cannot
// pile keys into one bucket run without knowing the table's secret seed.
//
// Open addressing with Robin Hood linear probing: an entry never sits further from its home
// bucket than the entry it displaced, so a lookup stops as soon as it meets an entry closer to
// home than the probe is, and a miss ends after about as many steps as a hit instead of running
// to the next empty bucket (at 7/8 load plain linear probing averages ~32 probes per miss).
// Deletion shifts the following run back by one, so there are no tombstones to degrade lookups
// in a table with heavy peer churn.
//
// Each bucket carries a 16-bit word: probe distance + 1 in the high byte (0 = empty) and 8 hash
// bits in the low byte. A lookup compares that word against what it expects at each step, so it
// only touches a key when both distance and tag match (about 1 in 256 of the other entries).
// The word fits between the 20-byte key and a 4-byte value, so a bucket is 28 bytes: 32 to 64
// bytes per entry between the 7/8 load limit and just after a doubling.
//
// Pointers returned by find() and insert() stay valid until the next insert or erase.
#pragma once

#include <tern/endpoint.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

namespace tern::base {

struct PeerKey {
  Endpoint endpoint;
  std::uint16_t id = 0;  // the local peer ID the remote side puts in its headers

  PeerKey() = default;
  PeerKey(const Endpoint& e, std::uint16_t local_id = 0)  // NOLINT: an Endpoint is an ID-0 key
      : endpoint(e), id(local_id) {}
};

template <class Value>
class PeerTable {
  static_assert(std::is_trivially_copyable_v<Value> && std::is_default_constructible_v<Value>,
                "buckets are moved around freely by backward shift and rehash");

 public:
  // The seed must be unpredictable to remote senders (e.g. from std::random_device), and
  // different per table, so that learning one shard's layout says nothing about another's.
  explicit PeerTable(std::uint64_t seed) : seed0_(mix_seed(seed, 1)), seed1_(mix_seed(seed, 2)) {}

  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;
  // A moved-from table is empty and usable.
  PeerTable(PeerTable&& other) noexcept
      : buckets_(std::move(other.buckets_)),
        capacity_(std::exchange(other.capacity_, 0)),
        mask_(std::exchange(other.mask_, 0)),
        size_(std::exchange(other.size_, 0)),
        seed0_(other.seed0_),
        seed1_(other.seed1_) {}
  PeerTable& operator=(PeerTable&& other) noexcept {
    if (this != &other) {
      buckets_ = std::move(other.buckets_);
      capacity_ = std::exchange(other.capacity_, 0);
      mask_ = std::exchange(other.mask_, 0);
      size_ = std::exchange(other.size_, 0);
      seed0_ = other.seed0_;
      seed1_ = other.seed1_;
    }
    return *this;
  }

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }
  std::size_t memory_bytes() const { return sizeof(*this) + capacity_ * sizeof(Bucket); }

  // Preallocates for n entries, so that up to n live peers never cause an allocation.
  void reserve(std::size_t n) {
    const std::size_t needed = capacity_for(n);
    if (needed > capacity_) rehash(needed);
  }

  Value* find(const PeerKey& key) {
    if (size_ == 0) return nullptr;
    const std::size_t i = locate(key, hash(key));
    return i == kNotFound ? nullptr : &buckets_[i].value;
  }
  const Value* find(const PeerKey& key) const {
    if (size_ == 0) return nullptr;
    const std::size_t i = locate(key, hash(key));
    return i == kNotFound ? nullptr : &buckets_[i].value;
  }

  // Returns the entry for key and whether it was created; an existing value is left unchanged.
  std::pair<Value*, bool> insert(const PeerKey& key, Value value) {
    const std::uint64_t h = hash(key);
    if (size_ != 0) {
      const std::size_t i = locate(key, h);
      if (i != kNotFound) return {&buckets_[i].value, false};
    }
    if (size_ + 1 > max_load(capacity_)) rehash(capacity_for(size_ + 1));
    Bucket entry{key, static_cast<std::uint16_t>(kDistOne | tag_of(h)), value};
    Bucket* placed = place(entry, h & mask_);
    ++size_;
    if (placed != nullptr) return {&placed->value, true};
    // A probe run hit the distance limit: only a flood of colliding keys does that. place() has
    // left in `entry` the one displaced entry it could not put down; rebuild with it included.
    rebuild_with(entry);
    return {find(key), true};
  }

  bool erase(const PeerKey& key) {
    if (size_ == 0) return false;
    std::size_t i = locate(key, hash(key));
    if (i == kNotFound) return false;
    // Pull the rest of the run one step toward home; it ends at an empty bucket or at an entry
    // already in its home bucket, either of which may stay where it is.
    for (;;) {
      const std::size_t next = (i + 1) & mask_;
      Bucket& n = buckets_[next];
      if (n.meta < 2 * kDistOne) break;
      buckets_[i] = n;
      buckets_[i].meta = static_cast<std::uint16_t>(n.meta - kDistOne);
      i = next;
    }
    buckets_[i].meta = 0;
    --size_;
    return true;
  }

  // Longest distance (in buckets) any entry sits from its home bucket: O(capacity), for tests
  // and diagnostics.
  std::size_t max_probe_length() const {
    std::uint32_t longest = 0;
    for (std::size_t i = 0; i < capacity_; ++i)
      longest = std::max<std::uint32_t>(longest, buckets_[i].meta >> 8);
    return longest == 0 ? 0 : longest - 1;
  }

  // The keyed hash, exposed for tests and benchmarks. Three 64x64->128 folded multiplies, the
  // construction of wyhash and rapidhash. Every input word is XORed with a secret before it is
  // multiplied, so without the seed an attacker can neither aim at a bucket nor feed the
  // multiply its weak inputs (a zero operand). The port and peer ID enter through their own
  // multiply, since XORing them into address bits would make collisions that hold under every
  // seed. The last
  // multiply takes both halves of the previous product: with one operand fixed, a fold is
  // nearly linear in a small varying input (one address, all 65,536 ports), which left runs of
  // 40+ under some seeds. Not a PRF like SipHash, but the table never reveals hashes or bucket
  // order, the seed is per table, and the distance limit (see insert) rebuilds under a fresh
  // seed if a run grows long anyway; SipHash-1-3 costs several times more per datagram (see
  // perf/micro/bench_peer_table.cpp).
  std::uint64_t hash(const PeerKey& key) const {
    std::uint64_t lo;
    std::uint64_t hi;
    std::memcpy(&lo, key.endpoint.addr.data(), 8);
    std::memcpy(&hi, key.endpoint.addr.data() + 8, 8);
    const std::uint64_t address = fold_multiply(lo ^ seed0_, hi ^ seed1_);
    const std::uint64_t port_and_id = (std::uint64_t{key.id} << 16) | key.endpoint.port;
    const U128 p = static_cast<U128>(address ^ seed1_) * ((port_and_id ^ kPortPad) ^ seed0_);
    return fold_multiply(static_cast<std::uint64_t>(p) ^ kFinal0,
                         static_cast<std::uint64_t>(p >> 64) ^ kFinal1);
  }

 private:
  __extension__ using U128 = unsigned __int128;

  struct Bucket {
    PeerKey key;
    std::uint16_t meta = 0;  // (probe distance + 1) << 8 | tag; 0 = empty
    Value value{};
  };

  static constexpr std::size_t kNotFound = ~std::size_t{0};
  static constexpr std::uint32_t kDistOne = 0x100;
  static constexpr std::uint32_t kDistMask = 0xff00;
  // Runs are far shorter than this with any hash worth the name; reaching it means a flood.
  static constexpr std::uint32_t kMaxMeta = 0xffff;
  static constexpr std::size_t kMinCapacity = 16;
  // Keeps the port word away from small values, which are weak multiply operands.
  static constexpr std::uint64_t kPortPad = 0x9e3779b97f4a0000ull;
  // Arbitrary odd constants with balanced bits (from rapidhash's secret).
  static constexpr std::uint64_t kFinal0 = 0x2d358dccaa6c78a5ull;
  static constexpr std::uint64_t kFinal1 = 0x8bb84b93962eacc9ull;

  static std::uint64_t fold_multiply(std::uint64_t a, std::uint64_t b) {
    const U128 p = static_cast<U128>(a) * b;
    return static_cast<std::uint64_t>(p) ^ static_cast<std::uint64_t>(p >> 64);
  }

  // splitmix64: turns one seed into independent secret words.
  static std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream) {
    std::uint64_t z = seed + stream * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  // The index uses the low bits, the tag the top byte, so the tag still filters entries that
  // share a home bucket.
  static std::uint32_t tag_of(std::uint64_t h) { return static_cast<std::uint32_t>(h >> 56); }

  static bool same_key(const PeerKey& a, const PeerKey& b) {
    return std::memcmp(a.endpoint.addr.data(), b.endpoint.addr.data(), 16) == 0 &&
           a.endpoint.port == b.endpoint.port && a.id == b.id;
  }

  static std::size_t max_load(std::size_t capacity) { return capacity - capacity / 8; }

  static std::size_t capacity_for(std::size_t n) {
    std::size_t cap = kMinCapacity;
    while (max_load(cap) < n) cap *= 2;
    return cap;
  }

  // Index of key's bucket, or kNotFound; the table must have buckets.
  std::size_t locate(const PeerKey& key, std::uint64_t h) const {
    std::size_t i = h & mask_;
    std::uint32_t want = kDistOne | tag_of(h);
    for (;;) {
      const Bucket& b = buckets_[i];
      if (b.meta == want && same_key(b.key, key)) return i;
      // An entry closer to its home than we are to ours means ours would have displaced it.
      if (b.meta < (want & kDistMask)) return kNotFound;
      want += kDistOne;
      i = (i + 1) & mask_;
    }
  }

  // Robin Hood placement of an entry not yet in the table, starting at bucket i with the
  // entry's distance already encoded in its meta. Returns where the new entry landed, or
  // nullptr if some carried entry hit the distance limit; that entry is then left in `entry`.
  Bucket* place(Bucket& entry, std::size_t i) {
    Bucket* landed = nullptr;
    for (;;) {
      Bucket& b = buckets_[i];
      if (b.meta == 0) {
        b = entry;
        return landed != nullptr ? landed : &b;
      }
      // Only the distance bytes decide who yields; tags of equal distance compare arbitrarily
      // but harmlessly, since both orders are valid.
      if ((b.meta & kDistMask) < (entry.meta & kDistMask)) {
        std::swap(b, entry);
        if (landed == nullptr) landed = &b;
      }
      if ((entry.meta & kDistMask) == (kMaxMeta & kDistMask)) return nullptr;
      entry.meta = static_cast<std::uint16_t>(entry.meta + kDistOne);
      i = (i + 1) & mask_;
    }
  }

  // Moves every entry into a fresh array of `capacity` buckets. On a distance overflow it picks
  // a new seed (an attacker who found collisions under the old one learns nothing about the
  // new) and, if that keeps failing, also doubles the array.
  void rehash(std::size_t capacity) { rebuild(capacity, nullptr, 0); }

  // The carried entry is counted in size_ already but is not in the array. The current seed
  // just produced an overlong run, so the first attempt already uses a new one.
  void rebuild_with(const Bucket& extra) { rebuild(capacity_, &extra, 1); }

  void rebuild(std::size_t capacity, const Bucket* extra, std::uint64_t first_attempt) {
    std::unique_ptr<Bucket[]> old = std::move(buckets_);
    const std::size_t old_capacity = capacity_;
    for (std::uint64_t attempt = first_attempt;; ++attempt) {
      if (attempt > 0) {
        seed0_ = mix_seed(seed0_, seed1_);
        seed1_ = mix_seed(seed1_, seed0_);
        if (attempt % 2 == 0) capacity *= 2;
      }
      if (try_fill(capacity, old.get(), old_capacity, extra)) return;
    }
  }

  bool try_fill(std::size_t capacity, const Bucket* old, std::size_t old_capacity,
                const Bucket* extra) {
    buckets_ = std::make_unique<Bucket[]>(capacity);
    capacity_ = capacity;
    mask_ = capacity - 1;
    auto put = [this](const Bucket& from) {
      Bucket entry = from;
      const std::uint64_t h = hash(entry.key);
      entry.meta = static_cast<std::uint16_t>(kDistOne | tag_of(h));
      return place(entry, h & mask_) != nullptr;
    };
    for (std::size_t i = 0; i < old_capacity; ++i)
      if (old[i].meta != 0 && !put(old[i])) return false;
    return extra == nullptr || put(*extra);
  }

  std::unique_ptr<Bucket[]> buckets_;
  std::size_t capacity_ = 0;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
  std::uint64_t seed0_;
  std::uint64_t seed1_;
};

}  // namespace tern::base
