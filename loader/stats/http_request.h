// The metrics endpoint's HTTP request reader: what it accepts of HTTP/1.0 and 1.1 (a request
// line and headers, no body), bounded before anything is stored.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace xcargo::loader {

// A request's head (line and headers) longer than this is refused.
inline constexpr size_t kMaxHttpHead = 4096;

enum class HttpVerdict {
  incomplete,    // no end of head yet, within the limit: read more
  metrics,       // GET /metrics (with or without a query): serve the counts
  not_found,     // a well-formed GET or HEAD of another path
  bad_method,    // a well-formed request with another method
  bad_request,   // malformed: not "METHOD SP TARGET SP HTTP/1.x", control bytes, a body announced
  too_large,     // no end of head within kMaxHttpHead bytes
};

struct HttpRequest {
  HttpVerdict verdict = HttpVerdict::incomplete;
  bool head_only = false;  // HEAD: the status line and headers, no body
  size_t head_size = 0;    // bytes of the head, once it is complete
};

// Reads the bytes received so far (the whole of them, from the first). Never reads past
// kMaxHttpHead bytes, never allocates.
HttpRequest parse_http_request(std::string_view received);

// The whole response: status line, Content-Type, Content-Length, Connection: close, body.
std::string http_response(HttpVerdict verdict, bool head_only, std::string_view body);

}  // namespace xcargo::loader
