/* <string.h> for kernels: memcpy, memmove, memset, memcmp and strlen come from the loader
 * (<xcargo/kernel.h>); the other common string functions are defined here, inline, so they
 * need nothing from it. */
#ifndef XCARGO_STRING_H
#define XCARGO_STRING_H

#include <xcargo/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline size_t strnlen(const char *s, size_t max) {
  size_t n = 0;
  while (n < max && s[n]) ++n;
  return n;
}

static inline int strncmp(const char *a, const char *b, size_t n) {
  for (; n; --n, ++a, ++b) {
    if (*a != *b) return (unsigned char)*a - (unsigned char)*b;
    if (!*a) return 0;
  }
  return 0;
}
static inline int strcmp(const char *a, const char *b) { return strncmp(a, b, (size_t)-1); }

static inline char *strchr(const char *s, int c) {
  for (;; ++s) {
    if (*s == (char)c) return (char *)s;
    if (!*s) return 0;
  }
}

static inline void *memchr(const void *s, int c, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  for (; n; --n, ++p)
    if (*p == (unsigned char)c) return (void *)p;
  return 0;
}

/* Copies at most size-1 bytes and always terminates (when size > 0); returns strlen(src). */
static inline size_t strlcpy(char *dst, const char *src, size_t size) {
  size_t n = strlen(src);
  if (size) {
    size_t k = n < size - 1 ? n : size - 1;
    memcpy(dst, src, k);
    dst[k] = 0;
  }
  return n;
}

#ifdef __cplusplus
}
#endif

#endif /* XCARGO_STRING_H */
