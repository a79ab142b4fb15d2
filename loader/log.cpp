// A mutex-protected buffer, flushed every 20 ms by a thread that sleeps when nothing is queued;
// and the log copier, a process that copies every loader process's stderr pipe into the log.
#include "log.h"

#include "log_json.h"
#include "sandbox/processes.h"
#include "xcargo/file.h"

#include <fcntl.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <future>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <thread>
#include <vector>

namespace xcargo::loader {

namespace {

// --log-format json: set before any process that logs is forked, so all of them agree.
bool g_json = false;

// "YYYY-MM-DDTHH:MM:SS.uuuuuuZ", now, in UTC.
std::string utc_now() {
  timespec t{};
  ::clock_gettime(CLOCK_REALTIME, &t);
  tm g{};
  ::gmtime_r(&t.tv_sec, &g);
  char b[40];
  const size_t n = std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &g);
  std::snprintf(b + n, sizeof b - n, ".%06ldZ", long(t.tv_nsec / 1000));
  return b;
}

// Lines beyond this many unwritten bytes are dropped (and counted) rather than buffered: a
// stderr nobody reads must not grow the loader without bound.
constexpr size_t kMaxBuffered = 1 << 20;

void write_fd(int fd, const char* p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd, p + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += size_t(w);
  }
}

struct Log {
  std::mutex out_mu;  // held while a batch taken from buf is written: flush_log waits for it
  std::mutex mu;
  std::condition_variable cv;
  std::string buf;
  bool started = false;  // the flusher thread runs in this process
  bool direct = false;   // log_directly(): each line is written at once, by its caller
  size_t dropped = 0;
  int pid = 0;           // this process's, for the prefix (0: not known yet)
  bool journal = false;  // systemd's journal stamps lines itself
  bool journal_known = false;
  time_t stamped_second = -1;  // the second whose text is in `second`
  char second[32] = {};        // "YYYY-MM-DDTHH:MM:SS"
  std::string tail;            // "Z xcargo-loader[PID]: "

  // In pieces of at most PIPE_BUF bytes ending at a line's end where possible: such a write
  // to a pipe is atomic, so the processes sharing --log's pipe never split each other's lines.
  void write_out(std::string& out) {
    size_t at = 0;
    while (at < out.size()) {
      size_t n = std::min(out.size() - at, size_t(PIPE_BUF));
      if (at + n < out.size()) {
        const size_t nl = out.rfind('\n', at + n - 1);
        if (nl != std::string::npos && nl >= at) n = nl + 1 - at;
      }
      write_fd(2, out.data() + at, n);
      at += n;
    }
    out.clear();
  }
  void run() {
    std::string out;
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return !buf.empty(); });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // gather a batch
      // The batch is taken and written under out_mu: a worker that flushes and _exit()s
      // (flush_and_quit) must not end this thread between the two, losing the batch (a
      // crash's "failed invoke" line among it; guarded by log_test.cpp, "a line logged
      // before flush_log is written, whether or not the flusher has taken it").
      std::lock_guard<std::mutex> w(out_mu);
      {
        std::lock_guard<std::mutex> l(mu);
        out.swap(buf);
      }
      write_out(out);
    }
  }
  // Called with mu held: line, prefixed (or as a JSON object), and its newline.
  void append_line(std::string_view line) {
    if (g_json) {
      if (!pid) pid = int(::getpid());
      buf.append(json_log_line(utc_now(), pid, tag.empty() ? std::string(line) : tag + std::string(line))).append(1, '\n');
      return;
    }
    prefix();
    buf.append(tag).append(line).append(1, '\n');
  }
  std::string tag;  // set_log_tag's, guarded by mu
  // Called with mu held.
  void prefix() {
    if (!journal_known) {
      journal = std::getenv("JOURNAL_STREAM") != nullptr;
      journal_known = true;
    }
    if (journal) {
      buf.append("xcargo-loader: ");
      return;
    }
    timespec t{};
    ::clock_gettime(CLOCK_REALTIME, &t);
    if (t.tv_sec != stamped_second) {
      tm g{};
      ::gmtime_r(&t.tv_sec, &g);
      std::strftime(second, sizeof second, "%Y-%m-%dT%H:%M:%S", &g);
      stamped_second = t.tv_sec;
    }
    if (!pid) {
      pid = int(::getpid());
      tail = "Z xcargo-loader[" + std::to_string(pid) + "]: ";
    }
    // By hand, not snprintf: this runs for every line (a tenth of the cost).
    char micro[6];
    long us = long(t.tv_nsec / 1000);
    for (int i = 5; i >= 0; --i, us /= 10) micro[i] = char('0' + us % 10);
    buf.append(second).append(1, '.').append(micro, 6).append(tail);
  }
};

// The log copier's process (start_log_copier): every process's stderr pipe, copied line by
// line into the log file (rotated) or into stderr as the loader got it.
struct FileSink {
  std::string path, rotated;  // path empty: file_fd is the loader's own stderr, never rotated
  uint64_t max_size = UINT64_MAX;
  int file_fd = -1;
  uint64_t size = 0;
  uint64_t lost = 0;  // bytes that could not be written (reported in the next file)

  bool open_file() {
    if (path.empty() || !not_planted(path).ok()) return false;
    file_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (file_fd < 0) return false;
    const off_t end = ::lseek(file_fd, 0, SEEK_END);
    size = end > 0 ? uint64_t(end) : 0;
    return true;
  }
  void rotate() {
    ::rename(path.c_str(), rotated.c_str());
    if (file_fd >= 0) ::close(file_fd);
    file_fd = -1;
    open_file();
  }
  void put(const char* p, size_t n) {
    if (file_fd < 0 && !open_file()) {
      lost += n;
      return;
    }
    if (lost) {
      char note[96];
      const int k = std::snprintf(note, sizeof note, "xcargo-loader: (%llu bytes of log lost: %s could not be written)\n",
                                  static_cast<unsigned long long>(lost), "the log file");
      lost = 0;
      write_fd(file_fd, note, size_t(k));
      size += uint64_t(k);
    }
    write_fd(file_fd, p, n);
    size += n;
  }
  // Writes whole lines, rotating first where the next line would not fit (a line longer than
  // the limit alone in a file is written anyway).
  void emit(const char* p, size_t n) {
    while (n) {
      if (size + n <= max_size) return put(p, n);
      const size_t room = size < max_size ? size_t(max_size - size) : 0;
      size_t cut = 0;  // the lines that still fit
      for (size_t i = 0; i < room && i < n; ++i)
        if (p[i] == '\n') cut = i + 1;
      if (cut == 0 && size == 0) return put(p, n);
      if (cut) put(p, cut);
      p += cut;
      n -= cut;
      rotate();
    }
  }
  // One process's pipe, and the start of a line whose end has not come through it yet.
  struct Source {
    int fd = -1;
    std::string pending;
  };
  // A chunk read from a source: its complete lines now, the rest when its line ends (or the
  // pipe does).
  void copy(Source& src, const char* p, size_t n) {
    std::string& pending = src.pending;
    const size_t from = pending.size();
    pending.append(p, n);
    // A worker's bytes are its kernels' to write: no terminal control (ESC sequences set an
    // admin's clipboard or title, or worse) reaches the log, which a terminal may show.
    for (size_t i = from; i < pending.size(); ++i)
      if (const unsigned char c = uint8_t(pending[i]); (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) pending[i] = '?';
    // Nor text direction overrides and isolates, marks, or line and paragraph separators
    // (U+200E-F, U+2028-E, U+2066-9: three bytes each, perhaps split over two reads), which
    // make a line read otherwise than it is, a kernel's entry name say (guarded by log_test.cpp,
    // "the log copier writes no text direction override, even split over two writes").
    for (size_t i = from < 2 ? 0 : from - 2; i + 2 < pending.size(); ++i) {
      const auto b = [&](size_t k) { return uint8_t(pending[i + k]); };
      if (b(0) == 0xe2 && ((b(1) == 0x80 && ((b(2) >= 0x8e && b(2) <= 0x8f) || (b(2) >= 0xa8 && b(2) <= 0xae))) ||
                           (b(1) == 0x81 && b(2) >= 0xa6 && b(2) <= 0xa9)))
        pending.replace(i, 3, "???");
    }
    const size_t end = pending.rfind('\n');
    if (end == std::string::npos) {
      // Cut into pieces that fit the smallest log file with their newline (kMinLogFileSize).
      constexpr size_t kPiece = (64 << 10) - 1;
      while (pending.size() >= kPiece) {
        std::string piece = pending.substr(0, kPiece) + '\n';
        if (g_json) emit_json(piece.data(), piece.size());
        else emit(piece.data(), piece.size());
        pending.erase(0, kPiece);
      }
      return;
    }
    if (g_json) emit_json(pending.data(), end + 1);
    else emit(pending.data(), end + 1);
    pending.erase(0, end + 1);
  }
  // JSON mode: the loader's lines are objects already; any other (a library's own line on
  // stderr, a line cut at kPiece) becomes one, with pid 0, so that every line parses.
  void emit_json(const char* p, size_t n) {
    std::string out;
    for (size_t at = 0; at < n;) {
      const char* nl = static_cast<const char*>(std::memchr(p + at, '\n', n - at));
      const size_t end = nl ? size_t(nl - p) : n;
      const std::string_view line(p + at, end - at);
      if (line.rfind("{\"time\":", 0) == 0 && line.back() == '}') out.append(line).append(1, '\n');
      else out.append(json_log_line(utc_now(), 0, line)).append(1, '\n');
      at = end + 1;
    }
    emit(out.data(), out.size());
  }
  void finish(Source& src) {
    if (!src.pending.empty()) {
      src.pending.push_back('\n');
      if (g_json) emit_json(src.pending.data(), src.pending.size());
      else emit(src.pending.data(), src.pending.size());
    }
    ::close(src.fd);
  }
  std::vector<Source> sources;  // the supervisor's own stderr first, then one per child

  // Until every pipe has ended and the supervisor has closed `control`, over which it sends
  // the read end of each new child's pipe (SCM_RIGHTS).
  void run(int control) {
    static char chunk[64 << 10];
    std::vector<pollfd> fds;
    while (control >= 0 || !sources.empty()) {
      fds.clear();
      fds.push_back({control, POLLIN, 0});
      for (const Source& s : sources) fds.push_back({s.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      for (size_t i = fds.size() - 1; i >= 1; --i) {
        if (!fds[i].revents) continue;
        Source& src = sources[i - 1];
        const ssize_t n = ::read(src.fd, chunk, sizeof chunk);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n > 0) {
          copy(src, chunk, size_t(n));
          continue;
        }
        finish(src);
        sources.erase(sources.begin() + long(i - 1));
      }
      if (fds[0].revents) {
        char byte;
        int fd;
        const ssize_t n = sandbox::receive_fd(control, &byte, 1, &fd);
        if (n <= 0) {
          ::close(control);
          control = -1;
        }
        if (fd >= 0) {
          // Never a blocking read: a kernel that reopens its stderr pipe for reading can take
          // a byte the copier was told of, and a blocking copier then waits in read() for
          // ever, copying nobody's lines (guarded by tests/e2e/audit_test.sh, "the log
          // copier reads every pipe without blocking").
          ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
          sources.push_back({fd, {}});
        }
      }
    }
  }
};

// The supervisor's side of the copier: the connection it sends new pipes over, and stderr as
// the loader got it, given back by close_log. Closed in every child forked later: a worker
// must hold neither (a kernel would rewrite the log through the one, or send the copier
// descriptors through the other).
struct Copier {
  pid_t pid = -1;
  int control = -1;
  int console = -1;
};
Copier g_copier;

// Starts f on a detached thread and returns once f runs. The supervisor forks workers while
// its log threads live: a sanitizer (AddressSanitizer) sets a new thread up with its
// allocator's locks taken, and a fork meanwhile leaves them taken in the worker, whose every
// thread then waits for ever. Everything such a thread allocates later it allocates under a
// lock that fork's prepare handler takes too.
template <class F>
void start_detached(F f) {
  std::promise<void> running;
  std::future<void> started = running.get_future();
  std::thread([r = std::move(running), f = std::move(f)]() mutable {
    r.set_value();
    f();
  }).detach();
  started.wait();
}

Log& the_log() {
  // Never destroyed: the flusher thread may outlive main. A fork (the supervisor starting a
  // worker) takes the lock so that the child inherits it free, and the child, which has no
  // flusher thread, starts its own at its first line.
  static Log* log = [] {
    Log* g = new Log();
    // The child gets a new mutex and condition variable: the inherited ones may count the
    // parent's flusher as a waiter, and signalling that ghost would block forever. It must not
    // hold the copier's connection nor the loader's stderr (Copier).
    ::pthread_atfork([] { the_log().out_mu.lock(), the_log().mu.lock(); },
                     [] { the_log().mu.unlock(), the_log().out_mu.unlock(); },
                     [] {
                       Log& c = the_log();
                       new (&c.out_mu) std::mutex();
                       new (&c.mu) std::mutex();
                       new (&c.cv) std::condition_variable();
                       c.started = false;
                       c.direct = false;  // a worker's lines are many: batched again
                       c.pid = 0;
                       for (int* fd : {&g_copier.control, &g_copier.console})
                         if (*fd >= 0) ::close(std::exchange(*fd, -1));
                       g_copier.pid = -1;
                     });
    return g;
  }();
  return *log;
}

}  // namespace

void start_log() {
  Log& g = the_log();
  std::lock_guard<std::mutex> l(g.mu);
  if (!g.started) {
    g.started = true;
    start_detached([&g] { g.run(); });
  }
}

void log_directly() {
  Log& g = the_log();
  std::lock_guard<std::mutex> l(g.mu);
  g.direct = true;
}

void set_log_json(bool on) { g_json = on; }

void log_line(std::string_view line) {
  Log& g = the_log();
  if (g.direct) {
    std::string out;
    {
      std::lock_guard<std::mutex> l(g.mu);
      g.append_line(line);
      out.swap(g.buf);
    }
    return g.write_out(out);
  }
  start_log();
  std::lock_guard<std::mutex> l(g.mu);
  const bool was_empty = g.buf.empty();
  if (g.buf.size() + line.size() > kMaxBuffered) {
    ++g.dropped;
    return;
  }
  if (g.dropped) {
    g.append_line("(" + std::to_string(g.dropped) + " log lines dropped: stderr was not read)");
    g.dropped = 0;
  }
  g.append_line(line);
  if (was_empty) g.cv.notify_one();
}

void set_log_tag(std::string tag) {
  Log& g = the_log();
  std::lock_guard<std::mutex> l(g.mu);
  g.tag = std::move(tag);
}

void flush_log() {
  Log& g = the_log();
  std::lock_guard<std::mutex> w(g.out_mu);  // and a batch the flusher took is written too
  std::string out;
  {
    std::lock_guard<std::mutex> l(g.mu);
    out.swap(g.buf);
  }
  g.write_out(out);
}

Status start_log_copier(const std::string& path, uint64_t max_size) {
  if (g_copier.pid > 0) return Error(Errc::invalid_argument, "the log copier runs already");
  if (!path.empty() && max_size < kMinLogFileSize)
    return Error(Errc::invalid_argument, "--log-max-size " + std::to_string(max_size) + ": below the smallest, " +
                                             std::to_string(kMinLogFileSize) + " bytes");
  the_log();  // its fork handlers first: they close what follows in children
  FileSink sink;
  if (!path.empty()) {
    sink.path = path;
    sink.rotated = path + ".1";
    sink.max_size = max_size;
    if (Status planted = not_planted(path); !planted.ok())
      return Error(Errc::io, path + ": " + planted.error().message()).hint(planted.error().hints().front());
    if (!sink.open_file())
      return Error(Errc::io, path + ": cannot open the log file: " + std::strerror(errno))
          .hint("--log names a file the loader can create or append to (its directory must exist)");
  }
  const int console = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (path.empty()) sink.file_fd = console;
  int p[2], ctl[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Error(Errc::io, std::string("cannot make the log pipe: ") + std::strerror(errno));
  ::fcntl(p[0], F_SETPIPE_SZ, 1 << 20);  // room for bursts while the file is slow; best effort
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ctl) != 0)
    return Error(Errc::io, std::string("cannot make the log copier's connection: ") + std::strerror(errno));
  const pid_t pid = ::fork();
  if (pid < 0) return Error(Errc::io, std::string("cannot start the log copier: ") + std::strerror(errno));
  if (pid == 0) {
    // Nobody's to trace; it ends when every pipe and the connection have ended, not on the
    // signals its process group gets (Ctrl-C, a service manager's SIGTERM): the supervisor's
    // last lines come after those.
    ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    ::prctl(PR_SET_NAME, "xcargo-log");
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
    for (int fd : {p[1], ctl[0]}) ::close(fd);
    if (console != sink.file_fd) ::close(console);
    // Nothing else of the supervisor's: node memory, the key service's connection.
    sandbox::close_all_but({p[0], ctl[1], sink.file_fd});
    ::fcntl(p[0], F_SETFL, ::fcntl(p[0], F_GETFL) | O_NONBLOCK);
    sink.sources.push_back({p[0], {}});
    sink.run(ctl[1]);
    _exit(0);
  }
  if (!path.empty()) ::close(sink.file_fd);
  ::close(p[0]);
  ::close(ctl[1]);
  if (::dup2(p[1], 2) < 0) return Error(Errc::io, std::string("cannot send stderr to the log: ") + std::strerror(errno));
  ::close(p[1]);
  g_copier = {pid, ctl[0], console};
  return {};
}

ChildLog log_for_child() {
  ChildLog c;
  if (g_copier.control < 0) return c;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return c;  // the child shares our stderr then
  ::fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
  const bool sent = sandbox::send_fd(g_copier.control, p[0], "+");
  ::close(p[0]);
  if (!sent) {  // the copier is gone: the child shares our stderr
    ::close(p[1]);
    return c;
  }
  c.write_fd = p[1];
  return c;
}

void child_stderr(ChildLog& c) {
  if (c.write_fd < 0) return;
  ::dup2(c.write_fd, 2);  // dup2 clears close-on-exec on fd 2
  ::close(c.write_fd);
  c.write_fd = -1;
}

void parent_done(ChildLog& c) {
  if (c.write_fd >= 0) ::close(c.write_fd);
  c.write_fd = -1;
}

void close_log() {
  flush_log();
  if (g_copier.pid <= 0) return;
  // Our own write end goes (stderr is the console again, for a last error message), and the
  // connection: once no child holds a pipe either, the copier has written everything and ends.
  ::dup2(g_copier.console, 2);
  ::close(std::exchange(g_copier.control, -1));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = ::waitpid(g_copier.pid, nullptr, WNOHANG);
    if (r == g_copier.pid || (r < 0 && errno != EINTR)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  g_copier.pid = -1;
}

}  // namespace xcargo::loader
