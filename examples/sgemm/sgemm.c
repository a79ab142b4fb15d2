/* sgemm: C = A x B for square float matrices, the DHPVM offload benchmark.
 * Input: u32 n, then A (n*n floats, row-major), then B (n*n floats). Reply: C (n*n floats).
 * Blocked i-k-j loops so the inner loop vectorizes for whatever CPU the code is built for. */
#include <xcargo/kernel.h>

enum { BLOCK = 64 };

static void sgemm(uint32_t n, const float *restrict a, const float *restrict b, float *restrict c) {
  memset(c, 0, (size_t)n * n * sizeof(float));
  for (uint32_t ii = 0; ii < n; ii += BLOCK)
    for (uint32_t kk = 0; kk < n; kk += BLOCK)
      for (uint32_t i = ii; i < ii + BLOCK && i < n; ++i)
        for (uint32_t k = kk; k < kk + BLOCK && k < n; ++k) {
          const float aik = a[(size_t)i * n + k];
          const float *restrict brow = b + (size_t)k * n;
          float *restrict crow = c + (size_t)i * n;
          for (uint32_t j = 0; j < n; ++j) crow[j] += aik * brow[j];
        }
}

XC_ENTRY int sgemm_run(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t n;
  if (in_len < sizeof n) return 1;
  memcpy(&n, in, sizeof n);
  if (n == 0 || n > 4096) return 2;
  const size_t bytes = (size_t)n * n * sizeof(float);
  if (in_len != sizeof n + 2 * bytes) return 3;
  /* The input buffer has no alignment guarantee: copy into aligned working memory. */
  float *a = (float *)xc_alloc(ctx, bytes);
  float *b = (float *)xc_alloc(ctx, bytes);
  float *c = (float *)xc_alloc(ctx, bytes);
  if (!a || !b || !c) return 4;
  memcpy(a, (const char *)in + sizeof n, bytes);
  memcpy(b, (const char *)in + sizeof n + bytes, bytes);
  sgemm(n, a, b, c);
  return xc_reply(ctx, c, bytes);
}
