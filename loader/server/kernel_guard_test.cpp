// The kernel guard: a crash, a refused system call or the time-out signal inside a kernel
// comes back to the executor as a failure with the message its client gets.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/syscall.h>

#include <thread>

#include "server/kernel_guard.h"

using namespace xcargo::loader;
using xcargo::wire::ReplyStatus;

namespace {
// Each test runs its kernel on a thread of its own, as an executor does.
template <class F>
void on_executor(F&& f) {
  std::thread t([&] {
    Slot s;
    adopt_slot(s);
    f(s);
    leave_slot(s);
  });
  t.join();
}
// A page nobody may touch (not a null pointer: the sanitizers' builds stop at that first).
volatile int* forbidden() {
  static void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(page != MAP_FAILED);
  return static_cast<volatile int*>(page);
}
}  // namespace

TEST_CASE("a kernel that crashes comes back as a crashed result", "[kernel_guard]") {
  install_fault_handlers();
  on_executor([](Slot& s) {
    bool after = false;
    volatile int* bad = forbidden();
    CHECK_FALSE(guarded(s, [&] {
      *bad = 1;
      after = true;
    }));
    CHECK_FALSE(after);
    CHECK(s.signo == SIGSEGV);
    CHECK(s.fault_addr == const_cast<int*>(bad));
    CHECK(s.in_kernel == 0);
    const KernelFailure f = failure_of(s, "10 s");
    CHECK(f.status == ReplyStatus::crashed);
    CHECK_THAT(f.what, Catch::StartsWith("the kernel crashed: signal 11 (Segmentation fault) at address"));
    CHECK_THAT(f.message(), Catch::EndsWith("; the node recovered"));
    // The same executor runs the next kernel normally.
    int x = 0;
    CHECK(guarded(s, [&] { x = 42; }));
    CHECK(x == 42);
    CHECK_FALSE(guarded(s, [&] { __builtin_trap(); }));
    CHECK(s.signo == SIGILL);
  });
}

TEST_CASE("the monitor's signal stops a kernel that runs past the limit", "[kernel_guard]") {
  install_fault_handlers();
  std::atomic<bool> running{false};
  std::atomic<Slot*> slot{nullptr};
  std::thread executor([&] {
    Slot s;
    adopt_slot(s);
    slot = &s;
    const bool returned = guarded(s, [&] {
      running = true;
      for (;;) std::this_thread::yield();  // a kernel that never ends
    });
    CHECK_FALSE(returned);
    const KernelFailure f = failure_of(s, "2 s");
    CHECK(f.status == ReplyStatus::timeout);
    CHECK(f.message() == "the kernel ran past the time limit of 2 s and was stopped; the node recovered");
    leave_slot(s);
  });
  while (!running) std::this_thread::yield();
  time_out(*slot.load());
  executor.join();
}

TEST_CASE("signals a kernel sends are neither faults nor time-outs", "[kernel_guard]") {
  // SIGSEGV or the time-out signal sent by a kernel to another executor's thread fails
  // neither that thread's kernel nor its own: such signals are ignored.
  install_fault_handlers();
  on_executor([](Slot& s) {
    int after = 0;
    CHECK(guarded(s, [&] {
      ::pthread_kill(::pthread_self(), SIGSEGV);
      ::pthread_kill(::pthread_self(), SIGBUS);
      ::pthread_kill(::pthread_self(), kTimeoutSignal);
      ::kill(::getpid(), SIGFPE);
      after = 1;
    }));
    CHECK(after == 1);
    // A real fault still counts.
    volatile int* bad = forbidden();
    CHECK_FALSE(guarded(s, [&] { *bad = 1; }));
    CHECK(s.signo == SIGSEGV);
  });
}

TEST_CASE("a time-out signal that comes after the kernel returned is ignored", "[kernel_guard]") {
  install_fault_handlers();
  on_executor([](Slot& s) {
    CHECK(guarded(s, [] {}));
    ::pthread_kill(::pthread_self(), kTimeoutSignal);  // the process survives it
    CHECK(guarded(s, [] {}));
  });
}

TEST_CASE("a system call the sandbox refused is named", "[kernel_guard]") {
  Slot s;
  s.signo = SIGSYS;
  s.syscall_nr = SYS_openat;
  const KernelFailure f = failure_of(s, "10 s");
  CHECK(f.status == ReplyStatus::sandbox);
  CHECK(f.message() == "the sandbox stopped the kernel: it made the system call openat itself (kernels may only call the "
                       "xcargo API); the node recovered");
  s.syscall_nr = SYS_kill;
  s.syscall_from_library = true;  // libc's syscall(), found by the kernel
  CHECK(failure_of(s, "10 s").message() ==
        "the sandbox stopped the kernel: it made the system call kill through library code, which the sandbox refuses "
        "(kernels may only call the xcargo API); the node recovered");
}
