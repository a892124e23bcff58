// A JSON object written field by field, for the admin endpoint's answers and the JSON log lines:
// flat objects of strings, numbers and booleans, with nested objects or arrays passed in as
// text already written by another JsonObject.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace tern::relay {

// `text` as a JSON string literal (quotes included), control characters escaped.
std::string json_quote(std::string_view text);

class JsonObject {
 public:
  JsonObject& add(std::string_view key, std::string_view value) {
    return raw(key, json_quote(value));
  }
  JsonObject& add(std::string_view key, const char* value) {
    return add(key, std::string_view(value));
  }
  JsonObject& add(std::string_view key, const std::string& value) {
    return add(key, std::string_view(value));
  }
  JsonObject& add(std::string_view key, bool value) { return raw(key, value ? "true" : "false"); }
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) JsonObject& add(std::string_view key,
                                                                              T value) {
    return raw(key, std::to_string(value));
  }
  JsonObject& add(std::string_view key, double value);
  // `json` must be a complete JSON value (an object or array from another builder).
  JsonObject& raw(std::string_view key, std::string_view json);
  // Every field of `other`, after this one's.
  JsonObject& merge(const JsonObject& other);

  bool empty() const { return body_.empty(); }
  std::string str() const { return "{" + body_ + "}"; }

 private:
  std::string body_;  // the fields, comma separated, without the braces
};

// A JSON array of values already written (objects from JsonObject::str()).
class JsonArray {
 public:
  JsonArray& push(std::string_view json) {
    if (!body_.empty()) body_ += ',';
    body_ += json;
    return *this;
  }
  std::string str() const { return "[" + body_ + "]"; }

 private:
  std::string body_;
};

}  // namespace tern::relay
