// The loader's log: one timestamped line per event, written by a background thread in batches
// so that logging every request costs the request path about a hundred nanoseconds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "xcargo/error.h"

namespace xcargo::loader {

// Queues "TIME xcargo-loader[PID]: LINE\n" for stderr (TIME in UTC, RFC 3339 with
// microseconds). Under systemd (JOURNAL_STREAM is set), which stamps lines itself, only
// "xcargo-loader: LINE".
void log_line(std::string_view line);
// Starts the thread that writes queued lines (else started by the first line): in a process
// whose sandbox refuses new threads, before that.
void start_log();
// Writes everything queued; call before _exit().
void flush_log();
// From now on this process writes each line at once, and starts no thread for it (children
// forked later batch theirs again). For the supervisor: its lines are few, and a process
// without threads forks safely (qemu-user 7.2, which runs the aarch64 loader in the tests,
// aborts a child forked beside another thread as soon as the child starts one).
void log_directly();

// --log FILE: from now on, stderr (fd 2, which workers and the compile service inherit when
// they are forked) is a pipe that a thread of this process copies into FILE, appending. When
// FILE would grow past max_size bytes it is renamed to FILE.1 (replacing the previous one) and
// a new FILE is started, so the log never takes more than twice max_size. The pipe's read end
// is closed in every child forked later. Call once, before forking anything.
[[nodiscard]] Status log_to_file(const std::string& path, uint64_t max_size);
// With log_to_file: a new pipe for one child about to be forked, whose other end the copying
// thread reads (its lines framed apart from every other process's). Before fork(), call
// it; in the child, call child_stderr(handle) first: it makes the pipe the child's stderr. In
// the parent, call parent_done(handle). Without log_to_file both do nothing: the child shares
// this process's stderr. A worker thus never holds a descriptor of another process's pipe,
// which it could reopen for reading through /proc/self/fd.
struct ChildLog {
  int write_fd = -1;
};
ChildLog log_for_child();
void child_stderr(ChildLog& c);
void parent_done(ChildLog& c);
// Before exit: writes what is queued, and waits (up to a second) until the copying thread has
// written everything sent before this call. Does nothing without log_to_file.
void close_log();

// The smallest --log-max-size accepted: enough for a few thousand lines.
constexpr uint64_t kMinLogFileSize = 64 << 10;

}  // namespace xcargo::loader
