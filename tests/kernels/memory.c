/* Node memory across failures: a region written by one invocation, read by later ones, while
 * other entries of the same cargo crash or hang. */
#include <xcargo/kernel.h>

#define WORDS (1u << 17) /* a 1 MiB region of u64 */

/* Fills region "data" with word i = seed * (i + 1) (input: u64 seed); replies the seed. */
XC_ENTRY int put(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t seed = 0;
  if (in_len == 8) memcpy(&seed, in, 8);
  uint64_t *d = (uint64_t *)xc_region_create(ctx, "data", WORDS * 8);
  if (!d) return 2;
  for (uint32_t i = 0; i < WORDS; ++i) d[i] = seed * (i + 1);
  return xc_reply(ctx, &seed, 8);
}

/* The seed "data" holds if every word agrees with it; kernel error 3 if any does not, 2 if
 * there is no region. */
XC_ENTRY int get(xc_ctx *ctx, const void *in, size_t in_len) {
  size_t len = 0;
  const uint64_t *d = (const uint64_t *)xc_region(ctx, "data", &len);
  if (!d || len != WORDS * 8) return 2;
  const uint64_t seed = d[0];
  for (uint32_t i = 0; i < WORDS; ++i)
    if (d[i] != seed * (i + 1)) return 3;
  return xc_reply(ctx, &seed, 8);
}

/* Adds its input (u64) to a counter in region "count" and replies the new value. */
XC_ENTRY int add(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t n = 0;
  if (in_len == 8) memcpy(&n, in, 8);
  uint64_t *c = (uint64_t *)xc_region_create(ctx, "count", 8);
  if (!c) return 2;
  *c += n;
  return xc_reply(ctx, c, 8);
}

XC_ENTRY int boom(xc_ctx *ctx, const void *in, size_t in_len) {
  *(volatile int *)(uintptr_t)in_len = 1; /* in_len 0: a null pointer */
  return 0;
}

XC_ENTRY int hang(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile uint64_t n = 0;
  for (;;) n++;
}

/* Runs about n * 2^20 loop iterations (input: u64 n), then replies n: a kernel still running
 * when another one fails. */
XC_ENTRY int slow(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t n = 0;
  if (in_len == 8) memcpy(&n, in, 8);
  volatile uint64_t acc = 0;
  for (uint64_t i = 0; i < (n << 20); ++i) acc += i;
  return xc_reply(ctx, &n, 8);
}
