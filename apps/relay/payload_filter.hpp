// tern-relay's payload filter (engine/filter, DESIGN §7): one rule hub and one scanner per
// shard. payload_filter.cpp is built with Hyperscan and payload_filter_off.cpp without it (meson
// picks), so the relay itself has no #if for the feature: without Hyperscan, load() refuses
// and the relay never enables the rest.
#pragma once

#include "shard.hpp"

#include <tern/endpoint.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <ostream>
#include <span>
#include <string>

namespace tern::relay {

// A ban one shard's rules decided, for the relay's one ban list (bans.hpp): the source
// address and its end. The filter itself keeps none.
struct FilterBan {
  Endpoint source;
  std::uint64_t until_ms = 0;
};

class PayloadFilter {
 public:
  PayloadFilter();
  ~PayloadFilter();
  PayloadFilter(const PayloadFilter&) = delete;
  PayloadFilter& operator=(const PayloadFilter&) = delete;

  // One scanner per shard, before the shards start; the rules come from load().
  void enable(std::size_t shards);
  bool enabled() const;
  // Parses, compiles and publishes `path`; each shard takes the new rules at its next burst.
  // False with the reason (and the running rules kept), or when Hyperscan is not built.
  bool load(const std::string& path, std::string& error);

  // On shard `shard`'s thread, enabled only. The datagram scope: keeps the frames that pass at
  // the front of `frames`, in order, and returns how many.
  std::size_t keep_datagrams(std::size_t shard, std::span<rt::RxFrame> frames,
                             std::uint64_t now_ms);
  // The message scope: true when the message is to be dropped.
  bool drops_message(std::size_t shard, const Endpoint& from, std::span<const std::byte> payload,
                     std::uint64_t now_ms);
  bool has_new_bans(std::size_t shard) const;
  // Moves the bans `shard`'s rules decided since the last call into `out`; returns how many.
  std::size_t take_new_bans(std::size_t shard, std::span<FilterBan> out);

  // Prometheus text: per-rule hits and totals over all shards (nothing when not enabled).
  void metrics(std::ostream& o) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tern::relay
