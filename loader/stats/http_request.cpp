// The metrics endpoint's HTTP request reader (see http_request.h).
#include "stats/http_request.h"

namespace xcargo::loader {

namespace {
// Bytes a request line or header may hold: printable ASCII and tabs.
bool clean(std::string_view s) {
  for (char c : s)
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) return false;
  return true;
}
bool equals_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}
}  // namespace

HttpRequest parse_http_request(std::string_view received) {
  HttpRequest r;
  const std::string_view window = received.substr(0, kMaxHttpHead);
  // The head ends at an empty line; CRLF or a bare LF, as RFC 9112 lets servers accept.
  size_t end = std::string_view::npos, body = 0;
  for (size_t i = 0; i < window.size() && end == std::string_view::npos; ++i) {
    if (window[i] != '\n') continue;
    if (i + 1 < window.size() && window[i + 1] == '\n') end = i, body = i + 2;
    else if (i + 2 < window.size() && window[i + 1] == '\r' && window[i + 2] == '\n') end = i, body = i + 3;
  }
  if (end == std::string_view::npos) {
    r.verdict = received.size() >= kMaxHttpHead ? HttpVerdict::too_large : HttpVerdict::incomplete;
    return r;
  }
  r.head_size = body;
  r.verdict = HttpVerdict::bad_request;
  std::string_view head = window.substr(0, end);
  const size_t eol = head.find('\n');
  std::string_view line = head.substr(0, eol);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (!clean(line)) return r;
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return r;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1 || line.find(' ', sp2 + 1) != std::string_view::npos) return r;
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1), version = line.substr(sp2 + 1);
  if (version != "HTTP/1.0" && version != "HTTP/1.1") return r;
  if (target.front() != '/') return r;
  // Headers: NAME: VALUE lines; a body (Content-Length other than 0, Transfer-Encoding) is refused.
  std::string_view rest = eol == std::string_view::npos ? std::string_view() : head.substr(eol + 1);
  while (!rest.empty()) {
    const size_t n = rest.find('\n');
    std::string_view h = rest.substr(0, n);
    rest = n == std::string_view::npos ? std::string_view() : rest.substr(n + 1);
    if (!h.empty() && h.back() == '\r') h.remove_suffix(1);
    const size_t colon = h.find(':');
    if (!clean(h) || colon == std::string_view::npos || colon == 0 || h.substr(0, colon).find_first_of(" \t") != std::string_view::npos)
      return r;
    std::string_view value = h.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
    const std::string_view name = h.substr(0, colon);
    if (equals_nocase(name, "transfer-encoding") || (equals_nocase(name, "content-length") && value != "0")) return r;
  }
  if (method != "GET" && method != "HEAD") {
    r.verdict = HttpVerdict::bad_method;
    return r;
  }
  r.head_only = method == "HEAD";
  const std::string_view path = target.substr(0, target.find('?'));
  r.verdict = path == "/metrics" ? HttpVerdict::metrics : HttpVerdict::not_found;
  return r;
}

std::string http_response(HttpVerdict verdict, bool head_only, std::string_view body) {
  const char* status = "400 Bad Request";
  std::string text;
  switch (verdict) {
    case HttpVerdict::metrics: status = "200 OK"; break;
    case HttpVerdict::not_found: status = "404 Not Found"; text = "only /metrics is served here\n"; break;
    case HttpVerdict::bad_method: status = "405 Method Not Allowed"; text = "only GET /metrics\n"; break;
    case HttpVerdict::too_large: status = "431 Request Header Fields Too Large"; text = "request head over 4096 bytes\n"; break;
    default: text = "malformed request\n"; break;
  }
  if (verdict == HttpVerdict::metrics) text = body;
  std::string r = "HTTP/1.1 ";
  r += status;
  r += "\r\nContent-Type: ";
  r += verdict == HttpVerdict::metrics ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8";
  r += "\r\nContent-Length: " + std::to_string(text.size()) + "\r\nConnection: close\r\n";
  if (verdict == HttpVerdict::bad_method) r += "Allow: GET, HEAD\r\n";
  r += "\r\n";
  if (!head_only) r += text;
  return r;
}

}  // namespace xcargo::loader
