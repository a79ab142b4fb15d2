/* Kernels that attack the node on purpose (tests/e2e/adversary_test.sh): system calls made
 * by the kernel's own instructions, past the import allow-list; stack overflow; allocation
 * past the limits; wild writes into the loader's memory. Each must be stopped with a clear
 * error while the node keeps serving. */
#include <xcargo/kernel.h>

/* A system call made by this code itself, not through the C library. */
static long raw_syscall(long nr, long a, long b, long c) {
#if defined(__x86_64__)
  long ret;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = nr;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
#else
  (void)nr, (void)a, (void)b, (void)c;
  return -38; /* portable bitcode has no system calls to make */
#endif
}

#if defined(__aarch64__)
enum { NR_OPENAT = 56, NR_SOCKET = 198, NR_EXECVE = 221, NR_PTRACE = 117, NR_GETPID = 172 };
#else
enum { NR_OPENAT = 257, NR_SOCKET = 41, NR_EXECVE = 59, NR_PTRACE = 101, NR_GETPID = 39 };
#endif

/* Each replies with what the call returned, if it returns at all. */
static int reply_long(xc_ctx *ctx, long v) { return xc_reply(ctx, &v, sizeof v); }

XC_ENTRY int sys_open(xc_ctx *ctx, const void *in, size_t in_len) {
  return reply_long(ctx, raw_syscall(NR_OPENAT, -100 /* AT_FDCWD */, (long)"/etc/passwd", 0));
}

XC_ENTRY int sys_socket(xc_ctx *ctx, const void *in, size_t in_len) {
  return reply_long(ctx, raw_syscall(NR_SOCKET, 2 /* AF_INET */, 1 /* SOCK_STREAM */, 0));
}

XC_ENTRY int sys_execve(xc_ctx *ctx, const void *in, size_t in_len) {
  static const char *argv[] = {"/bin/sh", "-c", "touch /tmp/xcargo-pwned", 0};
  return reply_long(ctx, raw_syscall(NR_EXECVE, (long)argv[0], (long)argv, 0));
}

XC_ENTRY int sys_ptrace(xc_ctx *ctx, const void *in, size_t in_len) {
  return reply_long(ctx, raw_syscall(NR_PTRACE, 0 /* PTRACE_TRACEME */, 0, 0));
}

/* Even a harmless call is refused: kernels make none of their own. */
XC_ENTRY int sys_getpid(xc_ctx *ctx, const void *in, size_t in_len) {
  return reply_long(ctx, raw_syscall(NR_GETPID, 0, 0, 0));
}

static int deep(volatile char *up, uint64_t n) {
  volatile char frame[1024];
  frame[0] = up ? up[0] + 1 : 0;
  if (n == 0) return frame[0];
  return deep(frame, n - 1) + frame[1023 & n]; /* not a tail call */
}

/* Recurses 2^40 levels: the stack runs out long before. */
XC_ENTRY int stack_overflow(xc_ctx *ctx, const void *in, size_t in_len) {
  return reply_long(ctx, deep(0, 1ull << 40));
}

/* Takes 64 MiB blocks from xc_alloc until it says no; replies how many MiB it got. */
XC_ENTRY int alloc_all(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t mib = 0;
  for (;;) {
    volatile char *p = xc_alloc(ctx, 64u << 20);
    if (!p) break;
    p[0] = 1; /* touch a page of each */
    mib += 64;
  }
  return xc_reply(ctx, &mib, sizeof mib);
}

/* Writes into the loader's code (the xc_reply function). */
XC_ENTRY int wild_code(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)&xc_reply;
  p[0] = 0xcc;
  return xc_reply(ctx, "unharmed", 8);
}

/* Writes through the context pointer, as if it were the loader's state. */
XC_ENTRY int wild_ctx(xc_ctx *ctx, const void *in, size_t in_len) {
  volatile uint64_t *p = (volatile uint64_t *)ctx;
  for (int i = 0; i < 64; ++i) p[i] = 0x4141414141414141ull;
  return xc_reply(ctx, "unharmed", 8);
}

/* Writes to an address far from anything mapped. */
XC_ENTRY int wild_far(xc_ctx *ctx, const void *in, size_t in_len) {
  *(volatile uint64_t *)(uintptr_t)0x7ead00000000ull = 1;
  return xc_reply(ctx, "unharmed", 8);
}

/* Forwards to the next node forever: the hop limit stops it. */
XC_ENTRY int cycle(xc_ctx *ctx, const void *in, size_t in_len) {
  uint32_t next = (xc_node_id(ctx) + 1) % xc_node_count(ctx);
  return xc_forward(ctx, next, "cycle", in, in_len);
}

XC_ENTRY int ok(xc_ctx *ctx, const void *in, size_t in_len) { return xc_reply(ctx, "fine", 4); }
