/* Kernels that attack the node on purpose (tests/e2e/adversary_test.sh): system calls made
 * by the kernel's own instructions, past the import allow-list, or through the C library's
 * syscall() (escape_*); stack overflow; allocation past the limits; wild writes into the
 * loader's memory. Each must be stopped with a clear error while the node keeps serving. */
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
enum { NR_OPENAT = 56, NR_SOCKET = 198, NR_EXECVE = 221, NR_PTRACE = 117, NR_GETPID = 172, NR_GETPPID = 173,
       NR_KILL = 129, NR_PROCESS_VM_READV = 270, NR_CLOSE = 57, NR_CLONE = 220, NR_EXIT_GROUP = 94,
       NR_GETSOCKOPT = 209, NR_PWRITE64 = 68, NR_READLINKAT = 78, NR_TGKILL = 131, NR_GETTID = 178,
       NR_RT_SIGACTION = 134, NR_FCNTL = 25, NR_PRLIMIT64 = 261, NR_PRCTL = 167,
       NR_SHUTDOWN = 210, NR_SHMGET = 194, NR_SHMAT = 196, NR_SHMDT = 197, NR_READ = 63, NR_FTRUNCATE = 46, NR_SOCKETPAIR = 199, NR_WRITE = 64,
       NR_RT_SIGPROCMASK = 135, NR_CONNECT = 203, NR_BIND = 200, NR_SENDTO = 206, NR_SENDMSG = 211 };
#else
enum { NR_OPENAT = 257, NR_SOCKET = 41, NR_EXECVE = 59, NR_PTRACE = 101, NR_GETPID = 39, NR_GETPPID = 110,
       NR_KILL = 62, NR_PROCESS_VM_READV = 310, NR_CLOSE = 3, NR_CLONE = 56, NR_EXIT_GROUP = 231,
       NR_GETSOCKOPT = 55, NR_PWRITE64 = 18, NR_READLINKAT = 267, NR_TGKILL = 234, NR_GETTID = 186,
       NR_RT_SIGACTION = 13, NR_FCNTL = 72, NR_PRLIMIT64 = 302, NR_PRCTL = 157,
       NR_SHUTDOWN = 48, NR_SHMGET = 29, NR_SHMAT = 30, NR_SHMDT = 67, NR_READ = 0, NR_FTRUNCATE = 77, NR_SOCKETPAIR = 53, NR_WRITE = 1,
       NR_RT_SIGPROCMASK = 14, NR_CONNECT = 42, NR_BIND = 49, NR_SENDTO = 44, NR_SENDMSG = 46 };
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

/* The escape_* kernels call the C library's syscall(), found through the loader's own pointer
 * to it: their input is where that pointer lies, as an offset from xc_reply (both in the
 * loader's file, so the same in every worker whatever its address layout; tests/e2e/lib.sh,
 * syscall_slot). Code loaded from a file, so the filter on where system calls come from lets
 * them through, and only the allow-list, the file rules and the supervisor's protection stand
 * in the way. Each replies with what the call returned: -1 is a refusal (syscall() keeps the
 * reason in errno). */
typedef long (*syscall_fn)(long, ...);

static syscall_fn libc_syscall(const void *in, size_t in_len) {
  uint64_t slot = 0;
  for (size_t i = 0; i < 8 && i < in_len; ++i) slot |= (uint64_t)((const unsigned char *)in)[i] << (8 * i);
  return *(syscall_fn *)((const char *)&xc_reply + slot);
}

/* "/proc/PID/NAME" */
static void proc_path(char *out, long pid, const char *name) {
  const char *pre = "/proc/";
  char digits[24];
  int n = 0;
  while (*pre) *out++ = *pre++;
  do digits[n++] = (char)('0' + pid % 10); while ((pid /= 10) > 0);
  while (n) *out++ = digits[--n];
  *out++ = '/';
  while (*name) *out++ = *name++;
  *out = 0;
}

struct iovec_ { void *base; size_t len; };

/* Reads 8 bytes of the supervisor (the worker's parent; same addresses, it forked the worker). */
XC_ENTRY int escape_vm_read(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  uint64_t got = 0;
  struct iovec_ local = {&got, sizeof got}, remote = {(void *)sys, sizeof got};
  return reply_long(ctx, sys(NR_PROCESS_VM_READV, sys(NR_GETPPID), &local, 1L, &remote, 1L, 0L));
}

/* Input: syscall()'s slot (libc_syscall), then a u64 flag. Flag 0: replies at once (quick). Flag 1:
   blocks the time-out signal (SIGUSR1) in its thread, then spins: the monitor's signal
   cannot stop it, and the worker is ended once its grace has passed. */
XC_ENTRY int hang_blocked(xc_ctx *ctx, const void *in, size_t in_len) {
  uint64_t flag = 0;
  if (in_len >= 16) memcpy(&flag, (const char *)in + 8, 8);
  if (flag == 1) {
    syscall_fn sys = libc_syscall(in, in_len);
    uint64_t set = 1ull << (10 - 1); /* SIGUSR1 */
    volatile uint64_t n = 0;
    if (sys(NR_RT_SIGPROCMASK, 0L /* SIG_BLOCK */, &set, 0L, 8L) == 0)
      for (;;) n++;
    return 7;
  }
  return xc_reply(ctx, &flag, 8);
}

XC_ENTRY int escape_kill(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  return reply_long(ctx, sys(NR_KILL, sys(NR_GETPPID), 0L)); /* signal 0: may it signal at all */
}

XC_ENTRY int escape_ptrace(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  return reply_long(ctx, sys(NR_PTRACE, 16L /* PTRACE_ATTACH */, sys(NR_GETPPID), 0L, 0L));
}

/* A thread of its own, through library code, that would outlive this run (and a revocation of
 * its cargo): clone as pthread_create makes it. On its own small stack; if it ever started, it
 * would crash the worker, and the test would see that. */
/* Its own worker ended as a clean stop ends it (exit status 0): by SIGTERM to itself, or by
 * exit_group(0). The supervisor must replace the worker, not take it for a stop of the loader
 * (an attacker helper stopped a whole loader so). */
XC_ENTRY int escape_term_self(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  return reply_long(ctx, sys(NR_KILL, sys(NR_GETPID), 15L));
}
/* SIGSTOP to its own thread: the worker, its monitor and its probe frozen, the node deaf until
 * an admin sent SIGCONT (attacker helper, 2026-11-26). The sandbox refuses it. */
XC_ENTRY int escape_sigstop(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  return reply_long(ctx, sys(NR_TGKILL, sys(NR_GETPID), sys(NR_GETTID), 19L));
}
/* What the sandbox lets through, made harmless: SIGSEGV and the time-out signal sent to its own
 * thread (sent to another executor's, they failed that kernel in its stead: ignored, 0 each);
 * SIGSEGV's handler reset to the default (a later crash then killed the worker outright: -1).
 * Replies their sum: -1. */
XC_ENTRY int escape_signals(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  const long pid = sys(NR_GETPID), tid = sys(NR_GETTID);
  long r = sys(NR_TGKILL, pid, tid, 11L) + sys(NR_TGKILL, pid, tid, 10L);
  long act[4] = {0, 0, 0, 0}; /* SIG_DFL, no flags, no restorer, an empty mask */
  r += sys(NR_RT_SIGACTION, 11L, (long)act, 0L, 8L);
  return reply_long(ctx, r);
}
/* A descriptor's events signalled with SIGSTOP (F_SETSIG), another way to freeze the worker:
 * the sandbox refuses it. */
XC_ENTRY int escape_setsig(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  return reply_long(ctx, sys(NR_FCNTL, 0L, 10L /* F_SETSIG */, 19L));
}
/* The supervisor's limits (the same user's process): its file size limit set to 0 killed it at
 * its next log line, the loader down for good (attacker helper, 2026-11-26). Refused. */
XC_ENTRY int escape_prlimit(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  unsigned long limit[2] = {0, 0};
  return reply_long(ctx, sys(NR_PRLIMIT64, sys(NR_GETPPID), 1L /* RLIMIT_FSIZE */, (long)limit, 0L));
}
/* Its own worker's address-space limit lowered: every later large allocation failed, for every
 * client, until the worker restarted for another reason (attacker helper). Refused. */
XC_ENTRY int escape_prlimit_self(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  unsigned long limit[2] = {64ul << 20, ~0ul};
  return reply_long(ctx, sys(NR_PRLIMIT64, 0L, 9L /* RLIMIT_AS */, (long)limit, 0L));
}
/* Calls `call`(fd, arg) on each descriptor of its worker that is a socket whose SOL_SOCKET
 * option `option` reads `value`; replies how many of those calls succeeded. */
static int on_sockets(xc_ctx *ctx, syscall_fn sys, long option, int value, long call, long arg) {
  long done = 0;
  for (long fd = 3; fd < 1024; ++fd) {
    int got = 0;
    unsigned int len = sizeof got;
    if (sys(NR_GETSOCKOPT, fd, 1L /* SOL_SOCKET */, option, (long)&got, (long)&len) == 0 && got == value)
      done += sys(call, fd, arg) == 0;
  }
  return reply_long(ctx, done);
}
/* Every Unix socket of its worker shut down: the connection to the compile service among them
 * (every later bitcode push failed until the worker restarted for another reason; attacker
 * helper). Replies how many it shut down. */
XC_ENTRY int escape_cut_compiler(xc_ctx *ctx, const void *in, size_t in_len) {
  return on_sockets(ctx, libc_syscall(in, in_len), 39L /* SO_DOMAIN */, 1 /* AF_UNIX */, NR_SHUTDOWN, 2L /* SHUT_RDWR */);
}
/* Its stdout and stderr truncated: a loader started with its stderr on a file (as scripts/cluster
 * starts them) gave that file to its workers, and a kernel emptied the log (attacker helper).
 * Replies what the second call returned: -1 when stderr is a pipe of its own. */
XC_ENTRY int escape_truncate_log(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  sys(NR_FTRUNCATE, 1L, 0L);
  return reply_long(ctx, sys(NR_FTRUNCATE, 2L, 0L));
}
/* Terminal control written to its stderr: the loader's stderr may be an admin's terminal,
 * where an OSC 52 sequence sets the clipboard (attacker helper). Replies what write returned. */
XC_ENTRY int escape_terminal(xc_ctx *ctx, const void *in, size_t in_len) {
  static const char text[] = "\033]52;c;eGNhcmdv\007\033[2J xcargo-terminal-marker\n";
  return reply_long(ctx, libc_syscall(in, in_len)(NR_WRITE, 2L, (long)text, (long)(sizeof text - 1)));
}
/* A Unix socket of its own, to pass its worker's connection to the key service to a process
 * outside the loader, which then had the node key sign for it after the worker had ended
 * (attacker helper, 2026-11-27). Replies -1 if both socket() and socketpair() are refused. */
XC_ENTRY int escape_unix_socket(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  int pair[2];
  const long s = sys(NR_SOCKET, 1L /* AF_UNIX */, 1L /* SOCK_STREAM */, 0L);
  const long p = sys(NR_SOCKETPAIR, 1L, 5L /* SOCK_SEQPACKET */, 0L, (long)pair);
  return reply_long(ctx, s == -1 && p == -1 ? -1 : s);
}
/* Sockets of a kernel's own, through libc's syscall() (input: its slot, libc_syscall). Without
 * trusted-network each call traps: the node answers `sandbox` and replaces the worker. */
static int own_socket(xc_ctx *ctx, const void *in, size_t in_len, long family, long type) {
  return reply_long(ctx, libc_syscall(in, in_len)(NR_SOCKET, family, type, 0L));
}
XC_ENTRY int escape_socket4(xc_ctx *ctx, const void *in, size_t in_len) { return own_socket(ctx, in, in_len, 2 /* AF_INET */, 1); }
XC_ENTRY int escape_socket6(xc_ctx *ctx, const void *in, size_t in_len) { return own_socket(ctx, in, in_len, 10 /* AF_INET6 */, 2 /* SOCK_DGRAM */); }
XC_ENTRY int escape_netlink(xc_ctx *ctx, const void *in, size_t in_len) { return own_socket(ctx, in, in_len, 16 /* AF_NETLINK */, 3 /* SOCK_RAW */); }
XC_ENTRY int escape_packet(xc_ctx *ctx, const void *in, size_t in_len) { return own_socket(ctx, in, in_len, 17 /* AF_PACKET */, 3); }
/* connect() and bind() on a descriptor the worker has (0 here: which one does not matter to
 * the filter, which refuses the call itself). */
struct sockaddr_in_ { unsigned short family, port; unsigned int addr; unsigned char zero[8]; };
XC_ENTRY int escape_connect(xc_ctx *ctx, const void *in, size_t in_len) {
  struct sockaddr_in_ a = {2, 0x0100 /* port 1 */, 0x0100007f /* 127.0.0.1 */, {0}};
  return reply_long(ctx, libc_syscall(in, in_len)(NR_CONNECT, 0L, (long)&a, (long)sizeof a));
}
XC_ENTRY int escape_bind(xc_ctx *ctx, const void *in, size_t in_len) {
  struct sockaddr_in_ a = {2, 0, 0x0100007f, {0}};
  return reply_long(ctx, libc_syscall(in, in_len)(NR_BIND, 0L, (long)&a, (long)sizeof a));
}
/* With trusted-network: a TCP port bound by a kernel (input: syscall()'s slot (libc_syscall), then the
 * port): Landlock refuses it (-1), as it would another loader's port. Replies bind's result. */
XC_ENTRY int escape_bind4(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  uint64_t port = 0;
  for (size_t i = 8; i < 16 && i < in_len; ++i) port |= (uint64_t)((const unsigned char *)in)[i] << (8 * (i - 8));
  const long fd = sys(NR_SOCKET, 2L, 1L, 0L);
  if (fd < 0) return reply_long(ctx, fd);
  struct sockaddr_in_ a = {2, (unsigned short)(((port & 0xff) << 8) | ((port >> 8) & 0xff)), 0x0100007f, {0}};
  const long r = sys(NR_BIND, fd, (long)&a, (long)sizeof a);
  sys(NR_CLOSE, fd);
  return reply_long(ctx, r);
}
/* A datagram socket (UDP, which no port rule covers): refused with trusted-network too. */
XC_ENTRY int escape_udp(xc_ctx *ctx, const void *in, size_t in_len) { return own_socket(ctx, in, in_len, 2, 2 /* SOCK_DGRAM */); }
/* sendto with MSG_FASTOPEN, which connects a TCP socket (one the keeper passed while it
 * connected, once reset) to the address given, without connect(): refused in every mode. */
XC_ENTRY int escape_fastopen(xc_ctx *ctx, const void *in, size_t in_len) {
  struct sockaddr_in_ a = {2, 0x0100, 0x0100007f, {0}};
  return reply_long(ctx, libc_syscall(in, in_len)(NR_SENDTO, 0L, (long)"x", 1L, 0x20000000L /* MSG_FASTOPEN */, (long)&a, (long)sizeof a));
}
/* sendmsg, which carries descriptors (SCM_RIGHTS) out through UCX's wake-up datagram socket to
 * any process of this host: refused without trusted-network (on any descriptor). */
XC_ENTRY int escape_pass_fd(xc_ctx *ctx, const void *in, size_t in_len) {
  long m[8] = {0};  /* an empty struct msghdr */
  return reply_long(ctx, libc_syscall(in, in_len)(NR_SENDMSG, 0L, (long)m, 0L));
}
/* What a kernel reaches with trusted-network: a TCP connection of its own to 127.0.0.1:PORT
 * (input: syscall()'s slot (libc_syscall), then the port), where it writes "reached". Replies 0 if it
 * connected and wrote, else the failing call's result. */
XC_ENTRY int escape_reach(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  uint64_t port = 0;
  for (size_t i = 8; i < 16 && i < in_len; ++i) port |= (uint64_t)((const unsigned char *)in)[i] << (8 * (i - 8));
  const long fd = sys(NR_SOCKET, 2L, 1L, 0L);
  if (fd < 0) return reply_long(ctx, fd);
  struct sockaddr_in_ a = {2, (unsigned short)(((port & 0xff) << 8) | ((port >> 8) & 0xff)), 0x0100007f, {0}};
  long r = sys(NR_CONNECT, fd, (long)&a, (long)sizeof a);
  if (r == 0) r = sys(NR_WRITE, fd, (long)"reached", 7L) == 7 ? 0 : -2;
  sys(NR_CLOSE, fd);
  return reply_long(ctx, r);
}
/* Its worker's connection to the key service shut down (the one SOCK_SEQPACKET socket): every
 * later client's hello would fail. Replies how many it shut down. */
XC_ENTRY int escape_cut_keys(xc_ctx *ctx, const void *in, size_t in_len) {
  return on_sockets(ctx, libc_syscall(in, in_len), 3L /* SO_TYPE */, 5 /* SOCK_SEQPACKET */, NR_SHUTDOWN, 2L /* SHUT_RDWR */);
}
/* The same connection shut down for writing only: the key service's end then read as ready
 * for ever, and it spun on a core until the next hello ended the worker (attacker helper). */
XC_ENTRY int escape_shutwr_keys(xc_ctx *ctx, const void *in, size_t in_len) {
  return on_sockets(ctx, libc_syscall(in, in_len), 3L /* SO_TYPE */, 5 /* SOCK_SEQPACKET */, NR_SHUTDOWN, 1L /* SHUT_WR */);
}
/* The node's private key, looked for in the worker's own memory (an attacker helper found the
 * OpenSSL key object there and replied its 32 private bytes: anyone could then prove the node's
 * key). Input: syscall()'s slot (libc_syscall), then the private key and the public key, each 32 bytes
 * XORed with 0x5a, so that neither is in memory whole but where the worker put it. Scans
 * every readable private anonymous mapping up to 1 GiB, the heap and the stacks, at every
 * byte. Replies how many copies of the private key it found, or -1 if it found no copy of the
 * public key (which the worker holds: then the scan itself failed). */
static int64_t count_masked(uint64_t lo, uint64_t hi, const unsigned char *masked) {
  int64_t hits = 0;
  const unsigned char first = masked[0] ^ 0x5a;
  for (const unsigned char *c = (const unsigned char *)lo; c + 32 <= (const unsigned char *)hi; ++c) {
    if (*c != first) continue;
    int k = 1;
    while (k < 32 && c[k] == (unsigned char)(masked[k] ^ 0x5a)) ++k;
    hits += k == 32;
  }
  return hits;
}
static uint64_t hex_at(const char **s) {
  uint64_t v = 0;
  for (;; ++*s) {
    const char c = **s;
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return v;
    v = v * 16 + (uint64_t)d;
  }
}
/* Counts the copies of each of n masked 32-byte patterns (XORed with 0x5a) in this process's
 * readable private anonymous mappings up to 1 GiB, its heap and stacks, and (sysv) its System V
 * segments, into hits[]; 0, or -2 if /proc/self/maps cannot be read. */
static int scan_memory(xc_ctx *ctx, syscall_fn sys, const unsigned char *masked, int n, int sysv, int64_t *hits) {
  const long cap = 1L << 22;
  char *maps = xc_alloc(ctx, (size_t)cap);
  const long fd = sys(NR_OPENAT, -100L, "/proc/self/maps", 0L, 0L);
  if (fd < 0) return -2;
  long got = 0, r;
  while (got < cap - 1 && (r = sys(NR_READ, fd, maps + got, cap - 1 - got)) > 0) got += r;
  sys(NR_CLOSE, fd);
  maps[got] = 0;
  for (int i = 0; i < n; ++i) hits[i] = 0;
  for (const char *s = maps; *s;) {
    const uint64_t lo = hex_at(&s);
    ++s;
    const uint64_t hi = hex_at(&s);
    ++s;
    const int readable = s[0] == 'r', private_ = s[3] == 'p';
    const char *end = s, *name;
    while (*end && *end != '\n') ++end;
    name = end;
    while (name > s && name[-1] != ' ') --name;
    /* anonymous (no name), or [heap] and [stack]; not files (past their end a read faults) */
    const int anonymous = name == end || (name[0] == '[' && (name[1] == 'h' || name[1] == 's'));
    const int segment = end - name >= 5 && name[0] == '/' && name[1] == 'S' && name[2] == 'Y' && name[3] == 'S' && name[4] == 'V';
    if (readable && ((private_ && anonymous) || (sysv && segment)) && hi - lo <= (1ull << 30)) /* not a sanitizer's shadow */
      for (int i = 0; i < n; ++i) hits[i] += count_masked(lo, hi, masked + 32 * i);
    s = *end ? end + 1 : end;
  }
  return 0;
}
XC_ENTRY int escape_find_key(xc_ctx *ctx, const void *in, size_t in_len) {
  if (in_len != 8 + 64) return 1;
  int64_t hits[2];
  if (scan_memory(ctx, libc_syscall(in, in_len), (const unsigned char *)in + 8, 2, 0, hits) != 0) return reply_long(ctx, -2);
  return reply_long(ctx, hits[1] ? hits[0] : -1);
}
/* Another tenant's data, looked for in this worker's memory (loader/README.md, "Tenants"):
 * input: syscall()'s slot, then a 32-byte pattern XORed with 0x5a. Scans as escape_find_key
 * does, System V segments too; replies the copies found. */
XC_ENTRY int escape_find_bytes(xc_ctx *ctx, const void *in, size_t in_len) {
  if (in_len != 8 + 32) return 1;
  int64_t hits;
  if (scan_memory(ctx, libc_syscall(in, in_len), (const unsigned char *)in + 8, 1, 1, &hits) != 0) return reply_long(ctx, -2);
  return reply_long(ctx, hits);
}
/* Keeps its input live in the worker while escape_find_bytes looks: sets its tenant's region
 * "held" to 1, waits until release sets it to 2 (or about 2^33 turns: a bound, not a clock),
 * replies the input's length. held replies the flag. */
XC_ENTRY int hold(xc_ctx *ctx, const void *in, size_t in_len) {
  size_t len = 0;
  volatile uint64_t *flag = (volatile uint64_t *)xc_region(ctx, "held", &len);
  if (!flag) flag = (volatile uint64_t *)xc_region_create(ctx, "held", 8);
  if (!flag) return 2;
  *flag = 1;
  for (uint64_t turns = 0; *flag == 1 && turns < (1ull << 33); ++turns) {
  }
  *flag = 0;
  return reply_long(ctx, (long)in_len);
}
XC_ENTRY int release(xc_ctx *ctx, const void *in, size_t in_len) {
  size_t len = 0;
  volatile uint64_t *flag = (volatile uint64_t *)xc_region(ctx, "held", &len);
  if (flag && *flag == 1) *flag = 2;
  return reply_long(ctx, flag ? 1 : 0);
}
XC_ENTRY int held(xc_ctx *ctx, const void *in, size_t in_len) {
  size_t len = 0;
  volatile uint64_t *flag = (volatile uint64_t *)xc_region(ctx, "held", &len);
  return reply_long(ctx, flag ? (long)*flag : 0);
}

/* Another tenant's System V memory (its worker's UCX segments, its clients' lanes), attached
 * by id from /proc/sysvipc/shm, read-only, as a kernel of the same uid could: replies how many
 * segments not open to everyone (mode without o+r) it attached, or -2 if the list cannot be
 * read. */
static uint64_t dec_at(const char **s, int base) {
  uint64_t v = 0;
  while (**s == ' ' || **s == '-') ++*s; /* a key may print negative: its value is not needed */
  for (; **s >= '0' && **s <= '9'; ++*s) v = v * (uint64_t)base + (uint64_t)(**s - '0');
  return v;
}
XC_ENTRY int escape_sysv_attach(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  const long cap = 1L << 20;
  char *list = xc_alloc(ctx, (size_t)cap);
  const long fd = sys(NR_OPENAT, -100L, "/proc/sysvipc/shm", 0L, 0L);
  if (fd < 0) return reply_long(ctx, -2);
  long got = 0, r;
  while (got < cap - 1 && (r = sys(NR_READ, fd, list + got, cap - 1 - got)) > 0) got += r;
  sys(NR_CLOSE, fd);
  list[got] = 0;
  long attached = 0;
  const char *s = list;
  while (*s && *s != '\n') ++s; /* the header */
  while (*s == '\n') {
    ++s;
    if (!*s) break;
    (void)dec_at(&s, 10);                /* key */
    const long id = (long)dec_at(&s, 10);
    const uint64_t perms = dec_at(&s, 8);
    if (!(perms & 04)) {
      const long p = sys(NR_SHMAT, id, 0L, 010000L /* SHM_RDONLY */);
      if (p != -1) {
        ++attached;
        sys(NR_SHMDT, p);
      }
    }
    while (*s && *s != '\n') ++s;
  }
  return reply_long(ctx, attached);
}

/* A System V shared-memory segment of 16 MiB, touched and left: it outlived the worker and the
 * loader, outside every memory limit (attacker helper). The supervisor removes it. Replies its
 * id. */
XC_ENTRY int escape_sysv_leak(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  const long size = 16l << 20;
  const long id = sys(NR_SHMGET, 0L /* IPC_PRIVATE */, size, 01000 /* IPC_CREAT */ | 0600);
  if (id < 0) return reply_long(ctx, id);
  volatile char *p = (volatile char *)sys(NR_SHMAT, id, 0L, 0L);
  if ((long)p != -1) {
    for (long o = 0; o < size; o += 4096) p[o] = 1;
    sys(NR_SHMDT, (long)p);
  }
  return reply_long(ctx, id);
}
/* prctl beyond naming threads: a seccomp filter on its executor's thread (later kernels there
 * failed, and the worker hung at its end), memory-deny-write-execute (every later push failed to
 * link). -1 each (EPERM): replies -2. */
XC_ENTRY int escape_prctl(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  static struct { unsigned short code; unsigned char jt, jf; unsigned int k; } allow = {0x06, 0, 0, 0x7fff0000u};
  static struct { unsigned short len; void *filter; } prog = {1, &allow};
  return reply_long(ctx, sys(NR_PRCTL, 22L /* PR_SET_SECCOMP */, 2L, (long)&prog, 0L, 0L) +
                             sys(NR_PRCTL, 65L /* PR_SET_MDWE */, 1L, 0L, 0L, 0L));
}
XC_ENTRY int escape_exit0(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  sys(NR_EXIT_GROUP, 0L);
  return 0;
}

XC_ENTRY int escape_thread(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  char *stack = (char *)xc_alloc(ctx, 65536);
  if (!stack) return 1;
  const long flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000 | 0x40000; /* VM FS FILES SIGHAND THREAD SYSVSEM */
  return reply_long(ctx, sys(NR_CLONE, flags, stack + 65536, 0L, 0L, 0L));
}

static long open_close(syscall_fn sys, const char *path, long flags) {
  long fd = sys(NR_OPENAT, -100L /* AT_FDCWD */, path, flags, 0644L);
  if (fd >= 0) sys(NR_CLOSE, fd);
  return fd;
}

/* The supervisor's memory through /proc, read-only: its file is readable, its memory is not. */
XC_ENTRY int escape_proc_mem(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  char path[64];
  proc_path(path, sys(NR_GETPPID), "mem");
  return reply_long(ctx, open_close(sys, path, 0 /* O_RDONLY */));
}

/* A file outside what the worker needs. */
XC_ENTRY int escape_read_file(xc_ctx *ctx, const void *in, size_t in_len) {
  return reply_long(ctx, open_close(libc_syscall(in, in_len), "/etc/passwd", 0));
}

/* Any path, with any open flags: input is syscall()'s slot (libc_syscall), the flags (u64), then the path
 * (the JIT cache's entries, say, which only the compile service may write). */
XC_ENTRY int escape_open(xc_ctx *ctx, const void *in, size_t in_len) {
  char path[512];
  uint64_t flags = 0;
  if (in_len < 17 || in_len - 16 >= sizeof path) return 1;
  for (size_t i = 0; i < 8; ++i) flags |= (uint64_t)((const unsigned char *)in)[8 + i] << (8 * i);
  for (size_t i = 16; i < in_len; ++i) path[i - 16] = ((const char *)in)[i];
  path[in_len - 16] = 0;
  return reply_long(ctx, open_close(libc_syscall(in, in_len), path, (long)flags));
}

/* A new file where anyone may write. */
XC_ENTRY int escape_write_file(xc_ctx *ctx, const void *in, size_t in_len) {
  return reply_long(ctx, open_close(libc_syscall(in, in_len), "/tmp/xcargo-escaped", 01 | 0100 /* O_WRONLY|O_CREAT */));
}

/* Deaf: closes every listening socket of its own worker (the attack that found this left the
 * node deaf to new clients for good); replies how many it closed. The worker's probe must
 * find that no new client is answered, and the worker be replaced. */
XC_ENTRY int escape_deafen(xc_ctx *ctx, const void *in, size_t in_len) {
  return on_sockets(ctx, libc_syscall(in, in_len), 30L /* SO_ACCEPTCONN */, 1, NR_CLOSE, 0L);
}

/* Junk for the next worker: every entry of the kept-cargos table (its memfd is among the
 * worker's descriptors) claims 256 MiB of a made-up digest, whose bytes are zeros. The attack
 * that found this made standbys read 32 x 256 MiB and die of it. Replies how many entries it
 * wrote. */
XC_ENTRY int escape_junk_kept(xc_ctx *ctx, const void *in, size_t in_len) {
  syscall_fn sys = libc_syscall(in, in_len);
  const char *want = "/memfd:xcargo-kept-cargos";
  long kept = -1;
  for (long fd = 0; fd < 256 && kept < 0; ++fd) {
    char path[64], link[128];
    proc_path(path, sys(NR_GETPID), "fd/");
    char *end = path;
    while (*end) ++end;
    char digits[24];
    int n = 0;
    long v = fd;
    do digits[n++] = (char)('0' + v % 10); while ((v /= 10) > 0);
    while (n) *end++ = digits[--n];
    *end = 0;
    long r = sys(NR_READLINKAT, -100L, path, link, 127L);
    if (r <= 0) continue;
    link[r] = 0;
    int i = 0;
    while (want[i] && link[i] == want[i]) ++i;
    if (!want[i]) kept = fd;
  }
  if (kept < 0) return reply_long(ctx, -1);
  long written = 0;
  for (uint64_t i = 0; i < 32; ++i) {
    unsigned char e[56] = {'C', 'R', 'G', 'O'};
    uint64_t length = 256ull << 20, sequence = 1000000 + i;
    for (int k = 0; k < 8; ++k) e[8 + k] = (unsigned char)(length >> (8 * k)), e[16 + k] = (unsigned char)(sequence >> (8 * k));
    for (int k = 0; k < 32; ++k) e[24 + k] = (unsigned char)(i * 131 + k * 7 + 0x5a);
    written += sys(NR_PWRITE64, kept, e, 56L, (long)(56 * i)) == 56;
  }
  return reply_long(ctx, written);
}
