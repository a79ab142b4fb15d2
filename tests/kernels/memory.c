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

/* Writes its input (u64 token) into region "held", then spins until the region's second word
 * is set (nothing here sets it: the worker ends under it): a kernel surely still running when
 * another one fails. held_state replies the token, once it runs (0 before). */
XC_ENTRY int held(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t token = 0;
  if (in_len == 8) memcpy(&token, in, 8);
  volatile uint64_t *h = (volatile uint64_t *)xc_region_create(ctx, "held", 16);
  if (!h) return 2;
  h[1] = 0;
  h[0] = token;
  while (!h[1]) {
  }
  return xc_reply(ctx, &token, 8);
}

XC_ENTRY int held_state(xc_ctx *ctx, const void *in, size_t in_len) {
  size_t len = 0;
  const volatile uint64_t *h = (const volatile uint64_t *)xc_region(ctx, "held", &len);
  const uint64_t token = h && len == 16 ? h[0] : 0;
  return xc_reply(ctx, &token, 8);
}
