// Interrupting long operations (Ctrl-C, SIGTERM): what a program's signal handler calls, and
// what the library's waits check, so that nothing keeps running and nothing is left behind.
#pragma once

#include <sys/types.h>

namespace xcargo {

// Async-signal-safe: records the signal and kills (SIGKILL) every child process tracked
// below. Waits in the library then end with an error (a killed compiler, a local loader's
// end of input, a node's reply no longer awaited) and destructors clean up.
void interrupt_now(int signal) noexcept;
// The signal interrupt_now() recorded, or 0.
int interrupted() noexcept;

// Child processes an interruption must end (compilers, a local loader); at most 64 at once.
void track_child(pid_t pid) noexcept;
void untrack_child(pid_t pid) noexcept;

// Scratch files exist that an interruption must not leave behind: while this count is not
// zero, a signal handler returns (and lets the program unwind) instead of exiting at once.
void hold_cleanup() noexcept;
void release_cleanup() noexcept;
bool cleanup_held() noexcept;

}  // namespace xcargo
