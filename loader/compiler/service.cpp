// The compile service (service.h): a loop that hands each request to a child forked for it
// ahead of time (a standby, its memory faulted in while idle).
#include "compiler/service.h"

#include "exit_codes.h"

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
#include <utility>
#include <vector>

#include "compiler/prefault.h"
#include "compiler/protocol.h"
#include "xcargo/file.h"

namespace xcargo::loader::compiler {

namespace {

using Clock = std::chrono::steady_clock;

// What a direct job (one that reads its request from the worker itself) tells the service,
// its only view of that request: records of a code byte, a u16 text length, the text, each
// written at once (shorter than PIPE_BUF: never interleaved or split).
//   kTook (the variant's name)  it read a request
//   kWriting                    its reply to the worker starts
//   kAnswered                   the reply is written; the job ends
//   kFollows (followup_key)     the reply is written; the job goes on to -O2
//   kRefused (why)              what the worker sent was not a request
constexpr char kTook = 'T', kWriting = 'W', kAnswered = 'A', kFollows = 'F', kRefused = 'X';

// In a job: where its reply goes (the worker, for a direct job; else the service) and, for a
// direct job, its status pipe (else -1).
int g_reply_fd = -1;
int g_status_fd = -1;

void tell(char code, std::string_view text = {}) {
  if (g_status_fd < 0) return;
  text = text.substr(0, 1024);
  std::string r{code, char(text.size() & 0xff), char(text.size() >> 8)};
  r += text;
  (void)write_all(g_status_fd, as_bytes(r));
}

void answer(const Bytes& reply, char done, std::string_view text = {}) {
  tell(kWriting);
  (void)write_all(g_reply_fd, reply);
  tell(done, text);
}

void reply_fatal(const char* reason) {
  answer(encode_reply(Error(Errc::compile, std::string("LLVM stopped compiling it: ") + reason)
                          .hint("the bitcode is refused here; other cargos are not affected")),
         kAnswered);
}

// A request's variant and cargo, as the key of a -O2 compile that followed a quick tier.
std::string followup_key(const std::string& variant, ByteView cargo) { return variant + "/" + to_hex(sha256(cargo)); }
std::string followup_key(const Request& req) { return followup_key(req.variant, req.cargo); }

// The answer to a request for -O2 whose compile after a quick tier did not end well (in
// failed: its followup_key and why), if it is one.
std::optional<Error> failed_before(const Request& req, const std::map<std::string, std::string>& failed) {
  if (req.allow_quick || failed.empty()) return std::nullopt;
  const auto it = failed.find(followup_key(req));
  if (it == failed.end()) return std::nullopt;
  return Error(Errc::compile, "variant " + req.variant + ": its -O2 compile after the quick tier did not end well: " + it->second)
      .hint("the cargo keeps running its quick tier's code");
}

// The job, in the child: the cargo verified again (a request is only as good as its
// signatures), the variant found, the object from the cache or compiled. *then: for a quick
// tier, with a cache, the -O2 compile the job goes on with once it has answered (stored in
// the cache, where the worker's next request for it finds it), and *key its followup_key.
Result<CompiledObject> job(const Jit& jit, const DiskCache& cache, const Options& o, Request req, std::function<bool()>* then,
                           std::function<std::string()>* key) {
  auto trust = TrustStore::load(o.trust);
  XC_TRY(trust);
  auto loaded = load_cargo(std::move(req.cargo), &*trust, o.limits);
  XC_TRY(loaded);
  auto cargo = std::make_shared<const Cargo>(std::move(*loaded));
  for (const Variant& v : cargo->manifest().variants)
    if (v.name == req.variant) {
      if (v.kind != VariantKind::bitcode) return Error(Errc::invalid_argument, "variant " + v.name + " is not bitcode");
      auto out = compile_or_fetch(jit, cache, *cargo, v, req.allow_quick);
      if (out.ok() && out->quick && cache.enabled()) {
        *then = [&jit, &cache, cargo, &v] { return compile_or_fetch(jit, cache, *cargo, v).ok(); };
        *key = [cargo, &v] { return followup_key(v.name, cargo->bytes()); };
      }
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

// Waits for a job that has ended or was killed; says so if a signal ended it.
std::string reaped(pid_t pid) {
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (!WIFSIGNALED(ws)) return "";
  return std::string("the compiler crashed (signal ") + std::to_string(WTERMSIG(ws)) + ", " + strsignal(WTERMSIG(ws)) + ")";
}

// All a job wrote: a whole reply, as soon as it is complete (*reap is then set: the job is
// still ending, which takes about 16 ms after a compile, and is waited for after the reply is
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
  if (const std::string why = reaped(pid); stopped->empty()) *stopped = why;
  return out;
}

// A child forked before its request: it faults its memory in, then waits for one request,
// answers it and ends. A job forked on demand took its copy-on-write and fresh-page faults
// while compiling: 36 to 64 ms for a tiny cargo, of which about 12 ms compiling.
// A direct standby (worker_fd set) reads its request from the worker and answers there
// itself, telling the service on reply_fd (kTook...); the service neither reads the worker's
// requests while it waits nor writes it any, and ends it by closing request_fd. Otherwise
// the service hands it a request it read on request_fd and relays the reply from reply_fd.
// Each hand-off wakes a process (0.15 to 0.25 ms in a virtual machine with a core idle, more
// when both are busy): a direct job saves two of the four on a push's critical path.
struct Standby {
  pid_t pid = -1;
  int request_fd = -1;  // the service's ends
  int reply_fd = -1;
  std::string status;  // what it told the service and the service has not taken yet
};

bool request_waiting(void* fd) {
  pollfd p{*static_cast<int*>(fd), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

[[noreturn]] void standby_child(int request_fd, int reply_fd, int worker_fd, const Jit& jit, const DiskCache& cache, const Options& o,
                                const std::map<std::string, std::string>& failed) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  int in = worker_fd >= 0 ? worker_fd : request_fd;
  // The heap a compile grows into (16 MiB) and the writable mappings (64 MiB at most: never a
  // sanitizer's reserved shadow) copied now rather than in the job; then a small compile,
  // which faults in the code and data LLVM uses.
  const PrefaultStats st = prefault(16 << 20, 32 << 20, 64 << 20, request_waiting, &in);
  if (!st.stopped && !request_waiting(&in)) {
    (void)jit.warm_up();
    // The job's own verification: its first in this process took 2 to 2.5 ms (trust files
    // read, PEM decoded, signature checked), against 0.3 ms in the service.
    (void)TrustStore::load(o.trust);
    warm_up_verification();
  }
  if (worker_fd >= 0) {  // a request from the worker, or the service dropping this standby
    pollfd p[2] = {{worker_fd, POLLIN, 0}, {request_fd, POLLIN, 0}};
    while (::poll(p, 2, -1) < 0 && errno == EINTR) {
    }
    if (p[1].revents) _exit(0);
    g_status_fd = reply_fd;
    g_reply_fd = worker_fd;
  } else {
    g_reply_fd = reply_fd;
  }
  auto req = read_request(in, o.limits.max_cargo_size);
  if (!req.ok()) {  // the worker ended (or the service dropped this standby), or sent something else
    if (req.error().code() != Errc::unreachable) tell(kRefused, req.error().message());
    _exit(0);
  }
  tell(kTook, req->variant);
  // The CPU limit counts from the request, not from the prefault.
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const rlim_t used = rlim_t(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1);
  const rlimit cpu{used + rlim_t(o.job_limit.count()), used + rlim_t(o.job_limit.count()) + 1};
  ::setrlimit(RLIMIT_CPU, &cpu);
  Jit::on_fatal_error(reply_fatal);
  std::function<bool()> then;
  if (auto refused = failed_before(*req, failed)) {
    answer(encode_reply(*refused), kAnswered);
    _exit(0);
  }
  std::function<std::string()> key;
  const Bytes reply = encode_reply(job(jit, cache, o, std::move(*req), &then, &key));
  if (!then) {
    answer(reply, kAnswered);
    _exit(0);
  }
  // The service serves on meanwhile, and kills this job at its time limit (Background).
  answer(reply, kFollows, g_status_fd >= 0 ? key() : "");  // the key after the reply: off the push's path
  ::close(g_reply_fd);
  ::close(reply_fd);
  g_reply_fd = g_status_fd = -1;
  // Behind the worker linking the quick tier and running it: on 2 cores this compile took
  // a core from the push's reply and the first invocation. Nice 19 was not enough: the
  // scheduler still gave it a core for a whole tick (4 ms here) while the worker's leader
  // waited, runnable, to link and reply. Under SCHED_IDLE it runs only on a core nothing
  // else wants (loader/README, "Tiers": the cold JIT push and first call, 13.1 against
  // 7.7 ms, medians of 7 alternating).
  (void)::setpriority(PRIO_PROCESS, 0, 19);
  sched_param idle{};
  (void)::sched_setscheduler(0, SCHED_IDLE, &idle);
  _exit(then() ? exit_code::kOk : exit_code::kCompileJob);
}

// worker_fd: the worker's connection, for a direct standby; -1 for one the service hands a
// request to.
Result<Standby> fork_standby(const Jit& jit, const DiskCache& cache, const Options& o, int worker_fd,
                             const std::map<std::string, std::string>& failed) {
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
    standby_child(req[0], rep[1], worker_fd, jit, cache, o, failed);
  }
  ::close(req[0]);
  ::close(rep[1]);
  if (pid < 0) {
    ::close(req[1]);
    ::close(rep[0]);
    return Error(Errc::io, std::string("compile service: fork: ") + std::strerror(errno));
  }
  Standby s;
  s.pid = pid;
  s.request_fd = req[1];
  s.reply_fd = rep[0];
  return s;
}

// How a job that has answered ended: nullopt while it runs (before deadline; past it, it is
// killed), else why it did not end well, or "" if it did.
std::optional<std::string> settled(pid_t pid, Clock::time_point deadline) {
  int ws = 0;
  pid_t r;
  while ((r = ::waitpid(pid, &ws, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (r == 0) {
    if (Clock::now() < deadline) return std::nullopt;
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    return "it was still compiling at its time limit and was stopped";
  }
  if (r != pid) return "";  // already waited for: nothing to say
  if (WIFSIGNALED(ws)) return std::string("the compiler was ended by signal ") + std::to_string(WTERMSIG(ws)) + " (" + strsignal(WTERMSIG(ws)) + ")";
  if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0) return "the compiler failed (exit status " + std::to_string(WEXITSTATUS(ws)) + ")";
  return "";
}

// Jobs that have answered and go on: compiling -O2 after a quick tier (under SCHED_IDLE), or
// just ending. The service serves on without waiting for them: on a node whose cores are
// busy, SCHED_IDLE gets about 0.3 % of a core, and a later request waiting behind such a
// compile would wait until the compile's time limit (a second bitcode push, 100 s beside two
// busy loops; guarded by service_test.cpp, "a request is answered while an earlier -O2
// compile gets no core"). Looked at on every turn of the service's loop (at least once a
// second); past its time limit a job is killed; an -O2 compile that did not end well is
// remembered in failed, for the worker's request for that object. When the service ends, so
// do they.
class Background {
public:
  static constexpr size_t kMax = 2;  // more: the oldest -O2 compile is given up
  Background(const Options& o, const DiskCache& cache, std::map<std::string, std::string>& failed)
      : o_(o), cache_(cache), failed_(failed) {}
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  ~Background() {
    for (const Job& j : jobs_) {
      ::kill(j.pid, SIGKILL);
      while (::waitpid(j.pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  bool compiling() const {
    for (const Job& j : jobs_)
      if (!j.followup.empty()) return true;
    return false;
  }
  // followup: the job's key when it goes on to -O2, else empty.
  void add(pid_t pid, Clock::time_point deadline, std::string followup) {
    check();
    if (jobs_.size() >= kMax) {
      // Reaped here: past its kill, waitpid(WNOHANG) may find it not ended yet, a zombie
      // left per such push (guarded by service_test.cpp, "past two -O2 compiles going on, the
      // oldest is stopped, reaped and remembered").
      ::kill(jobs_.front().pid, SIGKILL);
      while (::waitpid(jobs_.front().pid, nullptr, 0) < 0 && errno == EINTR) {
      }
      note(jobs_.front(), "stopped: " + std::to_string(kMax) + " later compiles went on in the background before it ended");
      jobs_.erase(jobs_.begin());
    }
    jobs_.push_back({pid, deadline, std::move(followup), o_.trust_stamp ? o_.trust_stamp() : ""});
  }
  // Reaps those that ended.
  void check() {
    for (size_t i = 0; i < jobs_.size();) {
      const auto why = settled(jobs_[i].pid, jobs_[i].deadline);
      if (!why) {
        ++i;
        continue;
      }
      note(jobs_[i], *why);
      if (why->empty() && !jobs_[i].followup.empty() && o_.trust_stamp && o_.trust_stamp() != jobs_[i].stamp) sweep_due_ = true;
      jobs_.erase(jobs_.begin() + long(i));
    }
  }
  // Whether one stored -O2 code after the trust directory changed since it began: the
  // cache's sweep for revoked signers ran before it, and is due again. Once.
  bool take_sweep_due() { return std::exchange(sweep_due_, false); }

private:
  struct Job {
    pid_t pid;
    Clock::time_point deadline;
    std::string followup;
    std::string stamp;  // the trust directory's when it began
  };
  void note(const Job& j, const std::string& why) {
    if (why.empty()) return;
    // Ended while it wrote its entry, it leaves a temporary file the size of the object (30
    // such pushes, about 160 MB): removed here (remove_partial; engine_test.cpp,
    // "remove_partial takes the temporary files of one writer, by the pid in their names").
    cache_.remove_partial(j.pid);
    if (j.followup.empty()) return;
    if (o_.log) o_.log("compile service: variant " + j.followup.substr(0, j.followup.find('/')) + ": -O2 after the quick tier: " + why);
    if (failed_.size() >= 256) failed_.erase(failed_.begin());
    failed_[j.followup] = why;
  }
  const Options& o_;
  const DiskCache& cache_;
  std::map<std::string, std::string>& failed_;
  std::vector<Job> jobs_;
  bool sweep_due_ = false;
};

// The reply for a job that ended without answering (what: "variant NAME"; stopped: why).
Bytes refusal(const std::string& what, const std::string& stopped) {
  return encode_reply(Error(Errc::compile, what + ": " + stopped).hint("the bitcode is refused here; other cargos are not affected"));
}

// Runs one request the service read itself (it had no standby waiting: one is forked now)
// and returns the reply to send. *reap: a job still ending, to wait for once the reply is
// sent; *followup: its key (followup_key) when it answered with a quick tier and is
// compiling -O2. failed: those -O2 compiles that did not end well, and why; a request for
// one is answered with that.
Bytes run_job(const Jit& jit, const DiskCache& cache, const Options& o, Request req, pid_t* reap, std::string* followup,
              const std::map<std::string, std::string>& failed) {
  const std::string what = "variant " + req.variant;
  bool damaged = false;
  if (auto hit = cached(jit, cache, o, req, &damaged)) return encode_reply(std::move(*hit));
  if (auto refused = failed_before(req, failed)) return encode_reply(*refused);
  auto forked = fork_standby(jit, cache, o, -1, failed);
  if (!forked.ok()) return encode_reply(forked.error());
  const Standby child = std::move(*forked);
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
  return refusal(what, stopped);
}

void sweep(const DiskCache& cache, const Options& o) {
  auto trust = TrustStore::load(o.trust);
  if (!trust.ok()) return;  // the worker reports a trust directory that does not load
  if (const size_t n = cache.sweep(*trust); n > 0 && o.log)
    o.log("disk cache: removed " + std::to_string(n) + " entries compiled from cargos no trusted key signs any more");
}

}  // namespace

// The next record a direct standby told the service (kTook and the rest): code 0 once it has
// ended, 't' if it told nothing more before deadline.
struct Told {
  char code = 0;
  std::string text;
};

Told next_told(Standby& s, Clock::time_point deadline) {
  for (;;) {
    if (s.status.size() >= 3) {
      const size_t n = size_t(uint8_t(s.status[1])) | size_t(uint8_t(s.status[2])) << 8;
      if (s.status.size() >= 3 + n) {
        Told t{s.status[0], s.status.substr(3, n)};
        s.status.erase(0, 3 + n);
        return t;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    pollfd p{s.reply_fd, POLLIN, 0};
    const int r = left > 0 ? ::poll(&p, 1, int(std::min<long long>(left, 1 << 30))) : 0;
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return {'t', {}};
    char buf[2048];
    const ssize_t got = ::read(s.reply_fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0 || s.status.size() > 4096) return {};  // ended (or not one of ours: treated as ended)
    s.status.append(buf, size_t(got));
  }
}

// A request a direct standby took from the worker (variant: its name): waited for within the
// time limit; answered for it (the job's time limit, its crash) if it ends before it starts
// its reply. failed: as run_job's, kept up to date. Returns false when the worker's stream is
// out of step (a reply cut short): the service then ends, and with it the worker's compiles.
bool supervise(Standby& job, const std::string& variant, int worker_fd, const Options& o, std::map<std::string, std::string>& failed,
               Background& background) {
  const std::string what = "variant " + variant;
  const auto deadline = Clock::now() + o.job_limit;
  bool writing = false;
  for (;;) {
    Told t = next_told(job, deadline);
    if (t.code == kWriting) {
      writing = true;
      continue;
    }
    if (t.code == kAnswered || t.code == kFollows) {
      // A job that answered with a quick tier compiles -O2 for the worker's tier-up, within
      // the same time limit as any compile, while the service serves on.
      background.add(job.pid, deadline, t.code == kFollows ? t.text : "");
      job.pid = -1;
      return true;
    }
    std::string stopped;
    if (t.code == 't') stopped = "it was still compiling after " + std::to_string(o.job_limit.count()) + " s and was stopped";
    if (t.code != 0) ::kill(job.pid, SIGKILL);  // out of time, or telling out of turn
    if (std::string why = reaped(job.pid); stopped.empty()) stopped = why;
    job.pid = -1;
    if (stopped.empty()) stopped = "the compiler ended without an answer";
    if (o.log) o.log("compile service: " + what + ": " + stopped + (writing ? "; its reply was cut short: closing the worker's connection" : ""));
    if (writing) return false;
    return write_all(worker_fd, refusal(what, stopped)).ok();
  }
}

namespace {

// serve's loop, and what it keeps from one request to the next: the standby that reads the
// worker's next request, the jobs going on in the background, and the trust directory's stamp.
class Service {
public:
  Service(int fd, const Options& o, const Jit& jit, const DiskCache& cache)
      : fd_(fd), o_(o), jit_(jit), cache_(cache), stamp_(o.trust_stamp ? o.trust_stamp() : "") {}
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;
  // Serves the worker: serve's result, 0 once the worker ended, 1 when its stream is out of step or failed.
  int run();

private:
  // Revocations applied to the cache within a second: a sweep once the trust directory's stamp changed.
  void revocations();
  // Closes the standby's pipes (if it still waits, it exits) and reaps it: says if a signal ended it.
  std::string end_standby();
  // A standby for the next request; failing, the next request forks its own (run_job).
  void keep_standby();
  // After a request: the standby for the next one, now, or due once no -O2 compile runs (standby_due_).
  void next_standby();
  // What the standby told (a request it took, supervised to its end): run's result if the service ends.
  std::optional<int> watch_standby();
  // The worker's request, read and answered by the service itself (no standby took it): run's result if it ends.
  std::optional<int> answer_request();

  const int fd_;
  const Options& o_;
  const Jit& jit_;
  const DiskCache& cache_;
  std::string stamp_;
  std::optional<Standby> standby_;             // always a direct one
  std::map<std::string, std::string> failed_;  // run_job's and supervise's
  Background background_{o_, cache_, failed_};
  // The standby for the next request, due once no -O2 compile runs or standby_after has
  // passed (on cores too busy for that compile): as when the service waited for -O2, its
  // fork and prefault do not take a core from the push's link and first call. (Against the
  // service that waited: a cold JIT push, 5 alternating rounds, medians 8.6 against 9.0 ms
  // in the loader, on a slow machine.)
  bool standby_due_ = false;
  Clock::time_point due_since_;
};

int Service::run() {
  sweep(cache_, o_);
  warm_up_verification();  // for the cache hits it answers itself (cached)
  // The first standby is forked after a second without requests (standby_after), not at
  // start (unless asked): a worker (and its standby) starting after a kernel failure shares
  // the cores with the one taking over and its clients, workers replaced in quick succession
  // never warm one in vain, and a loader's first native pushes have the cores to themselves.
  if (o_.standby_after.count() == 0 || o_.standby_at_start) keep_standby();
  for (;;) {
    // An -O2 job that began before a signer's revocation can store its object after the sweep
    // (seconds after it): check() makes a sweep due again when such a job ends.
    background_.check();
    if (background_.take_sweep_due()) sweep(cache_, o_);
    if (standby_due_ && !standby_ && (!background_.compiling() || Clock::now() - due_since_ >= o_.standby_after)) {
      standby_due_ = false;
      keep_standby();
    }
    if (standby_) {  // it reads the worker's next request: the service only watches it
      if (const std::optional<int> end = watch_standby()) return *end;
      continue;
    }
    pollfd p{fd_, POLLIN, 0};
    // While an -O2 compile runs, looked at every 5 ms: the standby is due when it ends.
    const long long wait_ms = standby_due_ ? 5 : std::max<long long>(o_.standby_after.count(), 1);
    const int r = ::poll(&p, 1, int(wait_ms));
    if (r < 0 && errno != EINTR) return 1;
    if (r <= 0) {  // idle: a standby job ready
      if (standby_due_) continue;  // once the -O2 compile has ended (above)
      keep_standby();
      revocations();
      continue;
    }
    if (const std::optional<int> end = answer_request()) return *end;
    next_standby();
  }
}

void Service::revocations() {
  if (!o_.trust_stamp) return;
  if (std::string now = o_.trust_stamp(); now != stamp_) {
    stamp_ = now;
    sweep(cache_, o_);
  }
}

std::string Service::end_standby() {
  ::close(standby_->request_fd);  // if it still waits, it exits
  ::close(standby_->reply_fd);
  const std::string why = standby_->pid > 0 ? reaped(standby_->pid) : "";
  standby_.reset();
  return why;
}

void Service::keep_standby() {
  if (auto s = fork_standby(jit_, cache_, o_, fd_, failed_); s.ok()) standby_ = std::move(*s);
}

void Service::next_standby() {
  if (!background_.compiling()) return keep_standby();
  standby_due_ = true;
  due_since_ = Clock::now();
}

std::optional<int> Service::watch_standby() {
  Told t = next_told(*standby_, Clock::now() + std::chrono::seconds(1));
  if (t.code == 't') {
    revocations();
    return std::nullopt;
  }
  if (t.code == kTook) {
    const bool in_step = supervise(*standby_, t.text, fd_, o_, failed_, background_);
    (void)end_standby();  // supervise reaped it
    if (!in_step) return 1;
    next_standby();
    return std::nullopt;
  }
  const std::string why = end_standby();
  if (t.code == kRefused) {
    if (o_.log) o_.log(t.text + "; closing the worker's connection");
    return 1;
  }
  // It ended before a request: the worker ended (the service's own read finds that), or it failed.
  if (!why.empty() && o_.log) o_.log("compile service: the waiting compile job ended before a request: " + why);
  return std::nullopt;
}

std::optional<int> Service::answer_request() {
  auto req = read_request(fd_, o_.limits.max_cargo_size);
  if (!req.ok()) {
    if (req.error().code() == Errc::unreachable) return 0;  // the worker ended
    if (o_.log) o_.log(req.error().message() + "; closing the worker's connection");
    return 1;
  }
  pid_t ending = -1;
  std::string followup;
  const auto started = Clock::now();
  const bool answered = write_all(fd_, run_job(jit_, cache_, o_, std::move(*req), &ending, &followup, failed_)).ok();
  if (ending > 0) background_.add(ending, started + o_.job_limit, followup);
  if (!answered) return 0;
  return std::nullopt;
}

}  // namespace

int serve(int fd, const Options& o) {
  auto jit = Jit::create();
  auto cache = DiskCache::open(o.cache_dir);
  if (!jit.ok() || !cache.ok()) {
    if (o.log) o.log("compile service: cannot start: " + (jit.ok() ? cache.error() : jit.error()).message());
    return 1;
  }
  Service service(fd, o, **jit, *cache);
  return service.run();
}

Compiler remote(int fd, std::chrono::seconds job_limit, std::function<void()> on_lost) {
  auto mu = std::make_shared<std::mutex>();
  return [fd, job_limit, mu, on_lost](const Cargo& cargo, const Variant& v, bool allow_quick) -> Result<CompiledObject> {
    std::lock_guard<std::mutex> lock(*mu);
    auto lost = [&] {
      if (on_lost) on_lost();
      return Error(Errc::unreachable, "the compile service has stopped (the loader's log says why)");
    };
    if (auto s = write_all(fd, encode_request(v.name, cargo.bytes(), allow_quick)); !s.ok()) return lost();
    auto r = read_reply(fd, Clock::now() + job_limit + std::chrono::seconds(10));
    if (!r.ok() && r.error().code() == Errc::unreachable) return lost();
    XC_TRY(r);
    return std::move(*r);
  };
}

}  // namespace xcargo::loader::compiler
