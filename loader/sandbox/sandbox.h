// The worker's sandbox: what a running kernel can do besides compute (loader/SECURITY.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "xcargo/error.h"

namespace xcargo::loader::sandbox {

struct Options {
  bool syscall_filter = true;  // seccomp: the allow-list, and no system calls from kernel code
  uint64_t address_space = 0;  // RLIMIT_AS in bytes; 0: none
};

// At the start of a worker, before anything else: no new privileges, the address-space limit,
// stdin on /dev/null unless keep_fds has 0, and every descriptor from 3 on closed but keep_fds.
[[nodiscard]] Status prepare(const Options& options, std::initializer_list<int> keep_fds);

// After start-up (UCX, LLVM, listener ready): seccomp filters on every thread of this process,
// and on threads it starts later. Two filters, both must allow a call:
//  1. system calls only from code loaded from files (the loader, its libraries, the vDSO), so
//     a kernel's own instructions (JIT or linked object memory) cannot make any;
//  2. an allow-list of what the worker needs after start-up; execve, ptrace, fork and the rest
//     are refused even from library code.
// A refused call raises SIGSYS (si_syscall names it) instead of running.
[[nodiscard]] Status lock_down(const Options& options);

// The name of system call nr on this architecture, or its number as text.
std::string syscall_name(int nr);

}  // namespace xcargo::loader::sandbox
