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
