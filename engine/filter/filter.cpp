// RuleSet compilation, FilterHub publication and the per-shard scanner (README.md).
#include "filter.hpp"

#include <hs/hs.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstring>
#include <random>
#include <unordered_map>
#include <utility>

namespace tern::filter {

namespace {

constexpr std::size_t kProbe = 8;  // neighbourhood searched from an entry's home slot
constexpr std::uint32_t kNoRule = UINT32_MAX;
constexpr std::uint64_t kMilli = 1000;  // token units per payload

std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The owning thread is the only writer: a plain load + store, no locked instruction.
void bump(std::atomic<std::uint64_t>& counter) {
  counter.store(counter.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

std::size_t table_size(std::size_t requested) {
  return std::bit_ceil(std::max<std::size_t>(requested, 16));
}

std::string rule_prefix(const Rule& rule) {
  std::string s = "rule " + std::to_string(rule.id);
  if (rule.line != 0) s += " (line " + std::to_string(rule.line) + ")";
  return s + ": ";
}

}  // namespace

// ---- RuleSet -------------------------------------------------------------------------------

RuleSet::~RuleSet() {
  for (hs_database* db : databases_) hs_free_database(db);
  hs_free_scratch(prototype_);
}

std::shared_ptr<const RuleSet> RuleSet::compile(std::vector<Rule> rules, std::string& error) {
  std::shared_ptr<RuleSet> set(new RuleSet());
  set->rules_ = std::move(rules);
  const std::vector<Rule>& all = set->rules_;

  std::unordered_map<std::uint32_t, const Rule*> by_id;
  for (const Rule& rule : all) {
    if (!by_id.emplace(rule.id, &rule).second) {
      error = rule_prefix(rule) + "duplicate rule id";
      return nullptr;
    }
    if (rule.pattern.empty() || rule.pattern.find('\0') != std::string::npos) {
      error = rule_prefix(rule) + "empty pattern or NUL byte in pattern";
      return nullptr;
    }
    if ((rule.action == Action::ban && rule.ban_seconds == 0) ||
        (rule.action == Action::limit && rule.limit_per_s == 0)) {
      error = rule_prefix(rule) + "ban seconds and limit rates must be > 0";
      return nullptr;
    }
  }
  if (all.empty()) return set;
  if (hs_valid_platform() != HS_SUCCESS) {
    error = "hyperscan: this CPU is not supported (SSSE3 required)";
    return nullptr;
  }

  for (std::size_t s = 0; s < kScopeCount; ++s) {
    std::vector<const char*> expressions;
    std::vector<unsigned> flags;
    std::vector<unsigned> ids;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (static_cast<std::size_t>(all[i].scope) != s) continue;
      expressions.push_back(all[i].pattern.c_str());
      flags.push_back(all[i].hs_flags);
      ids.push_back(static_cast<unsigned>(i));
    }
    set->scope_rules_[s] = ids.size();
    if (ids.empty()) continue;
    hs_compile_error_t* compile_error = nullptr;
    const hs_error_t rc = hs_compile_multi(expressions.data(), flags.data(), ids.data(),
                                           static_cast<unsigned>(ids.size()), HS_MODE_BLOCK,
                                           nullptr, &set->databases_[s], &compile_error);
    if (rc != HS_SUCCESS) {
      const std::string message = compile_error != nullptr && compile_error->message != nullptr
                                      ? compile_error->message
                                      : "compilation failed (error " + std::to_string(rc) + ")";
      if (compile_error != nullptr && compile_error->expression >= 0 &&
          static_cast<std::size_t>(compile_error->expression) < ids.size()) {
        error =
            rule_prefix(all[ids[static_cast<std::size_t>(compile_error->expression)]]) + message;
      } else {
        error =
            "hyperscan (" + std::string(to_string(static_cast<Scope>(s))) + " rules): " + message;
      }
      hs_free_compile_error(compile_error);
      set->databases_[s] = nullptr;
      return nullptr;
    }
    if (hs_alloc_scratch(set->databases_[s], &set->prototype_) != HS_SUCCESS) {
      error = "hyperscan: cannot allocate scratch";
      return nullptr;
    }
  }
  return set;
}

// ---- FilterHub -----------------------------------------------------------------------------

FilterHub::FilterHub() {
  std::string unused;
  current_ = RuleSet::compile({}, unused);
}

bool FilterHub::load(const std::string& path, std::string& error) {
  std::vector<Rule> rules;
  if (!load_rules_file(path, rules, error)) return false;
  return load_rules(std::move(rules), error);
}

bool FilterHub::load_rules(std::vector<Rule> rules, std::string& error) {
  std::shared_ptr<const RuleSet> set = RuleSet::compile(std::move(rules), error);
  if (!set) return false;
  publish(std::move(set));
  return true;
}

void FilterHub::publish(std::shared_ptr<const RuleSet> rules) {
  std::shared_ptr<const RuleSet> old;
  {
    std::lock_guard lock(mutex_);
    old = std::exchange(current_, std::move(rules));
    generation_.fetch_add(1, std::memory_order_release);
  }
  // `old` may be the last reference: freed here, outside the lock.
}

std::shared_ptr<const RuleSet> FilterHub::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::shared_ptr<const RuleSet> FilterHub::current(std::uint64_t& generation) const {
  std::lock_guard lock(mutex_);
  generation = generation_.load(std::memory_order_relaxed);
  return current_;
}

// ---- ShardFilter ---------------------------------------------------------------------------

RuleCounters::RuleCounters(std::shared_ptr<const RuleSet> set)
    : rules(std::move(set)), counters(rules ? rules->rules().size() : 0) {
  for (std::size_t i = 0; i < counters.size(); ++i) counters[i].id = rules->rules()[i].id;
}

struct ShardFilter::ScanContext {
  ShardFilter* self;
  const Rule* rules;
  const Endpoint* source;
  std::uint64_t now_ms;
  bool drop;
  bool limited;
};

ShardFilter::ShardFilter(const FilterHub& hub, ShardFilterOptions options) : ShardFilter(options) {
  hub_ = &hub;
  set_rules(hub.current(seen_generation_));
}

ShardFilter::ShardFilter(ShardFilterOptions options)
    : seed_(options.hash_seed != 0
                ? options.hash_seed
                : (std::uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()),
      bans_(table_size(options.ban_capacity), BanSlot{{}, 0}),
      buckets_(table_size(options.limit_capacity), BucketSlot{{}, kNoRule, 0, 0}),
      new_bans_(std::max<std::size_t>(options.new_ban_capacity, 1)) {
  keep_bans_ = options.keep_bans;
  counters_ = std::make_shared<RuleCounters>(nullptr);
}

ShardFilter::~ShardFilter() { hs_free_scratch(scratch_); }

bool ShardFilter::refresh() {
  if (hub_ == nullptr || hub_->generation() == seen_generation_) return false;
  set_rules(hub_->current(seen_generation_));  // the rare path: a lock, a shared_ptr copy
  return true;
}

void ShardFilter::set_rules(std::shared_ptr<const RuleSet> rules) {
  hs_scratch* scratch = nullptr;
  if (rules && rules->prototype_scratch() != nullptr &&
      hs_clone_scratch(rules->prototype_scratch(), &scratch) != HS_SUCCESS) {
    scratch = nullptr;  // out of memory: the set is installed but scans are skipped
    bump(live_.scan_errors);
  }
  auto counters = std::make_shared<RuleCounters>(rules);
  hits_ = counters->counters.data();
  {
    std::lock_guard lock(counters_mutex_);
    counters_ = std::move(counters);
  }
  hs_free_scratch(scratch_);
  scratch_ = scratch;
  rules_ = std::move(rules);
  seen_epoch_.assign(rules_ ? rules_->rules().size() : 0, 0);
  epoch_ = 0;
  // Buckets are keyed by rule index, which means something else in the new set.
  for (BucketSlot& slot : buckets_) slot.rule = kNoRule;
  bump(live_.reloads);
}

std::size_t ShardFilter::home(const std::array<std::uint8_t, 16>& addr, std::uint32_t salt,
                              std::size_t mask) const {
  std::uint64_t lo;
  std::uint64_t hi;
  std::memcpy(&lo, addr.data(), 8);
  std::memcpy(&hi, addr.data() + 8, 8);
  const std::uint64_t h = mix64(mix64(lo ^ seed_) ^ hi ^ (std::uint64_t{salt} << 32));
  return static_cast<std::size_t>(h) & mask;
}

Verdict ShardFilter::check(Scope scope, const Endpoint& source, std::span<const std::byte> payload,
                           std::uint64_t now_ms) {
  if (ban_entries_ != 0) {
    const std::size_t mask = bans_.size() - 1;
    const std::size_t start = home(source.addr, 0, mask);
    for (std::size_t k = 0; k < kProbe; ++k) {
      BanSlot& slot = bans_[(start + k) & mask];
      if (slot.until_ms == 0 || slot.addr != source.addr) continue;
      if (slot.until_ms > now_ms) {
        bump(live_.banned_drops);
        bump(live_.dropped);
        return Verdict::drop;
      }
      slot.until_ms = 0;  // expired: free the slot so an idle table skips this lookup
      --ban_entries_;
      break;
    }
  }

  const RuleSet* set = rules_.get();
  if (set == nullptr || scratch_ == nullptr) return Verdict::pass;
  const hs_database* db = set->database(scope);
  if (db == nullptr) return Verdict::pass;

  bump(live_.scanned);
  if (++epoch_ == 0) {
    std::fill(seen_epoch_.begin(), seen_epoch_.end(), 0);
    epoch_ = 1;
  }
  ScanContext ctx{this, set->rules().data(), &source, now_ms, false, false};
  static constexpr char kEmpty = 0;
  const char* data = payload.empty() ? &kEmpty : reinterpret_cast<const char*>(payload.data());
  const auto length = static_cast<unsigned>(std::min<std::size_t>(payload.size(), UINT_MAX));
  const hs_error_t rc = hs_scan(db, data, length, 0, scratch_, &ShardFilter::on_match, &ctx);
  if (rc != HS_SUCCESS) bump(live_.scan_errors);
  if (ctx.limited) bump(live_.limited_drops);
  if (!ctx.drop) return Verdict::pass;
  bump(live_.dropped);
  return Verdict::drop;
}

int ShardFilter::on_match(unsigned int id, unsigned long long /*from*/, unsigned long long /*to*/,
                          unsigned int /*flags*/, void* context) {
  auto& ctx = *static_cast<ScanContext*>(context);
  ctx.self->apply(ctx, id);
  return 0;  // keep scanning: every matching rule is counted
}

void ShardFilter::apply(ScanContext& ctx, std::uint32_t index) {
  if (seen_epoch_[index] == epoch_) return;  // one hit per rule per payload
  seen_epoch_[index] = epoch_;
  bump(hits_[index].hits);
  const Rule& rule = ctx.rules[index];
  switch (rule.action) {
    case Action::drop: ctx.drop = true; break;
    case Action::count: break;
    case Action::ban:
      record_ban(*ctx.source, ctx.now_ms + std::uint64_t{rule.ban_seconds} * 1000, rule.id);
      ctx.drop = true;
      break;
    case Action::limit:
      if (!take_token(index, rule, *ctx.source, ctx.now_ms)) {
        ctx.drop = true;
        ctx.limited = true;
      }
      break;
  }
}

bool ShardFilter::take_token(std::uint32_t rule_index, const Rule& rule, const Endpoint& source,
                             std::uint64_t now_ms) {
  const std::uint64_t capacity = std::uint64_t{rule.limit_per_s} * kMilli;
  const std::size_t mask = buckets_.size() - 1;
  const std::size_t start = home(source.addr, rule_index + 1, mask);
  BucketSlot* victim = nullptr;
  for (std::size_t k = 0; k < kProbe; ++k) {
    BucketSlot& slot = buckets_[(start + k) & mask];
    if (slot.rule == rule_index && slot.addr == source.addr) {
      // Refill: limit_per_s tokens per second, in thousandths; a second refills it all.
      const std::uint64_t elapsed = now_ms > slot.last_ms ? now_ms - slot.last_ms : 0;
      slot.tokens_milli =
          std::min(capacity, slot.tokens_milli + std::min<std::uint64_t>(elapsed, 1000) *
                                                     std::uint64_t{rule.limit_per_s});
      slot.last_ms = std::max(slot.last_ms, now_ms);
      if (slot.tokens_milli < kMilli) return false;
      slot.tokens_milli -= kMilli;
      return true;
    }
    if (victim == nullptr ||
        (victim->rule != kNoRule && (slot.rule == kNoRule || slot.last_ms < victim->last_ms))) {
      victim = &slot;
    }
  }
  // New bucket (replacing an empty slot, else the one used longest ago): full, minus this one.
  victim->addr = source.addr;
  victim->rule = rule_index;
  victim->tokens_milli = capacity - kMilli;
  victim->last_ms = now_ms;
  return true;
}

void ShardFilter::ban(const Endpoint& source, std::uint64_t until_ms) {
  if (until_ms == 0) return;
  const std::size_t mask = bans_.size() - 1;
  const std::size_t start = home(source.addr, 0, mask);
  BanSlot* victim = nullptr;
  for (std::size_t k = 0; k < kProbe; ++k) {
    BanSlot& slot = bans_[(start + k) & mask];
    if (slot.until_ms != 0 && slot.addr == source.addr) {
      slot.until_ms = std::max(slot.until_ms, until_ms);
      return;
    }
    // Empty slots have until_ms 0, so they win; then the ban that ends first.
    if (victim == nullptr || slot.until_ms < victim->until_ms) victim = &slot;
  }
  if (victim->until_ms == 0) ++ban_entries_;
  victim->addr = source.addr;
  victim->until_ms = until_ms;
}

void ShardFilter::record_ban(const Endpoint& source, std::uint64_t until_ms,
                             std::uint32_t rule_id) {
  if (keep_bans_) ban(source, until_ms);
  bump(live_.bans_created);
  BanRecord record;
  record.source.addr = source.addr;  // port 0: bans are per address
  record.until_ms = until_ms;
  record.rule_id = rule_id;
  const std::size_t capacity = new_bans_.size();
  if (new_ban_count_ == capacity) {  // full: the oldest record goes
    new_bans_[new_ban_head_] = record;
    new_ban_head_ = (new_ban_head_ + 1) % capacity;
    bump(live_.ban_records_lost);
  } else {
    new_bans_[(new_ban_head_ + new_ban_count_) % capacity] = record;
    ++new_ban_count_;
  }
}

bool ShardFilter::is_banned(const Endpoint& source, std::uint64_t now_ms) const {
  const std::size_t mask = bans_.size() - 1;
  const std::size_t start = home(source.addr, 0, mask);
  for (std::size_t k = 0; k < kProbe; ++k) {
    const BanSlot& slot = bans_[(start + k) & mask];
    if (slot.until_ms != 0 && slot.addr == source.addr) return slot.until_ms > now_ms;
  }
  return false;
}

std::size_t ShardFilter::take_new_bans(std::span<BanRecord> out) {
  const std::size_t n = std::min(out.size(), new_ban_count_);
  for (std::size_t i = 0; i < n; ++i) {
    out[i] = new_bans_[new_ban_head_];
    new_ban_head_ = (new_ban_head_ + 1) % new_bans_.size();
  }
  new_ban_count_ -= n;
  return n;
}

std::size_t ShardFilter::active_bans(std::uint64_t now_ms) const {
  return static_cast<std::size_t>(std::count_if(
      bans_.begin(), bans_.end(), [now_ms](const BanSlot& s) { return s.until_ms > now_ms; }));
}

std::size_t ShardFilter::limit_buckets() const {
  return static_cast<std::size_t>(std::count_if(
      buckets_.begin(), buckets_.end(), [](const BucketSlot& s) { return s.rule != kNoRule; }));
}

std::shared_ptr<const RuleCounters> ShardFilter::rule_counters() const {
  std::lock_guard lock(counters_mutex_);
  return counters_;
}

FilterTotals ShardFilter::totals() const {
  constexpr auto r = std::memory_order_relaxed;
  FilterTotals t;
  t.scanned = live_.scanned.load(r);
  t.dropped = live_.dropped.load(r);
  t.banned_drops = live_.banned_drops.load(r);
  t.limited_drops = live_.limited_drops.load(r);
  t.bans_created = live_.bans_created.load(r);
  t.ban_records_lost = live_.ban_records_lost.load(r);
  t.scan_errors = live_.scan_errors.load(r);
  t.reloads = live_.reloads.load(r);
  return t;
}

}  // namespace tern::filter
