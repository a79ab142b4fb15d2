/* xcargo kernel API: how a kernel declares entry points and everything it may call.
 *
 * A kernel is freestanding C or C++: no system headers, no libc beyond what is declared
 * here. The loader links a kernel only against these functions (the allow-list in
 * libcargo's libcargo/read/abi.h); a kernel importing anything else is refused, by `xcargo build`
 * and again by every loader.
 *
 * Entry points:
 *   XC_ENTRY int NAME(xc_ctx *ctx, const void *in, size_t in_len) { ... }
 * `in` holds the caller's input bytes (e.g. `xcargo run --arg i64:2 --arg f32[]:a.f32`,
 * packed little-endian as README's "A kernel's input" says; <xcargo/input.h>, included
 * here, reads them: xc_in_start, xc_in_i64, xc_in_f32s, ...). Return 0 on success; a non-zero return is reported to the caller as a
 * failed invocation with that code. Reply bytes go back with xc_reply().
 */
#ifndef XCARGO_KERNEL_H
#define XCARGO_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define XC_EXTERN_C extern "C"
extern "C" {
#else
#define XC_EXTERN_C
#endif

#define XC_API __attribute__((visibility("default")))

/* Marks an entry point. It must be a non-static function with the signature above. */
#define XC_ENTRY XC_EXTERN_C __attribute__((section(".text.xc_entry"), used, visibility("default")))

/* The invocation's context, owned by the loader. */
typedef struct xc_ctx xc_ctx;

/* Appends len bytes to the reply sent back to the caller. Returns 0, or -1 if the reply
 * would exceed the loader's reply limit (nothing is appended then). A reply that is `in`
 * itself, or its first bytes (data == in, len <= in_len), is sent from the input's own
 * buffer instead of a copy (an echo of 64 MiB: 11 ms less): `in` is the kernel's to read,
 * never to write (bytes written into it after such a call would show in the reply). */
XC_API int xc_reply(xc_ctx *ctx, const void *data, size_t len);
/* Memory that lives until the invocation ends, 64-byte aligned (a cache line); NULL past the limit. */
XC_API void *xc_alloc(xc_ctx *ctx, size_t len);
/* A line in the loader's log, tagged with the cargo and entry. */
XC_API void xc_log(xc_ctx *ctx, const char *msg);
/* This node's id and the number of nodes in its cluster (0 and 1 when standalone). */
XC_API uint32_t xc_node_id(xc_ctx *ctx);
XC_API uint32_t xc_node_count(xc_ctx *ctx);
/* Continues this computation on another node of the cluster: once this kernel returns 0,
 * entry `entry` of this same cargo runs there with input in[0..len), and whichever node
 * ends the computation replies straight to the client. At most once per invocation, not
 * to this node itself, and not after xc_reply(); xc_reply() fails after it. Returns 0, or
 * -1 (not in a cluster, no such node, input over the limit, already replied or forwarded). */
XC_API int xc_forward(xc_ctx *ctx, uint32_t node, const char *entry, const void *in, size_t len);
/* Node memory: the region `name` this loader hosts, kept between invocations, or NULL if it
 * has none; *len receives its size. Clients can read regions one-sidedly (RDMA GET). */
XC_API void *xc_region(xc_ctx *ctx, const char *name, size_t *len);
/* Creates a zeroed region `name` (1-64 of A-Z a-z 0-9 _ . -), or returns the one of that name
 * if it has this size; NULL past the node's limits or for a size mismatch. */
XC_API void *xc_region_create(xc_ctx *ctx, const char *name, size_t len);

/* libc subset. */
XC_API void *memcpy(void *dst, const void *src, size_t n);
XC_API void *memmove(void *dst, const void *src, size_t n);
XC_API void *memset(void *dst, int c, size_t n);
XC_API int memcmp(const void *a, const void *b, size_t n);
XC_API size_t strlen(const char *s);

/* libm subset. */
#define XC_MATH1(fn) XC_API double fn(double); XC_API float fn##f(float);
#define XC_MATH2(fn) XC_API double fn(double, double); XC_API float fn##f(float, float);
XC_MATH1(sqrt) XC_MATH1(fabs) XC_MATH1(floor) XC_MATH1(ceil) XC_MATH1(round) XC_MATH1(trunc)
XC_MATH1(exp) XC_MATH1(exp2) XC_MATH1(log) XC_MATH1(log2) XC_MATH1(log10) XC_MATH1(cbrt)
XC_MATH1(sin) XC_MATH1(cos) XC_MATH1(tan) XC_MATH1(asin) XC_MATH1(acos) XC_MATH1(atan)
XC_MATH1(sinh) XC_MATH1(cosh) XC_MATH1(tanh)
XC_MATH2(pow) XC_MATH2(atan2) XC_MATH2(fmod) XC_MATH2(fmin) XC_MATH2(fmax) XC_MATH2(hypot)
XC_API double fma(double, double, double);
XC_API float fmaf(float, float, float);
XC_API long lround(double);
#undef XC_MATH1
#undef XC_MATH2

#ifdef __cplusplus
}
#endif

/* Kernels are built -ffreestanding, which turns off the compiler's knowledge of these
 * functions; routing them through the builtins lets small copies and sqrt become inline
 * instructions again. Taking their address still names the real function. */
#define memcpy(d, s, n) __builtin_memcpy((d), (s), (n))
#define memmove(d, s, n) __builtin_memmove((d), (s), (n))
#define memset(d, c, n) __builtin_memset((d), (c), (n))
#define memcmp(a, b, n) __builtin_memcmp((a), (b), (n))
#define strlen(s) __builtin_strlen(s)
#define sqrt(x) __builtin_sqrt(x)
#define sqrtf(x) __builtin_sqrtf(x)
#define fabs(x) __builtin_fabs(x)
#define fabsf(x) __builtin_fabsf(x)
#define fma(a, b, c) __builtin_fma((a), (b), (c))
#define fmaf(a, b, c) __builtin_fmaf((a), (b), (c))

#include "input.h" /* beside this file */

#endif /* XCARGO_KERNEL_H */
