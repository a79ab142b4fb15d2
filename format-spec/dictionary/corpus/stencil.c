/* Dictionary corpus: one Jacobi step of a 1-D three-point stencil over f64 values. */
#include <xcargo/kernel.h>
XC_ENTRY int jacobi(xc_ctx *ctx, const void *in, size_t in_len) {
  if (in_len % 8 || in_len < 24) return 1;
  size_t n = in_len / 8;
  double *u = (double *)xc_alloc(ctx, in_len), *v = (double *)xc_alloc(ctx, in_len);
  if (!u || !v) return 2;
  memcpy(u, in, in_len);
  v[0] = u[0];
  v[n - 1] = u[n - 1];
  for (size_t i = 1; i + 1 < n; ++i) v[i] = 0.25 * u[i - 1] + 0.5 * u[i] + 0.25 * u[i + 1];
  uint32_t id = xc_node_id(ctx), nodes = xc_node_count(ctx);
  (void)id;
  (void)nodes;
  return xc_reply(ctx, v, in_len);
}
