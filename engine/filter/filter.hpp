// tern::filter: Hyperscan payload rules, per-shard scanners and reload (DESIGN §7).
//
//   filter::FilterHub hub;                                  // owned by the app, any thread
//   if (!hub.load("config/filter.rules", error)) ...;       // parse + compile off the hot path
//   filter::ShardFilter f(hub);                             // one per shard thread
//   // every poll iteration, on the shard thread:
//   f.refresh();                                            // one acquire load unless reloaded
//   if (f.check(Scope::datagram, from, bytes, now_ms) == Verdict::drop) ...;
//
// Rules (syntax in README.md and config/filter.rules) compile into one Hyperscan block-mode
// database per scope. A RuleSet is immutable and shared by every shard through
// std::shared_ptr<const RuleSet>; each ShardFilter owns its scratch, its ban table and its
// rate-limit buckets, and is never touched by another thread except through the counters.
#pragma once

#include <tern/endpoint.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

// Hyperscan's opaque types, so that callers need not see <hs/hs.h>.
struct hs_database;
struct hs_scratch;

namespace tern::filter {

enum class Scope : std::uint8_t {
  datagram = 0,  // the raw UDP payload, before protocol decoding
  message = 1,   // each message payload the protocol delivers
};
inline constexpr std::size_t kScopeCount = 2;

enum class Action : std::uint8_t {
  drop,   // drop the payload
  count,  // only count the hit
  ban,    // drop, and drop everything from the source address for ban_seconds
  limit,  // per source address: matching payloads beyond limit_per_s per second are dropped
};

enum class Verdict : std::uint8_t { pass, drop };

std::string_view to_string(Scope scope);
std::string_view to_string(Action action);

struct Rule {
  std::uint32_t id = 0;  // unique within a rule set
  Scope scope = Scope::datagram;
  Action action = Action::drop;
  std::uint32_t ban_seconds = 0;  // Action::ban only, > 0
  std::uint32_t limit_per_s = 0;  // Action::limit only, > 0
  std::string pattern;            // Hyperscan (PCRE subset) syntax, `\/` already unescaped
  unsigned hs_flags = 0;          // HS_FLAG_CASELESS | DOTALL | MULTILINE | SINGLEMATCH
  unsigned line = 0;              // 1-based line in the rules file; 0 when built in code
};

// Parses a rules file's text and appends its rules to `rules`. On the first error returns
// false with `error` = "FILE:LINE: reason" and leaves `rules` unchanged.
bool parse_rules(std::string_view text, const std::string& file_name, std::vector<Rule>& rules,
                 std::string& error);
// Reads `path` and parses it (error "PATH: cannot read: ..." when it cannot be read).
bool load_rules_file(const std::string& path, std::vector<Rule>& rules, std::string& error);

// Compiled rules: immutable once built.
class RuleSet {
 public:
  // One database per scope that has rules (hs_compile_multi; match id = index into rules()),
  // plus a prototype scratch that shards clone. On failure returns nullptr with `error`, e.g.
  // "rule 7 (line 12): <hyperscan message>".
  static std::shared_ptr<const RuleSet> compile(std::vector<Rule> rules, std::string& error);

  ~RuleSet();
  RuleSet(const RuleSet&) = delete;
  RuleSet& operator=(const RuleSet&) = delete;

  const std::vector<Rule>& rules() const { return rules_; }
  bool empty() const { return rules_.empty(); }
  std::size_t rule_count(Scope scope) const {
    return scope_rules_[static_cast<std::size_t>(scope)];
  }
  // Null when the scope has no rules.
  const hs_database* database(Scope scope) const {
    return databases_[static_cast<std::size_t>(scope)];
  }
  // Scratch big enough for both databases; never used to scan, only cloned. Null when empty.
  const hs_scratch* prototype_scratch() const { return prototype_; }

 private:
  RuleSet() = default;
  std::vector<Rule> rules_;
  std::array<hs_database*, kScopeCount> databases_{};
  std::array<std::size_t, kScopeCount> scope_rules_{};
  hs_scratch* prototype_ = nullptr;
};

// Publishes rule sets to the shards. Owned by the app; every member is thread-safe.
class FilterHub {
 public:
  FilterHub();  // starts with an empty rule set (everything passes)

  // Parses and compiles `path`, then publishes it. On failure the current rules stay and
  // `error` says why (FILE:LINE for syntax, rule id + line for Hyperscan rejections).
  bool load(const std::string& path, std::string& error);
  // The same for rules built in code (embedders, tests).
  bool load_rules(std::vector<Rule> rules, std::string& error);
  // Publishes an already compiled set (not null).
  void publish(std::shared_ptr<const RuleSet> rules);

  std::shared_ptr<const RuleSet> current() const;
  // The current set and, consistently with it, its generation.
  std::shared_ptr<const RuleSet> current(std::uint64_t& generation) const;
  // Bumped by every publish. ShardFilter::refresh() compares it with one acquire load.
  std::uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const RuleSet> current_;  // guarded by mutex_
  std::atomic<std::uint64_t> generation_{1};
};

// Per-rule hits of one ShardFilter for one rule set, indexed like RuleSet::rules().
struct RuleCounter {
  std::uint32_t id = 0;
  std::atomic<std::uint64_t> hits{0};
};
struct RuleCounters {
  std::shared_ptr<const RuleSet> rules;
  std::vector<RuleCounter> counters;  // counters[i] counts rules->rules()[i]
  explicit RuleCounters(std::shared_ptr<const RuleSet> set);
};

struct FilterTotals {
  std::uint64_t scanned = 0;           // payloads given to Hyperscan (both scopes)
  std::uint64_t dropped = 0;           // Verdict::drop returned, every reason
  std::uint64_t banned_drops = 0;      // dropped because the source was banned (not scanned)
  std::uint64_t limited_drops = 0;     // dropped by a `limit` rule's exhausted bucket
  std::uint64_t bans_created = 0;      // bans this shard's `ban` rules decided
  std::uint64_t ban_records_lost = 0;  // new-ban records overwritten before take_new_bans()
  std::uint64_t scan_errors = 0;       // hs_scan failures (the payload passes)
  std::uint64_t reloads = 0;           // rule sets installed by refresh()/set_rules()
};

// A ban for broadcasting to the other shards: the source address (port 0) and when it ends.
struct BanRecord {
  Endpoint source;
  std::uint64_t until_ms = 0;
  std::uint32_t rule_id = 0;
};

struct ShardFilterOptions {
  // Table sizes, rounded up to a power of two (at least 16). When a table's neighbourhood is
  // full, the entry that matters least is replaced: the ban expiring first, the bucket used
  // longest ago. 65,536 entries: 1.5 MiB for bans, 2 MiB for buckets.
  std::size_t ban_capacity = 65'536;
  std::size_t limit_capacity = 65'536;
  std::size_t new_ban_capacity = 1'024;  // records kept between take_new_bans() calls
  std::uint64_t hash_seed = 0;           // 0: drawn from std::random_device
  // false: a `ban` rule's bans are only reported (take_new_bans) for the owner to keep in a
  // list of its own (tern-relay: the engine's host-level list); this filter drops nothing for
  // them.
  bool keep_bans = true;
};

// One per shard thread. Only counters() / rule_counters() / totals() may be called from other
// threads; everything else belongs to the owning thread.
class ShardFilter {
 public:
  explicit ShardFilter(const FilterHub& hub, ShardFilterOptions options = {});
  // Without a hub: rules come from set_rules() only.
  explicit ShardFilter(ShardFilterOptions options = {});
  ~ShardFilter();
  ShardFilter(const ShardFilter&) = delete;
  ShardFilter& operator=(const ShardFilter&) = delete;

  // Once per poll iteration: takes the hub's new rule set if there is one (true then). The
  // common case is one acquire load. Installing a set allocates (scratch clone, counters).
  bool refresh();
  // Installs `rules` (null = empty). Per-rule counters and rate-limit buckets restart; bans
  // and totals are kept.
  void set_rules(std::shared_ptr<const RuleSet> rules);
  const std::shared_ptr<const RuleSet>& rules() const { return rules_; }

  // The hot path: no allocation, no lock, no system call.
  Verdict check(Scope scope, const Endpoint& source, std::span<const std::byte> payload,
                std::uint64_t now_ms);

  // Bans `source`'s address (the port is ignored) until `until_ms`, e.g. a ban another shard
  // decided. Extends, never shortens, an existing ban. Not reported by take_new_bans().
  void ban(const Endpoint& source, std::uint64_t until_ms);
  bool is_banned(const Endpoint& source, std::uint64_t now_ms) const;
  // Moves the bans this shard's rules created since the last call into `out` (oldest first)
  // and returns how many; records that do not fit stay for the next call.
  std::size_t take_new_bans(std::span<BanRecord> out);
  std::size_t pending_new_bans() const { return new_ban_count_; }
  // Live (unexpired at now_ms) entries, for tests and stats. O(capacity).
  std::size_t active_bans(std::uint64_t now_ms) const;
  std::size_t limit_buckets() const;
  std::size_t ban_capacity() const { return bans_.size(); }
  std::size_t limit_capacity() const { return buckets_.size(); }

  // Any thread.
  std::shared_ptr<const RuleCounters> rule_counters() const;
  FilterTotals totals() const;

 private:
  struct BanSlot {
    std::array<std::uint8_t, 16> addr;
    std::uint64_t until_ms;  // 0: empty
  };
  struct BucketSlot {
    std::array<std::uint8_t, 16> addr;
    std::uint32_t rule;  // index into rules_->rules(); kNoRule: empty
    std::uint32_t tokens_milli;
    std::uint64_t last_ms;
  };
  struct Live {
    std::atomic<std::uint64_t> scanned{0}, dropped{0}, banned_drops{0}, limited_drops{0},
        bans_created{0}, ban_records_lost{0}, scan_errors{0}, reloads{0};
  };
  struct ScanContext;
  static int on_match(unsigned int id, unsigned long long from, unsigned long long to,
                      unsigned int flags, void* context);
  void apply(ScanContext& ctx, std::uint32_t index);
  bool take_token(std::uint32_t rule_index, const Rule& rule, const Endpoint& source,
                  std::uint64_t now_ms);
  void record_ban(const Endpoint& source, std::uint64_t until_ms, std::uint32_t rule_id);
  std::size_t home(const std::array<std::uint8_t, 16>& addr, std::uint32_t salt,
                   std::size_t mask) const;

  const FilterHub* hub_ = nullptr;
  bool keep_bans_ = true;
  std::uint64_t seen_generation_ = 0;
  std::uint64_t seed_ = 0;
  std::shared_ptr<const RuleSet> rules_;
  hs_scratch* scratch_ = nullptr;
  std::shared_ptr<RuleCounters> counters_;  // replaced on the shard thread under counters_mutex_
  RuleCounter* hits_ = nullptr;             // counters_->counters.data()
  mutable std::mutex counters_mutex_;
  std::vector<std::uint32_t> seen_epoch_;  // per rule: last scan that matched it (dedupe)
  std::uint32_t epoch_ = 0;
  std::vector<BanSlot> bans_;
  std::size_t ban_entries_ = 0;  // occupied slots, possibly expired; 0 skips the lookup
  std::vector<BucketSlot> buckets_;
  std::vector<BanRecord> new_bans_;  // ring
  std::size_t new_ban_head_ = 0;
  std::size_t new_ban_count_ = 0;
  Live live_;
};

}  // namespace tern::filter
