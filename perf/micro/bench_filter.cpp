// Payload filter microbenchmarks: tern::filter::ShardFilter::check() (one Hyperscan block scan
// plus the filter's bookkeeping) over 64 B, 256 B and 1 KiB payloads against 10, 100 and 1,000
// generated rules, next to std::regex as the reference: the rules OR-ed into one regex, and for
// 10 rules also one regex_search per rule.
//
// Rules are generated from a fixed seed in the shapes real filters use: literals, literals
// with classes and counted repeats, anchored binary headers, small alternations. Payloads are
// text-like bytes; one in 16 carries a rule's literal, so most payloads do NOT match (the
// common case for a filter). Each benchmark reports `match%`: Hyperscan and std::regex should
// agree.
#include "filter.hpp"

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <regex>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace tern::filter;

constexpr std::uint64_t kSeed = 0x5eed'f11e'0000'0001ull;
constexpr std::size_t kPool = 256;  // payloads per size, walked round-robin

std::string word(std::mt19937_64& rng, std::size_t min_len, std::size_t max_len) {
  std::uniform_int_distribution<std::size_t> len(min_len, max_len);
  std::uniform_int_distribution<int> letter('a', 'z');
  std::string w(len(rng), 'a');
  for (char& c : w) c = static_cast<char>(letter(rng));
  return w;
}

std::string hex_byte(unsigned b) {
  static constexpr char kDigits[] = "0123456789abcdef";
  return std::string("\\x") + kDigits[(b >> 4) & 15] + kDigits[b & 15];
}

struct Corpus {
  std::vector<std::string> patterns;  // valid for both Hyperscan and ECMAScript std::regex
  std::vector<std::string> literals;  // strings that match some rule, planted in payloads
};

const Corpus& corpus(std::size_t rules) {
  static std::map<std::size_t, Corpus> cache;
  auto [it, fresh] = cache.try_emplace(rules);
  if (!fresh) return it->second;
  Corpus& c = it->second;
  std::mt19937_64 rng(kSeed + rules);
  for (std::size_t i = 0; i < rules; ++i) {
    switch (i % 6) {
      case 0: {  // plain literal
        std::string w = word(rng, 6, 10);
        c.literals.push_back(w);
        c.patterns.push_back(w);
        break;
      }
      case 1: c.patterns.push_back(word(rng, 4, 7) + "[0-9]{2,4}"); break;
      case 2: {  // anchored binary header
        std::uniform_int_distribution<unsigned> b(0x80, 0xff);
        std::string p(1, '^');  // appended piecewise: GCC 12 -Wrestrict misfires on "^" + ...
        p += hex_byte(b(rng));
        p += hex_byte(b(rng));
        p += "[\\x00-\\x03]";
        c.patterns.push_back(std::move(p));
        break;
      }
      case 3: c.patterns.push_back(word(rng, 4, 6) + "=[a-z]+;"); break;
      case 4:
        c.patterns.push_back("(?:" + word(rng, 3, 4) + "|" + word(rng, 3, 4) + ")_" +
                             word(rng, 3, 5));
        break;
      case 5: c.patterns.push_back("[A-Z]{3}-[0-9]{3}" + word(rng, 2, 3)); break;
    }
  }
  return c;
}

const std::vector<std::string>& payloads(std::size_t size, std::size_t rules) {
  static std::map<std::pair<std::size_t, std::size_t>, std::vector<std::string>> cache;
  auto [it, fresh] = cache.try_emplace({size, rules});
  if (!fresh) return it->second;
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789     =;:,._-";
  std::mt19937_64 rng(kSeed ^ (size * 7919 + rules));
  std::uniform_int_distribution<std::size_t> pick(0, sizeof(kAlphabet) - 2);
  const auto& literals = corpus(rules).literals;
  for (std::size_t p = 0; p < kPool; ++p) {
    std::string s(size, ' ');
    for (char& ch : s) ch = kAlphabet[pick(rng)];
    if (p % 16 == 0 && !literals.empty()) {
      const std::string& lit = literals[rng() % literals.size()];
      s.replace(rng() % (size - lit.size()), lit.size(), lit);
    }
    it->second.push_back(std::move(s));
  }
  return it->second;
}

std::shared_ptr<const RuleSet> rule_set(std::size_t rules) {
  static std::map<std::size_t, std::shared_ptr<const RuleSet>> cache;
  auto& slot = cache[rules];
  if (slot) return slot;
  std::vector<Rule> list;
  const auto& patterns = corpus(rules).patterns;
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    Rule r;
    r.id = static_cast<std::uint32_t>(i + 1);
    r.scope = Scope::datagram;
    r.action = Action::drop;
    r.pattern = patterns[i];
    list.push_back(std::move(r));
  }
  std::string error;
  slot = RuleSet::compile(std::move(list), error);
  if (!slot) std::fprintf(stderr, "bench_filter: %s\n", error.c_str());
  return slot;
}

void report(benchmark::State& state, std::size_t size, std::uint64_t matched) {
  const auto n = static_cast<std::int64_t>(state.iterations());
  state.SetItemsProcessed(n);
  state.SetBytesProcessed(n * static_cast<std::int64_t>(size));
  state.counters["match%"] = n > 0 ? 100.0 * static_cast<double>(matched) / n : 0.0;
}

// Args: payload bytes, rules.
void BM_filter_hyperscan(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto rules = static_cast<std::size_t>(state.range(1));
  auto set = rule_set(rules);
  if (!set) {
    state.SkipWithError("rule compilation failed");
    return;
  }
  ShardFilter filter(ShardFilterOptions{
      .ban_capacity = 1024, .limit_capacity = 1024, .new_ban_capacity = 16, .hash_seed = kSeed});
  filter.set_rules(set);
  const auto& pool = payloads(size, rules);
  const tern::Endpoint source = tern::Endpoint::v4(0x0a000001, 7777);
  std::size_t i = 0;
  std::uint64_t matched = 0;
  std::uint64_t now = 1;
  for (auto _ : state) {
    const std::string& p = pool[i++ % kPool];
    const auto verdict = filter.check(
        Scope::datagram, source, std::as_bytes(std::span<const char>(p.data(), p.size())), now);
    matched += verdict == Verdict::drop;
  }
  report(state, size, matched);
}

std::regex or_regex(const std::vector<std::string>& patterns) {
  std::string joined;
  for (const std::string& p : patterns) {
    if (!joined.empty()) joined += '|';
    joined += "(?:" + p + ")";
  }
  return std::regex(joined, std::regex::ECMAScript | std::regex::optimize);
}

// Args: payload bytes, rules. All rules in one alternation.
void BM_filter_std_regex_or(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto rules = static_cast<std::size_t>(state.range(1));
  static std::map<std::size_t, std::regex> cache;
  auto it = cache.find(rules);
  if (it == cache.end()) it = cache.emplace(rules, or_regex(corpus(rules).patterns)).first;
  const std::regex& re = it->second;
  const auto& pool = payloads(size, rules);
  std::size_t i = 0;
  std::uint64_t matched = 0;
  for (auto _ : state) {
    const std::string& p = pool[i++ % kPool];
    matched += std::regex_search(p.data(), p.data() + p.size(), re);
  }
  report(state, size, matched);
}

// Args: payload bytes, rules. One regex_search per rule, stopping at the first match.
void BM_filter_std_regex_each(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  const auto rules = static_cast<std::size_t>(state.range(1));
  std::vector<std::regex> res;
  for (const std::string& p : corpus(rules).patterns) {
    res.emplace_back(p, std::regex::ECMAScript | std::regex::optimize);
  }
  const auto& pool = payloads(size, rules);
  std::size_t i = 0;
  std::uint64_t matched = 0;
  for (auto _ : state) {
    const std::string& p = pool[i++ % kPool];
    bool hit = false;
    for (const std::regex& re : res) {
      if (std::regex_search(p.data(), p.data() + p.size(), re)) {
        hit = true;
        break;
      }
    }
    matched += hit;
  }
  report(state, size, matched);
}

BENCHMARK(BM_filter_hyperscan)->ArgsProduct({{64, 256, 1024}, {10, 100, 1000}});
BENCHMARK(BM_filter_std_regex_or)->ArgsProduct({{64, 256, 1024}, {10, 100, 1000}});
BENCHMARK(BM_filter_std_regex_each)->ArgsProduct({{64, 256, 1024}, {10}});

}  // namespace
