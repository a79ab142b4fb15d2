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
// From now on each line is a JSON object instead (log_json.h: --log-format json), in this
// process and in those it forks later, the log copier included (which makes any other line
// its stderr pipes carry one too). Call before forking.
void set_log_json(bool on);
// Text put before every line of this process from now on ("tenant lab: "; "" for none).
void set_log_tag(std::string tag);
// Starts the thread that writes queued lines (else started by the first line): in a process
// whose sandbox refuses new threads, before that.
void start_log();
// Writes everything queued, and waits for a batch the thread is writing; call before _exit().
void flush_log();
// From now on this process writes each line at once, and starts no thread for it (children
// forked later batch theirs again). For the supervisor: its lines are few, and a process
// without threads forks safely (qemu-user 7.2, which runs the aarch64 loader in the tests,
// aborts a child forked beside another thread as soon as the child starts one).
void log_directly();

// From now on, stderr (fd 2, which workers and the compile service inherit when they are
// forked) is a pipe that the log copier, a process of its own (xcargo-log), copies into the
// log: with a path (--log FILE), that file, appended to, and when it would grow past max_size
// bytes renamed to FILE.1 (replacing the previous one) and started anew, so the log never
// takes more than twice max_size; without one, stderr as this process got it (a file, a
// terminal, the journal). No process forked later holds that file or stderr: a kernel
// truncated the log file a worker inherited as its stderr, and could push input into an
// admin's terminal. Call once, before forking anything that logs; this process keeps no
// thread for it.
[[nodiscard]] Status start_log_copier(const std::string& path, uint64_t max_size);
// With the copier: a new pipe for one child about to be forked, whose other end the copier
// reads (its lines framed apart from every other process's). Before fork(), call
// it; in the child, call child_stderr(handle) first: it makes the pipe the child's stderr. In
// the parent, call parent_done(handle). Without the copier both do nothing: the child shares
// this process's stderr. A worker thus never holds a descriptor of another process's pipe,
// which it could reopen for reading through /proc/self/fd.
struct ChildLog {
  int write_fd = -1;
};
ChildLog log_for_child();
void child_stderr(ChildLog& c);
void parent_done(ChildLog& c);
// Before exit: writes what is queued, gives stderr back, and waits (up to a second) until the
// copier has written everything and ended. Does nothing without the copier.
void close_log();

// The smallest --log-max-size accepted: enough for a few thousand lines.
constexpr uint64_t kMinLogFileSize = 64 << 10;

}  // namespace xcargo::loader
