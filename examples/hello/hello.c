/* hello: the smallest useful kernel. `add` returns the sum of two little-endian i64
 * arguments; `greet` replies with a greeting that names the node it ran on. */
#include <xcargo/kernel.h>

XC_ENTRY int add(xc_ctx *ctx, const void *in, size_t in_len) {
  int64_t a, b;
  if (in_len != 2 * sizeof(int64_t)) return 1; /* wrong input: report failure */
  memcpy(&a, in, sizeof a);
  memcpy(&b, (const char *)in + sizeof a, sizeof b);
  int64_t sum = a + b;
  return xc_reply(ctx, &sum, sizeof sum);
}

XC_ENTRY int greet(xc_ctx *ctx, const void *in, size_t in_len) {
  static const char prefix[] = "hello from node ";
  char msg[64];
  size_t n = sizeof prefix - 1;
  memcpy(msg, prefix, n);
  uint32_t id = xc_node_id(ctx);
  char digits[10];
  int d = 0;
  do {
    digits[d++] = (char)('0' + id % 10);
    id /= 10;
  } while (id && d < 10);
  while (d) msg[n++] = digits[--d];
  return xc_reply(ctx, msg, n);
}
