// The compile service (service.h): a loop that hands each request to a child forked for it
// ahead of time (a standby, its memory faulted in while idle).
#include "service.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "prefault.h"
#include "protocol.h"
#include "xcargo/file.h"

namespace xcargo::loader::compiler {

namespace {

using Clock = std::chrono::steady_clock;

// In a job: where an LLVM fatal error's reason goes (the job's reply pipe).
int g_reply_fd = -1;

void reply_fatal(const char* reason) {
  const Bytes b = encode_reply(Error(Errc::compile, std::string("LLVM stopped compiling it: ") + reason)
                                   .hint("the bitcode is refused here; other cargos are not affected"));
  (void)write_all(g_reply_fd, b);
}

// The job, in the child: the cargo verified again (a request is only as good as its
// signatures), the variant found, the object from the cache or compiled. *then: for a quick
// tier, with a cache, the -O2 compile the job goes on with once it has answered (stored in
// the cache, where the worker's next request for it finds it).
Result<CompiledObject> job(const Jit& jit, const DiskCache& cache, const Options& o, Request req, std::function<bool()>* then) {
  auto trust = TrustStore::load(o.trust);
  XC_TRY(trust);
  auto loaded = load_cargo(std::move(req.cargo), &*trust, o.limits);
  XC_TRY(loaded);
  auto cargo = std::make_shared<const Cargo>(std::move(*loaded));
  for (const Variant& v : cargo->manifest().variants)
    if (v.name == req.variant) {
      if (v.kind != VariantKind::bitcode) return Error(Errc::invalid_argument, "variant " + v.name + " is not bitcode");
      auto out = compile_or_fetch(jit, cache, *cargo, v, req.allow_quick);
      if (out.ok() && out->quick && cache.enabled())
        *then = [&jit, &cache, cargo, &v] { return compile_or_fetch(jit, cache, *cargo, v).ok(); };
      return out;
    }
  return Error(Errc::invalid_argument, "the cargo has no variant " + req.variant);
}

// A cache hit, answered by the service itself: a job forked for it spent 9 to 18 ms here
// (a process switch each way, its first page faults, its exit); answered here, 1 to 2 ms.
// The cargo is verified as a job would verify it; the service holds the same rights as its
// jobs, and the worker parsed the same bytes first. nullopt: a job answers (a miss, or
// anything a job would refuse); *damaged: a damaged entry was removed.
// A miss is found before the signatures are checked (the key needs only the cargo parsed):
// the worker reads the cache itself, so what reaches the service is mostly a miss, and the
// job verifies it anyway (0.5 to 1 ms of a quick tier's push saved).
std::optional<CompiledObject> cached(const Jit& jit, const DiskCache& cache, const Options& o, const Request& req, bool* damaged) {
  *damaged = false;
  if (!cache.enabled()) return std::nullopt;
  {
    auto parsed = load_cargo(req.cargo, nullptr, o.limits);
    if (!parsed.ok()) return std::nullopt;  // the job says what is wrong
    const Variant* v = nullptr;
    for (const Variant& x : parsed->manifest().variants)
      if (x.name == req.variant && x.kind == VariantKind::bitcode) v = &x;
    if (!v || !cache.has(cache_key(parsed->digest(), *v, jit.host(), parsed->manifest().fp == "strict"))) return std::nullopt;
  }
  auto trust = TrustStore::load(o.trust);
  if (!trust.ok()) return std::nullopt;
  auto cargo = load_cargo(req.cargo, &*trust, o.limits);
  if (!cargo.ok()) return std::nullopt;
  for (const Variant& v : cargo->manifest().variants)
    if (v.name == req.variant && v.kind == VariantKind::bitcode) {
      auto hit = cache.get(cache_key(cargo->digest(), v, jit.host(), cargo->manifest().fp == "strict"), damaged);
      if (!hit) return std::nullopt;
      CompiledObject out;
      out.cache_enabled = out.cache_hit = true;
      out.object = std::move(*hit);
      return out;
    }
  return std::nullopt;
}

// All a job wrote: a whole reply, as soon as it is complete (*reap is then set: the job is
// still ending, which took 16 ms after a compile here, and is waited for after the reply is
// sent); or what it wrote before it ended, and *stopped says what stopped it.
Bytes collect(int fd, pid_t pid, std::chrono::seconds limit, std::string* stopped, bool* reap) {
  Bytes out;
  const auto deadline = Clock::now() + limit;
  uint8_t buf[65536];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    const int r = left > 0 ? ::poll(&p, 1, int(left)) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) {
      ::kill(pid, SIGKILL);
      *stopped = "it was still compiling after " + std::to_string(limit.count()) + " s and was stopped";
      break;
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() + size_t(n) > kReplyHeader + kMaxText + kMaxObject) {
      ::kill(pid, SIGKILL);
      *stopped = "its answer went past the size limit";
      break;
    }
    out.insert(out.end(), buf, buf + n);
    if (const uint64_t whole = reply_length(out); whole && out.size() >= whole) {
      *reap = true;
      return out;
    }
  }
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (stopped->empty() && WIFSIGNALED(ws))
    *stopped = std::string("the compiler crashed (signal ") + std::to_string(WTERMSIG(ws)) + ", " + strsignal(WTERMSIG(ws)) + ")";
  return out;
}

// A child forked before its request: it faults its memory in, then waits for one request on
// request_fd, answers on reply_fd and ends. A job forked on demand took its copy-on-write and
// fresh-page faults while compiling: 36 to 64 ms for a tiny cargo, of which about 12 ms compiling.
struct Standby {
  pid_t pid = -1;
  int request_fd = -1;  // the service's ends
  int reply_fd = -1;
};

bool request_waiting(void* fd) {
  pollfd p{*static_cast<int*>(fd), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

[[noreturn]] void standby_child(int request_fd, int reply_fd, const Jit& jit, const DiskCache& cache, const Options& o) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The heap a compile grows into (16 MiB) and the writable mappings (64 MiB at most: never a
  // sanitizer's reserved shadow) copied now rather than in the job; then a small compile,
  // which faults in the code and data LLVM uses.
  const PrefaultStats st = prefault(16 << 20, 32 << 20, 64 << 20, request_waiting, &request_fd);
  if (!st.stopped && !request_waiting(&request_fd)) {
    (void)jit.warm_up();
    // The job's own verification: its first in this process took 2 to 2.5 ms (trust files
    // read, PEM decoded, signature checked), against 0.3 ms in the service.
    (void)TrustStore::load(o.trust);
    warm_up_verification();
  }
  auto req = read_request(request_fd, o.limits.max_cargo_size);
  if (!req.ok()) _exit(0);  // the service ended, or dropped this standby
  // The CPU limit counts from the request, not from the prefault.
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const rlim_t used = rlim_t(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1);
  const rlimit cpu{used + rlim_t(o.job_limit.count()), used + rlim_t(o.job_limit.count()) + 1};
  ::setrlimit(RLIMIT_CPU, &cpu);
  g_reply_fd = reply_fd;
  Jit::on_fatal_error(reply_fatal);
  std::function<bool()> then;
  (void)write_all(reply_fd, encode_reply(job(jit, cache, o, std::move(*req), &then)));
  if (then) {  // the service waits for this job to end before it reads the next request
    ::close(reply_fd);
    g_reply_fd = -1;
    // Behind the worker linking the quick tier and running it: on 2 cores this compile took
    // a core from the push's reply and the first invocation. Nice 19 was not enough: the
    // scheduler still gave it a core for a whole tick (4 ms here) while the worker's leader
    // waited, runnable, to link and reply. Under SCHED_IDLE it runs only on a core nothing
    // else wants (loader/README, "Tiers": the cold JIT push and first call, 13.1 against
    // 7.7 ms, medians of 7 alternating).
    (void)::setpriority(PRIO_PROCESS, 0, 19);
    sched_param idle{};
    (void)::sched_setscheduler(0, SCHED_IDLE, &idle);
    _exit(then() ? 0 : 71);
  }
  _exit(0);
}

Result<Standby> fork_standby(const Jit& jit, const DiskCache& cache, const Options& o) {
  int req[2], rep[2];
  if (::pipe2(req, O_CLOEXEC) != 0) return Error(Errc::io, std::string("compile service: pipe: ") + std::strerror(errno));
  if (::pipe2(rep, O_CLOEXEC) != 0) {
    ::close(req[0]);
    ::close(req[1]);
    return Error(Errc::io, std::string("compile service: pipe: ") + std::strerror(errno));
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(req[1]);
    ::close(rep[0]);
    standby_child(req[0], rep[1], jit, cache, o);
  }
  ::close(req[0]);
  ::close(rep[1]);
  if (pid < 0) {
    ::close(req[1]);
    ::close(rep[0]);
    return Error(Errc::io, std::string("compile service: fork: ") + std::strerror(errno));
  }
  return Standby{pid, req[1], rep[0]};
}

// Waits until deadline for a job that answered and may still be compiling (-O2 after a quick
// tier), then kills it. Returns why it did not end well, or "" if it did.
std::string finish(pid_t pid, Clock::time_point deadline) {
  const int pidfd = int(::syscall(SYS_pidfd_open, pid, 0));  // -1 before Linux 5.3: short sleeps
  int ws = 0;
  std::string why;
  for (;;) {
    const pid_t r = ::waitpid(pid, &ws, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) break;  // already waited for: nothing to say
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
      }
      why = "it was still compiling at its time limit and was stopped";
      break;
    }
    pollfd p{pidfd, POLLIN, 0};
    ::poll(pidfd >= 0 ? &p : nullptr, pidfd >= 0 ? 1 : 0, int(std::min<long long>(left, pidfd >= 0 ? 1000 : 5)));
  }
  if (pidfd >= 0) ::close(pidfd);
  if (!why.empty()) return why;
  if (WIFSIGNALED(ws)) return std::string("the compiler was ended by signal ") + std::to_string(WTERMSIG(ws)) + " (" + strsignal(WTERMSIG(ws)) + ")";
  if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) return "the compiler failed (exit status " + std::to_string(WEXITSTATUS(ws)) + ")";
  return "";
}

// A request's variant and cargo, as the key of a -O2 compile that followed a quick tier.
std::string followup_key(const Request& req) { return req.variant + "/" + to_hex(sha256(req.cargo)); }

// Runs one request in the standby (forked now if there is none) and returns the reply to
// send. *reap: a job still ending, to wait for once the reply is sent; *followup: its key
// (followup_key) when it answered with a quick tier and is compiling -O2. failed: those
// -O2 compiles that did not end well, and why; a request for one is answered with that.
Bytes run_job(const Jit& jit, const DiskCache& cache, const Options& o, std::optional<Standby>& standby, Request req, pid_t* reap,
              std::string* followup, const std::map<std::string, std::string>& failed) {
  const std::string what = "variant " + req.variant;
  bool damaged = false;
  // A push's request (a quick tier allowed) goes to a waiting job at once: the worker found
  // no entry before it asked, the job looks in the cache anyway, and waking the job takes
  // about 1 ms on this VM, which the service's own look would come before (0.6 to 1 ms).
  if (!(req.allow_quick && standby))
    if (auto hit = cached(jit, cache, o, req, &damaged)) return encode_reply(std::move(*hit));
  if (!req.allow_quick && !failed.empty())
    if (auto it = failed.find(followup_key(req)); it != failed.end())
      return encode_reply(Error(Errc::compile, what + ": its -O2 compile after the quick tier did not end well: " + it->second)
                              .hint("the cargo keeps running its quick tier's code"));
  if (standby && ::waitpid(standby->pid, nullptr, WNOHANG) == standby->pid) {  // it ended while waiting
    ::close(standby->request_fd);
    ::close(standby->reply_fd);
    standby.reset();
    if (o.log) o.log("compile service: the waiting compile job had ended; started another");
  }
  if (!standby) {
    auto s = fork_standby(jit, cache, o);
    if (!s.ok()) return encode_reply(s.error());
    standby = *s;
  }
  const Standby child = *standby;
  standby.reset();
  std::string stopped;
  bool unreaped = false;
  const bool sent = write_all(child.request_fd, encode_request(req.variant, req.cargo, req.allow_quick)).ok();
  ::close(child.request_fd);
  Bytes out = collect(child.reply_fd, child.pid, o.job_limit, &stopped, &unreaped);
  if (!sent && stopped.empty()) stopped = "the compiler ended before its request";
  ::close(child.reply_fd);
  if (unreaped) *reap = child.pid;
  if (auto r = decode_reply(out); r.ok()) {  // whatever the job said, error or object
    if (r->ok() && (*r)->quick) *followup = followup_key(req);
    if (damaged && r->ok()) {  // the job compiled what replaced the damaged entry
      (*r)->cache_damaged = true;
      return encode_reply(*r);
    }
    return out;
  }
  if (stopped.empty()) stopped = "the compiler ended without an answer";
  if (o.log) o.log("compile service: " + what + ": " + stopped);
  return encode_reply(Error(Errc::compile, what + ": " + stopped).hint("the bitcode is refused here; other cargos are not affected"));
}

void sweep(const DiskCache& cache, const Options& o) {
  auto trust = TrustStore::load(o.trust);
  if (!trust.ok()) return;  // the worker reports a trust directory that does not load
  if (const size_t n = cache.sweep(*trust); n > 0 && o.log)
    o.log("disk cache: removed " + std::to_string(n) + " entries compiled from cargos no trusted key signs any more");
}

}  // namespace

int serve(int fd, const Options& o) {
  auto jit = Jit::create();
  auto cache = DiskCache::open(o.cache_dir);
  if (!jit.ok() || !cache.ok()) {
    if (o.log) o.log("compile service: cannot start: " + (jit.ok() ? cache.error() : jit.error()).message());
    return 1;
  }
  std::string stamp = o.trust_stamp ? o.trust_stamp() : "";
  sweep(*cache, o);
  warm_up_verification();  // for the cache hits it answers itself (cached)
  std::optional<Standby> standby;
  std::map<std::string, std::string> failed;  // run_job's
  auto drop_standby = [&] {
    if (!standby) return;
    ::close(standby->request_fd);  // it reads end of file and exits
    ::close(standby->reply_fd);
    while (::waitpid(standby->pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    standby.reset();
  };
  auto keep_standby = [&] {  // failing, the next request forks its own (run_job)
    if (standby) return;
    if (auto s = fork_standby(**jit, *cache, o); s.ok()) standby = *s;
    // The fork made every writable page of this process copy-on-write: the cache hits this
    // process answers itself took those faults, 1.6 to 2.3 ms each. Taken now, while idle
    // (stopping for a request), at the cost of this process's own copy of those pages.
    if (standby) (void)prefault(0, 32 << 20, 64 << 20, request_waiting, const_cast<int*>(&fd));
  };
  // The first standby is forked after a second without requests, not at start: a worker
  // (and its standby) starting after a kernel failure shares the cores with the one taking
  // over and its clients, and workers replaced in quick succession never warm one in vain.
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 1000);
    if (r < 0 && errno != EINTR) return 1;
    if (r <= 0) {  // idle: a standby job ready, and revocations applied to the cache within a second
      keep_standby();
      if (o.trust_stamp)
        if (std::string now = o.trust_stamp(); now != stamp) {
          stamp = now;
          sweep(*cache, o);
        }
      continue;
    }
    auto req = read_request(fd, o.limits.max_cargo_size);
    if (!req.ok()) {
      drop_standby();
      if (req.error().code() == Errc::unreachable) return 0;  // the worker ended
      if (o.log) o.log(req.error().message() + "; closing the worker's connection");
      return 1;
    }
    pid_t ending = -1;
    std::string followup;
    const auto started = Clock::now();
    const bool answered = write_all(fd, run_job(**jit, *cache, o, standby, std::move(*req), &ending, &followup, failed)).ok();
    // A job that answered with a quick tier compiles -O2 for the next request (the worker's
    // tier-up): waited for, within the same time limit as any compile.
    if (ending > 0)
      if (std::string why = finish(ending, started + o.job_limit); !why.empty() && !followup.empty()) {
        if (o.log) o.log("compile service: variant " + followup.substr(0, followup.find('/')) + ": -O2 after the quick tier: " + why);
        if (failed.size() >= 256) failed.erase(failed.begin());
        failed[followup] = why;
      }
    if (!answered) {
      drop_standby();
      return 0;
    }
    keep_standby();  // for the next request
  }
}

Compiler remote(int fd, std::chrono::seconds job_limit) {
  auto mu = std::make_shared<std::mutex>();
  return [fd, job_limit, mu](const Cargo& cargo, const Variant& v, bool allow_quick) -> Result<CompiledObject> {
    std::lock_guard<std::mutex> lock(*mu);
    if (auto s = write_all(fd, encode_request(v.name, cargo.bytes(), allow_quick)); !s.ok())
      return Error(Errc::unreachable, "the compile service has stopped (the loader's log says why)");
    auto r = read_reply(fd, Clock::now() + job_limit + std::chrono::seconds(10));
    XC_TRY(r);
    return std::move(*r);
  };
}

}  // namespace xcargo::loader::compiler
