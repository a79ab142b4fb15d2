// A mutex-protected buffer, flushed every 20 ms by a thread that sleeps when nothing is queued.
#include "log.h"

#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

namespace xcargo::loader {

namespace {

// Lines beyond this many unwritten bytes are dropped (and counted) rather than buffered: a
// stderr nobody reads must not grow the loader without bound.
constexpr size_t kMaxBuffered = 1 << 20;

struct Log {
  std::mutex mu;
  std::condition_variable cv;
  std::string buf;
  bool started = false;  // the flusher thread runs in this process
  size_t dropped = 0;

  void write_out(std::string& out) {
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::write(2, out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += size_t(n);
    }
    out.clear();
  }
  void run() {
    std::string out;
    std::unique_lock<std::mutex> l(mu);
    for (;;) {
      cv.wait(l, [&] { return !buf.empty(); });
      l.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // gather a batch
      l.lock();
      out.swap(buf);
      l.unlock();
      write_out(out);
      l.lock();
    }
  }
};

Log& the_log() {
  // Never destroyed: the flusher thread may outlive main. A fork (the supervisor starting a
  // worker) takes the lock so that the child inherits it free, and the child, which has no
  // flusher thread, starts its own at its first line.
  static Log* log = [] {
    Log* g = new Log();
    // The child gets a new mutex and condition variable: the inherited ones may count the
    // parent's flusher as a waiter, and signalling that ghost would block forever.
    ::pthread_atfork([] { the_log().mu.lock(); }, [] { the_log().mu.unlock(); },
                     [] {
                       Log& c = the_log();
                       new (&c.mu) std::mutex();
                       new (&c.cv) std::condition_variable();
                       c.started = false;
                     });
    return g;
  }();
  return *log;
}

}  // namespace

void log_line(std::string_view line) {
  Log& g = the_log();
  std::lock_guard<std::mutex> l(g.mu);
  if (!g.started) {
    g.started = true;
    std::thread([&g] { g.run(); }).detach();
  }
  const bool was_empty = g.buf.empty();
  if (g.buf.size() + line.size() > kMaxBuffered) {
    ++g.dropped;
    return;
  }
  if (g.dropped) {
    g.buf.append("xcargo-loader: (").append(std::to_string(g.dropped)).append(" log lines dropped: stderr was not read)\n");
    g.dropped = 0;
  }
  g.buf.append("xcargo-loader: ").append(line).append(1, '\n');
  if (was_empty) g.cv.notify_one();
}

void flush_log() {
  Log& g = the_log();
  std::string out;
  {
    std::lock_guard<std::mutex> l(g.mu);
    out.swap(g.buf);
  }
  g.write_out(out);
}

}  // namespace xcargo::loader
