// The supervisor: starts the worker process, restarts it when it dies, stops it on a signal.
#include "supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "log.h"
#include "timing.h"
#include "xcargo/file.h"

namespace xcargo::loader {

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kIncidentSize = 4096;

// Reads the worker's "HOST:PORT" line; empty if the worker exits first or says nothing
// before `limit` (then *timed_out).
std::string read_address(int fd, std::chrono::milliseconds limit, bool* timed_out) {
  std::string s;
  const auto deadline = Clock::now() + limit;
  char c;
  pollfd p{fd, POLLIN, 0};
  *timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      *timed_out = true;
      return "";
    }
    const int r = ::poll(&p, 1, int(left));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) continue;  // the deadline, checked above
    if (r < 0 || ::read(fd, &c, 1) != 1) return "";
    if (c == '\n') return s;
    s.push_back(c);
  }
}

// What a worker that does not start is doing: each thread's name, state and system call
// (from /proc; what cannot be read is left out).
std::string describe_threads(pid_t pid) {
  std::string out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (!d) return "its threads cannot be read";
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string task = dir + "/" + e->d_name;
    std::string comm, stat, call;
    std::getline(std::ifstream(task + "/comm"), comm);
    std::getline(std::ifstream(task + "/stat"), stat);
    std::getline(std::ifstream(task + "/syscall"), call);
    const size_t close = stat.rfind(')');
    const char state = close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
    out += (out.empty() ? "" : ", ") + std::string(e->d_name) + " " + comm + " " + state;
    if (!call.empty()) out += " syscall " + call.substr(0, call.find(' '));
  }
  ::closedir(d);
  return out;
}

}  // namespace

Result<int> supervise(const SupervisorOptions& options, const std::atomic<bool>& stop, const WorkerMain& worker) {
  // No process of this uid without CAP_SYS_PTRACE (a worker included) may read or write this
  // one's memory (/proc/PID/mem, process_vm_writev) or attach to it.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return Error(Errc::io, std::string("cannot make the supervisor non-dumpable: ") + std::strerror(errno));
  char* incident = static_cast<char*>(::mmap(nullptr, kIncidentSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (incident == MAP_FAILED) return Error(Errc::io, "cannot map the incident page");
  incident[0] = '\0';
  std::string listen = options.listen;
  std::deque<Clock::time_point> restarts;
  bool first = true;
  int failed_starts = 0;
  for (;;) {
    int pfd[2];
    if (::pipe2(pfd, O_CLOEXEC) != 0) return Error(Errc::io, std::string("pipe failed: ") + std::strerror(errno));
    pid_t pid = ::fork();
    if (pid < 0) return Error(Errc::io, std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      ::close(pfd[0]);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
      // Dumpable again, as a process is by default: local UCX peers of the same uid attach its
      // shared-memory segments through /proc/PID/fd. What it may reach is the sandbox's concern.
      ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
      if (::getppid() == 1) _exit(1);
      _exit(worker(listen, pfd[1], incident, kIncidentSize));
    }
    ::close(pfd[1]);
    bool silent = false;  // alive, but said nothing within the limit
    std::string addr = read_address(pfd[0], timing::kWorkerStartLimit, &silent), confined;
    ::close(pfd[0]);
    if (const size_t tab = addr.find('\t'); tab != std::string::npos) {
      confined = addr.substr(tab + 1);
      addr.resize(tab);
    }
    bool hung = false;
    if (addr.empty() && !stop && silent) {
      // Alive but silent: stuck before it could serve (seen once under a sanitizer on a busy
      // machine). Say where, end it, and try again.
      hung = true;
      log_line("worker did not start within " + std::to_string(timing::kWorkerStartLimit.count() / 1000) +
               " s; ending it. Its threads: " + describe_threads(pid));
      flush_log();
      ::kill(pid, SIGKILL);
    }
    if (!addr.empty()) {
      if (first) {
        if (!options.ready_file.empty())
          if (auto s = write_file(options.ready_file, as_bytes(addr + "\n")); !s.ok()) {
            ::kill(pid, SIGKILL);
            return Error(Errc::io, options.ready_file + ": " + s.error().message());
          }
        log_line("listening on " + addr + options.started + (confined.empty() ? "" : "; worker " + confined));
        flush_log();  // lifecycle lines are rare: write them at once
        listen = addr;  // restarts keep the port, even one picked with port 0
        first = false;
      } else {
        log_line("worker restarted; listening on " + addr);
        flush_log();
      }
    }
    int ws = 0;
    bool forwarded = false;
    Clock::time_point kill_at{};
    for (;;) {
      pid_t r = ::waitpid(pid, &ws, forwarded ? WNOHANG : 0);
      if (r == pid) break;
      if (r < 0 && errno != EINTR) return Error(Errc::io, std::string("waitpid failed: ") + std::strerror(errno));
      if (stop && !forwarded) {
        ::kill(pid, SIGTERM);
        forwarded = true;
        kill_at = Clock::now() + std::chrono::milliseconds(int64_t(options.kernel_timeout_s * 1000) + 2000);  // a kernel may still be running
      }
      if (forwarded) {
        if (Clock::now() > kill_at) ::kill(pid, SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    if (stop) {
      log_line("stopped");
      flush_log();
      return 0;
    }
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) return 0;
    if (addr.empty()) {
      if (first && !hung) return WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;  // it never started: a configuration problem
      // A restart that could not start (e.g. the port not yet free), or a start that hung:
      // retry for a while.
      if (++failed_starts > (first ? 2 : 20)) return Error(Errc::io, "the worker cannot be started; giving up");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    failed_starts = 0;
    std::string why = incident[0] ? std::string(incident, ::strnlen(incident, kIncidentSize))
                      : WIFSIGNALED(ws) ? std::string("killed by signal ") + std::to_string(WTERMSIG(ws)) + " (" + strsignal(WTERMSIG(ws)) + ")"
                                        : "exited with status " + std::to_string(WEXITSTATUS(ws));
    log_line("worker stopped: " + why + "; restarting it");
    flush_log();
    const bool kernel_incident = incident[0] != '\0';
    incident[0] = '\0';
    // A worker that keeps dying on its own (not a kernel the worker caught and reported,
    // which needs a request each time) is in a crash loop: slow down.
    const auto now = Clock::now();
    if (!kernel_incident) restarts.push_back(now);
    while (!restarts.empty() && now - restarts.front() > std::chrono::seconds(2)) restarts.pop_front();
    if (restarts.size() > 5) std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace xcargo::loader
