/* <stdlib.h> for kernels: what makes sense inside an invocation. Memory comes from
 * xc_alloc(ctx, n), freed when the invocation ends; a kernel ends by returning from its entry.
 * Defined here, inline (nothing from the loader): abs, labs, llabs, div, ldiv, qsort, bsearch,
 * strtol, strtoul, strtoll, strtoull, strtod, atoi, atol, atoll, atof. A kernel has no errno:
 * a number out of range gives the C library's clamped result, which a caller can test. The
 * rest of libc's stdlib is declared unavailable, with what to use instead, so a port fails
 * to compile at the line that needs changing. */
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

typedef struct { int quot, rem; } div_t;
typedef struct { long quot, rem; } ldiv_t;
static inline div_t div(int a, int b) { div_t r = {a / b, a % b}; return r; }
static inline ldiv_t ldiv(long a, long b) { ldiv_t r = {a / b, a % b}; return r; }

/* Heapsort: O(n log n) at worst, no recursion, no memory; not stable (neither is C's). */
static inline void xc_sort_swap(char *a, char *b, size_t size) {
  for (size_t i = 0; i < size; ++i) {
    char t = a[i];
    a[i] = b[i];
    b[i] = t;
  }
}

static inline void xc_sort_sift(char *base, size_t root, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  for (;;) {
    size_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && cmp(base + child * size, base + (child + 1) * size) < 0) ++child;
    if (cmp(base + root * size, base + child * size) >= 0) return;
    xc_sort_swap(base + root * size, base + child * size, size);
    root = child;
  }
}

static inline void qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  char *b = (char *)base;
  if (n < 2 || size == 0) return;
  for (size_t i = n / 2; i-- > 0;) xc_sort_sift(b, i, n, size, cmp);
  for (size_t end = n - 1; end > 0; --end) {
    xc_sort_swap(b, b + end * size, size);
    xc_sort_sift(b, 0, end, size, cmp);
  }
}

static inline void *bsearch(const void *key, const void *base, size_t n, size_t size, int (*cmp)(const void *, const void *)) {
  const char *b = (const char *)base;
  while (n > 0) {
    const char *mid = b + (n / 2) * size;
    int c = cmp(key, mid);
    if (c == 0) return (void *)mid;
    if (c > 0) b = mid + size, n -= n / 2 + 1;
    else n /= 2;
  }
  return 0;
}

static inline int xc_num_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static inline int xc_num_digit(char c, int base) {
  int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : c >= 'A' && c <= 'Z' ? c - 'A' + 10 : 99;
  return d < base ? d : -1;
}

/* The magnitude of an integer in text, as strtoull reads it; *neg its sign, *end past it,
 * *over set if it passed max. */
static inline unsigned long long xc_num_parse(const char *s, char **end, int base, int *neg, unsigned long long max, int *over) {
  const char *p = s;
  while (xc_num_space(*p)) ++p;
  *neg = 0;
  if (*p == '+' || *p == '-') *neg = *p++ == '-';
  if ((base == 0 || base == 16) && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && xc_num_digit(p[2], 16) >= 0) p += 2, base = 16;
  else if (base == 0) base = *p == '0' ? 8 : 10;
  unsigned long long v = 0;
  const char *digits = p;
  *over = 0;
  for (int d; base >= 2 && base <= 36 && (d = xc_num_digit(*p, base)) >= 0; ++p) {
    if (v > (max - (unsigned)d) / (unsigned)base) *over = 1;
    else v = v * (unsigned)base + (unsigned)d;
  }
  if (end) *end = (char *)(p == digits ? s : p);
  return v;
}

static inline long long strtoll(const char *s, char **end, int base) {
  int neg, over;
  unsigned long long v = xc_num_parse(s, end, base, &neg, 9223372036854775808ull, &over);
  if (over || (!neg && v > 9223372036854775807ull)) return neg ? (-9223372036854775807ll - 1) : 9223372036854775807ll;
  return neg ? (long long)(0ull - v) : (long long)v;
}
static inline unsigned long long strtoull(const char *s, char **end, int base) {
  int neg, over;
  unsigned long long v = xc_num_parse(s, end, base, &neg, ~0ull, &over);
  if (over) return ~0ull;
  return neg ? 0ull - v : v;
}
static inline long strtol(const char *s, char **end, int base) { return (long)strtoll(s, end, base); }
static inline unsigned long strtoul(const char *s, char **end, int base) { return (unsigned long)strtoull(s, end, base); }
static inline int atoi(const char *s) { return (int)strtol(s, 0, 10); }
static inline long atol(const char *s) { return strtol(s, 0, 10); }
static inline long long atoll(const char *s) { return strtoll(s, 0, 10); }

/* Decimal text to a double: exact to about 15 significant digits (it scales by powers of ten
 * in double arithmetic; glibc rounds the exact decimal value), "inf", "infinity" and "nan". */
static inline double strtod(const char *s, char **end) {
  const char *p = s;
  while (xc_num_space(*p)) ++p;
  int neg = 0;
  if (*p == '+' || *p == '-') neg = *p++ == '-';
  double v = 0;
  if ((p[0] | 32) == 'i' && (p[1] | 32) == 'n' && (p[2] | 32) == 'f') {
    p += 3;
    if ((p[0] | 32) == 'i' && (p[1] | 32) == 'n' && (p[2] | 32) == 'i' && (p[3] | 32) == 't' && (p[4] | 32) == 'y') p += 5;
    if (end) *end = (char *)p;
    return neg ? -__builtin_inf() : __builtin_inf();
  }
  if ((p[0] | 32) == 'n' && (p[1] | 32) == 'a' && (p[2] | 32) == 'n') {
    if (end) *end = (char *)(p + 3);
    return __builtin_nan("");
  }
  int digits = 0, scale = 0;
  unsigned long long m = 0;
  for (; *p >= '0' && *p <= '9'; ++p, ++digits) {
    if (m < 100000000000000000ull) m = m * 10 + (unsigned)(*p - '0');
    else ++scale;
  }
  if (*p == '.') {
    ++p;
    for (; *p >= '0' && *p <= '9'; ++p, ++digits)
      if (m < 100000000000000000ull) m = m * 10 + (unsigned)(*p - '0'), --scale;
  }
  if (digits == 0) {
    if (end) *end = (char *)s;
    return 0;
  }
  if ((*p | 32) == 'e') {
    const char *e = p + 1;
    int eneg = 0, ev = 0, ed = 0;
    if (*e == '+' || *e == '-') eneg = *e++ == '-';
    for (; *e >= '0' && *e <= '9'; ++e, ++ed)
      if (ev < 100000) ev = ev * 10 + (*e - '0');
    if (ed) p = e, scale += eneg ? -ev : ev;
  }
  v = (double)m;
  /* 10^|scale| in steps a double holds exactly (10^22 is the last), so that one rounding
   * error comes from each step. */
  double p10 = 1;
  int k = scale < 0 ? -scale : scale;
  for (; k >= 22; k -= 22) {
    v = scale < 0 ? v / 1e22 : v * 1e22;
  }
  for (; k > 0; --k) p10 *= 10;
  v = scale < 0 ? v / p10 : v * p10;
  if (end) *end = (char *)p;
  return neg ? -v : v;
}
static inline double atof(const char *s) { return strtod(s, 0); }

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
