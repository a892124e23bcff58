// kcp-go's forward error correction, receive side: Reed-Solomon over GF(2^8) as its codec
// (klauspost/reedsolomon's default) builds it, and a fixed cache of shard groups.
//
// The codec: field polynomial 0x11d; the encoding matrix is the (data + parity) x data
// Vandermonde matrix (row r, column c: r^c) times the inverse of its top square, so data shards
// pass through unchanged and parity shard p is row data + p applied to the data shards. kcp-go
// numbers every datagram it sends (seqid); shard i of group g is seqid g * (data + parity) + i,
// indices below `data` carry data, the rest parity. A shard's coded bytes start at its size
// field (offset 6) and are zero-padded to the longest in the group.
#pragma once

#include <tern/endpoint.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace tern::proto::kcp {

class GaloisField {
 public:
  GaloisField() {
    unsigned x = 1;
    for (unsigned i = 0; i < 255; ++i) {
      exp_[i] = exp_[i + 255] = static_cast<std::uint8_t>(x);
      log_[x] = static_cast<std::uint8_t>(i);
      x <<= 1;
      if (x & 0x100) x ^= 0x11d;
    }
  }
  std::uint8_t mul(std::uint8_t a, std::uint8_t b) const {
    if (a == 0 || b == 0) return 0;
    return exp_[log_[a] + log_[b]];
  }
  std::uint8_t inv(std::uint8_t a) const { return exp_[255 - log_[a]]; }
  std::uint8_t pow(std::uint8_t a, unsigned n) const {
    if (n == 0) return 1;
    if (a == 0) return 0;
    return exp_[(log_[a] * n) % 255];
  }

 private:
  std::array<std::uint8_t, 510> exp_{};
  std::array<std::uint8_t, 256> log_{};
};

// Square matrices up to 32 x 32 (kcp-go's shard counts are far below).
class RsMatrix {
 public:
  static constexpr unsigned kMax = 32;
  using Rows = std::array<std::array<std::uint8_t, kMax>, kMax>;

  // Inverts the n x n matrix `m` in place; false when singular.
  static bool invert(const GaloisField& gf, Rows& m, unsigned n) {
    Rows id{};
    for (unsigned i = 0; i < n; ++i) id[i][i] = 1;
    for (unsigned c = 0; c < n; ++c) {
      unsigned p = c;
      while (p < n && m[p][c] == 0) ++p;
      if (p == n) return false;
      std::swap(m[p], m[c]);
      std::swap(id[p], id[c]);
      const std::uint8_t f = gf.inv(m[c][c]);
      for (unsigned k = 0; k < n; ++k) {
        m[c][k] = gf.mul(m[c][k], f);
        id[c][k] = gf.mul(id[c][k], f);
      }
      for (unsigned r = 0; r < n; ++r) {
        if (r == c || m[r][c] == 0) continue;
        const std::uint8_t g = m[r][c];
        for (unsigned k = 0; k < n; ++k) {
          m[r][k] ^= gf.mul(g, m[c][k]);
          id[r][k] ^= gf.mul(g, id[c][k]);
        }
      }
    }
    m = id;
    return true;
  }
};

// The encoding matrix's rows, (data + parity) x data.
inline std::vector<std::array<std::uint8_t, RsMatrix::kMax>> rs_encoding_matrix(
    const GaloisField& gf, unsigned data, unsigned parity) {
  const unsigned total = data + parity;
  RsMatrix::Rows top{};
  for (unsigned r = 0; r < data; ++r)
    for (unsigned c = 0; c < data; ++c) top[r][c] = gf.pow(static_cast<std::uint8_t>(r), c);
  RsMatrix::invert(gf, top, data);  // a Vandermonde square with distinct rows is invertible
  std::vector<std::array<std::uint8_t, RsMatrix::kMax>> m(total);
  for (unsigned r = 0; r < total; ++r) {
    for (unsigned c = 0; c < data; ++c) {
      std::uint8_t v = 0;
      for (unsigned k = 0; k < data; ++k)
        v ^= gf.mul(gf.pow(static_cast<std::uint8_t>(r), k), top[k][c]);
      m[r][c] = v;
    }
  }
  return m;
}

// Shard groups being collected, a fixed number per core, keyed by (source, first seqid). A
// group is decoded once `data` of its shards are in and one or more data shards are missing;
// a source sending more groups at once than there are entries only loses recoveries.
class FecCache {
 public:
  static constexpr std::size_t kShardBytes = 1500;

  FecCache(unsigned data, unsigned parity, std::size_t groups)
      : data_(data),
        total_(data + parity),
        matrix_(rs_encoding_matrix(gf_, data, parity)),
        groups_(groups),
        shards_(groups * total_ * kShardBytes) {}

  unsigned total() const { return total_; }
  unsigned data() const { return data_; }

  // Takes one shard: `coded` is everything from the size field (data) or after the 6-byte
  // header (parity). Calls recovered(bytes) with the KCP bytes of each data shard rebuilt.
  // Returns false when the shard contradicts the shard counts (a peer with other settings).
  template <class F>
  bool add(const Endpoint& from, std::uint32_t seqid, bool is_data, const std::byte* coded,
           std::size_t len, F&& recovered) {
    const unsigned index = seqid % total_;
    if ((index < data_) != is_data || len > kShardBytes || len < 2) return false;
    const std::uint32_t base = seqid - index;
    Group* g = find(from, base);
    if (g == nullptr) {
      g = &groups_[next_];
      next_ = (next_ + 1) % groups_.size();
      *g = Group{};
      g->from = from;
      g->base = base;
      g->used = true;
    }
    if (g->done || (g->have >> index) & 1u) return true;
    std::memcpy(shard(*g, index), coded, len);
    g->len[index] = static_cast<std::uint16_t>(len);
    g->have |= 1u << index;
    ++g->count;
    if (g->count < data_) return true;
    g->done = true;
    const std::uint32_t data_mask = (1u << data_) - 1;
    if ((g->have & data_mask) == data_mask) return true;  // nothing lost
    decode(*g, recovered);
    return true;
  }

 private:
  struct Group {
    Endpoint from;
    std::uint32_t base = 0;
    std::uint32_t have = 0;
    unsigned count = 0;
    bool used = false;
    bool done = false;
    std::array<std::uint16_t, RsMatrix::kMax> len{};
  };

  Group* find(const Endpoint& from, std::uint32_t base) {
    for (Group& g : groups_)
      if (g.used && g.base == base && g.from == from) return &g;
    return nullptr;
  }
  std::byte* shard(const Group& g, unsigned index) {
    const auto gi = static_cast<std::size_t>(&g - groups_.data());
    return shards_.data() + (gi * total_ + index) * kShardBytes;
  }

  template <class F>
  void decode(Group& g, F& recovered) {
    // As the codec does: the first `data` shards present, in index order, and their rows.
    std::array<unsigned, RsMatrix::kMax> use{};
    unsigned n = 0;
    std::size_t width = 0;
    for (unsigned i = 0; i < total_ && n < data_; ++i) {
      if (!((g.have >> i) & 1u)) continue;
      use[n++] = i;
      width = std::max<std::size_t>(width, g.len[i]);
    }
    // Shorter shards were coded zero-padded to the longest.
    for (unsigned k = 0; k < n; ++k) {
      const unsigned i = use[k];
      std::memset(shard(g, i) + g.len[i], 0, width - g.len[i]);
    }
    RsMatrix::Rows sub{};
    for (unsigned r = 0; r < data_; ++r) sub[r] = matrix_[use[r]];
    if (!RsMatrix::invert(gf_, sub, data_)) return;
    std::array<std::byte, kShardBytes> out;
    for (unsigned missing = 0; missing < data_; ++missing) {
      if ((g.have >> missing) & 1u) continue;
      std::memset(out.data(), 0, width);
      for (unsigned k = 0; k < data_; ++k) {
        const std::uint8_t c = sub[missing][k];
        if (c == 0) continue;
        const std::byte* in = shard(g, use[k]);
        for (std::size_t b = 0; b < width; ++b)
          out[b] ^= std::byte(gf_.mul(c, static_cast<std::uint8_t>(in[b])));
      }
      const std::size_t size = std::size_t(static_cast<std::uint8_t>(out[0])) |
                               std::size_t(static_cast<std::uint8_t>(out[1])) << 8;
      if (size >= 2 && size <= width)
        recovered(std::span<const std::byte>(out.data() + 2, size - 2));
    }
  }

  GaloisField gf_;
  unsigned data_;
  unsigned total_;
  std::vector<std::array<std::uint8_t, RsMatrix::kMax>> matrix_;
  std::vector<Group> groups_;
  std::vector<std::byte> shards_;
  std::size_t next_ = 0;
};

}  // namespace tern::proto::kcp
