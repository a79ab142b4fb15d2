// The kernel guard: fault handlers that jump back to the executor, and what a failure says.
#include "server/kernel_guard.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sandbox/sandbox.h"

namespace xcargo::loader {

thread_local Slot* t_guarded_slot = nullptr;

namespace {

void on_fault(int sig, siginfo_t* info, void*) {
  Slot* s = t_guarded_slot;
  if (sig == kTimeoutSignal ? !(s && s->timed_out) : info && info->si_code <= 0) return;  // sent, not a fault or a time-out
  if (s && s->in_kernel) {
    s->in_kernel = 0;
    s->signo = sig;
    s->fault_addr = info ? info->si_addr : nullptr;
    s->syscall_nr = sig == SIGSYS && info ? info->si_syscall : -1;
    s->syscall_from_library = sig == SIGSYS && info && sandbox::from_loaded_code(info->si_call_addr);
    siglongjmp(s->env, 1);
  }
  if (sig == kTimeoutSignal) return;  // the kernel returned just before the signal came
  if (sig == SIGSYS && info) {  // the loader's own code: the allow-list misses a call it needs
    char line[96];
    const int n = std::snprintf(line, sizeof line, "xcargo-loader: the sandbox refused system call %d made by the loader\n", info->si_syscall);
    if (n > 0) (void)!::write(2, line, size_t(n));
  }
  if (::signal(sig, SIG_DFL) == SIG_ERR) _exit(128 + sig);  // the sandbox keeps handlers as they are
  ::raise(sig);
}

}  // namespace

void install_fault_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, kTimeoutSignal}) ::sigaction(sig, &sa, nullptr);
}

void time_out(Slot& s) {
  s.timed_out = 1;
  ::pthread_kill(s.thread, kTimeoutSignal);
}

void adopt_slot(Slot& s) {
  t_guarded_slot = &s;
  s.thread = ::pthread_self();
  s.altstack.resize(64 * 1024);
  stack_t ss{};
  ss.ss_sp = s.altstack.data();
  ss.ss_size = s.altstack.size();
  ::sigaltstack(&ss, &s.previous);
}

void leave_slot(Slot& s) {
  ::sigaltstack(&s.previous, nullptr);
  t_guarded_slot = nullptr;
}

KernelFailure failure_of(const Slot& s, const std::string& limit) {
  KernelFailure f;
  if (s.signo == kTimeoutSignal) {
    f.status = wire::ReplyStatus::timeout;
    f.what = "the kernel ran past the time limit of " + limit;
  } else if (s.signo == SIGSYS) {
    f.status = wire::ReplyStatus::sandbox;
    f.what = "the sandbox stopped the kernel: it made the system call " + sandbox::syscall_name(s.syscall_nr) +
             (s.syscall_from_library ? " through library code, which the sandbox refuses" : " itself") +
             " (kernels may only call the xcargo API)";
  } else {
    char what[160];
    std::snprintf(what, sizeof what, "the kernel crashed: signal %d (%s) at address %p", int(s.signo), strsignal(s.signo), s.fault_addr);
    f.status = wire::ReplyStatus::crashed;
    f.what = what;
  }
  return f;
}

}  // namespace xcargo::loader
