// Existing C++, as a port brings it: the C++ forms of the standard headers.
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <xcargo/kernel.h>

// reply: f64 of std::sqrt(16.0f) (the float overload) + std::abs(-2.5) + std::strlen("abc") = 4 + 2.5 + 3
XC_ENTRY int cxx(xc_ctx *ctx, const void *in, std::size_t in_len) {
  float f = std::sqrt(16.0f);
  std::int64_t n = static_cast<std::int64_t>(std::strlen("abc"));
  double r = f + std::abs(-2.5) + static_cast<double>(n) + (std::fmax(1.0, 2.0) == 2.0 ? 0 : 100);
  return xc_reply(ctx, &r, sizeof r);
}
