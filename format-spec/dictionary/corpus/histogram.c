/* Dictionary corpus: 256-bin byte histogram. */
#include <xcargo/kernel.h>
XC_ENTRY int histogram(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t bins[256];
  memset(bins, 0, sizeof bins);
  const uint8_t *p = (const uint8_t *)in;
  for (size_t i = 0; i < in_len; ++i) bins[p[i]]++;
  return xc_reply(ctx, bins, sizeof bins);
}
