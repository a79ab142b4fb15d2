/* Kernels over float arrays passed as `xcargo run --arg f32[]:FILE` (README, "A kernel's
 * input"), read with <xcargo/input.h>: a dot product, elementwise products, and a*x + y with
 * a scalar before the arrays (so that the arrays' padding is crossed). Each returns 1 for an
 * input that is not what it says, and 2 for arrays of different lengths. */
#include <xcargo/kernel.h>

/* Two f32 arrays: their dot product, one f64 (summed in double). */
XC_ENTRY int dot(xc_ctx *ctx, const void *in, size_t in_len) {
  xc_in r = xc_in_start(ctx, in, in_len);
  size_t na, nb;
  const float *a = xc_in_f32s(&r, &na), *b = xc_in_f32s(&r, &nb);
  size_t rest;
  xc_in_rest(&r, &rest);
  if (!xc_in_ok(&r) || rest != 0) return 1;
  if (na != nb) return 2;
  double s = 0;
  for (size_t i = 0; i < na; ++i) s += (double)a[i] * (double)b[i];
  return xc_reply(ctx, &s, sizeof s);
}

/* Two f32 arrays: a[i] * b[i], an f32 array. */
XC_ENTRY int products(xc_ctx *ctx, const void *in, size_t in_len) {
  xc_in r = xc_in_start(ctx, in, in_len);
  size_t na, nb;
  const float *a = xc_in_f32s(&r, &na), *b = xc_in_f32s(&r, &nb);
  if (!xc_in_ok(&r)) return 1;
  if (na != nb) return 2;
  float *p = (float *)xc_alloc(ctx, na * sizeof(float) + 1);
  if (!p) return 1;
  for (size_t i = 0; i < na; ++i) p[i] = a[i] * b[i];
  return xc_reply(ctx, p, na * sizeof(float));
}

/* An f32 scalar a, then f32 arrays x and y: a * x[i] + y[i], an f32 array. */
XC_ENTRY int axpy(xc_ctx *ctx, const void *in, size_t in_len) {
  xc_in r = xc_in_start(ctx, in, in_len);
  const float alpha = xc_in_f32(&r);
  size_t nx, ny;
  const float *x = xc_in_f32s(&r, &nx), *y = xc_in_f32s(&r, &ny);
  if (!xc_in_ok(&r)) return 1;
  if (nx != ny) return 2;
  float *p = (float *)xc_alloc(ctx, nx * sizeof(float) + 1);
  if (!p) return 1;
  for (size_t i = 0; i < nx; ++i) p[i] = alpha * x[i] + y[i];
  return xc_reply(ctx, p, nx * sizeof(float));
}
