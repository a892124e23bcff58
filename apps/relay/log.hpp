// tern-relay's log lines: the plain text it always printed, or (log.format = "json",
// --log-format json) one JSON object per line with ts, level, event and the line's fields, for
// log collectors that index fields rather than grep text.
#pragma once

#include "json.hpp"

#include <cstdio>
#include <string_view>

namespace tern::relay {

enum class LogFormat : std::uint8_t { text, json };
enum class LogLevel : std::uint8_t { info, warning, error };

// "text" or "json"; false for anything else.
bool parse_log_format(std::string_view name, LogFormat& out);

class Log {
 public:
  void set_format(LogFormat f) { format_ = f; }
  LogFormat format() const { return format_; }

  // One line to `to`: `text` as it is in text format; in JSON format
  // {"ts":"2026-01-02T03:04:05.678Z","level":"info","event":EVENT, ...fields}. The line goes out
  // in one write and is flushed, so lines from the main and HTTP threads never interleave.
  void write(std::FILE* to, LogLevel level, std::string_view event, std::string_view text,
             const JsonObject& fields) const;
  void info(std::string_view event, std::string_view text, const JsonObject& fields) const {
    write(stdout, LogLevel::info, event, text, fields);
  }
  // To stderr; in JSON the text is the field "message" (after `fields`).
  void error(std::string_view event, std::string_view text, JsonObject fields = {}) const;
  void warning(std::string_view event, std::string_view text, JsonObject fields = {}) const;

 private:
  LogFormat format_ = LogFormat::text;
};

}  // namespace tern::relay
