// Log lines as JSON objects (see log_json.h).
#include "log_json.h"

#include <cstdint>

namespace xcargo::loader {

namespace {

void append_u(std::string& out, uint32_t u) {
  static const char hex[] = "0123456789abcdef";
  out += "\\u";
  for (int s = 12; s >= 0; s -= 4) out += hex[(u >> s) & 0xf];
}

// The code point of the UTF-8 sequence at s[i], and its length; 0 length: not UTF-8
// (overlong, surrogate, past U+10FFFF, truncated).
uint32_t decode_utf8(std::string_view s, size_t i, size_t* len) {
  const auto b = [&](size_t k) { return uint8_t(s[i + k]); };
  const uint8_t c = b(0);
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  *len = 0;
  if (n == 0 || c > 0xf4 || i + n > s.size()) return 0;
  uint32_t u = c & (0x7f >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    u = (u << 6) | (b(k) & 0x3f);
  }
  if ((n == 3 && u < 0x800) || (n == 4 && (u < 0x10000 || u > 0x10ffff)) || (u >= 0xd800 && u <= 0xdfff)) return 0;
  *len = n;
  return u;
}

bool hex_digit(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool word_char(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }

// The token starting at `at` and ending before any of `stops` (or the end).
std::string token(std::string_view line, size_t at, std::string_view stops) {
  const size_t end = line.find_first_of(stops, at);
  return std::string(line.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at));
}

// "HEX/ENTRY" at `at`: the digest's hex (8 to 64 digits) and the entry (up to a space, ';',
// ',', ')' or ':').
bool cargo_entry(std::string_view line, size_t at, LogFields& f) {
  size_t i = at;
  while (i < line.size() && hex_digit(line[i])) ++i;
  if (i - at < 8 || i - at > 64 || i >= line.size() || line[i] != '/') return false;
  f.cargo = std::string(line.substr(at, i - at));
  f.entry = token(line, i + 1, " ;,):");
  return true;
}

// What a terminal acts on or shows as a line break rather than as a character: C1 controls,
// the bidirectional overrides and isolates, the line and paragraph separators.
bool invisible(uint32_t u) {
  return (u >= 0x80 && u <= 0x9f) || (u >= 0x202a && u <= 0x202e) || (u >= 0x2066 && u <= 0x2069) || u == 0x2028 || u == 0x2029;
}

}  // namespace

std::string json_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = uint8_t(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20 || c == 0x7f) {  // as the text log: `jq -r` must not write a control to a terminal
      out += '?';
    } else if (c < 0x80) {
      out += char(c);
    } else {
      size_t len = 0;
      const uint32_t u = decode_utf8(s, i, &len);
      if (len == 0) {
        append_u(out, 0xfffd);
        ++i;
        continue;
      }
      if (invisible(u)) {
        out += '?';
      } else if (u >= 0x10000) {
        append_u(out, 0xd800 + ((u - 0x10000) >> 10));
        append_u(out, 0xdc00 + ((u - 0x10000) & 0x3ff));
      } else {
        append_u(out, u);
      }
      i += len;
      continue;
    }
    ++i;
  }
  return out;
}

namespace {
// A kernel's own xc_log line, "CARGO/ENTRY: TEXT" (engine.cpp): a head without a space, with
// a '/', before the first ": ", which no line of the loader's own has. Its text is the
// kernel's, so nothing in it is taken for a field.
bool kernel_line(std::string_view line) {
  const size_t colon = line.find(": ");
  if (colon == std::string_view::npos) return false;
  const std::string_view head = line.substr(0, colon);
  return head.find('/') != std::string_view::npos && head.find(' ') == std::string_view::npos;
}
}  // namespace

LogFields log_fields(std::string_view line) {
  LogFields f;
  if (kernel_line(line)) return f;
  if (line.rfind("error:", 0) == 0 || line.find(": error:") != std::string_view::npos) f.level = "error";
  else if (line.rfind("WARNING", 0) == 0 || line.rfind("failed ", 0) == 0 || line.rfind("refused ", 0) == 0 ||
           line.rfind("interrupted ", 0) == 0 || line.rfind("worker stopped", 0) == 0 || line.find("; killing it") != std::string_view::npos)
    f.level = "warning";
  // "... HEX/ENTRY -> STATUS ...": an invoke's or forward's line.
  if (const size_t arrow = line.find(" -> "); arrow != std::string_view::npos) {
    const size_t start = line.rfind(' ', arrow - 1);
    cargo_entry(line, start == std::string_view::npos ? 0 : start + 1, f);
    size_t i = arrow + 4;
    while (i < line.size() && word_char(line[i])) ++i;
    if (i > arrow + 4) f.status = std::string(line.substr(arrow + 4, i - arrow - 4));
  }
  // "(cargo HEX/ENTRY, ...": a failed kernel's line.
  if (f.cargo.empty())
    for (size_t at = line.find("cargo "); at != std::string_view::npos && f.cargo.empty(); at = line.find("cargo ", at + 1))
      cargo_entry(line, at + 6, f);
  if (f.status.empty()) {
    if (line.find("the kernel crashed") != std::string_view::npos) f.status = "crashed";
    else if (line.find("the kernel ran past the time limit") != std::string_view::npos) f.status = "timeout";
    else if (line.find("the sandbox stopped the kernel") != std::string_view::npos) f.status = "sandbox";
  }
  size_t k = line.find(" key ");
  if (k != std::string_view::npos && k >= 4 && line.substr(k - 4, 4) == "node") k = line.find(" key ", k + 1);  // the node's own
  if (k != std::string_view::npos) {
    std::string key = token(line, k + 5, " ;,)");
    bool hex = !key.empty();
    for (char c : key) hex = hex && hex_digit(c);
    if (hex) f.client = std::move(key);
  }
  if (const size_t at = line.find("from "); at != std::string_view::npos && (at == 0 || line[at - 1] == ' ' || line[at - 1] == '(')) {
    std::string peer = token(line, at + 5, " ;,)");
    if (!peer.empty() && peer.back() == ':') peer.pop_back();  // "from HOST:PORT: key ..."
    if (peer.find(':') != std::string::npos) f.peer = std::move(peer);
  }
  return f;
}

std::string json_log_line(std::string_view time, int pid, std::string_view line) {
  if (line.size() > kMaxJsonMessage) line = line.substr(0, kMaxJsonMessage);
  const LogFields f = log_fields(line);
  std::string out = "{\"time\":\"" + json_escape(time) + "\",\"level\":\"" + std::string(f.level) + "\",\"pid\":" + std::to_string(pid) +
                    ",\"message\":\"" + json_escape(line) + "\"";
  auto field = [&](const char* name, const std::string& v) {
    if (!v.empty()) out.append(",\"").append(name).append("\":\"").append(json_escape(v)).append("\"");
  };
  field("cargo", f.cargo);
  field("entry", f.entry);
  field("status", f.status);
  field("client", f.client);
  field("peer", f.peer);
  out += '}';
  return out;
}

}  // namespace xcargo::loader
