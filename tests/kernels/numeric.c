/* Kernels whose answers must not depend on the node's architecture or the variant it runs:
 * integer arithmetic always, floating point when the cargo is built with --fp strict. */
#include <xcargo/kernel.h>

/* A 64-bit hash (FNV-1a, then a splitmix finaliser) of the input bytes, repeated `rounds`
 * times (u32 at the start of the input; the rest is hashed): shifts, multiplies, overflow and
 * unaligned loads, compiled for each architecture. */
XC_ENTRY int mix(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t rounds = 1;
  if (in_len >= 4) memcpy(&rounds, in, 4);
  const unsigned char *p = (const unsigned char *)in;
  uint64_t h = 1469598103934665603ull;
  for (uint32_t r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < in_len; ++i) h = (h ^ p[i]) * 1099511628211ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
  }
  return xc_reply(ctx, &h, sizeof h);
}

/* Sensitive to floating-point contraction: a Horner-style recurrence x = x * a + c (a
 * multiply and an add that a compiler may fuse into one instruction with a single rounding)
 * for n steps (u32 input, default 1000). Replies with the result's 64 bits, so that a reply
 * compares bit for bit. */
XC_ENTRY int horner(xc_ctx *ctx, const void *in, size_t in_len) {
#ifdef NUMERIC_CONTRACT /* asks for contraction whatever the command line says: --fp strict refuses it */
#pragma STDC FP_CONTRACT ON
#endif
  uint32_t n = 1000;
  if (in_len >= 4) memcpy(&n, in, 4);
  double x = 0.1, a = 1.0000001, c = 1e-3;
  for (uint32_t i = 0; i < n; ++i) {
    x = x * a + c;
    a = a * 0.9999999 + 1e-9;
  }
  uint64_t bits;
  memcpy(&bits, &x, sizeof bits);
  return xc_reply(ctx, &bits, sizeof bits);
}
