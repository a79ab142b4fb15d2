/* A kernel with a 7 GiB static array: its object would need 7 GiB once loaded, over the
 * format's limit (spec section 7). xcargo build refuses its objects; a loader refuses the
 * object it would JIT-compile from its bitcode, before linking (which would zero 7 GiB). */
#include <xcargo/kernel.h>

static char big[7ull << 30];

XC_ENTRY int touch(xc_ctx *ctx, const void *in, size_t in_len) {
  big[in_len * 4096] = 1;
  return xc_reply(ctx, &big[0], 1);
}
