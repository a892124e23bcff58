#include "log.hpp"

#include <chrono>
#include <ctime>
#include <string>

namespace tern::relay {

namespace {

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::info: return "info";
    case LogLevel::warning: return "warning";
    case LogLevel::error: return "error";
  }
  return "info";
}

// RFC 3339 UTC with milliseconds: sorts as text and every collector parses it.
std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  const std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms.count() % 1000));
  return buf;
}

}  // namespace

bool parse_log_format(std::string_view name, LogFormat& out) {
  if (name == "text") {
    out = LogFormat::text;
  } else if (name == "json") {
    out = LogFormat::json;
  } else {
    return false;
  }
  return true;
}

void Log::write(std::FILE* to, LogLevel level, std::string_view event, std::string_view text,
                const JsonObject& fields) const {
  std::string line;
  if (format_ == LogFormat::json) {
    JsonObject o;
    o.add("ts", utc_now()).add("level", level_name(level)).add("event", event).merge(fields);
    line = o.str();
  } else {
    line = text;
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), to);
  std::fflush(to);
}

void Log::error(std::string_view event, std::string_view text, JsonObject fields) const {
  fields.add("message", text);
  write(stderr, LogLevel::error, event, "tern-relay: " + std::string(text), fields);
}

void Log::warning(std::string_view event, std::string_view text, JsonObject fields) const {
  fields.add("message", text);
  write(stderr, LogLevel::warning, event, "tern-relay: " + std::string(text), fields);
}

}  // namespace tern::relay
