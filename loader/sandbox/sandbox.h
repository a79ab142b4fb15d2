// The worker's sandbox: what a running kernel can do besides compute (loader/SECURITY.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "sandbox/files.h"
#include "sandbox/privileges.h"
#include "xcargo/error.h"

namespace xcargo::loader::sandbox {

struct Options {
  bool syscall_filter = true;  // seccomp: the allow-list, and no system calls from kernel code
  uint64_t address_space = 0;  // RLIMIT_AS in bytes; 0: none
  // Privileges and files (false only with the seccomp filters off, to diagnose a problem).
  bool confine = false;
  std::optional<User> user;        // run as this user (the loader started as root)
  bool keep_bind_service = false;  // root without --user, listening below port 1024
  FileRules start_files;  // what every thread of the worker may reach, from its start
  FileRules serve_files;  // narrower: what the threads that run kernels may reach
  // The filters refuse clone altogether (EAGAIN): no thread can start after lock_down, so a
  // kernel cannot leave one running past its own run (or its cargo's revocation). For a
  // process that has started every thread it needs before lock_calls.
  bool no_new_threads = false;
  // New sockets and connections after lock_down: socket (IPv4, IPv6, netlink), connect, bind,
  // listen, accept. Without, each traps: a process whose connections the supervisor's keepers
  // make and pass in (a worker without trusted-network) reaches nobody by a socket of its
  // own. Sockets it has stay usable (send, receive, shutdown).
  bool sockets = true;
};

// What prepare and lock_down applied, for the worker's first log line.
struct Confinement {
  int landlock_abi = 0;      // 0: the kernel has no Landlock; files are not restricted
  bool capabilities = true;  // the worker still holds capabilities (not confined, or not root)
  std::string user;          // the user it runs as, if it changed
};
std::string describe(const Confinement& c);

// At the start of a worker, while it has one thread, before anything else: no new
// privileges, the address-space limit, stdin on /dev/null unless keep_fds has 0, every
// descriptor from 3 on closed but keep_fds; with `confine`, the user (or root's capabilities
// dropped) and Landlock's start_files for every thread.
[[nodiscard]] Result<Confinement> prepare(const Options& options, std::initializer_list<int> keep_fds);

// After start-up (UCX, LLVM, listener ready): seccomp filters on every thread of this process,
// and on threads it starts later. Two filters, both must allow a call:
//  1. system calls only from code loaded from files (the loader, its libraries, the vDSO), so
//     a kernel's own instructions (JIT or linked object memory) cannot make any;
//  2. an allow-list of what the worker needs after start-up; execve, ptrace, fork,
//     process_vm_readv/writev and the rest are refused even from library code.
// A refused call raises SIGSYS (si_syscall names it) instead of running. With `confine`,
// Landlock's serve_files first, for this thread and the threads it starts later (the
// executors: call it on the thread that starts them).
[[nodiscard]] Status lock_down(const Options& options);
// lock_down in two steps, for a process that starts its threads in between: Landlock's
// serve_files (inherited by threads started later), then the seccomp filters (on every thread).
[[nodiscard]] Status lock_files(const Options& options);
[[nodiscard]] Status lock_calls(const Options& options);

// Whether a system call made at `address` (SIGSYS's si_call_addr) came from code loaded from
// a file (the C library, say) rather than from a kernel's own instructions. Async-signal-safe;
// false before lock_down.
bool from_loaded_code(const void* address);

// The name of system call nr on this architecture, or its number as text.
std::string syscall_name(int nr);

}  // namespace xcargo::loader::sandbox
