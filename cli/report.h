// How the CLI tells the user about errors: "xcargo: error: FILE: what", then "hint:" lines.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "xcargo/error.h"

namespace xcargo::cli {

// Prints the error (prefixed with subject, a file name, when not empty) and its hints to
// stderr and returns the exit code for it.
int report(const Error& error, const std::string& subject = "");
// A one-line notice on stderr: "xcargo: MESSAGE".
void note(const std::string& message);

// --json: every outcome of the verb is one JSON object on stdout. After this, report() of an
// error that comes before the verb printed its object prints {"ok": false, "error": {...},
// "exit_code": N} (with "file": SUBJECT when there is one); the text still goes to stderr.
void set_json_output(bool on);
// Prints the verb's JSON object; later reports print no second one.
void print_json(const nlohmann::json& object);
nlohmann::json error_json(const Error& error);

// Text a node sent (a kernel's log line), made safe to print: the characters a terminal
// shows as a line break or as a change of direction (U+2028, U+2029, U+202A-U+202E,
// U+2066-U+2069) become '?'. The wire protocol already keeps control characters out.
std::string for_terminal(std::string_view text);

}  // namespace xcargo::cli
