// Running a kernel so that its crash, a system call the sandbox refuses, or the monitor's
// time-out signal comes back to the executor that ran it as a failure instead of ending the
// process (the worker is then restarted: the kernel may have damaged it).
#pragma once

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <csetjmp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "wire/wire.h"

namespace xcargo::loader {

struct Job;

// Sent by the monitor to a thread running a kernel inline past the time limit.
inline constexpr int kTimeoutSignal = SIGUSR1;

// What an executor thread is doing.
enum class Phase : int {
  idle,
  leading,   // running a request as leader
  deposed,   // running one after the monitor handed leadership on (its reply goes through the outbox)
  inline_,   // running a quick kernel inline, inside a receive callback (it cannot hand leadership on)
};

// One executor thread.
struct Slot {
  pthread_t thread{};
  std::atomic<Phase> phase{Phase::idle};
  std::atomic<int64_t> since{0};          // when its request started (steady clock, ns); 0 idle
  std::atomic<bool> kernel{false};        // that request runs a kernel (the time limit applies); stored before since
  std::atomic<int64_t> limit_ns{0};       // that request's own kernel limit (an invoke's timeout_ms), 0: the node's; stored before since
  bool kernel_after_load = false;         // kernel, while a load (Engine::on_load) times the request by the request limit
  std::atomic<std::shared_ptr<Job>> job;  // read by the monitor for time-out replies
  sigjmp_buf env;
  volatile sig_atomic_t in_kernel = 0;
  volatile sig_atomic_t timed_out = 0;  // time_out() sent kTimeoutSignal for the kernel it runs
  volatile int signo = 0;
  void* fault_addr = nullptr;
  int syscall_nr = -1;  // SIGSYS: the system call the sandbox refused
  bool syscall_from_library = false;  // SIGSYS: made through loaded code (libc's syscall()), not by the kernel's own
  std::vector<uint8_t> altstack;
  stack_t previous{};  // the thread's alternate stack before adopt_slot
};

// Installs the handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS and kTimeoutSignal. A
// signal on a thread inside guarded() jumps back out of it; any other such fault ends the
// process (the supervisor restarts the worker). Only faults count, and only the monitor's
// time-outs: a fault signal that was sent (kill, tgkill, sigqueue: si_code <= 0) and a
// kTimeoutSignal that time_out() did not send are ignored (a kernel that sent them to another
// executor's thread failed that thread's kernel in its stead, and the log blamed the victim).
void install_fault_handlers();
// Stops the kernel running on s's thread (the monitor, past the time limit).
void time_out(Slot& s);
// Makes s this thread's slot, with an alternate signal stack (a kernel may overflow its own).
void adopt_slot(Slot& s);
// Before the thread ends: gives it back its previous alternate stack (AddressSanitizer frees
// the one it set up when the thread ends, and must find its own).
void leave_slot(Slot& s);

// Runs f (the kernel) on s's thread. False if a signal stopped it: s.signo says which.
// Objects f created are not destroyed then; the worker restarts after such a run anyway.
extern thread_local Slot* t_guarded_slot;  // the slot of the kernel this thread runs

template <class F>
bool guarded(Slot& s, F&& f) {
  t_guarded_slot = &s;
  if (sigsetjmp(s.env, 0) == 0) {
    s.timed_out = 0;
    s.in_kernel = 1;
    f();
    s.in_kernel = 0;
    return true;
  }
  return false;
}

// What the client is told after guarded() returned false, and the line for the logs.
struct KernelFailure {
  wire::ReplyStatus status{};
  std::string what;  // "the kernel crashed: signal 11 (...) at address 0x0", ...
  std::string message() const { return what + (status == wire::ReplyStatus::timeout ? " and was stopped" : "") + "; the node recovered"; }
};
// limit: the time limit as text ("10 s"), for time-outs.
KernelFailure failure_of(const Slot& s, const std::string& limit);

}  // namespace xcargo::loader
