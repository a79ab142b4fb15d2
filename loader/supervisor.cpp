// The supervisor: starts the worker process and its compile service, restarts them when the
// worker dies, stops them on a signal.
#include "supervisor.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
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

Result<pid_t> start_compile_service(const CompilerMain& compiler, int* worker_end) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Error(Errc::io, std::string("socketpair failed: ") + std::strerror(errno));
  ChildLog child_log = log_for_child();
  const pid_t pid = ::fork();
  if (pid < 0) {
    parent_done(child_log);
    ::close(sv[0]);
    ::close(sv[1]);
    return Error(Errc::io, std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    child_stderr(child_log);
    ::dup2(2, 1);
    ::close(sv[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::prctl(PR_SET_NAME, "xcargo-compiler");  // told apart from the worker in ps and pgrep
    if (::getppid() == 1) _exit(1);
    _exit(compiler(sv[1]));
  }
  parent_done(child_log);
  ::close(sv[1]);
  *worker_end = sv[0];
  return pid;
}

namespace {

void end_process(pid_t pid) {
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

Result<int> supervise(const SupervisorOptions& options, const std::atomic<bool>& stop, const WorkerMain& worker,
                      const CompilerMain& compiler) {
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
    int compiler_fd = -1;
    auto compiler_pid = start_compile_service(compiler, &compiler_fd);
    XC_TRY(compiler_pid);
    int pfd[2];
    if (::pipe2(pfd, O_CLOEXEC) != 0) return Error(Errc::io, std::string("pipe failed: ") + std::strerror(errno));
    ChildLog child_log = log_for_child();
    pid_t pid = ::fork();
    if (pid < 0) return Error(Errc::io, std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      child_stderr(child_log);
      ::dup2(2, 1);  // its stdout is its log too: the loader's own stdout (a file, say) is out of a kernel's reach
      ::close(pfd[0]);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
      // Dumpable again, as a process is by default: local UCX peers of the same uid attach its
      // shared-memory segments through /proc/PID/fd. What it may reach is the sandbox's concern.
      ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
      if (::getppid() == 1) _exit(1);
      _exit(worker(listen, pfd[1], incident, kIncidentSize, compiler_fd));
    }
    parent_done(child_log);
    ::close(pfd[1]);
    ::close(compiler_fd);
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
    end_process(*compiler_pid);  // each worker gets a fresh one
    if (stop) {
      log_line("stopped");
      flush_log();
      return 0;
    }
    // A worker's exit is a stop only when this process was asked to stop (above): a kernel
    // can make its own worker exit 0 (SIGTERM to itself, exit_group), which must not take
    // the loader down.
    if (addr.empty()) {
      if (first && !hung) return WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;  // it never started: a configuration problem
      // A restart that could not start (e.g. the port not yet free), or a start that hung:
      // retry for a while.
      // After it has served once, never give up: what keeps a worker from starting may pass
      // (the port held by another process for a while, a trust directory being edited), and
      // a loader that exits is one a kernel elsewhere on the host could take down for good.
      ++failed_starts;
      if (first && failed_starts > 2) return Error(Errc::io, "the worker cannot be started; giving up");
      if (!first && (failed_starts == 5 || failed_starts % 50 == 0)) {
        log_line("worker could not start " + std::to_string(failed_starts) +
                 " times in a row (its own lines say why); retrying every second");
        flush_log();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(failed_starts < 10 ? 100 : 1000));
      continue;
    }
    failed_starts = 0;
    // What waitpid says is this process's own finding; the incident page is the worker's
    // word, which a kernel running in it could have written.
    std::string why = WIFSIGNALED(ws) ? std::string("killed by signal ") + std::to_string(WTERMSIG(ws)) + " (" + strsignal(WTERMSIG(ws)) + ")"
                                      : "exited with status " + std::to_string(WEXITSTATUS(ws));
    if (incident[0]) why += "; it reported: " + std::string(incident, ::strnlen(incident, kIncidentSize));
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
