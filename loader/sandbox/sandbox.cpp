// Worker sandbox: seccomp filters (libseccomp for the allow-list, a raw BPF program for the
// instruction-pointer rule), the address-space limit, no new privileges, closed descriptors.
#include "sandbox/sandbox.h"

#include "sandbox/processes.h"
#include "sandbox/sys_error.h"

#include <fcntl.h>
#include <signal.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

namespace xcargo::loader::sandbox {

namespace {

#if defined(__x86_64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kAuditArch = AUDIT_ARCH_AARCH64;
#else
#error "xcargo-loader's sandbox knows x86_64 and aarch64"
#endif

// What the worker calls after start-up: UCX (tcp, shared memory, connection set-up reads
// /sys and asks interfaces with ioctl), ORC (mmap, mprotect), the disk cache, the trust
// watcher, logging, threads. Names unknown on this architecture are skipped.
constexpr const char* kAllowed[] = {
    // files and descriptors
    "read", "write", "readv", "writev", "pread64", "pwrite64", "close", "openat", "open", "newfstatat", "fstat",
    "stat", "lstat", "statx", "lseek", "getdents64", "readlink", "readlinkat", "access",
    "faccessat", "faccessat2", "statfs", "fstatfs", "rename", "renameat", "renameat2", "unlink", "unlinkat", "mkdir",
    "mkdirat", "fsync", "fdatasync", "fchmod", "ftruncate", "fallocate", "dup", "dup2", "dup3", "pipe2", "eventfd2",
    "memfd_create", "getcwd", "timerfd_create", "timerfd_settime", "timerfd_gettime",
    // waiting
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "poll", "ppoll", "select", "pselect6",
    // sockets it has (new ones: kSocketCalls)
    "getsockname", "getpeername", "setsockopt",
    "getsockopt", "recvfrom", "recvmsg", "recvmmsg", "shutdown",  // sending: install_allow_list
    // memory, and UCX's shared-memory transports (SysV, POSIX; not CMA, which reads and
    // writes other processes with process_vm_readv/writev: the worker turns it off)
    "mmap", "munmap", "mremap", "mprotect", "madvise", "brk", "set_mempolicy", "get_mempolicy", "mbind", "shmget",
    "shmat", "shmdt", "shmctl", "membarrier",
    // threads, signals, time
    "futex", "set_robust_list", "get_robust_list", "rseq", "exit", "exit_group", "gettid", "getpid", "getppid",
    "getuid", "geteuid", "getgid", "getegid", "rt_sigprocmask", "rt_sigreturn", "sigaltstack",
    "restart_syscall", "clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
    "sched_yield", "sched_getaffinity", "getcpu", "getrandom", "uname", "getrlimit", "getrusage",
    "sysinfo", "set_tid_address", "arch_prctl",
};


// New sockets and connections, with Options::sockets only (socket() itself is limited to the
// families in install_allow_list; no Unix sockets at all).
constexpr const char* kSocketCalls[] = {"bind", "listen", "accept", "accept4", "connect"};

// Executable mappings backed by a file, and the vDSO: where system calls may come from.
struct Range {
  uint64_t lo, hi;  // [lo, hi)
  bool libc;
};

std::vector<Range> code_ranges() {
  std::vector<Range> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long lo = 0, hi = 0;
    char perms[8] = {}, path[512] = {};
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %*s %*s %*s %511s", &lo, &hi, perms, path) < 3) continue;
    if (perms[2] != 'x') continue;
    const std::string p = path;
    if (p.empty() || (p[0] != '/' && p != "[vdso]" && p != "[vsyscall]")) continue;  // anonymous: JIT and kernels
    if (p.size() > 10 && p.compare(p.size() - 10, 10, " (deleted)") == 0) continue;
    out.push_back({lo, hi, p.find("/libc.so") != std::string::npos});
  }
  // libc first: nearly every system call comes from it, so the filter's common path is short.
  std::stable_partition(out.begin(), out.end(), [](const Range& r) { return r.libc; });
  return out;
}

// The code ranges filter 1 allows, for from_loaded_code (read in signal handlers: fixed size).
constexpr size_t kMaxRanges = 1024;
Range g_ranges[kMaxRanges];
std::atomic<size_t> g_range_count{0};

// Filter 1: a system call whose instruction pointer is outside every code range traps.
Status install_ip_filter() {
  size_t kept = 0;
  for (const Range& r : code_ranges())
    if (kept < kMaxRanges) g_ranges[kept++] = r;
  g_range_count.store(kept);
  std::vector<Range> ranges;
  for (const Range& r : code_ranges()) {  // split at 4 GiB boundaries: one high word per range
    uint64_t lo = r.lo;
    while (lo < r.hi) {
      const uint64_t boundary = lo | 0xffffffffull;  // the last byte with lo's high word
      const uint64_t next = r.hi - 1 <= boundary ? r.hi : boundary + 1;
      ranges.push_back({lo, next, r.libc});
      lo = next;
    }
  }
  if (ranges.empty()) return Error(Errc::io, "sandbox: /proc/self/maps lists no code; cannot build the filter");
  constexpr uint32_t kIpLo = offsetof(seccomp_data, instruction_pointer);
  constexpr uint32_t kIpHi = kIpLo + 4;
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the filter reads the instruction pointer as two words");
  std::vector<sock_filter> prog = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kAuditArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
  };
  for (const Range& r : ranges) {
    const uint32_t high = uint32_t(r.lo >> 32), lo = uint32_t(r.lo), last = uint32_t(r.hi - 1);
    // if (ip.hi == high && ip.lo >= lo && ip.lo <= last) allow; else go on to the next range
    prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kIpHi));
    prog.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, high, 0, 4));
    prog.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, kIpLo));
    prog.push_back(BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, lo, 0, 2));
    prog.push_back(BPF_JUMP(BPF_JMP | BPF_JGT | BPF_K, last, 1, 0));
    prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  }
  prog.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP));
  if (prog.size() > BPF_MAXINSNS) return Error(Errc::limit, "sandbox: too many code mappings for one filter (" + std::to_string(ranges.size()) + ")");
  sock_fprog fprog{static_cast<unsigned short>(prog.size()), prog.data()};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &fprog) != 0)
    return sys_error("installing the code-origin filter", errno);
  return {};
}

// Filter 2: the allow-list, with argument rules for socket, clone and signals.
Status check_rule(int rc, const char* what) {
  if (rc < 0) return sys_error(what, -rc);
  return {};
}

// The rules on sockets: sends, and with `sockets` the calls UCX's tcp needs; no Unix socket.
Status add_socket_rules(scmp_filter_ctx ctx, bool sockets) {
  const auto check = check_rule;
  // Sending never with MSG_FASTOPEN, which connects a TCP socket without connect(): a socket
  // the keeper passed while connecting, once reset, would reach any address (guarded by
  // escape_fastopen in adversary.c, run by tests/e2e/adversary_test.sh). sendto's flags are
  // its fourth argument, sendmsg's and sendmmsg's their third and fourth.
  const auto no_fastopen = [](unsigned arg) { return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, uint64_t(MSG_FASTOPEN), 0}; };
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendto), 1, no_fastopen(3)), "sendto"));
  // sendmsg, which can carry descriptors (SCM_RIGHTS) through any datagram socket the worker
  // has (UCX's wake-up sockets reach every Unix datagram socket of this host), only with
  // `sockets` (UCX's tcp writes with it); without, a kernel passes no descriptor out (its
  // worker's connection to the key service, say: escape_pass_fd in adversary.c).
  if (sockets) {
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendmsg), 1, no_fastopen(2)), "sendmsg"));
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(sendmmsg), 1, no_fastopen(3)), "sendmmsg"));
  }
  // Without `sockets` a kernel can neither open a socket of its own nor connect, bind, listen
  // or accept on one it finds: each traps (guarded by escape_socket4 and escape_connect in
  // adversary.c, run by tests/e2e/adversary_test.sh).
  if (sockets) {
    for (const char* name : kSocketCalls)
      if (const int nr = seccomp_syscall_resolve_name(name); nr != __NR_SCMP_ERROR) XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0), name));
    // IPv4 and IPv6 stream sockets (UCX's tcp), and netlink (UCX asks interfaces): no
    // datagram or raw socket, which Landlock's port rules would not cover.
    for (int family : {AF_INET, AF_INET6})
      XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, uint64_t(family)),
                                    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, uint64_t(SOCK_STREAM))),
                   "socket"));
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, uint64_t(AF_NETLINK))), "socket"));
  }
  // No new Unix socket once locked down (EPERM): with one, a kernel can pass its worker's
  // connection to the key service (SCM_RIGHTS) to a process outside the loader, which the
  // service then signs for after the kernel, and its worker, have ended (guarded by
  // escape_unix_socket in tests/kernels/adversary.c, run by tests/e2e/adversary_test.sh).
  // The Unix sockets a worker needs, the supervisor made before its fork; over those, a
  // descriptor sent is dropped by the receiver (neither service reads control data).
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_EQ, uint64_t(AF_UNIX))), "socket"));
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socketpair), 0), "socketpair"));
  return {};
}

// The rules on this process: threads, signals, limits, prctl.
Status add_process_rules(scmp_filter_ctx ctx, bool no_new_threads) {
  const auto check = check_rule;
  // Threads only: clone must share the address space and be a thread. clone3 passes its flags
  // in memory a filter cannot read; ENOSYS makes the C library fall back to clone.
  if (no_new_threads)
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAGAIN), SCMP_SYS(clone), 0), "clone"));
  else
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD | CLONE_VM, CLONE_THREAD | CLONE_VM)),
                 "clone"));
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0), "clone3"));
  // Signals only to this process's threads, and only those the worker sends itself: the
  // monitor's time-out signal, and raise() of a fault or of abort(). No kill(): with it a
  // kernel can freeze its own worker with SIGSTOP (the node deaf until an admin steps in),
  // make it stop in order with SIGTERM, or turn on UCX's debug log with SIGHUP (guarded by
  // escape_kill, escape_term_self, escape_sigstop and escape_signals in adversary.c).
  const uint64_t self = uint64_t(::getpid());
  for (int sig : {SIGUSR1 /* kTimeoutSignal */, SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS})
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 2, SCMP_A0(SCMP_CMP_EQ, self),
                                  SCMP_A2(SCMP_CMP_EQ, uint64_t(sig))),
                 "tgkill"));
  // Signal handlers as the worker set them before the lock-down: a kernel that resets SIGSEGV's
  // makes a later, innocent crash kill the worker outright, and one that ignores SIGTERM keeps
  // an admin from stopping it (guarded by escape_signals in adversary.c). Reading them stays
  // allowed; setting one fails (EPERM: the worker's own late calls, at exit, must not trap).
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(rt_sigaction), 1, SCMP_A1(SCMP_CMP_EQ, 0)), "rt_sigaction"));
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(rt_sigaction), 1, SCMP_A1(SCMP_CMP_NE, 0)), "rt_sigaction"));
  // Limits of this process only: a kernel that sets the supervisor's (same user) file size
  // limit to 0 kills the supervisor at its next log line, the loader down for good (guarded
  // by escape_prlimit in adversary.c).
  // And read only: a kernel that lowers the worker's own address-space limit leaves every later
  // large allocation failing, for every client, until the worker restarts for another reason
  // (escape_prlimit_self).
  for (uint64_t pid : {uint64_t(0), self})
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, pid), SCMP_A2(SCMP_CMP_EQ, 0)),
                 "prlimit64"));
  // prctl: naming threads (ps, pgrep) and reading the name; nothing else once locked down. A
  // kernel could add a seccomp filter to its executor's thread (PR_SET_SECCOMP: later clients'
  // kernels on that thread fail, and the worker hangs at its end) or make every later push
  // fail to link (PR_SET_MDWE) (guarded by escape_prctl in adversary.c). Others fail with
  // EPERM (the C library's own must not trap).
  for (int option : {PR_SET_NAME, PR_GET_NAME})
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, uint64_t(option))), "prctl"));
  static_assert(PR_GET_NAME == PR_SET_NAME + 1, "the two allowed options are next to each other");
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_LT, uint64_t(PR_SET_NAME))), "prctl"));
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_GT, uint64_t(PR_GET_NAME))), "prctl"));
  return {};
}

// The rules on descriptors: fcntl and ioctl.
Status add_descriptor_rules(scmp_filter_ctx ctx) {
  const auto check = check_rule;
  // No signal of one's choice on a descriptor's events (F_SETSIG: SIGSTOP by way of a pipe,
  // without kill(); guarded by escape_setsig in adversary.c); the rest of fcntl allowed.
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1, SCMP_A1(SCMP_CMP_NE, F_SETSIG)), "fcntl"));
  // No characters pushed into a terminal's input (TIOCSTI): a worker started from an admin's
  // shell has that terminal as its stderr, and what a kernel pushed there the shell would run
  // once the loader stops. The kernel reads the request as 32 bits, so the refusal compares
  // those alone (high bits set must not slip past); every other request as before.
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI)),
               "ioctl"));
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_LT, TIOCSTI)), "ioctl"));
  XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, SCMP_A1(SCMP_CMP_GT, TIOCSTI)), "ioctl"));
  return {};
}

Status install_allow_list(bool no_new_threads, bool sockets) {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
  if (!ctx) return Error(Errc::io, "sandbox: seccomp_init failed");
  struct Free {
    scmp_filter_ctx c;
    ~Free() { seccomp_release(c); }
  } release{ctx};
  const auto check = check_rule;
  for (const char* name : kAllowed) {
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr == __NR_SCMP_ERROR) continue;
    XC_TRY(check(seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0), name));
  }
  XC_TRY(add_socket_rules(ctx, sockets));
  XC_TRY(add_process_rules(ctx, no_new_threads));
  XC_TRY(add_descriptor_rules(ctx));
  XC_TRY(check(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1), "thread synchronisation"));
  // A binary tree over the system call numbers: every call pays this filter, the hot ones
  // (epoll_wait, sendmsg, recvmsg, futex) included.
  XC_TRY(check(seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2), "filter layout"));
  XC_TRY(check(seccomp_load(ctx), "loading the allow-list"));
  return {};
}

}  // namespace

Result<Confinement> prepare(const Options& o, std::initializer_list<int> keep_fds) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return sys_error("no_new_privs", errno);
  if (o.address_space) {
    rlimit rl{o.address_space, o.address_space};
    if (::setrlimit(RLIMIT_AS, &rl) != 0) return sys_error("setting the address-space limit", errno);
  }
  std::vector<int> keep(keep_fds);
  if (std::find(keep.begin(), keep.end(), 0) == keep.end())
    if (int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC); null >= 0) {
      ::dup2(null, 0);
      ::close(null);
    }
  close_all_but(std::move(keep));
  Confinement c;
  if (!o.confine) return c;
  if (o.user) {
    XC_TRY(become(*o.user));
    c.user = o.user->name;
  } else {
    XC_TRY(drop_capabilities(o.keep_bind_service));
  }
  c.capabilities = effective_capabilities() != 0;
  auto abi = restrict_files(o.start_files);
  XC_TRY(abi);
  c.landlock_abi = *abi;
  return c;
}

Status lock_files(const Options& o) {
  if (o.confine) XC_TRY(restrict_files(o.serve_files));
  return {};
}

Status lock_calls(const Options& o) {
  if (!o.syscall_filter) return {};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return sys_error("no_new_privs", errno);
  XC_TRY(install_ip_filter());  // first: the allow-list refuses seccomp() itself
  return install_allow_list(o.no_new_threads, o.sockets);
}

Status lock_down(const Options& o) {
  XC_TRY(lock_files(o));
  return lock_calls(o);
}

std::string describe(const Confinement& c) {
  std::string s = c.user.empty() ? (::geteuid() == 0 ? (c.capabilities ? "runs as root" : "runs as root without capabilities")
                                                     : "runs as uid " + std::to_string(::geteuid()))
                                 : "runs as " + c.user;
  s += c.landlock_abi ? "; files: Landlock ABI " + std::to_string(c.landlock_abi)
                      : "; files: not restricted (this kernel has no Landlock; loader/SECURITY.md)";
  return s;
}

bool from_loaded_code(const void* address) {
  const uint64_t a = reinterpret_cast<uintptr_t>(address);
  const size_t n = g_range_count.load();
  for (size_t i = 0; i < n; ++i)
    if (a >= g_ranges[i].lo && a < g_ranges[i].hi) return true;
  return false;
}

std::string syscall_name(int nr) {
  char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
  std::string s = name ? std::string(name) : "system call " + std::to_string(nr);
  std::free(name);
  return s;
}

}  // namespace xcargo::loader::sandbox
