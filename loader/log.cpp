// A mutex-protected buffer, flushed every 20 ms by a thread that sleeps when nothing is queued.
#include "log.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace xcargo::loader {

namespace {

struct Log {
  std::mutex mu;
  std::condition_variable cv;
  std::string buf;
  bool started = false;

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
  static Log* log = new Log();  // never destroyed: the flusher thread may outlive main
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
