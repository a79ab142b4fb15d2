/* scale(x) = twice(x) * FACTOR + OFFSET, across two sources and a header of the project's own. */
#include <stdint.h>
#include <xcargo/kernel.h>
#include "scale.h"

#ifndef OFFSET
#define OFFSET 0  /* the README's CMake example passes no DEFINES */
#endif

int64_t twice(int64_t x);

XC_ENTRY int scale(xc_ctx *ctx, const void *in, size_t in_len) {
  if (in_len != sizeof(int64_t)) return 1;
  int64_t x;
  __builtin_memcpy(&x, in, sizeof x);
  int64_t r = twice(x) * FACTOR + OFFSET;
  return xc_reply(ctx, &r, sizeof r);
}
