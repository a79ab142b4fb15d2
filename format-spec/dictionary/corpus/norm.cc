// Dictionary corpus: C++ kernel computing L1, L2 and L-infinity norms of f32 vectors.
#include <xcargo/kernel.h>
namespace {
template <typename T>
struct Norms {
  T l1 = 0, l2 = 0, linf = 0;
  void add(T v) {
    T a = v < 0 ? -v : v;
    l1 += a;
    l2 += v * v;
    if (a > linf) linf = a;
  }
};
}  // namespace
XC_ENTRY int norms(xc_ctx* ctx, const void* in, size_t in_len) {
  Norms<float> n;
  for (size_t i = 0; i + 4 <= in_len; i += 4) {
    float v;
    memcpy(&v, static_cast<const char*>(in) + i, 4);
    n.add(v);
  }
  const float out[3] = {n.l1, sqrtf(n.l2), n.linf};
  return xc_reply(ctx, out, sizeof out);
}
