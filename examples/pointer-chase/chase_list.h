/* The pointer-chase list, shared by the kernels, the client and the Active Message baseline.
 *
 * L elements, numbered 0..L-1. Element i lives on node i % N, in slot i / N of that node's
 * region "chase" (16 bytes per slot: next element, value). The list visits the elements in
 * the order of a pseudo-random permutation of 0..L-1 made from a seed, so consecutive
 * elements are on random nodes: a walk leaves its node on about (N-1)/N of its steps. */
#ifndef XCARGO_CHASE_LIST_H
#define XCARGO_CHASE_LIST_H

#include <stdint.h>

#define CHASE_END UINT64_MAX
#define CHASE_MAX_LENGTH (1ull << 26)

typedef struct {
  uint64_t next; /* CHASE_END for the last element */
  uint64_t value;
} chase_elem;

/* The state a walk carries from node to node, and what it answers at the end. */
typedef struct {
  uint64_t cur;  /* the element to visit next; at the end, the last element visited */
  uint64_t hops; /* elements visited */
  uint64_t sum;  /* checksum of the values visited */
  uint64_t end;  /* 1 once the walk ended */
} chase_state;

static inline uint64_t chase_rng(uint64_t *s) { /* xorshift64* */
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1Dull;
}

static inline uint64_t chase_slots(uint64_t length, uint32_t nodes, uint32_t node) {
  return length > node ? (length - node + nodes - 1) / nodes : 0;
}

/* order[0..length): the list order (a Fisher-Yates shuffle). */
static inline void chase_order(uint64_t *order, uint64_t length, uint64_t seed) {
  uint64_t s = seed ? seed : 1;
  for (uint64_t i = 0; i < length; ++i) order[i] = i;
  for (uint64_t i = length; i > 1; --i) {
    uint64_t j = chase_rng(&s) % i, t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
}

/* Fills node `node`'s slots from the list order. */
static inline void chase_fill(chase_elem *slots, const uint64_t *order, uint64_t length, uint32_t nodes, uint32_t node) {
  for (uint64_t j = 0; j < length; ++j) {
    uint64_t i = order[j];
    if (i % nodes != node) continue;
    slots[i / nodes].next = j + 1 < length ? order[j + 1] : CHASE_END;
    slots[i / nodes].value = (i + 1) * 0x9E3779B97F4A7C15ull;
  }
}

/* Walks from st->cur while the elements are in these slots (node `node` of `nodes`).
 * Returns 1 when the walk ended (st->cur is then the last element), 0 when st->cur is on
 * another node, -1 for an element that is not there. */
static inline int chase_walk_local(chase_state *st, const chase_elem *slots, uint64_t nslots, uint32_t nodes,
                                   uint32_t node) {
  while (st->cur % nodes == node) {
    uint64_t slot = st->cur / nodes;
    if (slot >= nslots) return -1;
    const chase_elem *e = &slots[slot];
    st->sum = st->sum * 31 + e->value;
    st->hops++;
    if (e->next == CHASE_END) {
      st->end = 1;
      return 1;
    }
    st->cur = e->next;
  }
  return 0;
}

#endif
