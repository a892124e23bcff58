// tern::filter: the rules parser, Hyperscan compilation, each action and scope, ban expiry,
// per-source limits, reload while another thread scans, and bounded tables under a flood.
// Time is an argument everywhere: no test reads the clock.
#include "filter.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace tern::filter;
using tern::Endpoint;

std::span<const std::byte> bytes(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

std::vector<Rule> parse_ok(std::string_view text) {
  std::vector<Rule> rules;
  std::string error;
  EXPECT_TRUE(parse_rules(text, "t.rules", rules, error)) << error;
  return rules;
}

std::shared_ptr<const RuleSet> compile_ok(std::string_view text) {
  std::string error;
  auto set = RuleSet::compile(parse_ok(text), error);
  EXPECT_TRUE(set) << error;
  return set;
}

const Endpoint kA = Endpoint::v4(0x0a000001, 1000);
const Endpoint kB = Endpoint::v4(0x0a000002, 1000);

// ---- parser ---------------------------------------------------------------------------------

TEST(FilterParse, GoodFile) {
  const auto rules = parse_ok(
      "# comment\n"
      "\n"
      "   # indented comment\n"
      "1 datagram drop /^\\x00\\xff/\n"
      "2\tmessage  count   /hello world/iH   # trailing comment\r\n"
      "3 datagram ban:60 /GET \\/admin/sm\n"
      "4 message limit:5/s /spam[0-9]+/\n"
      "  42 message drop /a\\\\/\n");
  ASSERT_EQ(rules.size(), 5u);
  EXPECT_EQ(rules[0].id, 1u);
  EXPECT_EQ(rules[0].scope, Scope::datagram);
  EXPECT_EQ(rules[0].action, Action::drop);
  EXPECT_EQ(rules[0].pattern, "^\\x00\\xff");
  EXPECT_EQ(rules[0].hs_flags, 0u);
  EXPECT_EQ(rules[0].line, 4u);
  EXPECT_EQ(rules[1].scope, Scope::message);
  EXPECT_EQ(rules[1].action, Action::count);
  EXPECT_EQ(rules[1].pattern, "hello world");
  EXPECT_EQ(rules[1].line, 5u);
  EXPECT_NE(rules[1].hs_flags, 0u);
  EXPECT_EQ(rules[2].action, Action::ban);
  EXPECT_EQ(rules[2].ban_seconds, 60u);
  EXPECT_EQ(rules[2].pattern, "GET /admin");  // `\/` unescaped
  EXPECT_EQ(rules[3].action, Action::limit);
  EXPECT_EQ(rules[3].limit_per_s, 5u);
  EXPECT_EQ(rules[4].id, 42u);
  EXPECT_EQ(rules[4].pattern, "a\\\\");  // `\\` stays for Hyperscan; the next `/` closes
  // Each flag maps to its own Hyperscan flag and they combine.
  const auto flags = parse_ok(
      "1 datagram drop /x/i\n2 datagram drop /x/s\n3 datagram drop /x/m\n"
      "4 datagram drop /x/H\n5 datagram drop /x/ismH\n");
  EXPECT_EQ(flags[4].hs_flags,
            flags[0].hs_flags | flags[1].hs_flags | flags[2].hs_flags | flags[3].hs_flags);
  for (int i = 0; i < 4; ++i) {
    for (int j = i + 1; j < 4; ++j) EXPECT_EQ(flags[i].hs_flags & flags[j].hs_flags, 0u);
  }
  // An empty file or one with only comments is a valid empty rule set.
  EXPECT_TRUE(parse_ok("").empty());
  EXPECT_TRUE(parse_ok("# nothing\n\n").empty());
}

TEST(FilterParse, EveryErrorNamesFileAndLine) {
  struct Case {
    const char* line;
    const char* reason;
  };
  const Case cases[] = {
      {"7 datagram drop", "expected `ID SCOPE ACTION /PATTERN/FLAGS`"},
      {"7", "expected"},
      {"x datagram drop /a/", "bad rule id 'x'"},
      {"-1 datagram drop /a/", "bad rule id '-1'"},
      {"99999999999 datagram drop /a/", "bad rule id"},
      {"7 packet drop /a/", "unknown scope 'packet'"},
      {"7 datagram reject /a/", "unknown action 'reject'"},
      {"7 datagram ban /a/", "unknown action 'ban'"},
      {"7 datagram ban:0 /a/", "bad ban duration"},
      {"7 datagram ban:ten /a/", "bad ban duration"},
      {"7 datagram ban: /a/", "bad ban duration"},
      {"7 datagram limit:5 /a/", "bad rate limit"},
      {"7 datagram limit:0/s /a/", "bad rate limit"},
      {"7 datagram limit:x/s /a/", "bad rate limit"},
      {"7 datagram drop a/", "pattern must start with '/'"},
      {"7 datagram drop /abc", "unterminated pattern"},
      {"7 datagram drop /abc\\/", "unterminated pattern"},
      {"7 datagram drop //", "empty pattern"},
      {"7 datagram drop /a/x", "unknown flag 'x'"},
      {"7 datagram drop /a/i junk", "unexpected text after the pattern"},
  };
  for (const Case& c : cases) {
    std::vector<Rule> rules = parse_ok("1 datagram drop /ok/\n");
    std::string error;
    const std::string text = "1000 message count /before/\n# comment\n\n" + std::string(c.line) +
                             "\n2000 message count /after/\n";
    EXPECT_FALSE(parse_rules(text, "conf/f.rules", rules, error)) << c.line;
    EXPECT_EQ(error.rfind("conf/f.rules:4: ", 0), 0u) << c.line << " -> " << error;
    EXPECT_NE(error.find(c.reason), std::string::npos) << c.line << " -> " << error;
    EXPECT_EQ(rules.size(), 1u) << "nothing loaded on error: " << c.line;
  }
  std::vector<Rule> rules;
  std::string error;
  EXPECT_FALSE(parse_rules("5 datagram drop /a/\n\n5 message drop /b/\n", "d.rules", rules, error));
  EXPECT_EQ(error, "d.rules:3: duplicate rule id 5 (first on line 1)");
  EXPECT_TRUE(rules.empty());
}

TEST(FilterParse, LoadFile) {
  const std::string path = ::testing::TempDir() + "tern_filter_test.rules";
  {
    std::ofstream out(path);
    out << "# sample\n1 datagram drop /evil/\n2 message ban:10 /worse/i\n";
  }
  std::vector<Rule> rules;
  std::string error;
  ASSERT_TRUE(load_rules_file(path, rules, error)) << error;
  EXPECT_EQ(rules.size(), 2u);
  {
    std::ofstream out(path);
    out << "1 datagram drop /evil/\n2 message ban:10 /worse/q\n";
  }
  rules.clear();
  EXPECT_FALSE(load_rules_file(path, rules, error));
  EXPECT_EQ(error.rfind(path + ":2: unknown flag 'q'", 0), 0u) << error;
  EXPECT_TRUE(rules.empty());
  std::remove(path.c_str());
  EXPECT_FALSE(load_rules_file(path, rules, error));
  EXPECT_NE(error.find("cannot read"), std::string::npos) << error;
}

// The shipped sample parses and compiles.
TEST(FilterParse, SampleConfig) {
  const char* root = std::getenv("TERN_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "TERN_SOURCE_ROOT not set";
  FilterHub hub;
  std::string error;
  ASSERT_TRUE(hub.load(std::string(root) + "/config/filter.rules", error)) << error;
  EXPECT_FALSE(hub.current()->empty());
  ShardFilter f(hub);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("GET /index.html HTTP/1.1"), 0), Verdict::drop);
  EXPECT_TRUE(f.is_banned(kA, 299'999));
  EXPECT_EQ(f.check(Scope::message, kB, bytes("hi <SCRIPT>"), 0), Verdict::drop);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(f.check(Scope::message, kB, bytes("chat: x"), 0), Verdict::pass);
  EXPECT_EQ(f.check(Scope::message, kB, bytes("chat: x"), 0), Verdict::drop);
  EXPECT_EQ(f.check(Scope::message, kB, bytes("my admin_password"), 0), Verdict::pass);
}

// ---- compilation ----------------------------------------------------------------------------

TEST(FilterCompile, HyperscanErrorNamesRuleAndLine) {
  FilterHub hub;
  std::string error;
  ASSERT_TRUE(hub.load_rules(parse_ok("1 datagram drop /fine/\n"), error)) << error;
  const auto before = hub.current();
  const std::uint64_t generation = hub.generation();

  const auto rules = parse_ok(
      "1 datagram drop /fine/\n"
      "2 message count /also fine/\n"
      "\n"
      "7 message drop /a(b/\n");
  EXPECT_FALSE(RuleSet::compile(rules, error));
  EXPECT_EQ(error.rfind("rule 7 (line 4): ", 0), 0u) << error;
  EXPECT_NE(error.find("parenthesis"), std::string::npos) << error;  // Hyperscan's own words

  error.clear();
  EXPECT_FALSE(hub.load_rules(rules, error));
  EXPECT_EQ(error.rfind("rule 7 (line 4): ", 0), 0u) << error;
  EXPECT_EQ(hub.current(), before);
  EXPECT_EQ(hub.generation(), generation);

  // A pattern that matches the empty string is rejected by Hyperscan too.
  EXPECT_FALSE(RuleSet::compile(parse_ok("3 datagram drop /x*/\n"), error));
  EXPECT_EQ(error.rfind("rule 3 (line 1): ", 0), 0u) << error;
}

TEST(FilterCompile, ScopesAndEmptySets) {
  const auto set = compile_ok("1 datagram drop /a/\n2 datagram count /b/\n");
  EXPECT_NE(set->database(Scope::datagram), nullptr);
  EXPECT_EQ(set->database(Scope::message), nullptr);
  EXPECT_EQ(set->rule_count(Scope::datagram), 2u);
  EXPECT_EQ(set->rule_count(Scope::message), 0u);
  std::string error;
  const auto empty = RuleSet::compile({}, error);
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
  EXPECT_EQ(empty->prototype_scratch(), nullptr);
  // Rules built in code are checked too.
  std::vector<Rule> dup(2);
  dup[0].pattern = dup[1].pattern = "x";
  EXPECT_FALSE(RuleSet::compile(dup, error));
  EXPECT_NE(error.find("duplicate rule id"), std::string::npos) << error;
}

// ---- actions and scopes ---------------------------------------------------------------------

TEST(FilterCheck, ActionsAndScopes) {
  ShardFilter f;
  f.set_rules(
      compile_ok("1 datagram drop /^EVIL/\n"
                 "2 datagram count /hello/i\n"
                 "3 message drop /bad word/\n"
                 "4 message count /^\\d{3}-\\d{4}$/\n"));
  std::uint64_t now = 1000;
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("EVIL payload"), now), Verdict::drop);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("not EVIL at start"), now), Verdict::pass);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("say HeLLo"), now), Verdict::pass);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("hello hello hello"), now), Verdict::pass);
  // Message rules do not apply to datagrams and vice versa.
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("bad word"), now), Verdict::pass);
  EXPECT_EQ(f.check(Scope::message, kA, bytes("EVIL"), now), Verdict::pass);
  EXPECT_EQ(f.check(Scope::message, kA, bytes("a bad word here"), now), Verdict::drop);
  EXPECT_EQ(f.check(Scope::message, kA, bytes("555-1234"), now), Verdict::pass);
  EXPECT_EQ(f.check(Scope::message, kA, bytes("x555-1234"), now), Verdict::pass);
  EXPECT_EQ(f.check(Scope::message, kA, bytes(""), now), Verdict::pass);
  // Binary payloads with NUL bytes are scanned whole.
  const std::string bin("\x00\x01EVIL", 6);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes(bin), now), Verdict::pass);
  const std::string bin2("EVIL\x00\x01", 6);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes(bin2), now), Verdict::drop);

  const auto counters = f.rule_counters();
  ASSERT_EQ(counters->counters.size(), 4u);
  EXPECT_EQ(counters->counters[0].id, 1u);
  EXPECT_EQ(counters->counters[0].hits.load(), 2u);
  EXPECT_EQ(counters->counters[1].hits.load(), 2u);  // once per payload, not per match
  EXPECT_EQ(counters->counters[2].hits.load(), 1u);
  EXPECT_EQ(counters->counters[3].hits.load(), 1u);
  const FilterTotals t = f.totals();
  EXPECT_EQ(t.scanned, 12u);
  EXPECT_EQ(t.dropped, 3u);
  EXPECT_EQ(t.banned_drops, 0u);
  EXPECT_EQ(t.scan_errors, 0u);
}

TEST(FilterCheck, DropWinsOverCountAndAllHitsCount) {
  ShardFilter f;
  f.set_rules(compile_ok("1 datagram count /abc/\n2 datagram drop /bc/\n3 datagram count /c/\n"));
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("abc"), 0), Verdict::drop);
  const auto c = f.rule_counters();
  for (const auto& rc : c->counters) EXPECT_EQ(rc.hits.load(), 1u) << rc.id;
}

TEST(FilterCheck, BanDropsEverythingUntilExpiry) {
  ShardFilter f;
  f.set_rules(compile_ok("9 datagram ban:30 /^KILL/\n1 message count /x/\n"));
  const std::uint64_t t0 = 5'000;
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("hello"), t0), Verdict::pass);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("KILL me"), t0), Verdict::drop);
  EXPECT_TRUE(f.is_banned(kA, t0));
  // Any payload, any scope, any port of the same address: dropped without scanning.
  Endpoint other_port = kA;
  other_port.port = 4242;
  EXPECT_EQ(f.check(Scope::datagram, other_port, bytes("hello"), t0 + 1), Verdict::drop);
  EXPECT_EQ(f.check(Scope::message, kA, bytes("x"), t0 + 29'999), Verdict::drop);
  EXPECT_EQ(f.check(Scope::datagram, kB, bytes("hello"), t0 + 10), Verdict::pass);
  // Readmitted once the ban has run out.
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("hello"), t0 + 30'000), Verdict::pass);
  EXPECT_FALSE(f.is_banned(kA, t0 + 30'000));
  EXPECT_EQ(f.active_bans(t0 + 30'000), 0u);

  const FilterTotals t = f.totals();
  EXPECT_EQ(t.banned_drops, 2u);
  EXPECT_EQ(t.dropped, 3u);
  EXPECT_EQ(t.bans_created, 1u);
  EXPECT_EQ(f.rule_counters()->counters[1].hits.load(), 0u);  // banned: never scanned

  // The ban is reported once for broadcasting, with port 0.
  BanRecord out[4];
  ASSERT_EQ(f.take_new_bans(out), 1u);
  EXPECT_EQ(out[0].source.addr, kA.addr);
  EXPECT_EQ(out[0].source.port, 0);
  EXPECT_EQ(out[0].until_ms, t0 + 30'000);
  EXPECT_EQ(out[0].rule_id, 9u);
  EXPECT_EQ(f.take_new_bans(out), 0u);
}

TEST(FilterCheck, BansFromAnotherShard) {
  ShardFilter decider;
  ShardFilter other;
  decider.set_rules(compile_ok("1 datagram ban:10 /attack/\n"));
  EXPECT_EQ(decider.check(Scope::datagram, kA, bytes("attack"), 100), Verdict::drop);
  EXPECT_EQ(decider.check(Scope::datagram, kB, bytes("attack!"), 200), Verdict::drop);
  BanRecord records[8];
  const std::size_t n = decider.take_new_bans(records);
  ASSERT_EQ(n, 2u);
  for (std::size_t i = 0; i < n; ++i) other.ban(records[i].source, records[i].until_ms);
  EXPECT_EQ(other.check(Scope::message, kA, bytes("innocent"), 150), Verdict::drop);
  EXPECT_EQ(other.check(Scope::message, kB, bytes("innocent"), 10'199), Verdict::drop);
  EXPECT_EQ(other.check(Scope::message, kA, bytes("innocent"), 10'100), Verdict::pass);
  EXPECT_EQ(other.take_new_bans(records), 0u);  // applied, not created, here
  // ban() only ever extends.
  other.ban(kB, 50'000);
  other.ban(kB, 20'000);
  EXPECT_TRUE(other.is_banned(kB, 49'999));
  EXPECT_FALSE(other.is_banned(kB, 50'000));
}

TEST(FilterCheck, NewBanRecordsAreBounded) {
  ShardFilterOptions options;
  options.new_ban_capacity = 4;
  ShardFilter f(options);
  f.set_rules(compile_ok("1 datagram ban:1 /x/\n"));
  for (std::uint32_t i = 0; i < 10; ++i) {
    f.check(Scope::datagram, Endpoint::v4(0x0b000000 + i, 1), bytes("x"), 0);
  }
  EXPECT_EQ(f.pending_new_bans(), 4u);
  EXPECT_EQ(f.totals().ban_records_lost, 6u);
  BanRecord out[3];
  ASSERT_EQ(f.take_new_bans(out), 3u);  // the newest four are kept, oldest first
  EXPECT_EQ(out[0].source.v4_host_order(), 0x0b000006u);
  EXPECT_EQ(out[2].source.v4_host_order(), 0x0b000008u);
  ASSERT_EQ(f.take_new_bans(out), 1u);
  EXPECT_EQ(out[0].source.v4_host_order(), 0x0b000009u);
}

TEST(FilterCheck, LimitPerSource) {
  ShardFilter f;
  f.set_rules(compile_ok("3 message limit:5/s /^chat:/\n"));
  auto send = [&](const Endpoint& from, std::uint64_t now) {
    return f.check(Scope::message, from, bytes("chat: hi"), now);
  };
  std::uint64_t now = 10'000;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(send(kA, now), Verdict::pass) << i;
  EXPECT_EQ(send(kA, now), Verdict::drop);
  EXPECT_EQ(send(kA, now), Verdict::drop);
  // Non-matching payloads are never limited.
  EXPECT_EQ(f.check(Scope::message, kA, bytes("move 1 2"), now), Verdict::pass);
  // Another source has its own bucket.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(send(kB, now), Verdict::pass) << i;
  EXPECT_EQ(send(kB, now), Verdict::drop);
  // 200 ms refill one token (5/s).
  EXPECT_EQ(send(kA, now + 199), Verdict::drop);
  EXPECT_EQ(send(kA, now + 200), Verdict::pass);
  EXPECT_EQ(send(kA, now + 200), Verdict::drop);
  // A quiet second refills the bucket, never beyond N.
  now += 5'000;
  for (int i = 0; i < 5; ++i) EXPECT_EQ(send(kA, now), Verdict::pass) << i;
  EXPECT_EQ(send(kA, now), Verdict::drop);
  // Limits never ban.
  EXPECT_FALSE(f.is_banned(kA, now));
  EXPECT_EQ(f.totals().limited_drops, 6u);
  EXPECT_EQ(f.rule_counters()->counters[0].hits.load(), 22u);
  EXPECT_EQ(f.limit_buckets(), 2u);
}

TEST(FilterCheck, LimitBucketsPerRule) {
  ShardFilter f;
  f.set_rules(compile_ok("1 datagram limit:1/s /a/\n2 datagram limit:2/s /b/\n"));
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("a"), 0), Verdict::pass);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("a"), 0), Verdict::drop);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("b"), 0), Verdict::pass);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("b"), 0), Verdict::pass);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("b"), 0), Verdict::drop);
}

// ---- reload ---------------------------------------------------------------------------------

TEST(FilterReload, RefreshSwapsAndResetsCounters) {
  FilterHub hub;
  ShardFilter f(hub);
  EXPECT_FALSE(f.refresh());
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("alpha"), 0), Verdict::pass);
  std::string error;
  ASSERT_TRUE(hub.load_rules(parse_ok("1 datagram drop /alpha/\n"), error)) << error;
  // Not seen until refresh(): the shard picks its moment.
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("alpha"), 0), Verdict::pass);
  EXPECT_TRUE(f.refresh());
  EXPECT_FALSE(f.refresh());
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("alpha"), 0), Verdict::drop);
  EXPECT_EQ(f.rule_counters()->counters[0].hits.load(), 1u);
  const auto old_counters = f.rule_counters();

  ASSERT_TRUE(hub.load_rules(parse_ok("1 datagram drop /alpha/\n2 datagram drop /beta/\n"), error));
  ASSERT_TRUE(f.refresh());
  const auto counters = f.rule_counters();
  ASSERT_EQ(counters->counters.size(), 2u);
  EXPECT_EQ(counters->counters[0].hits.load(), 0u);      // reset with the new set
  EXPECT_EQ(old_counters->counters[0].hits.load(), 1u);  // old snapshot still readable
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("beta"), 0), Verdict::drop);

  // A failed reload keeps the old rules, and shards see no change.
  EXPECT_FALSE(hub.load_rules(parse_ok("1 datagram drop /(/\n"), error));
  EXPECT_FALSE(hub.load("/nonexistent/filter.rules", error));
  EXPECT_FALSE(f.refresh());
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("beta"), 0), Verdict::drop);
  EXPECT_EQ(f.totals().reloads, 3u);
}

TEST(FilterReload, BansSurviveReloadBucketsRestart) {
  FilterHub hub;
  std::string error;
  ASSERT_TRUE(hub.load_rules(parse_ok("1 datagram ban:60 /x/\n2 datagram limit:1/s /y/\n"), error));
  ShardFilter f(hub);
  EXPECT_EQ(f.check(Scope::datagram, kA, bytes("x"), 0), Verdict::drop);
  EXPECT_EQ(f.check(Scope::datagram, kB, bytes("y"), 0), Verdict::pass);
  EXPECT_EQ(f.check(Scope::datagram, kB, bytes("y"), 0), Verdict::drop);
  ASSERT_TRUE(hub.load_rules(parse_ok("2 datagram limit:1/s /y/\n"), error));
  ASSERT_TRUE(f.refresh());
  EXPECT_TRUE(f.is_banned(kA, 1));
  EXPECT_EQ(f.limit_buckets(), 0u);
  EXPECT_EQ(f.check(Scope::datagram, kB, bytes("y"), 0), Verdict::pass);
}

// One thread scans and refreshes as a shard would; another reloads 100 times, every other
// load failing. Each verdict must agree with the rule set the scanner holds at that moment,
// and a third thread reads the counters throughout. Run with -Dtsan=true for data races.
TEST(FilterReload, ConcurrentReloadIsAtomic) {
  FilterHub hub;
  std::string error;
  const auto alpha = parse_ok("1 datagram drop /alpha/\n2 message count /z/\n");
  const auto beta = parse_ok("1 datagram drop /beta/\n2 message count /z/\n3 datagram count /a/\n");
  const auto broken = parse_ok("1 datagram drop /alpha(/\n");
  ASSERT_TRUE(hub.load_rules(alpha, error)) << error;

  std::atomic<bool> stop{false};
  std::atomic<ShardFilter*> shared_filter{nullptr};
  std::atomic<std::uint64_t> checks{0};
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<std::uint64_t> refreshes{0};
  std::thread shard([&] {
    ShardFilter f(hub);
    shared_filter.store(&f, std::memory_order_release);
    std::uint64_t now = 0;
    while (!stop.load(std::memory_order_acquire)) {
      if (f.refresh()) refreshes.fetch_add(1, std::memory_order_relaxed);
      const bool is_alpha = f.rules()->rules()[0].pattern == "alpha";
      for (int i = 0; i < 16; ++i) {
        const Verdict a = f.check(Scope::datagram, kA, bytes("xx alpha xx"), ++now);
        const Verdict b = f.check(Scope::datagram, kA, bytes("xx beta xx"), now);
        if ((a == Verdict::drop) != is_alpha || (b == Verdict::drop) == is_alpha) {
          mismatches.fetch_add(1, std::memory_order_relaxed);
        }
        f.check(Scope::message, kB, bytes("zzz"), now);
        checks.fetch_add(1, std::memory_order_relaxed);
      }
    }
    // Wait for the reader to finish before the filter goes away.
    while (shared_filter.load(std::memory_order_acquire) != nullptr) std::this_thread::yield();
  });
  std::thread reader([&] {
    ShardFilter* f = nullptr;
    while ((f = shared_filter.load(std::memory_order_acquire)) == nullptr) {
      std::this_thread::yield();
    }
    std::uint64_t sum = 0;
    while (!stop.load(std::memory_order_acquire)) {
      const auto c = f->rule_counters();
      for (const auto& rc : c->counters) sum += rc.hits.load(std::memory_order_relaxed);
      sum += f->totals().scanned;
    }
    shared_filter.store(nullptr, std::memory_order_release);
    EXPECT_GT(sum + 1, 0u);
  });

  int good = 0;
  for (int i = 0; i < 100; ++i) {
    if (i % 2 == 1) {
      EXPECT_FALSE(hub.load_rules(broken, error));
    } else {
      ASSERT_TRUE(hub.load_rules((i / 2) % 2 == 0 ? beta : alpha, error)) << error;
      ++good;
    }
    // Let the shard run a little between reloads.
    const std::uint64_t target = checks.load() + 64;
    while (checks.load() < target) std::this_thread::yield();
  }
  stop.store(true, std::memory_order_release);
  reader.join();
  shard.join();
  std::printf("%llu checks, %llu rule sets taken by the shard over %d good reloads\n",
              static_cast<unsigned long long>(checks.load()),
              static_cast<unsigned long long>(refreshes.load()), good);
  EXPECT_EQ(mismatches.load(), 0u);
  EXPECT_GE(refreshes.load(), 1u);
  EXPECT_LE(refreshes.load(), static_cast<std::uint64_t>(good));
  // The last good load was alpha (i = 98: (98/2) % 2 == 1).
  EXPECT_EQ(hub.current()->rules()[0].pattern, "alpha");
}

// ---- bounded tables -------------------------------------------------------------------------

TEST(FilterTables, BoundedUnderFloodOfSources) {
  const std::uint64_t seed = 0x5eed'0000'f11e'0001ull;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  ShardFilterOptions options;
  options.ban_capacity = 1'000;  // rounded up to 1,024
  options.limit_capacity = 1'024;
  options.hash_seed = seed;
  ShardFilter f(options);
  EXPECT_EQ(f.ban_capacity(), 1'024u);
  f.set_rules(compile_ok("1 datagram ban:60 /^B/\n2 datagram limit:1/s /^L/\n"));
  std::mt19937_64 rng(seed);
  auto random_source = [&] {
    std::uint8_t a[16];
    const std::uint64_t r1 = rng();
    const std::uint64_t r2 = rng();
    std::memcpy(a, &r1, 8);
    std::memcpy(a + 8, &r2, 8);
    return Endpoint::v6(a, 1);
  };
  constexpr int kFlood = 200'000;
  Endpoint last;
  for (int i = 0; i < kFlood; ++i) {
    last = random_source();
    EXPECT_EQ(f.check(Scope::datagram, last, bytes("B"), 1'000 + i / 100), Verdict::drop);
    // Limit buckets: every new source gets its first payload through.
    ASSERT_EQ(f.check(Scope::datagram, random_source(), bytes("L"), 1'000 + i / 100),
              Verdict::pass);
  }
  EXPECT_EQ(f.ban_capacity(), 1'024u);
  EXPECT_EQ(f.limit_capacity(), 1'024u);
  EXPECT_LE(f.active_bans(1'000), 1'024u);
  EXPECT_GT(f.active_bans(1'000), 900u);  // the table fills up, then replaces
  EXPECT_LE(f.limit_buckets(), 1'024u);
  // The newest ban is never the one replaced.
  EXPECT_TRUE(f.is_banned(last, 1'000 + kFlood / 100));
  // New bans have the latest expiry, so they replace the ones ending first.
  EXPECT_EQ(f.totals().bans_created, static_cast<std::uint64_t>(kFlood));
  // After the bans expire everyone is readmitted.
  EXPECT_EQ(f.check(Scope::datagram, last, bytes("ok"), 1'000'000), Verdict::pass);
}

}  // namespace
