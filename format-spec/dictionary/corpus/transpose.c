/* Dictionary corpus: transpose of a square f64 matrix, u32 n first. */
#include <xcargo/kernel.h>
XC_ENTRY int transpose(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t n;
  if (in_len < 4) return 1;
  memcpy(&n, in, 4);
  if ((size_t)n * n * 8 + 4 != in_len) return 2;
  const double *a = (const double *)xc_alloc(ctx, (size_t)n * n * 8);
  double *t = (double *)xc_alloc(ctx, (size_t)n * n * 8);
  if (!a || !t) return 3;
  memcpy((void *)a, (const char *)in + 4, (size_t)n * n * 8);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < n; ++j) t[(size_t)j * n + i] = a[(size_t)i * n + j];
  return xc_reply(ctx, t, (size_t)n * n * 8);
}
