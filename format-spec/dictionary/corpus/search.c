/* Dictionary corpus: count occurrences of a needle (first byte = its length) in a haystack. */
#include <xcargo/kernel.h>
XC_ENTRY int count_matches(xc_ctx *ctx, const void *in, size_t in_len) {
  const uint8_t *p = (const uint8_t *)in;
  if (in_len < 1) return 1;
  size_t m = p[0];
  if (m == 0 || 1 + m > in_len) return 2;
  const uint8_t *needle = p + 1, *hay = p + 1 + m;
  size_t n = in_len - 1 - m;
  uint64_t count = 0;
  for (size_t i = 0; i + m <= n; ++i)
    if (memcmp(hay + i, needle, m) == 0) ++count;
  xc_log(ctx, "search done");
  return xc_reply(ctx, &count, sizeof count);
}
