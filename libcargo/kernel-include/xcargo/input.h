/* Reading the input `xcargo run` packs (README, "A kernel's input"), value by value, in the
 * order of its --arg options. Included by <xcargo/kernel.h>.
 *
 *   xc_in r = xc_in_start(ctx, in, in_len);
 *   int64_t n = xc_in_i64(&r);
 *   size_t na, nb;
 *   const float *a = xc_in_f32s(&r, &na), *b = xc_in_f32s(&r, &nb);
 *   if (!xc_in_ok(&r)) return 1;
 *
 * Failure is sticky: a read past the input's end, or of an array whose count does not fit,
 * returns 0 (arrays: NULL and a count of 0) and every later read does too; xc_in_ok says
 * whether every read so far found its bytes. Arrays come back aligned for their type: a
 * pointer into the input when it is, else a copy in xc_alloc memory (NULL past its limit,
 * which fails the reader too).
 */
#ifndef XCARGO_INPUT_H
#define XCARGO_INPUT_H

#include <stddef.h>
#include <stdint.h>

/* Arrays start at the next multiple of XC_IN_ARRAY_ALIGN bytes of the input. */
#define XC_IN_ARRAY_ALIGN 8

typedef struct xc_in {
  xc_ctx *ctx;
  const unsigned char *start;
  size_t len, pos;
  int failed;
} xc_in;

static inline xc_in xc_in_start(xc_ctx *ctx, const void *in, size_t in_len) {
  xc_in r = {ctx, (const unsigned char *)in, in_len, 0, 0};
  return r;
}

/* Non-zero when every read so far found its bytes. */
static inline int xc_in_ok(const xc_in *r) { return !r->failed; }

/* The bytes after the last value read (e.g. those of --input files), and how many. */
static inline const void *xc_in_rest(const xc_in *r, size_t *len) {
  *len = r->failed ? 0 : r->len - r->pos;
  return r->start + (r->failed ? r->len : r->pos);
}

/* Copies the next n bytes to out (zeros once failed). */
static inline void xc_in_bytes(xc_in *r, void *out, size_t n) {
  if (r->failed || r->len - r->pos < n) {
    r->failed = 1;
    memset(out, 0, n);
    return;
  }
  memcpy(out, r->start + r->pos, n);
  r->pos += n;
}

#define XC_IN_SCALAR(name, type)                  \
  static inline type xc_in_##name(xc_in *r) {     \
    type v;                                       \
    xc_in_bytes(r, &v, sizeof v);                 \
    return v;                                     \
  }
XC_IN_SCALAR(i32, int32_t)
XC_IN_SCALAR(u32, uint32_t)
XC_IN_SCALAR(i64, int64_t)
XC_IN_SCALAR(u64, uint64_t)
XC_IN_SCALAR(f32, float)
XC_IN_SCALAR(f64, double)
#undef XC_IN_SCALAR

/* The next array of elements of elem_size bytes: its elements, *count of them. */
static inline const void *xc_in_array(xc_in *r, size_t elem_size, size_t *count) {
  *count = 0;
  const size_t at = (r->pos + XC_IN_ARRAY_ALIGN - 1) / XC_IN_ARRAY_ALIGN * XC_IN_ARRAY_ALIGN;
  if (r->failed || at > r->len) {
    r->failed = 1;
    return NULL;
  }
  r->pos = at;
  const uint64_t n = xc_in_u64(r);
  if (r->failed || n > (r->len - r->pos) / elem_size) {
    r->failed = 1;
    return NULL;
  }
  const unsigned char *p = r->start + r->pos;
  const size_t bytes = (size_t)n * elem_size;
  r->pos += bytes;
  *count = (size_t)n;
  if ((uintptr_t)p % elem_size == 0) return p;
  void *copy = xc_alloc(r->ctx, bytes ? bytes : 1);
  if (!copy) {
    r->failed = 1;
    *count = 0;
    return NULL;
  }
  memcpy(copy, p, bytes);
  return copy;
}

#define XC_IN_ARRAY(name, type) \
  static inline const type *xc_in_##name##s(xc_in *r, size_t *count) { return (const type *)xc_in_array(r, sizeof(type), count); }
XC_IN_ARRAY(u8, uint8_t)
XC_IN_ARRAY(i32, int32_t)
XC_IN_ARRAY(u32, uint32_t)
XC_IN_ARRAY(i64, int64_t)
XC_IN_ARRAY(u64, uint64_t)
XC_IN_ARRAY(f32, float)
XC_IN_ARRAY(f64, double)
#undef XC_IN_ARRAY

#endif /* XCARGO_INPUT_H */
