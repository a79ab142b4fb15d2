/* Dictionary corpus: y = a*x + y over f32 vectors. */
#include <xcargo/kernel.h>
XC_ENTRY int saxpy(xc_ctx *ctx, const void *in, size_t in_len) {
  float a;
  if (in_len < 4 || (in_len - 4) % 8) return 1;
  memcpy(&a, in, 4);
  size_t n = (in_len - 4) / 8;
  float *y = (float *)xc_alloc(ctx, n * 4);
  if (!y) return 2;
  const unsigned char *p = (const unsigned char *)in + 4;
  for (size_t i = 0; i < n; ++i) {
    float xi, yi;
    memcpy(&xi, p + 8 * i, 4);
    memcpy(&yi, p + 8 * i + 4, 4);
    y[i] = a * xi + yi;
  }
  return xc_reply(ctx, y, n * 4);
}
