// The compile service (service.h): a loop that forks one child per request.
#include "service.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

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
// signatures), the variant found, the object from the cache or compiled.
Result<CompiledObject> job(const Jit& jit, const DiskCache& cache, const Options& o, Request req) {
  auto trust = TrustStore::load(o.trust);
  XC_TRY(trust);
  auto cargo = load_cargo(std::move(req.cargo), &*trust, o.limits);
  XC_TRY(cargo);
  for (const Variant& v : cargo->manifest().variants)
    if (v.name == req.variant) {
      if (v.kind != VariantKind::bitcode) return Error(Errc::invalid_argument, "variant " + v.name + " is not bitcode");
      return compile_or_fetch(jit, cache, *cargo, v);
    }
  return Error(Errc::invalid_argument, "the cargo has no variant " + req.variant);
}

// All a job wrote before it ended (at most a whole reply), or what stopped it.
Bytes collect(int fd, pid_t pid, std::chrono::seconds limit, std::string* stopped) {
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
  }
  int ws = 0;
  while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
  }
  if (stopped->empty() && WIFSIGNALED(ws))
    *stopped = std::string("the compiler crashed (signal ") + std::to_string(WTERMSIG(ws)) + ", " + strsignal(WTERMSIG(ws)) + ")";
  return out;
}

// Runs one request in a child and returns the reply to send.
Bytes run_job(const Jit& jit, const DiskCache& cache, const Options& o, Request req) {
  const std::string what = "variant " + req.variant;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return encode_reply(Error(Errc::io, std::string("compile service: pipe: ") + std::strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return encode_reply(Error(Errc::io, std::string("compile service: fork: ") + std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(p[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const rlimit cpu{rlim_t(o.job_limit.count()), rlim_t(o.job_limit.count() + 1)};
    ::setrlimit(RLIMIT_CPU, &cpu);
    g_reply_fd = p[1];
    Jit::on_fatal_error(reply_fatal);
    (void)write_all(p[1], encode_reply(job(jit, cache, o, std::move(req))));
    _exit(0);
  }
  ::close(p[1]);
  std::string stopped;
  Bytes out = collect(p[0], pid, o.job_limit, &stopped);
  ::close(p[0]);
  if (auto r = decode_reply(out); r.ok()) return out;  // whatever the job said, error or object
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
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 1000);
    if (r < 0 && errno != EINTR) return 1;
    if (r <= 0) {  // idle: apply revocations to the cache within a second
      if (o.trust_stamp)
        if (std::string now = o.trust_stamp(); now != stamp) {
          stamp = now;
          sweep(*cache, o);
        }
      continue;
    }
    auto req = read_request(fd, o.limits.max_cargo_size);
    if (!req.ok()) {
      if (req.error().code() == Errc::unreachable) return 0;  // the worker ended
      if (o.log) o.log(req.error().message() + "; closing the worker's connection");
      return 1;
    }
    if (!write_all(fd, run_job(**jit, *cache, o, std::move(*req))).ok()) return 0;
  }
}

Compiler remote(int fd, std::chrono::seconds job_limit) {
  auto mu = std::make_shared<std::mutex>();
  return [fd, job_limit, mu](const Cargo& cargo, const Variant& v) -> Result<CompiledObject> {
    std::lock_guard<std::mutex> lock(*mu);
    if (auto s = write_all(fd, encode_request(v.name, cargo.bytes())); !s.ok())
      return Error(Errc::unreachable, "the compile service has stopped (the loader's log says why)");
    auto r = read_reply(fd, Clock::now() + job_limit + std::chrono::seconds(10));
    XC_TRY(r);
    return std::move(*r);
  };
}

}  // namespace xcargo::loader::compiler
