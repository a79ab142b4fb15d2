// The supervisor: starts the worker process and its compile service, restarts them when the
// worker dies, stops them on a signal.
#include "supervisor.h"

#include "sandbox/processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <optional>
#include <thread>
#include <utility>

#include "door_keeper.h"
#include "log.h"
#include "tls_keeper.h"
#include "timing.h"
#include "xcargo/file.h"

namespace xcargo::loader {

namespace {

using Clock = std::chrono::steady_clock;

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

// In a forked child whose exec failed (exec_planned returned): says so on stderr (its log)
// and in its incident page, if any, and exits 127. System calls only, as between fork and exec.
[[noreturn]] void exec_failed(char* incident, size_t incident_size) {
  static constexpr char kWhy[] = "could not exec the loader's own file to start this process";
  (void)!::write(2, kWhy, sizeof kWhy - 1);
  (void)!::write(2, "\n", 1);
  if (incident && incident_size > sizeof kWhy) std::memcpy(incident, kWhy, sizeof kWhy);
  _exit(127);
}

}  // namespace

Result<pid_t> start_compile_service(const CompilerMain& compiler, int* worker_end, const PlanCompiler& plan_compiler) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return Error(Errc::io, std::string("socketpair failed: ") + std::strerror(errno));
  std::optional<ExecPlan> plan;
  if (plan_compiler) {
    auto p = plan_compiler(sv[1]);
    if (!p.ok()) {
      ::close(sv[0]);
      ::close(sv[1]);
      return p.take_error();
    }
    plan = std::move(*p);
  }
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
    if (plan) {
      exec_planned(*plan);
      exec_failed(nullptr, 0);
    }
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

// One worker process, its compile service, and the supervisor's ends of their pipes. A
// worker says "standby" once it is ready but for listening, takes over when it reads a byte
// from `go`, then says "HOST:PORT\tTLS-HOST:PORT\tHOW-CONFINED" once it serves. Anything it writes after
// that, or the end of the pipe, means it is ending: its listener is closed or it is dead.
struct Child {
  pid_t pid = -1, compiler = -1;
  int from = -1, go = -1;
  int door = -1;  // the keeper's end of its door channel
  int tls = -1;   // the TLS keeper's end of its channel
  char* incident = nullptr;  // its own page: a line saying why it is about to stop
  std::string buf;           // what `from` gave that is not yet a whole line
  bool ready = false;        // said "standby"
  bool ending = false;
  bool killed = false;            // the supervisor sent it SIGKILL (stopped, or stuck after a failure)
  Clock::time_point started{}, ending_since{};
  Clock::time_point incident_at{};  // when the supervisor first saw its incident line
  Clock::time_point door_lost_at{};  // when the supervisor first saw its door channel ended
  std::function<void()> forget_key;  // closes its connection to the key service

  explicit operator bool() const { return pid > 0; }
  // Reads what is there (blocking once if `block`); false at the end of the pipe or when
  // it writes more than a line can hold.
  bool fill(bool block) {
    char chunk[512];
    for (;;) {
      const ssize_t n = ::read(from, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) return true;  // a signal: the caller looks at stop
      if (n < 0 && errno == EAGAIN) return true;
      if (n <= 0) return false;
      buf.append(chunk, size_t(n));
      if (buf.size() > kIncidentSize) return false;
      if (block || size_t(n) < sizeof chunk) return true;
    }
  }
  std::optional<std::string> line() {
    const size_t nl = buf.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string l = buf.substr(0, nl);
    buf.erase(0, nl + 1);
    return l;
  }
  // The next line within `limit`; nullopt if the pipe ends first, the limit passes (then
  // *timed_out) or stop is set.
  std::optional<std::string> next_line(std::chrono::milliseconds limit, const std::atomic<bool>& stop, bool* timed_out) {
    const auto deadline = Clock::now() + limit;
    *timed_out = false;
    for (;;) {
      if (auto l = line()) return l;
      if (stop) return std::nullopt;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        *timed_out = true;
        return std::nullopt;
      }
      pollfd p{from, POLLIN, 0};
      const int r = ::poll(&p, 1, int(left));
      if (r < 0 && errno == EINTR) continue;
      if (r > 0 && !fill(false)) return line();
    }
  }
  // Waits for its exit (after SIGKILL if `kill`; a worker that closed its pipe but still
  // runs after a few seconds is killed too), ends its compile service, frees the rest.
  int reap(bool kill) {
    if (kill) ::kill(pid, SIGKILL);
    const int ws = sandbox::reap_within(pid, timing::kReapGrace);
    release();
    return ws;
  }
  void release() {
    if (forget_key) forget_key();  // what a kernel may have passed on dies with the worker
    if (compiler > 0) end_process(compiler);
    if (from >= 0) ::close(from);
    if (go >= 0) ::close(go);
    if (door >= 0) ::close(door);
    if (tls >= 0) ::close(tls);
    if (incident) ::munmap(incident, kIncidentSize);
    *this = Child();
  }
};

// Maps c's incident page, empty, from a memory file (which a worker started by exec maps
// again): its descriptor, or -1 (c.incident stays null).
int map_incident(Child& c) {
  const int fd = ::memfd_create("xcargo-incident", MFD_CLOEXEC);
  if (fd >= 0 && ::ftruncate(fd, kIncidentSize) == 0) {
    void* p = ::mmap(nullptr, kIncidentSize, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p != MAP_FAILED) {
      c.incident = static_cast<char*>(p);
      c.incident[0] = '\0';
      return fd;
    }
  }
  if (fd >= 0) ::close(fd);
  return -1;
}

// Forks a worker (and its compile service) that prepares and waits for `go`.
Result<Child> spawn(const Listen& listen, const WorkerMain& worker, const CompilerMain& compiler,
                    const SupervisorOptions& options) {
  Child c;
  int key_fd = -1;
  if (options.connect_key) {
    auto k = options.connect_key();
    XC_TRY(k);
    key_fd = k->first;
    if (options.disconnect_key) c.forget_key = [&options, id = k->second] { options.disconnect_key(id); };
  }
  int compiler_fd = -1;
  auto compiler_pid = start_compile_service(compiler, &compiler_fd, options.plan_compiler);
  if (!compiler_pid.ok() && key_fd >= 0) ::close(key_fd);
  XC_TRY(compiler_pid);
  c.compiler = *compiler_pid;
  int from[2], go[2];
  if (::pipe2(from, O_CLOEXEC) != 0) {
    c.release();
    for (int fd : {compiler_fd, key_fd}) ::close(fd);
    return Error(Errc::io, std::string("pipe failed: ") + std::strerror(errno));
  }
  if (::pipe2(go, O_CLOEXEC) != 0) {
    ::close(from[0]);
    ::close(from[1]);
    c.release();
    for (int fd : {compiler_fd, key_fd}) ::close(fd);
    return Error(Errc::io, std::string("pipe failed: ") + std::strerror(errno));
  }
  int door[2] = {-1, -1};  // its channel to the door keeper, if the loader has a door
  if (options.door && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, door) != 0) {
    for (int fd : {from[0], from[1], go[0], go[1], compiler_fd, key_fd}) ::close(fd);
    c.release();
    return Error(Errc::io, std::string("socketpair failed: ") + std::strerror(errno));
  }
  int tls[2] = {-1, -1};  // its channel from the TLS keeper, if the loader has one
  if (options.tls_keeper && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, tls) != 0) {
    for (int fd : {from[0], from[1], go[0], go[1], door[0], door[1], compiler_fd, key_fd}) ::close(fd);
    c.release();
    return Error(Errc::io, std::string("socketpair failed: ") + std::strerror(errno));
  }
  c.tls = tls[0];
  c.door = door[0];
  c.from = from[0];
  c.go = go[1];
  const int incident_fd = map_incident(c);
  if (incident_fd < 0) {
    for (int fd : {from[1], go[0], door[1], tls[1], compiler_fd, key_fd}) ::close(fd);
    c.release();
    return Error(Errc::io, "cannot map an incident page");
  }
  std::optional<ExecPlan> plan;
  if (options.plan_worker) {
    auto p = options.plan_worker(listen, WorkerFds{from[1], go[0], incident_fd, compiler_fd, key_fd, door[1], tls[1]});
    if (!p.ok()) {
      for (int fd : {from[1], go[0], door[1], tls[1], compiler_fd, key_fd, incident_fd}) ::close(fd);
      c.release();
      return p.take_error();
    }
    plan = std::move(*p);
  }
  ChildLog child_log = log_for_child();
  const pid_t pid = ::fork();
  if (pid < 0) {
    parent_done(child_log);
    for (int fd : {from[1], go[0], door[1], tls[1], compiler_fd, key_fd, incident_fd}) ::close(fd);
    c.release();
    return Error(Errc::io, std::string("fork failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    child_stderr(child_log);
    ::dup2(2, 1);  // its stdout is its log too: the loader's own stdout (a file, say) is out of a kernel's reach
    ::close(from[0]);
    ::close(go[1]);
    if (door[0] >= 0) ::close(door[0]);
    if (tls[0] >= 0) ::close(tls[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the supervisor
    // Told apart in ps and pgrep: xcargo-standby until it takes over, then xcargo-loader
    // (and xcargo-ending once it is about to end).
    ::prctl(PR_SET_NAME, "xcargo-standby");
    // Dumpable again, as a process is by default: local UCX peers of the same uid attach its
    // shared-memory segments through /proc/PID/fd. What it may reach is the sandbox's concern.
    ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    if (::getppid() == 1) _exit(1);
    if (plan) {
      exec_planned(*plan);
      exec_failed(c.incident, kIncidentSize);
    }
    _exit(worker(listen, from[1], go[0], c.incident, kIncidentSize, incident_fd, compiler_fd, key_fd, door[1], tls[1]));
  }
  parent_done(child_log);
  for (int fd : {from[1], go[0], door[1], tls[1], compiler_fd, key_fd, incident_fd}) ::close(fd);
  ::fcntl(c.from, F_SETFL, ::fcntl(c.from, F_GETFL) | O_NONBLOCK);
  c.pid = pid;
  c.started = Clock::now();
  return c;
}

// Removes the System V shared-memory segments a worker made and left: not attached, not marked
// for removal, and (unless `any_age`, its process gone) older than kOrphanSegmentAge. UCX's own
// segments are attached and marked for removal within microseconds of their creation; a
// kernel's (through syscall()) would outlive the worker and the loader, outside every memory
// limit (guarded by escape_sysv_leak in tests/kernels/adversary.c, run by
// tests/e2e/adversary_test.sh). Returns how many.
int remove_orphan_segments(pid_t worker, bool any_age) {
  shm_info info{};
  const int max = ::shmctl(0, SHM_INFO, reinterpret_cast<shmid_ds*>(&info));
  int removed = 0;
  const time_t now = ::time(nullptr);
  for (int i = 0; i <= max; ++i) {
    shmid_ds ds{};
    const int id = ::shmctl(i, SHM_STAT, &ds);
    if (id < 0 || ds.shm_cpid != worker || ds.shm_nattch != 0 || (ds.shm_perm.mode & SHM_DEST)) continue;
    if (!any_age && now - ds.shm_ctime < timing::kOrphanSegmentAge.count()) continue;
    if (::shmctl(id, IPC_RMID, nullptr) == 0) ++removed;
  }
  return removed;
}

std::string ms_since(Clock::time_point t) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", ms);
  return b;
}

// What a worker said once told to go: its addresses and how it is confined (addr empty: it
// did not start), whether it stayed silent past the limit, and whether it was a ready standby.
struct StartReply {
  std::string addr, tls, confined;
  bool silent = false;  // alive, but said nothing within the limit
  bool was_ready = false;
};

// The supervisor's state while it runs: the serving worker, its standby, the workers ending,
// the door and the pace of restarts. run() is the loop that supervise() returns from.
struct Supervision {
  const SupervisorOptions& options;
  const std::atomic<bool>& stop;
  const WorkerMain& worker;
  const CompilerMain& compiler;
  Listen listen = options.listen;
  std::deque<Clock::time_point> restarts;
  bool first = true;
  int failed_starts = 0, standby_failures = 0;
  Child cur, standby;
  std::unique_ptr<DoorKeeper> own_door;    // the same-host door, once the first worker has bound its address
  DoorKeeper* door = options.door_keeper;  // the door its workers serve: its own, or one shared by tenants
  std::vector<Child> ending;          // ended or ending, not yet reaped
  Clock::time_point gap_since{};      // when the last serving worker began to end
  Clock::time_point standby_at{};     // no new standby before this (after one failed)
  // Its lines name the tenant whose workers it runs ("tenant lab: worker stopped: ...").
  const std::string tag = options.tenant.empty() ? "" : "tenant " + options.tenant + ": ";
  void say(const std::string& line) const { log_line(tag + line); }

  // Reaps what has exited among `ending` (all of them, killing what is left, if `all`).
  void reap_ending(bool all) {
    for (size_t i = 0; i < ending.size();) {
      Child& c = ending[i];
      int ws = 0;
      pid_t r = ::waitpid(c.pid, &ws, WNOHANG);
      const bool overdue = Clock::now() - c.ending_since > timing::kEndingGrace;
      if (r == 0 && (all || overdue)) {
        if (overdue) say("worker " + std::to_string(c.pid) + " still runs " + std::to_string(timing::kEndingGrace.count()) + " ms after it began to end; killing it");
        ::kill(c.pid, SIGKILL);
        while ((r = ::waitpid(c.pid, &ws, 0)) < 0 && errno == EINTR) {
        }
      }
      if (r != c.pid) {
        ++i;
        continue;
      }
      // What waitpid says is this process's own finding; the incident page is the worker's
      // word, which a kernel running in it could have written.
      std::string why = sandbox::exit_text(ws);
      if (c.incident[0]) why += "; it reported: " + std::string(c.incident, ::strnlen(c.incident, kIncidentSize));
      if (const int n = remove_orphan_segments(c.pid, true))
        why += "; removed " + std::to_string(n) + " shared-memory segments it left";
      if (!stop) say("worker stopped: " + why + (options.standby ? "; replaced by its standby" : "; restarting it"));
      flush_log();
      if (door) door->ended(c.door);  // its same-host clients' lifelines close
      if (options.on_worker_ended) options.on_worker_ended(c.pid);
      c.release();
      ending.erase(ending.begin() + long(i));
    }
  }

  // Stops every process: the serving worker gets SIGTERM and time for a running kernel.
  Result<int> shut_down() {
    if (options.tls_keeper) options.tls_keeper->serve(options.tenant, -1);
    if (door) door->serve(options.tenant, -1);
    const auto kill_at = Clock::now() + std::chrono::milliseconds(int64_t(options.kernel_timeout_s * 1000) + 2000);
    // A standby waiting for its go reads its end of `go`: closed, that read ends. SIGTERM
    // alone does not always end it: one that gets it during its start (g_stop set before it
    // begins to wait) would wait for ever, and the loader with it (guarded by
    // tests/e2e/storm_test.sh, "the loader stopped" with its standby).
    for (Child* c : {&cur, &standby})
      if (*c) {
        ::kill(c->pid, SIGTERM);
        if (c->go >= 0) ::close(std::exchange(c->go, -1));
      }
    for (Child* c : {&cur, &standby}) {
      if (!*c) continue;
      int ws = 0;
      while (::waitpid(c->pid, &ws, WNOHANG) == 0) {
        if (Clock::now() > kill_at) ::kill(c->pid, SIGKILL);
        std::this_thread::sleep_for(timing::kShutDownPoll);
      }
      c->release();
    }
    reap_ending(true);
    // The ready file says the loader listens: not any more (unless it names another's).
    if (!listen.ucx.empty() && !options.ready_file.empty() && options.ready_file != "-")
      if (auto cur = read_file(options.ready_file, 4096); cur.ok() && std::string(cur->begin(), cur->end()) == listen.ready_text())
        ::unlink(options.ready_file.c_str());
    say("stopped");
    flush_log();
    return 0;
  }

  // Puts a serving worker in cur: the standby, else a new one. Returns what supervise()
  // returns when it must end here; nullopt otherwise, with cur still empty when no worker
  // could start now (after a pause: the next turn of run() tries again).
  std::optional<Result<int>> bring_up() {
    Child w;
    if (standby) {
      w = std::move(standby);
      standby = Child();
    } else {
      auto c = spawn(listen, worker, compiler, options);
      if (!c.ok()) {
        // No process, pipe or connection for a worker now (memory short, say): the first
        // start reports it; after serving, retry, as for a worker that cannot start.
        if (first) return c.take_error();
        say("cannot start a worker: " + c.error().message() + "; retrying in a second");
        flush_log();
        std::this_thread::sleep_for(timing::kSpawnRetry);
        reap_ending(false);
        return std::nullopt;
      }
      w = std::move(*c);
    }
    const StartReply reply = hear_start(w);
    if (stop) {
      cur = std::move(w);
      return shut_down();
    }
    if (reply.addr.empty()) return failed_start(w, reply.silent);
    failed_starts = 0;
    return take_over(w, reply);
  }

  // Waits for w to be ready (unless it is), tells it to go, and parses what it says then.
  StartReply hear_start(Child& w) {
    StartReply reply;
    std::optional<std::string> said;
    reply.was_ready = w.ready;
    if (!w.ready) {
      said = w.next_line(timing::kWorkerStartLimit, stop, &reply.silent);
      w.ready = said && *said == "standby";
    }
    if (w.ready && ::write(w.go, "g", 1) == 1) {
      said = w.next_line(timing::kWorkerStartLimit, stop, &reply.silent);
      if (said) reply.addr = *said;
    }
    if (const size_t tab = reply.addr.find('\t'); tab != std::string::npos) {
      reply.confined = reply.addr.substr(tab + 1);
      reply.addr.resize(tab);
      if (const size_t t2 = reply.confined.find('\t'); t2 != std::string::npos) {
        reply.tls = reply.confined.substr(0, t2);
        reply.confined.erase(0, t2 + 1);
      }
    }
    return reply;
  }

  // Ends w, which did not start (`silent`: alive but mute past the limit). Returns what
  // supervise() returns when the first start fails so; nullopt after the pause before a retry.
  std::optional<Result<int>> failed_start(Child& w, bool silent) {
    // Alive but silent: stuck before it could serve (a start under a sanitizer on a busy
    // machine can hang so). Say where, end it, and try again.
    const bool hung = silent;
    if (hung) {
      say("worker did not start within " + std::to_string(timing::kWorkerStartLimit.count() / 1000) +
               " s; ending it. Its threads: " + describe_threads(w.pid));
      flush_log();
    }
    const int ws = w.reap(hung);
    if (first && !hung) return WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;  // it never started: a configuration problem
    // A restart that could not start (e.g. the port not yet free), or a start that hung:
    // retry for a while. After it has served once, never give up: what keeps a worker
    // from starting may pass (the port held by another process for a while, a trust
    // directory being edited), and a loader that exits is one a kernel elsewhere on the
    // host could take down for good.
    ++failed_starts;
    if (first && failed_starts > 2) return Error(Errc::io, "the worker cannot be started; giving up");
    if (!first && (failed_starts == 5 || failed_starts % 50 == 0)) {
      say("worker could not start " + std::to_string(failed_starts) +
               " times in a row (its own lines say why); retrying every second");
      flush_log();
    }
    std::this_thread::sleep_for(failed_starts < timing::kStartRetriesSoon ? timing::kStartRetry : timing::kStartRetrySlow);
    reap_ending(false);
    return std::nullopt;
  }

  // Makes w, which serves at reply's addresses, the serving worker (cur): the first one opens
  // the door and writes the ready file, then the log says so and the keepers pass it their
  // clients. Returns what supervise() returns when the door or the ready file cannot be made.
  std::optional<Result<int>> take_over(Child& w, const StartReply& reply) {
    if (first && options.door && !door) {  // the door opens before the ready file says the loader serves
      DoorKeeper::Options d;
      d.host_port = reply.addr;
      d.other_users = reply.tls.empty() ? "this loader has no TLS front door for other users (its admin can give it one: tls-listen)"
                                        : "reach it over TLS: tls://" + reply.tls;
      d.node_key = options.node_key;
      d.log = [](const std::string& line) { log_line(line); };
      auto k = DoorKeeper::open(std::move(d));
      if (!k.ok()) {
        w.reap(true);
        return k.take_error();
      }
      own_door = std::move(*k);
      door = own_door.get();
    }
    if (first) {
      if (!options.ready_file.empty())
        if (auto s = write_file(options.ready_file, as_bytes(Listen{reply.addr, reply.tls}.ready_text())); !s.ok()) {
          w.reap(true);
          return Error(Errc::io, options.ready_file + ": " + s.error().message());
        }
      listen = Listen{reply.addr, reply.tls};  // restarts keep the ports, even ones picked with port 0
      if (options.tenant.empty())
        say("listening on " + listen.described(options.ucx_what) + options.started +
            (reply.confined.empty() ? "" : "; worker " + reply.confined));
      else
        say("serving" + (reply.confined.empty() ? "" : "; worker " + reply.confined));
      for (const std::string& line : options.started_notes) say(line);
      first = false;
      standby_at = Clock::now() + timing::kFirstStandbyAfter;
    } else {
      if (options.on_restart) options.on_restart();
      say("worker restarted; listening on " + Listen{reply.addr, reply.tls}.text() + " " + ms_since(gap_since) +
               " ms after the last one began to end" + (reply.was_ready ? "" : " (no standby was ready)"));
    }
    flush_log();  // lifecycle lines are rare: write them at once
    cur = std::move(w);
    if (door) door->serve(options.tenant, cur.door);
    if (options.tls_keeper) options.tls_keeper->serve(options.tenant, cur.tls);
    return std::nullopt;
  }

  // Spawns a standby; one that cannot be spawned is tried again kSpawnRetry later.
  void start_standby() {
    auto c = spawn(listen, worker, compiler, options);
    if (c.ok()) {
      standby = std::move(*c);
    } else {
      say("cannot start a standby worker: " + c.error().message());
      standby_at = Clock::now() + timing::kSpawnRetry;
    }
  }

  // How long run() polls, in ms: at least every kStoppedCheck (a stopped worker says nothing
  // and keeps its pipe open), every 50 ms while workers are ending, and no later than the
  // next standby is due.
  int poll_ms() const {
    int wait_ms = int(timing::kStoppedCheck.count());
    if (!ending.empty()) wait_ms = 50;
    else if (options.standby && !standby) wait_ms = int(std::clamp<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(standby_at - Clock::now()).count(), 1, wait_ms));
    return wait_ms;
  }

  // Kills the serving worker when it is stopped by a signal, or stuck after reporting a
  // failure or after losing its door channel (it then ends as a dead worker does), and
  // removes the System V segments it left.
  void watch_serving() {
    // A worker stopped by a signal (SIGSTOP from a kernel, by whatever route the sandbox
    // misses) serves nobody, its monitor and probe frozen with it: the node would stay deaf
    // until an admin sends SIGCONT. It is killed, and ends as a dead worker does (its pipe
    // closes; guarded by tests/e2e/adversary_test.sh, "a stopped worker is killed and
    // replaced"). WSTOPPED alone: an exit stays for reap_ending.
    if (siginfo_t si{}; ::waitid(P_PID, id_t(cur.pid), &si, WSTOPPED | WNOHANG) == 0 && si.si_pid == cur.pid &&
                        si.si_code == CLD_STOPPED) {
      say("worker stopped by signal " + std::to_string(si.si_status) + " (" + strsignal(si.si_status) +
               "): a stopped worker serves nobody; killing it");
      flush_log();
      ::kill(cur.pid, SIGKILL);
      cur.killed = true;
    }
    if (const int n = remove_orphan_segments(cur.pid, false))
      say("removed " + std::to_string(n) + " System V shared-memory segments the worker made and left (not UCX's: a kernel's)");
    // A worker that reported a failure (its incident line) ends within a second, its replies
    // sent; one still there kEndingGrace after the supervisor saw the line is stuck (a kernel
    // stopped inside the C library with a lock taken leaves the worker's end waiting on that
    // lock for good, port open and served by nobody).
    if (cur.incident[0] && !cur.killed) kill_if_stuck(cur.incident_at, "worker reported a failure", "and has not ended");
    // A worker whose door channel ended (shut down by a kernel, say) serves no new same-host
    // client: it ends in order when it sees that, and one still serving kEndingGrace later
    // (its descriptor closed, so it cannot see it) is killed.
    if (door && cur.door >= 0 && !cur.killed)
      if (pollfd p{cur.door, POLLRDHUP, 0}; ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR)))
        kill_if_stuck(cur.door_lost_at, "worker's channel to the same-host door ended", "and it still serves");
  }

  // The serving worker in a state it leaves within kEndingGrace, first seen at `since`:
  // killed once it has not ("WHAT N ms ago AND_THEN; killing it").
  void kill_if_stuck(Clock::time_point& since, const std::string& what, const char* and_then) {
    if (since == Clock::time_point{}) {
      since = Clock::now();
    } else if (Clock::now() - since > timing::kEndingGrace) {
      say(what + " " + ms_since(since) + " ms ago " + and_then + "; killing it");
      flush_log();
      ::kill(cur.pid, SIGKILL);
      cur.killed = true;
    }
  }

  // Reads what the standby said: "standby" makes it ready; anything else ends it, and so
  // does the end of its pipe (reaped, another after a back-off that grows with each
  // failure in a row).
  void hear_standby() {
    if (!standby.fill(false)) {
      const int ws = standby.reap(false);
      ++standby_failures;
      const auto pause = std::min(timing::kStandbyRetry * (1 << std::min(standby_failures, 6)), timing::kStandbyRetryMax);
      say("standby worker ended before it was needed (" + sandbox::exit_text(ws) + "; its own lines say why); another in " +
               std::to_string(pause.count()) + " ms");
      flush_log();
      standby_at = Clock::now() + pause;
    } else if (auto l = standby.ready ? std::nullopt : standby.line()) {
      standby.ready = *l == "standby";
      if (standby.ready) standby_failures = 0;
      else {
        say("standby worker said '" + l->substr(0, 80) + "' instead of being ready; ending it");
        standby.reap(true);
        standby_at = Clock::now() + timing::kSpawnRetry;
      }
    }
  }

  // Moves the serving worker, which is ending (it spoke, or its pipe ended), to `ending`:
  // the keepers stop passing it clients, and restarts in a crash loop pause.
  void serving_ends() {
    cur.fill(false);  // whatever it says now, or the end of its pipe: it is ending
    cur.ending = true;
    cur.ending_since = gap_since = Clock::now();
    // A worker that keeps dying on its own (not a kernel the worker caught and reported,
    // which needs a request each time) is in a crash loop: slow down.
    if (!cur.incident[0]) restarts.push_back(gap_since);
    while (!restarts.empty() && gap_since - restarts.front() > timing::kCrashLoopWindow) restarts.pop_front();
    if (door) door->serve(options.tenant, -1);  // its clients' lifelines close: they reconnect to the next
    if (options.tls_keeper) options.tls_keeper->serve(options.tenant, -1);  // new connections wait for the next
    ending.push_back(std::move(cur));
    cur = Child();
    if (restarts.size() > timing::kCrashLoopRestarts) std::this_thread::sleep_for(timing::kCrashLoopPause);
  }

  // The supervisor's loop, until it stops: what supervise() returns.
  Result<int> run() {
    for (;;) {
      if (stop) return shut_down();
      // 1. A serving worker: the standby, if one is ready; else a new one, made ready now.
      if (!cur) {
        if (auto done = bring_up()) return std::move(*done);
        if (!cur) continue;  // none could start now: try again
      }
      // 2. A standby, started once the serving worker serves (they do not compete to start; the
      //    first a second later: kFirstStandbyAfter).
      if (options.standby && !standby && Clock::now() >= standby_at) start_standby();
      // 3. Wait for the serving worker to end, the standby to be ready (or fail), or a signal.
      // The standby's pipe too once it is ready: if it dies waiting (killed, say), it is reaped
      // and replaced now, not found dead at the next takeover.
      pollfd fds[2] = {{cur.from, POLLIN, 0}, {standby ? standby.from : -1, POLLIN, 0}};
      const int r = ::poll(fds, 2, poll_ms());
      if (r < 0 && errno != EINTR) return Error(Errc::io, std::string("poll failed: ") + std::strerror(errno));
      if (stop) return shut_down();
      // Without its key service no worker can prove the node's key (every handshake fails),
      // and no other can be started: stop, and say so (a service manager restarts the loader).
      if (std::string why; options.key_alive && !options.key_alive(&why)) {
        say("the node key's service ended (" + why + "): no worker can prove the node's key; stopping");
        (void)shut_down();
        return Error(Errc::key, "the node key's service ended (" + why + ")")
            .hint("its lines above say why; restart the loader");
      }
      watch_serving();
      if (r > 0 && fds[1].revents) hear_standby();
      if ((r > 0 && fds[0].revents) || !cur.buf.empty()) serving_ends();
      reap_ending(false);
    }
  }
};

}  // namespace

Result<int> supervise(const SupervisorOptions& options, const std::atomic<bool>& stop, const WorkerMain& worker,
                      const CompilerMain& compiler) {
  // No process of this uid without CAP_SYS_PTRACE (a worker included) may read or write this
  // one's memory (/proc/PID/mem, process_vm_writev) or attach to it.
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return Error(Errc::io, std::string("cannot make the supervisor non-dumpable: ") + std::strerror(errno));
  Supervision s{options, stop, worker, compiler};
  return s.run();
}

}  // namespace xcargo::loader
