// cpp-reduce: a kernel written in C++ (templates, constexpr, classes; no exceptions/RTTI).
// `stats_f64` replies {count, sum, min, max} over the input doubles; `stats_i32` over i32s.
#include <xcargo/kernel.h>

namespace {

template <typename T>
struct Stats {
  double count = 0, sum = 0, min = 0, max = 0;

  void add(T v) {
    const double d = static_cast<double>(v);
    if (count == 0 || d < min) min = d;
    if (count == 0 || d > max) max = d;
    sum += d;
    count += 1;
  }
};

template <typename T>
int run(xc_ctx* ctx, const void* in, size_t in_len) {
  if (in_len % sizeof(T) != 0) return 1;
  Stats<T> s;
  const auto* bytes = static_cast<const unsigned char*>(in);
  for (size_t off = 0; off < in_len; off += sizeof(T)) {
    T v;
    memcpy(&v, bytes + off, sizeof v);
    s.add(v);
  }
  const double out[4] = {s.count, s.sum, s.min, s.max};
  return xc_reply(ctx, out, sizeof out);
}

}  // namespace

XC_ENTRY int stats_f64(xc_ctx* ctx, const void* in, size_t in_len) { return run<double>(ctx, in, in_len); }
XC_ENTRY int stats_i32(xc_ctx* ctx, const void* in, size_t in_len) { return run<int32_t>(ctx, in, in_len); }
