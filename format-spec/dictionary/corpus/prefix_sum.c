/* Dictionary corpus: inclusive prefix sums of i64 values, and their total. */
#include <xcargo/kernel.h>
XC_ENTRY int prefix_sum(xc_ctx *ctx, const void *in, size_t in_len) {
  if (in_len % 8) return 1;
  size_t n = in_len / 8;
  int64_t *out = (int64_t *)xc_alloc(ctx, in_len ? in_len : 8);
  if (!out) return 2;
  int64_t acc = 0;
  for (size_t i = 0; i < n; ++i) {
    int64_t v;
    memcpy(&v, (const char *)in + 8 * i, 8);
    acc += v;
    out[i] = acc;
  }
  return xc_reply(ctx, out, in_len);
}
XC_ENTRY int total(xc_ctx *ctx, const void *in, size_t in_len) {
  int64_t acc = 0;
  for (size_t i = 0; i + 8 <= in_len; i += 8) {
    int64_t v;
    memcpy(&v, (const char *)in + i, 8);
    acc += v;
  }
  return xc_reply(ctx, &acc, 8);
}
