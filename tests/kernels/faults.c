/* Test kernels that misbehave on purpose: the loader must survive each of them. */
#include <xcargo/kernel.h>

XC_ENTRY int segfault(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile int *p = (volatile int *)(uintptr_t)in_len; /* in_len 0: a null pointer */
  *p = 1;
  return 0;
}

XC_ENTRY int trap(xc_ctx *ctx, const void *in, size_t in_len) {
  __builtin_trap();
}

XC_ENTRY int spin(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile uint64_t n = 0;
  for (;;) n++;
}

/* Spins for the u64 input's count of cycle-counter ticks (0: none) and replies it: a kernel
   of a set length whatever else runs on the machine. Two entries, each judged quick or not
   on its own (xcargo-batch-limit). */
static int spin_ticks(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t n = 0;
  if (in_len == 8) memcpy(&n, in, 8);
  const uint64_t t0 = __builtin_readcyclecounter();
  while (__builtin_readcyclecounter() - t0 < n) {
  }
  return xc_reply(ctx, &n, 8);
}
XC_ENTRY int ticks(xc_ctx *ctx, const void *in, size_t in_len) { return spin_ticks(ctx, in, in_len); }
XC_ENTRY int ticks_too(xc_ctx *ctx, const void *in, size_t in_len) { return spin_ticks(ctx, in, in_len); }

/* chatty: 20 xc_log lines (with a terminal escape and a direction override, which must reach
 * no terminal), returns 2. */
XC_ENTRY int chatty(xc_ctx *ctx, const void *in, size_t in_len) {
  char line[] = "step 00 of 20 \x1b[31m\xe2\x80\xae";
  for (int i = 0; i < 20; ++i) {
    line[5] = (char)('0' + i / 10);
    line[6] = (char)('0' + i % 10);
    xc_log(ctx, line);
  }
  return 2;
}

XC_ENTRY int ok(xc_ctx *ctx, const void *in, size_t in_len) {
  return xc_reply(ctx, "fine", 4);
}

XC_ENTRY int huge_reply(xc_ctx *ctx, const void *in, size_t in_len) {
  static const char block[4096];
  for (int i = 0; i < 1 << 20; ++i)
    if (xc_reply(ctx, block, sizeof block) != 0) return 7;
  return 0;
}

/* Replies n bytes (input: u64 n): for clients that do not read their replies. */
XC_ENTRY int sized_reply(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t n = 0;
  if (in_len == 8) memcpy(&n, in, 8);
  char *p = (char *)xc_alloc(ctx, n);
  if (!p) return 2;
  memset(p, 0x5a, n);
  return xc_reply(ctx, p, n);
}

/* Forwards its input to node 1's sized_reply, whose result then goes to the client's
 * address: for clients that do not read forwarded results. */
XC_ENTRY int reply_from_node1(xc_ctx *ctx, const void *in, size_t in_len) {
  return xc_forward(ctx, 1, "sized_reply", in, in_len) == 0 ? 0 : 2;
}

/* Burns about n * 2^20 loop iterations (input: u64 n), then replies; for concurrency tests. */
XC_ENTRY int burn(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t n = 0;
  if (in_len == 8) memcpy(&n, in, 8);
  volatile uint64_t acc = 0;
  for (uint64_t i = 0; i < (n << 20); ++i) acc += i;
  uint64_t out = acc;
  return xc_reply(ctx, &out, 8);
}

/* Replies "fine" for input u64 0 and crashes for anything else: quick until it is not. */
XC_ENTRY int crash_if(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t n = 0;
  if (in_len == 8) memcpy(&n, in, 8);
  if (n) *(volatile int *)0 = 1;
  return xc_reply(ctx, "fine", 4);
}

/* A gate in region "gate" (u64) that a test opens: open_gate writes its input (u64 token)
 * there. gated(token) spins until the gate holds its token, then replies it: a kernel surely
 * still running while the test does something else. burn_until_open(token) burns about a
 * millisecond (burn 1) unless the gate holds its token: a run of many requests that goes on
 * until the test opens the gate, then ends at once. */
static volatile uint64_t *gate(xc_ctx *ctx) { return (volatile uint64_t *)xc_region_create(ctx, "gate", 8); }
static uint64_t token_of(const void *in, size_t in_len) {
  uint64_t t = 0;
  if (in_len == 8) memcpy(&t, in, 8);
  return t;
}

XC_ENTRY int open_gate(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile uint64_t *g = gate(ctx);
  if (!g) return 2;
  *g = token_of(in, in_len);
  return xc_reply(ctx, "open", 4);
}

XC_ENTRY int gated(xc_ctx *ctx, const void *in, size_t in_len) {
  const uint64_t t = token_of(in, in_len);
  volatile uint64_t *g = gate(ctx);
  if (!g) return 2;
  while (*g != t) {
  }
  return xc_reply(ctx, &t, 8);
}

/* marked_gated(token) writes its token into region "mark" (u64), then waits as gated does:
 * once mark() replies the token, the kernel is surely running. */
XC_ENTRY int marked_gated(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile uint64_t *m = (volatile uint64_t *)xc_region_create(ctx, "mark", 8);
  if (!m) return 2;
  *m = token_of(in, in_len);
  return gated(ctx, in, in_len);
}

XC_ENTRY int mark(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile uint64_t *m = (volatile uint64_t *)xc_region_create(ctx, "mark", 8);
  if (!m) return 2;
  const uint64_t v = *m;
  return xc_reply(ctx, &v, 8);
}

XC_ENTRY int burn_until_open(xc_ctx *ctx, const void *in, size_t in_len) {
  const uint64_t t = token_of(in, in_len);
  volatile uint64_t *g = gate(ctx);
  if (!g) return 2;
  volatile uint64_t acc = 0;
  if (*g != t)
    for (uint64_t i = 0; i < (1u << 20); ++i) acc += i;
  return xc_reply(ctx, &t, 8);
}
