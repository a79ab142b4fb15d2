/* <stdlib.h> for kernels: what makes sense inside an invocation. Memory comes from
 * xc_alloc(ctx, n), freed when the invocation ends; a kernel ends by returning from its entry.
 * The rest of libc's stdlib is declared unavailable, with what to use instead, so a port
 * fails to compile at the line that needs changing. */
#ifndef XCARGO_STDLIB_H
#define XCARGO_STDLIB_H

#include <xcargo/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XC_UNAVAILABLE(why) __attribute__((unavailable(why)))

static inline int abs(int x) { return x < 0 ? -x : x; }
static inline long labs(long x) { return x < 0 ? -x : x; }
static inline long long llabs(long long x) { return x < 0 ? -x : x; }
static inline void abort(void) { __builtin_trap(); } /* the caller gets 'crashed' */

XC_UNAVAILABLE("kernels allocate with xc_alloc(ctx, n): memory that lives until the invocation ends")
void *malloc(size_t n);
XC_UNAVAILABLE("kernels allocate with xc_alloc(ctx, n) (then memset it to zero)")
void *calloc(size_t count, size_t n);
XC_UNAVAILABLE("kernels allocate with xc_alloc(ctx, n); copy into a new block to grow one")
void *realloc(void *p, size_t n);
XC_UNAVAILABLE("nothing to free: memory from xc_alloc ends with the invocation")
void free(void *p);
XC_UNAVAILABLE("a kernel ends by returning from its entry (nonzero: an error for the caller)")
void exit(int status);
XC_UNAVAILABLE("a kernel has no environment: pass settings in the invocation's input")
char *getenv(const char *name);
XC_UNAVAILABLE("a kernel cannot run programs")
int system(const char *command);
XC_UNAVAILABLE("a kernel has no source of randomness: pass a seed in the input")
int rand(void);

#undef XC_UNAVAILABLE

#ifdef __cplusplus
}
#endif

#endif /* XCARGO_STDLIB_H */
