/* Test kernels that move between the nodes of a cluster with xc_forward. */
#include <xcargo/kernel.h>

/* Visits every node once, from this one on, appending each node's id (0-9) to its input; the
 * last one replies with the path, e.g. "012". */
XC_ENTRY int tour(xc_ctx *ctx, const void *in, size_t in_len) {
  char path[64];
  if (in_len >= sizeof path) return 1;
  memcpy(path, in, in_len);
  uint32_t me = xc_node_id(ctx), count = xc_node_count(ctx);
  path[in_len++] = (char)('0' + me % 10);
  if (in_len >= count) return xc_reply(ctx, path, in_len);
  return xc_forward(ctx, (me + 1) % count, "tour", path, in_len) == 0 ? 0 : 2;
}

/* Forwards itself to the next node without end: the hop limit must stop it. */
XC_ENTRY int forever(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t me = xc_node_id(ctx), count = xc_node_count(ctx);
  return xc_forward(ctx, (me + 1) % count, "forever", in, in_len) == 0 ? 0 : 2;
}

/* Forwards to the node given as input (u32): one that does not exist, or this node itself. */
XC_ENTRY int to_node(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t node = 0;
  if (in_len == 4) memcpy(&node, in, 4);
  if (xc_forward(ctx, node, "tour", "", 0) != 0) return 3;
  return 0;
}

/* Like tour, but each node appends "node N: WHAT\n", WHAT saying which variant of the cargo
 * it runs (an object's compiler knows its architecture; portable bitcode does not). */
XC_ENTRY int tour_arch(xc_ctx *ctx, const void *in, size_t in_len) {
#if defined(__x86_64__)
  static const char what[] = "x86_64 object";
#elif defined(__aarch64__)
  static const char what[] = "aarch64 object";
#else
  static const char what[] = "bitcode, JIT-compiled there";
#endif
  char path[1024];
  if (in_len > sizeof path - 64) return 1;
  memcpy(path, in, in_len);
  uint32_t me = xc_node_id(ctx), count = xc_node_count(ctx), visited = 0;
  for (size_t i = 0; i < in_len; ++i) visited += path[i] == '\n';
  static const char node[] = "node ";
  memcpy(path + in_len, node, sizeof node - 1);
  in_len += sizeof node - 1;
  path[in_len++] = (char)('0' + me % 10);
  path[in_len++] = ':';
  path[in_len++] = ' ';
  memcpy(path + in_len, what, sizeof what - 1);
  in_len += sizeof what - 1;
  path[in_len++] = '\n';
  if (visited + 1 >= count) return xc_reply(ctx, path, in_len);
  return xc_forward(ctx, (me + 1) % count, "tour_arch", path, in_len) == 0 ? 0 : 2;
}
