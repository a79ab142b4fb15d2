/* <stdio.h> for kernels: a kernel has no files or terminal. Output goes to the caller with
 * xc_reply(ctx, data, len), and a line to the node's log with xc_log(ctx, msg); the usual
 * stdio functions are declared unavailable and say so where a port calls them. Formatting
 * into a buffer (snprintf, vsnprintf) is defined here, inline: it needs nothing from the
 * loader. It follows C's printf for the flags - + space # 0, width and precision (also *),
 * the lengths hh h l ll j z t L and the conversions d i u o x X c s p f F e E g G %; a
 * floating-point value is printed as glibc prints it: its exact decimal expansion, rounded
 * to nearest with ties to even (at most 380 characters of digits). */
#ifndef XCARGO_STDIO_H
#define XCARGO_STDIO_H

#include <stdarg.h>
#include <xcargo/kernel.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct xc_no_file FILE;
#define XC_UNAVAILABLE_IO __attribute__((unavailable( \
    "a kernel has no files or terminal: xc_reply(ctx, data, len) answers the caller, xc_log(ctx, msg) logs a line")))

XC_UNAVAILABLE_IO int printf(const char *format, ...);
XC_UNAVAILABLE_IO int fprintf(FILE *f, const char *format, ...);
XC_UNAVAILABLE_IO int puts(const char *s);
XC_UNAVAILABLE_IO int putchar(int c);
XC_UNAVAILABLE_IO int fputs(const char *s, FILE *f);
XC_UNAVAILABLE_IO FILE *fopen(const char *path, const char *mode);
XC_UNAVAILABLE_IO size_t fread(void *p, size_t size, size_t n, FILE *f);
XC_UNAVAILABLE_IO size_t fwrite(const void *p, size_t size, size_t n, FILE *f);
XC_UNAVAILABLE_IO int fclose(FILE *f);
XC_UNAVAILABLE_IO extern FILE *stdin, *stdout, *stderr;
__attribute__((unavailable("sprintf cannot know the buffer's size: snprintf(s, size, format, ...)")))
int sprintf(char *s, const char *format, ...);

/* The formatter's state: what fits goes into p[0 .. cap-1), len counts all. */
struct xc_fmt_out {
  char *p;
  size_t cap, len;
};

static inline void xc_fmt_put(struct xc_fmt_out *o, char c) {
  if (o->len + 1 < o->cap) o->p[o->len] = c;
  o->len++;
}

static inline void xc_fmt_repeat(struct xc_fmt_out *o, char c, long n) {
  for (; n > 0; --n) xc_fmt_put(o, c);
}

/* One converted field: PREFIX (sign, 0x), ZEROS leading zeros, then BODY, padded to WIDTH. */
static inline void xc_fmt_field(struct xc_fmt_out *o, const char *prefix, long zeros, const char *body, long blen, long width,
                                int left, int zero_pad) {
  long plen = 0;
  while (prefix[plen]) ++plen;
  long pad = width - plen - zeros - blen;
  if (zero_pad && !left && pad > 0) zeros += pad, pad = 0;
  if (!left) xc_fmt_repeat(o, ' ', pad);
  for (long i = 0; i < plen; ++i) xc_fmt_put(o, prefix[i]);
  xc_fmt_repeat(o, '0', zeros);
  for (long i = 0; i < blen; ++i) xc_fmt_put(o, body[i]);
  if (left) xc_fmt_repeat(o, ' ', pad);
}

/* Digits of v in base (16 or less), at the end of buf[0 .. 24): returns where they start. */
static inline char *xc_fmt_digits(char *end, unsigned long long v, unsigned base, int upper) {
  const char *d = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  do {
    *--end = d[v % base];
    v /= base;
  } while (v);
  return end;
}

/* The exact decimal expansion of a finite double x >= 0, one digit at a time: the whole
 * part's digits (none if x < 1), then the fraction's. A double's whole part has at most 309
 * digits; its fraction, at most 1074 bits, is kept as frac / 2^(32 * fl). */
struct xc_fmt_dec {
  char whole[320];
  int nwhole, next; /* the whole part's digit count, and the next digit to give */
  unsigned frac[36]; /* 32-bit limbs, least significant first; frac[fl] takes each digit */
  int fl;
};

/* m < 2^53 shifted left by r < 32 bits into limbs w[0..3). */
static inline void xc_fmt_put_shifted(unsigned *w, unsigned long long m, int r) {
  unsigned long long lo = (m & 0xffffffffull) << r, hi = (m >> 32) << r;
  w[0] = (unsigned)lo;
  w[1] = (unsigned)(lo >> 32) | (unsigned)hi;
  w[2] = (unsigned)(hi >> 32);
}

static inline void xc_fmt_dec_init(struct xc_fmt_dec *d, double x) {
  unsigned long long bits;
  __builtin_memcpy(&bits, &x, sizeof bits);
  int biased = (int)(bits >> 52) & 0x7ff;
  unsigned long long m = bits & 0xfffffffffffffull;
  if (biased) m |= 1ull << 52;
  else biased = 1;
  const int e = biased - 1075; /* x = m * 2^e */
  unsigned w[36] = {0};        /* the whole part */
  int wl = 0;
  for (int i = 0; i < 36; ++i) d->frac[i] = 0;
  d->fl = 0;
  if (e >= 0) {
    xc_fmt_put_shifted(w + e / 32, m, e % 32);
    wl = e / 32 + 3;
  } else {
    const int s = -e; /* fraction bits, 1 .. 1074 */
    if (s < 64) {
      w[0] = (unsigned)(m >> s);
      w[1] = (unsigned)((m >> s) >> 32);
      wl = 2;
      m &= (1ull << s) - 1;
    }
    d->fl = (s + 31) / 32;
    xc_fmt_put_shifted(d->frac, m, d->fl * 32 - s);
  }
  char rev[320];
  int n = 0;
  while (wl > 0 && w[wl - 1] == 0) --wl;
  while (wl > 0) { /* nine digits at a time: the remainder of a division by 10^9 */
    unsigned long long rem = 0;
    for (int i = wl - 1; i >= 0; --i) {
      const unsigned long long cur = (rem << 32) | w[i];
      w[i] = (unsigned)(cur / 1000000000u);
      rem = cur % 1000000000u;
    }
    while (wl > 0 && w[wl - 1] == 0) --wl;
    for (int k = 0; k < 9; ++k, rem /= 10) rev[n++] = (char)('0' + rem % 10);
  }
  while (n > 0 && rev[n - 1] == '0') --n;
  for (int i = 0; i < n; ++i) d->whole[i] = rev[n - 1 - i];
  d->nwhole = n;
  d->next = 0;
}

static inline int xc_fmt_dec_digit(struct xc_fmt_dec *d) {
  if (d->next < d->nwhole) return d->whole[d->next++] - '0';
  unsigned long long carry = 0;
  for (int i = 0; i < d->fl; ++i) {
    const unsigned long long v = (unsigned long long)d->frac[i] * 10 + carry;
    d->frac[i] = (unsigned)v;
    carry = v >> 32;
  }
  return (int)carry;
}

/* Whether a nonzero digit is still to come. */
static inline int xc_fmt_dec_more(const struct xc_fmt_dec *d) {
  for (int i = d->next; i < d->nwhole; ++i)
    if (d->whole[i] != '0') return 1;
  for (int i = 0; i < d->fl; ++i)
    if (d->frac[i]) return 1;
  return 0;
}

/* Rounds buf[0 .. n) (digits, perhaps with a '.') to nearest, ties to even, given what the
 * expansion holds after it: returns 1 if a carry left the first digit (all zeros now). */
static inline int xc_fmt_dec_round(char *buf, long n, struct xc_fmt_dec *d) {
  long last = n - 1;
  if (buf[last] == '.') --last;
  const int next = xc_fmt_dec_digit(d);
  if (!(next > 5 || (next == 5 && (xc_fmt_dec_more(d) || ((buf[last] - '0') & 1))))) return 0;
  for (long i = last; i >= 0; --i) {
    if (buf[i] == '.') continue;
    if (buf[i] != '9') {
      ++buf[i];
      return 0;
    }
    buf[i] = '0';
  }
  return 1;
}

/* The decimal digits of x >= 0 with PREC digits after the point (up to 380 characters in
 * all), into buf (at least 400 bytes): returns the count. */
static inline long xc_fmt_fixed(char *buf, double x, int prec, int point) {
  struct xc_fmt_dec d;
  xc_fmt_dec_init(&d, x);
  long n = 0;
  if (d.nwhole == 0) buf[n++] = '0';
  for (; d.next < d.nwhole; ++d.next) buf[n++] = d.whole[d.next];
  if (prec > 0 || point) buf[n++] = '.';
  for (int i = 0; i < prec && n < 380; ++i) buf[n++] = (char)('0' + xc_fmt_dec_digit(&d));
  if (xc_fmt_dec_round(buf, n, &d)) {
    for (long i = n; i > 0; --i) buf[i] = buf[i - 1];
    buf[0] = '1';
    ++n;
  }
  return n;
}

/* x >= 0 as d.ddd with PREC digits after the point: the mantissa's digits into buf, the
 * exponent in *exp. */
static inline long xc_fmt_mantissa(char *buf, double x, int prec, int point, int *exp) {
  struct xc_fmt_dec d;
  xc_fmt_dec_init(&d, x);
  int e = 0, first = 0;
  if (x != 0) {
    if (d.nwhole > 0) {
      e = d.nwhole - 1;
      first = xc_fmt_dec_digit(&d);
    } else {
      for (e = -1; (first = xc_fmt_dec_digit(&d)) == 0; --e) {}
    }
  }
  long n = 0;
  buf[n++] = (char)('0' + first);
  if (prec > 0 || point) buf[n++] = '.';
  for (int i = 0; i < prec && n < 380; ++i) buf[n++] = (char)('0' + xc_fmt_dec_digit(&d));
  if (xc_fmt_dec_round(buf, n, &d)) { /* 9.99 became 0.00: 1.00 with the exponent one more */
    buf[0] = '1';
    ++e;
  }
  *exp = e;
  return n;
}

static inline int vsnprintf(char *s, size_t size, const char *f, va_list ap) {
  struct xc_fmt_out o = {s, size, 0};
  for (; *f; ++f) {
    if (*f != '%') {
      xc_fmt_put(&o, *f);
      continue;
    }
    int left = 0, plus = 0, space = 0, alt = 0, zero = 0;
    for (;; ++f) {
      char c = f[1];
      if (c == '-') left = 1;
      else if (c == '+') plus = 1;
      else if (c == ' ') space = 1;
      else if (c == '#') alt = 1;
      else if (c == '0') zero = 1;
      else break;
    }
    ++f;
    long width = 0, prec = -1;
    if (*f == '*') {
      width = va_arg(ap, int);
      if (width < 0) left = 1, width = -width;
      ++f;
    } else {
      while (*f >= '0' && *f <= '9') width = width * 10 + (*f++ - '0');
    }
    if (*f == '.') {
      ++f;
      prec = 0;
      if (*f == '*') {
        prec = va_arg(ap, int);
        ++f;
      } else {
        while (*f >= '0' && *f <= '9') prec = prec * 10 + (*f++ - '0');
      }
    }
    int size_mod = 0; /* 1 hh, 2 h, 3 l, 4 ll (and j, z, t) */
    if (*f == 'h') size_mod = f[1] == 'h' ? (++f, 1) : 2, ++f;
    else if (*f == 'l') size_mod = f[1] == 'l' ? (++f, 4) : 3, ++f;
    else if (*f == 'j' || *f == 'z' || *f == 't') size_mod = 4, ++f;
    else if (*f == 'L') ++f;
    char c = *f, tmp[24], num[400];
    if (!c) break;
    switch (c) {
      case 'd':
      case 'i': {
        long long v = size_mod >= 3 ? va_arg(ap, long long) : va_arg(ap, int);
        if (size_mod == 1) v = (signed char)v;
        if (size_mod == 2) v = (short)v;
        unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
        char *d = prec == 0 && u == 0 ? tmp + 24 : xc_fmt_digits(tmp + 24, u, 10, 0);
        long len = tmp + 24 - d;
        const char *sign = v < 0 ? "-" : plus ? "+" : space ? " " : "";
        xc_fmt_field(&o, sign, prec > len ? prec - len : 0, d, len, width, left, zero && prec < 0);
        break;
      }
      case 'u':
      case 'o':
      case 'x':
      case 'X':
      case 'p': {
        unsigned long long u = c == 'p' ? (unsigned long long)(uintptr_t)va_arg(ap, void *)
                               : size_mod >= 3 ? va_arg(ap, unsigned long long) : va_arg(ap, unsigned);
        if (size_mod == 1) u = (unsigned char)u;
        if (size_mod == 2) u = (unsigned short)u;
        unsigned base = c == 'u' ? 10 : c == 'o' ? 8 : 16;
        char *d = prec == 0 && u == 0 ? tmp + 24 : xc_fmt_digits(tmp + 24, u, base, c == 'X');
        long len = tmp + 24 - d;
        const char *prefix = (c == 'p' || (alt && u && c == 'x')) ? "0x" : (alt && u && c == 'X') ? "0X" : "";
        long zeros = prec > len ? prec - len : 0;
        if (alt && c == 'o' && zeros == 0 && (len == 0 || *d != '0')) zeros = 1;
        xc_fmt_field(&o, prefix, zeros, d, len, width, left, zero && prec < 0);
        break;
      }
      case 'c':
        tmp[0] = (char)va_arg(ap, int);
        xc_fmt_field(&o, "", 0, tmp, 1, width, left, 0);
        break;
      case 's': {
        const char *str = va_arg(ap, const char *);
        if (!str) str = "(null)";
        long len = 0;
        while ((prec < 0 || len < prec) && str[len]) ++len;
        xc_fmt_field(&o, "", 0, str, len, width, left, 0);
        break;
      }
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G': {
        double x = va_arg(ap, double);
        const int neg = __builtin_signbit(x) != 0;
        if (neg) x = -x;
        const char *sign = neg ? "-" : plus ? "+" : space ? " " : "";
        const int upper = c == 'F' || c == 'E' || c == 'G';
        if (x != x || x == __builtin_inf()) {
          xc_fmt_field(&o, sign, 0, x != x ? (upper ? "NAN" : "nan") : (upper ? "INF" : "inf"), 3, width, left, 0);
          break;
        }
        if (prec < 0) prec = 6;
        long len;
        int exp = 0, as_exp = c == 'e' || c == 'E';
        if (c == 'g' || c == 'G') {
          int p = prec == 0 ? 1 : (int)prec;
          xc_fmt_mantissa(num, x, p - 1, 0, &exp);
          as_exp = !(exp >= -4 && exp < p);
          prec = as_exp ? p - 1 : p - 1 - exp;
        }
        if (as_exp) {
          len = xc_fmt_mantissa(num, x, (int)prec, alt, &exp);
        } else {
          len = xc_fmt_fixed(num, x, (int)prec, alt);
        }
        if ((c == 'g' || c == 'G') && !alt) { /* no trailing zeros, nor a bare point */
          long point = 0;
          while (point < len && num[point] != '.') ++point;
          if (point < len) {
            while (len > point && num[len - 1] == '0') --len;
            if (len == point + 1) --len;
          }
        }
        if (as_exp) {
          num[len++] = upper ? 'E' : 'e';
          num[len++] = exp < 0 ? '-' : '+';
          char *d = xc_fmt_digits(tmp + 24, (unsigned long long)(exp < 0 ? -exp : exp), 10, 0);
          if (tmp + 24 - d < 2) num[len++] = '0';
          while (d < tmp + 24) num[len++] = *d++;
        }
        xc_fmt_field(&o, sign, 0, num, len, width, left, zero);
        break;
      }
      case '%': xc_fmt_put(&o, '%'); break;
      default: xc_fmt_put(&o, '%'), xc_fmt_put(&o, c); break; /* not a conversion: shown as written */
    }
  }
  if (size) s[o.len < size ? o.len : size - 1] = 0;
  return (int)o.len;
}

static inline int snprintf(char *s, size_t size, const char *format, ...) __attribute__((format(printf, 3, 4)));
static inline int snprintf(char *s, size_t size, const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  int n = vsnprintf(s, size, format, ap);
  va_end(ap);
  return n;
}

#undef XC_UNAVAILABLE_IO

#ifdef __cplusplus
}
#endif

#endif /* XCARGO_STDIO_H */
