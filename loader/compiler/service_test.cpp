// The compile service over a socket pair, as a worker uses it: a quick tier first, then the
// -O2 object its job went on to compile and store; served by a job the service hands the
// request to, and by a standby that reads it from the worker itself.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/sockios.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "compiler/protocol.h"
#include "compiler/service.h"
#include "support.h"
#include "xcargo/file.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

// A cargo built by the real tools: `xcargo build` (hello, bitcode) or, with a kind,
// xcargo-hostile-bitcode.
Cargo build(const test::ScratchDir& dir, const std::string& hostile = "", const std::string& name = "hello") {
  auto pem = read_file(test::vectors_dir() + "/keys/vector-signer.key", 64 * 1024);
  REQUIRE(pem.ok());
  REQUIRE(write_file(dir / "signer.key", *pem, 0600).ok());
  const std::string out = dir / (hostile.empty() ? name + ".xcargo" : hostile + ".xcargo");
  const std::string cmd = hostile.empty() ? std::string(XCARGO_BIN) + " build " + test::source_dir() + "/examples/hello/hello.c -t bitcode -o " +
                                                out + " --name " + name + " --key " + (dir / "signer.key") + " 2>>" + (dir / "build.err")
                                          : std::string(XCARGO_HOSTILE_BITCODE) + " " + out + " " + (dir / "signer.key") + " " + hostile +
                                                " >>" + (dir / "build.err") + " 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto bytes = read_file(out, 1 << 20);
  REQUIRE(bytes.ok());
  TrustStore trust = test::vector_trust();
  auto cargo = load_cargo(std::move(*bytes), &trust);
  REQUIRE(cargo.ok());
  return std::move(*cargo);
}

// Whether a job's -O2 object is in the cache yet (a quick tier's never is).
bool cached_o2(const test::ScratchDir& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir / "cache/jit", ec))
    if (e.path().extension() == ".o") return true;
  return false;
}

// A compile service in a child process, and the worker's end of its socket.
// /proc/PID/stat, "" once the process is gone: one read(2) into a fixed buffer, no stream and
// no path that throws (an exception's no-return hook under ASan inspects the stack it unwinds).
std::string proc_stat(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", int(pid));
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

struct Service {
  pid_t pid = -1;
  int fd = -1;
  Service(const test::ScratchDir& dir, std::chrono::milliseconds standby_after, bool standby_at_start = false) {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(sv[0]);
      compiler::Options o;
      o.trust = test::vectors_dir() + "/keys/vector-signer.pub";
      o.cache_dir = dir / "cache";
      o.standby_after = standby_after;
      o.standby_at_start = standby_at_start;
      o.log = [](std::string_view line) { std::fprintf(stderr, "%.*s\n", int(line.size()), line.data()); };
      ::_exit(compiler::serve(sv[1], o));
    }
    ::close(sv[1]);
    fd = sv[0];
  }
  std::vector<pid_t> children() const {
    std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
    std::vector<pid_t> out;
    for (pid_t child; f >> child;) out.push_back(child);
    return out;
  }
  // Its children compiling -O2 after a quick tier: those under SCHED_IDLE (field 41 of
  // /proc/PID/stat, 5).
  std::vector<pid_t> idle_children() const {
    std::vector<pid_t> out;
    for (pid_t child : children()) {
      const std::string stat = proc_stat(child);
      const size_t paren = stat.rfind(')');
      if (paren == std::string::npos) continue;
      std::istringstream fields(stat.substr(paren + 2));  // from field 3, the state
      std::string field;
      for (int i = 3; i <= 41 && fields >> field; ++i)
        if (i == 41 && field == "5") out.push_back(child);
    }
    return out;
  }
  int stop() {  // the service's exit status once the worker's end is closed
    ::close(fd);
    int ws = 0;
    REQUIRE(::waitpid(pid, &ws, 0) == pid);
    return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  }
};

// After a quick tier: its job's -O2 compile, under SCHED_IDLE (the service's idle children),
// or nothing once that object is in the cache already (*done).
std::vector<pid_t> o2_jobs(const Service& service, const test::ScratchDir& dir, bool* done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a generous ceiling
  std::vector<pid_t> jobs;
  while ((jobs = service.idle_children()).empty() && !(*done = cached_o2(dir)) && std::chrono::steady_clock::now() < until)
    ::usleep(200);
  return jobs;
}

// A service with hello's bitcode, and its quick tier asked for: what the tier cases start from.
struct QuickTier {
  test::ScratchDir dir;
  const Cargo cargo;
  Service service;
  Compiler compile;
  Result<CompiledObject> quick;
  explicit QuickTier(std::chrono::milliseconds standby_after)
      : cargo(build(dir)), service(dir, standby_after), compile(compiler::remote(service.fd, std::chrono::seconds(120))),
        quick(compile(cargo, variant(), true)) {}
  const Variant& variant() const { return cargo.manifest().variants.at(0); }
};

}  // namespace

TEST_CASE("the compile service answers a quick tier, then the -O2 object its job stored", "[compiler][tiers]") {
  // 1 s: the service reads the first request itself and hands it to a job it forks then;
  // 0: a standby waits from the start and reads the request from the worker's end itself.
  const auto standby_after = GENERATE(std::chrono::milliseconds(1000), std::chrono::milliseconds(0));
  CAPTURE(standby_after.count());
  QuickTier t(standby_after);
  auto& [dir, cargo, service, compile, quick] = t;
  const Variant& v = t.variant();
  REQUIRE(quick.ok());
  CHECK(quick->quick);
  CHECK_FALSE(quick->cache_hit);
  // The job goes on to -O2 under SCHED_IDLE (or is done already), and the service serves on.
  bool done = false;
  CHECK((!o2_jobs(service, dir, &done).empty() || done));
  // The worker's tier-up: the object that job stored, or (on a machine too busy for a
  // SCHED_IDLE compile) compiled for this request.
  auto full = compile(cargo, v, false);
  REQUIRE(full.ok());
  CHECK_FALSE(full->quick);
  CHECK(full->object != quick->object);
  auto again = compile(cargo, v, true);  // -O2 is in the cache now: no quick tier
  REQUIRE(again.ok());
  CHECK_FALSE(again->quick);
  CHECK(again->cache_hit);
  CHECK(again->object == full->object);
  CHECK(service.stop() == 0);
}

TEST_CASE("a job that LLVM stops answers with the reason, and the service serves the next request", "[compiler]") {
  const auto standby_after = GENERATE(std::chrono::milliseconds(1000), std::chrono::milliseconds(0));
  CAPTURE(standby_after.count());
  test::ScratchDir dir;
  const Cargo fatal = build(dir, "fatal");
  const Cargo hello = build(dir);
  Service service(dir, standby_after);
  Compiler compile = compiler::remote(service.fd, std::chrono::seconds(120));
  auto r = compile(fatal, fatal.manifest().variants.at(0), true);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::compile);
  CHECK_THAT(r.error().message(), Catch::Contains("LLVM stopped compiling it: Cannot select"));
  auto ok = compile(hello, hello.manifest().variants.at(0), true);
  REQUIRE(ok.ok());
  CHECK(ok->quick);
  CHECK(service.stop() == 0);
}

TEST_CASE("a standby killed while it compiles a request it read itself: the service answers for it", "[compiler]") {
  test::ScratchDir dir;
  const Cargo hello = build(dir);
  Service service(dir, std::chrono::milliseconds(0));
  // The request is written by hand so that the job can be killed while it holds it: the
  // service's only child that is not a standby of the next request.
  const Bytes req = compiler::encode_request(hello.manifest().variants.at(0).name, hello.bytes(), true);
  REQUIRE(write_all(service.fd, req).ok());
  // Once the request has left the socket (SIOCOUTQ: bytes the peer has not read), the standby
  // holds it: the service's only child, as the next standby is forked after this request.
  int unread = 1;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a generous ceiling
  while (unread > 0 && std::chrono::steady_clock::now() < until)
    if (::ioctl(service.fd, SIOCOUTQ, &unread) != 0) break;
  REQUIRE(unread == 0);
  bool killed = false;
  for (pid_t child : service.children())
    if (::kill(child, SIGKILL) == 0) killed = true;
  REQUIRE(killed);
  auto r = compiler::read_reply(service.fd, std::chrono::steady_clock::now() + std::chrono::seconds(60));
  if (!r.ok()) {
    // Killed in the middle of writing its reply, straight into the worker's connection (seen
    // in a fresh-clone run on a busy machine): the service cannot mend a reply cut short, so
    // it closes the connection ("its reply was cut short"), and a worker then ends in order
    // (compiler::remote's on_lost). Not a time-out, and nothing more to ask this service.
    CHECK(r.error().code() == Errc::unreachable);
    (void)service.stop();
    return;
  }
  // A well-formed reply: an error, or the object if the job answered first.
  if (!r->ok()) CHECK_THAT(r->error().message(), Catch::Contains("the compiler crashed (signal 9"));
  // And it serves on. A request that allows the quick tier: if the job answered with its quick
  // tier before it was killed, the kill ended its -O2 compile, which the service remembers,
  // and refuses an -O2-only request for this cargo from memory (seen on a busy machine).
  Compiler compile = compiler::remote(service.fd, std::chrono::seconds(120));
  auto ok = compile(hello, hello.manifest().variants.at(0), true);
  REQUIRE(ok.ok());
  CHECK(service.stop() == 0);
}

TEST_CASE("a service told to keep a standby from the start has one before its first request", "[compiler]") {
  // As a loader that prefers bitcode starts it. Without standby_at_start, an hour without
  // requests would pass before the first standby.
  test::ScratchDir dir;
  const Cargo hello = build(dir);
  Service service(dir, std::chrono::hours(1), true);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a generous ceiling
  while (service.children().empty() && std::chrono::steady_clock::now() < until) ::usleep(1000);
  REQUIRE(service.children().size() == 1);
  Compiler compile = compiler::remote(service.fd, std::chrono::seconds(120));
  auto quick = compile(hello, hello.manifest().variants.at(0), true);
  REQUIRE(quick.ok());
  CHECK(quick->quick);
  CHECK(service.stop() == 0);
}

TEST_CASE("a request is answered while an earlier -O2 compile gets no core", "[compiler][tiers]") {
  // On a node whose cores are busy, SCHED_IDLE gives the -O2 compile next to nothing; the
  // service used to wait for it before it read the next request (a second bitcode push took
  // 100 s beside two busy loops). Here the -O2 job is stopped outright.
  const auto standby_after = GENERATE(std::chrono::milliseconds(1000), std::chrono::milliseconds(0));
  CAPTURE(standby_after.count());
  QuickTier t(standby_after);
  auto& [dir, hello, service, compile, quick] = t;
  const Variant& v = t.variant();
  REQUIRE(quick.ok());
  REQUIRE(quick->quick);
  // The job turns to SCHED_IDLE once it has answered: caught then, or it was done first.
  bool done = false;
  const std::vector<pid_t> o2 = o2_jobs(service, dir, &done);
  for (pid_t p : o2) ::kill(p, SIGSTOP);
  if (o2.empty() || cached_o2(dir)) WARN("the -O2 compile was done before it could be stopped: the case shows nothing this time");
  // Answered now, not at the stopped compile's time limit (120 s): 60 s is a ceiling for a
  // busy machine, never a measurement.
  REQUIRE(write_all(service.fd, compiler::encode_request(v.name, hello.bytes(), true)).ok());
  auto again = compiler::read_reply(service.fd, std::chrono::steady_clock::now() + std::chrono::seconds(60));
  for (pid_t p : o2) ::kill(p, SIGCONT);
  REQUIRE(again.ok());
  REQUIRE(again->ok());
  CHECK(service.stop() == 0);
}

TEST_CASE("past two -O2 compiles going on, the oldest is stopped, reaped and remembered", "[compiler][tiers]") {
  test::ScratchDir dir;
  std::vector<Cargo> cargos;
  for (const char* name : {"one", "two", "three"}) cargos.push_back(build(dir, "", name));
  Service service(dir, std::chrono::milliseconds(0));
  Compiler compile = compiler::remote(service.fd, std::chrono::seconds(120));
  std::vector<pid_t> stopped;
  for (const Cargo& c : cargos) {
    auto quick = compile(c, c.manifest().variants.at(0), true);
    REQUIRE(quick.ok());
    REQUIRE(quick->quick);
    // Its -O2 job (the idle child not seen before), held as cores too busy for SCHED_IDLE
    // would hold it.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a generous ceiling
    pid_t job = -1;
    while (job < 0 && std::chrono::steady_clock::now() < until) {
      for (pid_t p : service.idle_children())
        if (std::find(stopped.begin(), stopped.end(), p) == stopped.end()) job = p;
      if (job < 0) ::usleep(200);
    }
    REQUIRE(job > 0);
    REQUIRE(::kill(job, SIGSTOP) == 0);
    stopped.push_back(job);
  }
  // The first job is gone, not a zombie; the two later ones go on (stopped here).
  auto state = [](pid_t p) {
    const std::string stat = proc_stat(p);
    const size_t paren = stat.rfind(')');
    return paren == std::string::npos || paren + 2 >= stat.size() ? '-' : stat[paren + 2];
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a generous ceiling
  while (state(stopped.front()) != '-' && std::chrono::steady_clock::now() < until) ::usleep(1000);
  CHECK(state(stopped.front()) == '-');
  for (pid_t child : service.children()) CHECK(state(child) != 'Z');
  // The later two live on (stopped, or about to be: SIGSTOP takes effect when they next run).
  CHECK(state(stopped[1]) != '-');
  CHECK(state(stopped[2]) != '-');
  // The worker's tier-up request for the first cargo is refused from memory, with the reason.
  auto full = compile(cargos.front(), cargos.front().manifest().variants.at(0), false);
  REQUIRE_FALSE(full.ok());
  CHECK_THAT(full.error().message(), Catch::Contains("later compiles went on in the background"));
  for (pid_t p : stopped) ::kill(p, SIGCONT);
  CHECK(service.stop() == 0);
}
