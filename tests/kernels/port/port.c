/* Existing C, as a port brings it: the standard headers a kernel may include (tests/e2e/port_test.sh). */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xcargo/kernel.h>

static bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

/* in: a word; reply: i64 of strlen * 1000 + strcmp's sign against "middle" * 100 + the primes below 100 */
XC_ENTRY int mix(xc_ctx *ctx, const void *in, size_t in_len) {
  size_t n = strnlen((const char *)in, in_len);
  char *word = (char *)xc_alloc(ctx, n + 1);
  if (word == NULL) return 1;
  memcpy(word, in, n);
  word[n] = '\0';
  int64_t primes = 0;
  for (int64_t i = 0; i < 100; ++i) primes += is_prime(i);
  int cmp = strcmp(word, "middle");
  int64_t r = (int64_t)strlen(word) * 1000 + (cmp < 0 ? -1 : cmp > 0) * 100 + primes + abs(-7) - labs(7L);
  if (INT_MAX != 2147483647 || DBL_EPSILON > 1e-15 || strchr(word, 'q') != NULL) r = -1;
  return xc_reply(ctx, &r, sizeof r);
}

/* reply: f64 of hypot(3, 4) + cos(M_PI) + (isnan(NAN) ? 10 : 0) + sqrt(2)^2 = 5 - 1 + 10 + 2 */
XC_ENTRY int geometry(xc_ctx *ctx, const void *in, size_t in_len) {
  double r = hypot(3.0, 4.0) + cos(M_PI) + (isnan(NAN) ? 10.0 : 0.0) + round(sqrt(2.0) * sqrt(2.0));
  return xc_reply(ctx, &r, sizeof r);
}
