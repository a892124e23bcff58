// The operations pieces on their own: ban targets and the bans file's reader, the admin
// endpoint's HTTP request parsing, and the JSON strings the log lines and answers are made of.
#include "bans.hpp"
#include "json.hpp"
#include "metrics.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace tern::relay {
namespace {

Endpoint at(const char* text) { return *Endpoint::parse(text); }

TEST(BanTarget, AddressesAndPrefixesParseAndCover) {
  std::string why;
  const auto one = parse_ban_target("10.0.0.1", why);
  ASSERT_TRUE(one) << why;
  EXPECT_EQ(one->prefix_bits, 128u);
  EXPECT_TRUE(covers(*one, at("10.0.0.1:4000")));
  EXPECT_FALSE(covers(*one, at("10.0.0.2:4000")));
  const auto net = parse_ban_target("10.1.2.3/16", why);  // host bits are dropped
  ASSERT_TRUE(net) << why;
  EXPECT_EQ(net->prefix_bits, 96u + 16);
  EXPECT_EQ(ban_target_text(*net), "10.1.0.0/16");
  EXPECT_TRUE(covers(*net, at("10.1.255.7:1")));
  EXPECT_FALSE(covers(*net, at("10.2.0.1:1")));
  const auto v6 = parse_ban_target("[2001:db8::1]", why);
  ASSERT_TRUE(v6) << why;
  EXPECT_EQ(ban_target_text(*v6), "2001:db8::1");
  const auto v6net = parse_ban_target("2001:db8::/32", why);
  ASSERT_TRUE(v6net) << why;
  EXPECT_TRUE(covers(*v6net, at("[2001:db8:5::9]:7")));
  EXPECT_FALSE(covers(*v6net, at("10.1.0.1:7")));
  for (const char* bad :
       {"", "0.0.0.0", "10.0.0.1/33", "10.0.0.1:80", "nonsense", "::/129", "10.0.0.0/x"}) {
    EXPECT_FALSE(parse_ban_target(bad, why)) << bad;
  }
}

class BansFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/tern-bans-XXXXXX";
    const int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = name;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  void write(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }
  std::string path_;
};

TEST_F(BansFile, ReadsLinesCommentsAndSeconds) {
  write(
      "# banned for abuse\n\n10.0.0.1\n  10.2.0.0/16   600  # a day's worth later\n"
      "2001:db8::/48 30\n");
  std::vector<BanLine> lines;
  std::string error;
  ASSERT_TRUE(read_bans_file(path_, lines, error)) << error;
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(ban_target_text(lines[0].target), "10.0.0.1");
  EXPECT_EQ(lines[0].seconds, 0u);
  EXPECT_EQ(ban_target_text(lines[1].target), "10.2.0.0/16");
  EXPECT_EQ(lines[1].seconds, 600u);
  EXPECT_EQ(lines[2].target.prefix_bits, 48u);
  EXPECT_EQ(lines[2].seconds, 30u);
}

TEST_F(BansFile, ABadLineIsNamedAndNothingIsTaken) {
  std::vector<BanLine> lines{BanLine{}};
  std::string error;
  write("10.0.0.1\n10.0.0.300 5\n");
  EXPECT_FALSE(read_bans_file(path_, lines, error));
  EXPECT_EQ(error.rfind(path_ + ":2: ", 0), 0u) << error;
  EXPECT_EQ(lines.size(), 1u);  // untouched
  write("10.0.0.1 0\n");
  EXPECT_FALSE(read_bans_file(path_, lines, error));
  EXPECT_NE(error.find(":1: seconds"), std::string::npos) << error;
  std::string many;
  for (std::size_t i = 0; i <= kMaxBansFileLines; ++i)
    many += "10.1." + std::to_string(i / 256) + "." + std::to_string(i % 256) + "\n";
  write(many);
  EXPECT_FALSE(read_bans_file(path_, lines, error));
  EXPECT_NE(error.find(":4097: more than 4096 bans"), std::string::npos) << error;
  write("10.0.0.1 5 6\n");
  EXPECT_FALSE(read_bans_file(path_, lines, error));
  EXPECT_FALSE(read_bans_file(path_ + ".missing", lines, error));
  EXPECT_NE(error.find("cannot be read"), std::string::npos) << error;
}

TEST(HttpRequest, QueryFormBodyAndAuthorization) {
  const HttpRequest r = parse_http_request(
      "POST /admin/ban?address=127.0.0.1&seconds=60 HTTP/1.1\r\n"
      "Host: x\r\nauthorization:  Bearer abc \r\n"
      "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 19\r\n\r\n"
      "reason=too+loud%21&");
  ASSERT_FALSE(r.malformed);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/admin/ban");
  EXPECT_EQ(r.authorization, "Bearer abc");
  ASSERT_NE(r.param("address"), nullptr);
  EXPECT_EQ(*r.param("address"), "127.0.0.1");
  EXPECT_EQ(*r.param("seconds"), "60");
  ASSERT_NE(r.param("reason"), nullptr);
  EXPECT_EQ(*r.param("reason"), "too loud!");
  EXPECT_EQ(r.param("missing"), nullptr);
}

TEST(HttpRequest, MalformedOnesAreRefused) {
  EXPECT_TRUE(parse_http_request("GET /metrics HTTP/1.0\r\n").malformed);  // head not ended
  EXPECT_TRUE(parse_http_request("garbage\r\n\r\n").malformed);
  // A body shorter than announced (cut short, or past the server's size limit).
  EXPECT_TRUE(
      parse_http_request("POST /admin/kick HTTP/1.0\r\nContent-Length: 50\r\n\r\npeer=").malformed);
  const HttpRequest r = parse_http_request("GET /admin/peers?room=%3 HTTP/1.0\r\n\r\n");
  ASSERT_FALSE(r.malformed);
  EXPECT_EQ(*r.param("room"), "%3");  // a broken escape stays as it came
}

TEST(Json, QuotesAndEscapes) {
  EXPECT_EQ(json_quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
  JsonObject o;
  o.add("s", "x").add("n", std::uint64_t{42}).add("b", false).add("d", 0.5);
  EXPECT_EQ(o.str(), "{\"s\":\"x\",\"n\":42,\"b\":false,\"d\":0.5}");
  JsonArray a;
  a.push(o.str()).push("{}");
  EXPECT_EQ(JsonObject().raw("list", a.str()).str(),
            "{\"list\":[{\"s\":\"x\",\"n\":42,\"b\":false,\"d\":0.5},{}]}");
}

}  // namespace
}  // namespace tern::relay
