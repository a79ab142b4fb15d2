// Log lines as JSON objects (--log-format json): one object per line, for journald, Loki, jq.
#pragma once

#include <string>
#include <string_view>

namespace xcargo::loader {

// s as the inside of a JSON string: ", \ and control characters escaped, everything outside
// ASCII as \uXXXX (surrogate pairs past U+FFFF), bytes that are not UTF-8 as \ufffd. The
// result is printable ASCII: nothing in it can act on a terminal or split a line.
std::string json_escape(std::string_view s);

// The fields a loader log line names, found in its wording; empty when it names none.
struct LogFields {
  std::string_view level = "info";  // error, warning or info
  std::string cargo, entry, status, client, peer;
};
LogFields log_fields(std::string_view line);

// {"time":TIME,"level":...,"pid":PID,"message":LINE[,"cargo":...,"entry":...,"status":...,
// "client":...,"peer":...]} without a newline. A message past kMaxJsonMessage bytes is cut.
std::string json_log_line(std::string_view time, int pid, std::string_view line);
inline constexpr size_t kMaxJsonMessage = 8192;

}  // namespace xcargo::loader
