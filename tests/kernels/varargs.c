// Variadic functions as ordinary C writes them: a printf-style formatter into a buffer, a
// function taking a va_list, va_copy, and every type C passes through `...`. Its reply must
// be the same from every variant (engine_test.cpp).
#include <stdarg.h>
#include <xcargo/kernel.h>

struct out {
  char *p;
  size_t len, cap;
};

static void put(struct out *o, char c) {
  if (o->len + 1 < o->cap) o->p[o->len] = c;
  o->len++;
}

static void put_unsigned(struct out *o, unsigned long v, unsigned base) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  while (n) put(o, digits[--n]);
}

static void put_signed(struct out *o, long v) {
  if (v < 0) {
    put(o, '-');
    put_unsigned(o, 0ul - (unsigned long)v, 10);
  } else {
    put_unsigned(o, (unsigned long)v, 10);
  }
}

// %d %ld %u %x %c %s %f (fixed, 3 decimals) and %%.
static int format_v(char *buf, size_t cap, const char *f, va_list ap) {
  struct out o = {buf, 0, cap};
  for (; *f; ++f) {
    if (*f != '%') {
      put(&o, *f);
      continue;
    }
    switch (*++f) {
      case 'd': put_signed(&o, va_arg(ap, int)); break;
      case 'l': ++f; put_signed(&o, va_arg(ap, long)); break;
      case 'u': put_unsigned(&o, va_arg(ap, unsigned), 10); break;
      case 'x': put_unsigned(&o, va_arg(ap, unsigned), 16); break;
      case 'c': put(&o, (char)va_arg(ap, int)); break;
      case 's': for (const char *s = va_arg(ap, const char *); *s; ++s) put(&o, *s); break;
      case 'f': {
        double d = va_arg(ap, double);
        if (d < 0) put(&o, '-'), d = -d;
        long whole = (long)d;
        put_signed(&o, whole);
        put(&o, '.');
        long milli = (long)((d - (double)whole) * 1000.0 + 0.5);
        put(&o, (char)('0' + milli / 100 % 10)), put(&o, (char)('0' + milli / 10 % 10)), put(&o, (char)('0' + milli % 10));
        break;
      }
      default: put(&o, *f); break;
    }
  }
  if (cap) buf[o.len < cap ? o.len : cap - 1] = 0;
  return (int)o.len;
}

static int format(char *buf, size_t cap, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int n = format_v(buf, cap, f, ap);
  va_end(ap);
  return n;
}

// Sums its arguments twice, the second time through a copy of the list.
static long twice(int n, ...) {
  va_list ap, again;
  va_start(ap, n);
  va_copy(again, ap);
  long s = 0;
  for (int i = 0; i < n; ++i) s += va_arg(ap, long);
  for (int i = 0; i < n; ++i) s += va_arg(again, long);
  va_end(again);
  va_end(ap);
  return s;
}

XC_ENTRY int run(xc_ctx *ctx, const void *in, size_t in_len) {
  (void)in;
  char text[200];
  long big = -1234567890123l;
  int n = format(text, sizeof text, "%d|%ld|%u|%x|%c|%s|%f|%%|%d", -42, big, 4000000000u, 0xbeefu, 'Z', "str",
                 3.25 + (double)in_len, (int)twice(3, 1l, 20l, 300l));
  return xc_reply(ctx, text, (size_t)n);
}
