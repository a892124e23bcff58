// tern-relay's payload filter with Hyperscan (engine/filter).
#include "payload_filter.hpp"

#include "filter.hpp"

#include <array>
#include <map>
#include <vector>

namespace tern::relay {

struct PayloadFilter::Impl {
  filter::FilterHub hub;
  std::vector<std::unique_ptr<filter::ShardFilter>> shards;  // one per shard
};

PayloadFilter::PayloadFilter() : impl_(std::make_unique<Impl>()) {}
PayloadFilter::~PayloadFilter() = default;

void PayloadFilter::enable(std::size_t shards) {
  for (std::size_t i = 0; i < shards; ++i) {
    // The relay keeps every ban in the engine's list (bans.hpp), not in the filter's.
    filter::ShardFilterOptions o;
    o.keep_bans = false;
    impl_->shards.push_back(std::make_unique<filter::ShardFilter>(impl_->hub, o));
  }
}

bool PayloadFilter::enabled() const { return !impl_->shards.empty(); }

bool PayloadFilter::load(const std::string& path, std::string& error) {
  return impl_->hub.load(path, error);
}

std::size_t PayloadFilter::keep_datagrams(std::size_t shard, std::span<rt::RxFrame> frames,
                                          std::uint64_t now_ms) {
  filter::ShardFilter& f = *impl_->shards[shard];
  f.refresh();
  std::size_t keep = 0;
  for (rt::RxFrame& frame : frames) {
    if (f.check(filter::Scope::datagram, frame.from, frame.bytes, now_ms) ==
        filter::Verdict::drop) {
      continue;
    }
    frames[keep++] = frame;
  }
  return keep;
}

bool PayloadFilter::drops_message(std::size_t shard, const Endpoint& from,
                                  std::span<const std::byte> payload, std::uint64_t now_ms) {
  return impl_->shards[shard]->check(filter::Scope::message, from, payload, now_ms) ==
         filter::Verdict::drop;
}

bool PayloadFilter::has_new_bans(std::size_t shard) const {
  return impl_->shards[shard]->pending_new_bans() != 0;
}

std::size_t PayloadFilter::take_new_bans(std::size_t shard, std::span<FilterBan> out) {
  std::array<filter::BanRecord, 16> records;
  const std::size_t n = impl_->shards[shard]->take_new_bans(
      std::span<filter::BanRecord>(records).first(std::min(records.size(), out.size())));
  for (std::size_t i = 0; i < n; ++i) out[i] = FilterBan{records[i].source, records[i].until_ms};
  return n;
}

void PayloadFilter::metrics(std::ostream& o) const {
  if (impl_->shards.empty()) return;
  // Per rule id, summed over shards (a shard that has not yet taken a reloaded set still
  // reports the old set's rules).
  std::map<std::uint32_t, std::uint64_t> hits;
  filter::FilterTotals t;
  for (const auto& f : impl_->shards) {
    if (auto c = f->rule_counters()) {
      for (const filter::RuleCounter& r : c->counters) hits[r.id] += r.hits.load();
    }
    const filter::FilterTotals ft = f->totals();
    t.scanned += ft.scanned;
    t.dropped += ft.dropped;
    t.banned_drops += ft.banned_drops;
    t.limited_drops += ft.limited_drops;
    t.bans_created += ft.bans_created;
  }
  o << "# HELP tern_relay_filter_rule_hits_total Payloads each filter rule matched.\n"
       "# TYPE tern_relay_filter_rule_hits_total counter\n";
  for (const auto& [id, n] : hits) {
    o << "tern_relay_filter_rule_hits_total{rule=\"" << id << "\"} " << n << '\n';
  }
  o << "# HELP tern_relay_filter_scanned_total Payloads scanned (datagrams and messages).\n"
       "# TYPE tern_relay_filter_scanned_total counter\n"
    << "tern_relay_filter_scanned_total " << t.scanned << '\n'
    << "# HELP tern_relay_filter_dropped_total Payloads the filter dropped, by cause.\n"
       "# TYPE tern_relay_filter_dropped_total counter\n"
    << "tern_relay_filter_dropped_total{cause=\"rule\"} "
    << t.dropped - t.banned_drops - t.limited_drops << '\n'
    << "tern_relay_filter_dropped_total{cause=\"banned\"} " << t.banned_drops << '\n'
    << "tern_relay_filter_dropped_total{cause=\"limited\"} " << t.limited_drops << '\n'
    << "# HELP tern_relay_filter_bans_total Bans the rules decided.\n"
       "# TYPE tern_relay_filter_bans_total counter\n"
    << "tern_relay_filter_bans_total " << t.bans_created << '\n';
}

}  // namespace tern::relay
