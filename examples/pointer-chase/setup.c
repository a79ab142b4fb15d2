/* Pointer chase, set-up: lays out this node's part of the list in its region "chase".
 * Input: u64 length, u64 seed. Reply: u64 the first element. Run it on every node. */
#include <xcargo/kernel.h>

#include "chase_list.h"

XC_ENTRY int setup(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t length, seed;
  if (in_len != 16) return 1;
  memcpy(&length, in, 8);
  memcpy(&seed, (const char *)in + 8, 8);
  if (length == 0 || length > CHASE_MAX_LENGTH) return 2;
  uint32_t nodes = xc_node_count(ctx), node = xc_node_id(ctx);
  uint64_t nslots = chase_slots(length, nodes, node);
  uint64_t *order = (uint64_t *)xc_alloc(ctx, length * 8);
  chase_elem *slots = (chase_elem *)xc_region_create(ctx, "chase", (nslots ? nslots : 1) * sizeof(chase_elem));
  if (!order || !slots) return 3;
  chase_order(order, length, seed);
  chase_fill(slots, order, length, nodes, node);
  return xc_reply(ctx, &order[0], 8);
}
