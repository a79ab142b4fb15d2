/* scale: compute kernels of adjustable length for scripts/bench-kernels, the same source
 * built as a cargo and as a native program (native_main.c). Input: a little-endian u64
 * repetition count, then a u64 seed. Each entry replies with an 8-byte checksum, so that
 * nothing it computes can be optimized away and the two builds can be compared. */
#include <xcargo/kernel.h>

#define GRID 64 /* stencil: a 64x64 grid of floats, 16 KiB, from xc_alloc */
#define LANES 64 /* hash: 64 independent 64-bit states */

static int read_args(const void *in, size_t in_len, uint64_t *reps, uint64_t *seed) {
  if (in_len != 2 * sizeof(uint64_t)) return 0;
  memcpy(reps, in, sizeof *reps);
  memcpy(seed, (const char *)in + sizeof *reps, sizeof *seed);
  return 1;
}

/* Jacobi relaxation on a 2-D grid: floating point, vectorizable. */
XC_ENTRY int stencil(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t reps, seed;
  if (!read_args(in, in_len, &reps, &seed)) return 1;
  float *a = (float *)xc_alloc(ctx, sizeof(float) * GRID * GRID);
  float *b = (float *)xc_alloc(ctx, sizeof(float) * GRID * GRID);
  if (!a || !b) return 2;
  for (int i = 0; i < GRID * GRID; ++i) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    a[i] = b[i] = (float)(seed >> 40) * (1.0f / 16777216.0f);
  }
  for (uint64_t r = 0; r < reps; ++r) {
    for (int y = 1; y < GRID - 1; ++y)
      for (int x = 1; x < GRID - 1; ++x)
        b[y * GRID + x] = 0.2f * (a[y * GRID + x] + a[(y - 1) * GRID + x] + a[(y + 1) * GRID + x] +
                                  a[y * GRID + x - 1] + a[y * GRID + x + 1]);
    float *t = a;
    a = b;
    b = t;
  }
  double sum = 0;
  for (int i = 0; i < GRID * GRID; ++i) sum += a[i];
  return xc_reply(ctx, &sum, sizeof sum);
}

/* Integer mixing of independent lanes: multiplies, shifts and rotates, no memory traffic. */
XC_ENTRY int hash(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t reps, seed;
  if (!read_args(in, in_len, &reps, &seed)) return 1;
  uint64_t s[LANES];
  for (int i = 0; i < LANES; ++i) s[i] = seed + (uint64_t)i * 0x9e3779b97f4a7c15ull;
  for (uint64_t r = 0; r < reps; ++r)
    for (int i = 0; i < LANES; ++i) {
      uint64_t x = s[i];
      x ^= x >> 31;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 27;
      x = (x << 13) | (x >> 51);
      s[i] = x + r;
    }
  uint64_t sum = 0;
  for (int i = 0; i < LANES; ++i) sum ^= s[i] + (uint64_t)i;
  return xc_reply(ctx, &sum, sizeof sum);
}

/* The input back as the reply: scripts/bench-invoke's bandwidth figure (64 MiB each way). */
XC_ENTRY int echo(xc_ctx *ctx, const void *in, size_t in_len) { return xc_reply(ctx, in, in_len); }
