/* Pointer chase, the walk: visits the elements held here, then moves itself to the node that
 * holds the next one (xc_forward). Input and reply: a chase_state (chase_list.h); the node
 * holding the last element replies to the client. */
#include <xcargo/kernel.h>

#include "chase_list.h"

XC_ENTRY int walk(xc_ctx *ctx, const void *in, size_t in_len) {
  chase_state st;
  size_t len = 0;
  if (in_len != sizeof st) return 1;
  memcpy(&st, in, sizeof st);
  const chase_elem *slots = (const chase_elem *)xc_region(ctx, "chase", &len);
  if (!slots) return 2; /* run setup first */
  uint32_t nodes = xc_node_count(ctx), node = xc_node_id(ctx);
  int r = chase_walk_local(&st, slots, len / sizeof(chase_elem), nodes, node);
  if (r < 0) return 3;
  if (r == 1) return xc_reply(ctx, &st, sizeof st);
  return xc_forward(ctx, (uint32_t)(st.cur % nodes), "walk", &st, sizeof st) == 0 ? 0 : 4;
}
