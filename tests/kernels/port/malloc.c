/* C that calls malloc: <stdlib.h> refuses it at this line, naming xc_alloc. */
#include <stdlib.h>
#include <xcargo/kernel.h>

XC_ENTRY int leak(xc_ctx *ctx, const void *in, size_t in_len) { return malloc(in_len) == NULL; }
