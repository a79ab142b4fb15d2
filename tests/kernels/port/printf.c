/* C that prints: <stdio.h> refuses printf at this line, naming xc_log and xc_reply. */
#include <stdio.h>
#include <xcargo/kernel.h>

XC_ENTRY int chatty(xc_ctx *ctx, const void *in, size_t in_len) { return printf("%zu\n", in_len) < 0; }
