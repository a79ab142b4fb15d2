// Error and notice printing for the CLI.
#include "report.h"

#include <cstdio>
#include <cstring>

#include "exit_codes.h"
#include "xcargo/interrupt.h"

namespace xcargo::cli {

namespace {
bool json_output = false, json_printed = false;
}  // namespace

void set_json_output(bool on) { json_output = on; }

void print_json(const nlohmann::json& object) {
  std::printf("%s\n", object.dump(2).c_str());
  std::fflush(stdout);
  json_printed = true;
}

nlohmann::json error_json(const Error& error) {
  return {{"kind", errc_name(error.code())}, {"message", error.message()}, {"hints", error.hints()}};
}

int report(const Error& error, const std::string& subject) {
  if (int sig = interrupted()) {  // what failed was cut short: say that, once
    static bool said = false;
    // What the interrupted work says of itself (a node's run: cancelled there) goes with it.
    const std::string what = error.message().find("cancelled") != std::string::npos ? ": " + error.message() : "";
    if (!said) std::fprintf(stderr, "xcargo: interrupted (%s)%s\n", strsignal(sig), what.c_str());
    said = true;
    return 128 + sig;
  }
  std::string line = "xcargo: error: ";
  if (!subject.empty()) line += subject + ": ";
  line += error.message();
  std::fprintf(stderr, "%s\n", line.c_str());
  for (const auto& h : error.hints()) std::fprintf(stderr, "hint: %s\n", h.c_str());
  const int code = exit_code_for(error.code());
  if (json_output && !json_printed) {
    nlohmann::json j = {{"ok", false}, {"error", error_json(error)}, {"exit_code", code}};
    if (!subject.empty()) j["file"] = subject;
    print_json(j);
  }
  return code;
}

void note(const std::string& message) { std::fprintf(stderr, "xcargo: %s\n", message.c_str()); }

std::string for_terminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto b = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
    if (b(0) == 0xE2 && i + 2 < text.size()) {  // U+2000 to U+2FFF
      const uint32_t u = 0x2000 | (uint32_t(b(1) & 0x3F) << 6) | uint32_t(b(2) & 0x3F);
      if (u == 0x2028 || u == 0x2029 || (u >= 0x202A && u <= 0x202E) || (u >= 0x2066 && u <= 0x2069)) {
        out += '?';
        i += 2;
        continue;
      }
    }
    out += text[i];
  }
  return out;
}

}  // namespace xcargo::cli
