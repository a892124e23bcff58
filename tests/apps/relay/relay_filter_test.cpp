// The payload filter inside tern-relay, with real libenet clients: each action in each scope,
// a ban that disconnects an address's client and refuses it until the ban ends, per-source rate
// limits, and rule reloads under load that lose no message no rule targets.
#include "relay_fixture.hpp"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tern::relay {
namespace {

constexpr std::uint32_t kReliable = ENET_PACKET_FLAG_RELIABLE;

class RelayFilterTest : public RelayFixture {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/tern-filter-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override {
    std::remove(rules_path().c_str());
    std::remove(dir_.c_str());
  }

  std::string rules_path() const { return dir_ + "/relay.rules"; }
  void write_rules(const std::string& text) {
    std::ofstream f(rules_path(), std::ios::trunc);
    f << text;
  }
  void start_with_rules(const std::string& text) {
    write_rules(text);
    RelayConfig c;
    c.rules_path = rules_path();
    start(c);
  }
  static std::size_t count_prefix(const Client& c, const std::string& prefix) {
    std::size_t n = 0;
    for (const Copy& copy : c.got) n += copy.bytes.rfind(prefix, 0) == 0 ? 1 : 0;
    return n;
  }
  std::string metrics() const { return relay_->metrics_text(); }

  std::string dir_;
};

TEST_F(RelayFilterTest, MessageScopeDropAndCount) {
  start_with_rules(
      "1 message drop /^bad/\n"
      "2 message count /^note/\n");
  Client& a = connect(3);
  Client& b = connect(3);
  ASSERT_TRUE(run_until([&] { return all_connected(); }));
  settle(50ms);
  for (int i = 0; i < 5; ++i) {
    a.send_text(0, kReliable, "bad " + std::to_string(i));
    a.send_text(0, kReliable, "note " + std::to_string(i));
    a.send_text(0, kReliable, "good " + std::to_string(i));
  }
  ASSERT_TRUE(run_until([&] { return b.got.size() >= 10; }));
  settle(150ms);
  EXPECT_EQ(count_prefix(b, "bad"), 0u);
  EXPECT_EQ(count_prefix(b, "note"), 5u);
  EXPECT_EQ(count_prefix(b, "good"), 5u);
  EXPECT_EQ(relay_->drops(RelayDrop::filtered), 5u);
  const std::string m = metrics();
  EXPECT_NE(m.find("tern_relay_filter_rule_hits_total{rule=\"1\"} 5"), std::string::npos) << m;
  EXPECT_NE(m.find("tern_relay_filter_rule_hits_total{rule=\"2\"} 5"), std::string::npos) << m;
}

// A datagram rule bans the sender's address for one second, in the relay's one ban list (the
// engine's): its client is disconnected with data kBanned, a new client from the address gets
// no answer until the ban ends (its resent CONNECT is answered then), another address is
// untouched.
TEST_F(RelayFilterTest, DatagramBanDisconnectsThenReadmits) {
  start_with_rules("10 datagram ban:1 /EVILBYTES/\n");
  Client& evil = connect(4);
  Client& other = connect(4);
  Client& listener = connect(4);
  ASSERT_TRUE(run_until([&] { return all_connected(); }));
  settle(50ms);
  const auto banned_at = SteadyClock::now();
  evil.send_text(0, 0, "EVILBYTES");
  ASSERT_TRUE(run_until([&] { return evil.disconnected; }));
  EXPECT_EQ(evil.disconnect_data, kBanned);
  other.send_text(0, kReliable, "from elsewhere");
  ASSERT_TRUE(run_until([&] { return count_prefix(listener, "from elsewhere") == 1; }));
  EXPECT_EQ(count_prefix(listener, "EVILBYTES"), 0u);
  Client& again = connect(4, &evil);
  ASSERT_TRUE(run_until([&] { return again.connected; }, 8s));
  EXPECT_GE(SteadyClock::now() - banned_at, 1s);
  // Shard counters are published between poll iterations: waited for, not read at once.
  EXPECT_TRUE(run_until([&] { return relay_->total().connects_banned > 0; }, 2s))
      << "the CONNECTs during the ban were refused";
  EXPECT_EQ(relay_->drops(RelayDrop::banned), 1u);
  EXPECT_FALSE(other.disconnected);
  const std::string m = metrics();
  EXPECT_NE(m.find("tern_relay_filter_bans_total 1"), std::string::npos) << m;
}

TEST_F(RelayFilterTest, RateLimitHoldsPerSource) {
  start_with_rules("20 message limit:5/s /^chat:/\n");
  Client& a = connect(6);
  Client& c = connect(6);
  Client& listener = connect(6);
  ASSERT_TRUE(run_until([&] { return all_connected(); }));
  settle(50ms);
  for (int i = 0; i < 30; ++i) {
    a.send_text(0, kReliable, "chat:a" + std::to_string(i));
    c.send_text(0, kReliable, "chat:c" + std::to_string(i));
    a.send_text(0, kReliable, "move:a" + std::to_string(i));  // not limited
  }
  ASSERT_TRUE(run_until([&] { return count_prefix(listener, "move:a") == 30; }));
  settle(200ms);
  // A bucket of 5 that refills at 5/s: 5 at once, maybe one more while the burst arrives.
  EXPECT_GE(count_prefix(listener, "chat:a"), 5u);
  EXPECT_LE(count_prefix(listener, "chat:a"), 7u);
  EXPECT_GE(count_prefix(listener, "chat:c"), 5u) << "one source's limit starved another";
  EXPECT_LE(count_prefix(listener, "chat:c"), 7u);
}

// Continuous reliable traffic while the rules are reloaded 20 times (every other file broken):
// the traffic matches no rule, so every message arrives once and in order.
TEST_F(RelayFilterTest, ReloadUnderLoadLosesNothing) {
  start_with_rules("30 message drop /^NEVER/\n");
  Client& a = connect(8);
  Client& b = connect(8);
  ASSERT_TRUE(run_until([&] { return all_connected(); }));
  settle(50ms);
  constexpr int kMessages = 2000;
  int sent = 0;
  int reloads_ok = 0;
  int reloads_failed = 0;
  std::string error;
  while (sent < kMessages) {
    for (int k = 0; k < 100 && sent < kMessages; ++k) a.send(0, kReliable, sent++);
    run_until([] { return false; }, 5ms);
    if (sent % 200 == 0) {
      if ((sent / 200) % 2 == 0) {
        write_rules("30 message drop /^NEVER/\n31 datagram count /NOTHING-LIKE-THIS/\n");
        reloads_ok += relay_->reload_rules(error) ? 1 : 0;
      } else {
        write_rules("30 message drop /^NEVER(/\n");  // does not compile
        reloads_failed += relay_->reload_rules(error) ? 0 : 1;
        EXPECT_NE(error.find("rule 30 (line 1)"), std::string::npos) << error;
      }
    }
  }
  EXPECT_EQ(reloads_ok, 5);
  EXPECT_EQ(reloads_failed, 5);
  ASSERT_TRUE(run_until([&] { return b.got.size() >= static_cast<std::size_t>(kMessages); }, 20s))
      << b.got.size();
  settle(100ms);
  ASSERT_EQ(b.got.size(), static_cast<std::size_t>(kMessages));
  for (int i = 0; i < kMessages; ++i) ASSERT_EQ(b.got[i].seq, static_cast<std::uint32_t>(i));
}

TEST_F(RelayFilterTest, BadRulesRefuseToStart) {
  write_rules("7 message drop /(unclosed/\n");
  RelayConfig c;
  c.rules_path = rules_path();
  c.listen = Endpoint::v4(0x7f000001u, 0);
  Relay relay(c);
  std::string error;
  EXPECT_FALSE(relay.start(error));
  EXPECT_NE(error.find("rule 7 (line 1)"), std::string::npos) << error;
  write_rules("8 message explode /x/\n");
  Relay relay2(c);
  EXPECT_FALSE(relay2.start(error));
  EXPECT_NE(error.find(rules_path() + ":1:"), std::string::npos) << error;
}

}  // namespace
}  // namespace tern::relay
