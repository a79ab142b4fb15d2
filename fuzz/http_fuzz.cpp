// Fuzz target: the metrics endpoint's request reader (loader/stats/http_request.h), given
// the bytes received so far, as the endpoint reads them in pieces: every prefix gets a
// verdict, never a crash, never a look past kMaxHttpHead; once complete, longer input keeps
// the verdict.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "stats/http_request.h"

using namespace xcargo::loader;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 3 * kMaxHttpHead) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  HttpRequest first{};
  for (size_t n = 0; n <= size; n += 1 + n / 8) {
    const HttpRequest q = parse_http_request(all.substr(0, n));
    if (q.head_size > kMaxHttpHead || q.head_size > n) std::abort();
    if (q.verdict == HttpVerdict::too_large && n < kMaxHttpHead) std::abort();
    // A verdict, once given, does not change with what follows.
    if (first.verdict != HttpVerdict::incomplete && (q.verdict != first.verdict || q.head_size != first.head_size)) std::abort();
    if (first.verdict == HttpVerdict::incomplete) first = q;
    (void)http_response(q.verdict, q.head_only, "x 1\n");
  }
  return 0;
}
