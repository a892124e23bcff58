// The operations pieces on their own, on given times: the relay-level ban list (expiry is
// exact to the millisecond passed in), the admin endpoint's HTTP request parsing, and the
// JSON strings the log lines and admin answers are made of.
#include "bans.hpp"
#include "json.hpp"
#include "metrics.hpp"

#include <gtest/gtest.h>

namespace tern::relay {
namespace {

Endpoint at(const char* text) { return *Endpoint::parse(text); }

TEST(BanList, RefusesEveryPortOfTheAddressUntilItsEnd) {
  BanList bans;
  ASSERT_TRUE(bans.add(at("10.0.0.1:4000"), 5000, 1000));
  EXPECT_TRUE(bans.refuses(at("10.0.0.1:4000"), 1000));
  EXPECT_TRUE(bans.refuses(at("10.0.0.1:1"), 4999));  // another port of the same address
  EXPECT_FALSE(bans.refuses(at("10.0.0.2:4000"), 1000));
  EXPECT_FALSE(bans.refuses(at("10.0.0.1:4000"), 5000));  // ended
  EXPECT_EQ(bans.running(4999).size(), 1u);
  EXPECT_TRUE(bans.running(5000).empty());
}

TEST(BanList, BanningAgainMovesTheEndAndRemoveLifts) {
  BanList bans;
  ASSERT_TRUE(bans.add(at("[2001:db8::1]:0"), 2000, 0));
  ASSERT_TRUE(bans.add(at("[2001:db8::1]:7"), 9000, 100));
  EXPECT_EQ(bans.running(100).size(), 1u);
  EXPECT_TRUE(bans.refuses(at("[2001:db8::1]:9"), 8999));
  EXPECT_TRUE(bans.remove(at("[2001:db8::1]:0")));
  EXPECT_FALSE(bans.refuses(at("[2001:db8::1]:9"), 100));
  EXPECT_FALSE(bans.remove(at("[2001:db8::1]:0")));
}

TEST(BanList, BoundedAndMakesRoomFromEndedBans) {
  BanList bans;
  for (std::uint32_t i = 0; i < BanList::kMaxBans; ++i) {
    ASSERT_TRUE(bans.add(Endpoint::v4(0x0a000000u + i, 0), i < 10 ? 50 : 10'000, 0));
  }
  EXPECT_FALSE(bans.add(Endpoint::v4(0x0b000001u, 0), 10'000, 0));  // full, none ended
  EXPECT_TRUE(bans.add(Endpoint::v4(0x0b000001u, 0), 10'000, 60));  // ten ended by 60
  EXPECT_EQ(bans.running(60).size(), BanList::kMaxBans - 10 + 1);
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
