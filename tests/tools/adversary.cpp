// xcargo-adversary: invokes one misbehaving entry of a cargo on a node REPS times, checks that
// every invocation gets the expected status with a message, and that the node then serves a
// well-behaved entry ("ok", replying "fine"). After a status that restarts the node's worker
// (crashed, timeout, sandbox) it reconnects and pushes the cargo again.
// usage: xcargo-adversary --to HOST:PORT --cargo FILE --entry NAME --expect STATUS --reps N
//        [--message TEXT] (a substring every message must contain) [--u64 N] (input)
//        xcargo-adversary --to HOST:PORT --cargo FILE --entry NAME --reps N --vanish [--u64 N]
// --vanish: in each repetition a client process (this tool again) connects, pushes, sends
// the invocation and is killed (SIGKILL) 100 ms later, while its kernel runs: the reply has
// nowhere to go. This tool then connects at once (UCX may give it the dead client's endpoint
// address) and must get its own reply to "ok", not the dead client's.
// Prints one summary line; exits 0 when every repetition went as expected, 1 otherwise.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tool_args.h"
#include "xcargo/cargo.h"
#include "xcargo/client.h"
#include "xcargo/file.h"

using namespace xcargo;

namespace {

using test::arg;

[[noreturn]] void die(const std::string& what) { test::die("xcargo-adversary", what, 2); }

bool restarts_worker(wire::ReplyStatus s) {
  return s == wire::ReplyStatus::crashed || s == wire::ReplyStatus::timeout || s == wire::ReplyStatus::sandbox;
}

// The client to be killed: connects, pushes, says "sent" on stdout, invokes (and is killed
// before the reply comes).
int vanishing_client(const std::string& to, ByteView cargo, const Digest& digest, const std::string& entry, ByteView input) {
  auto c = client::connect(to, {});
  if (!c.ok()) die(c.error().message());
  auto p = (*c)->push(cargo);
  if (!p.ok() || p->status != wire::ReplyStatus::ok) die("push failed");
  std::printf("sent\n");
  std::fflush(stdout);
  auto r = (*c)->invoke(digest, entry, input);
  return r.ok() ? 0 : 1;
}

// One vanishing client: true once it has sent its invocation and was killed.
bool vanish_once(char** argv, std::string* why) {
  int fds[2];
  if (::pipe(fds) != 0) die("pipe");
  const pid_t pid = ::fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::execv("/proc/self/exe", argv);  // argv ends with --child
    _exit(127);
  }
  ::close(fds[1]);
  pollfd pf{fds[0], POLLIN, 0};
  char buf[8] = {};
  const bool sent = ::poll(&pf, 1, 60000) == 1 && ::read(fds[0], buf, 4) == 4 && std::memcmp(buf, "sent", 4) == 0;
  if (sent) ::usleep(100000);  // its invocation is on its way or running
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(fds[0]);
  if (!sent) *why = "the client to be killed did not get to send its invocation";
  return sent;
}

int vanish(char** argv, const std::string& to, const Digest& digest, const std::string& entry, long reps) {
  long killed = 0, wrong = 0, lost = 0, unsent = 0;
  std::string first_problem;
  for (long i = 0; i < reps; ++i) {
    std::string why;
    if (vanish_once(argv, &why)) {
      ++killed;
    } else {
      ++unsent;
      if (first_problem.empty()) first_problem = "repetition " + std::to_string(i) + ": " + why;
    }
    auto c = client::connect(to, {});
    auto fine = c.ok() ? (*c)->invoke(digest, "ok", {}) : Result<client::InvokeReply>(c.error());
    if (!fine.ok()) {
      ++lost;
      if (first_problem.empty()) first_problem = "repetition " + std::to_string(i) + ": " + fine.error().message();
    } else if (fine->result.status != wire::ReplyStatus::ok || std::string(fine->output.begin(), fine->output.end()) != "fine") {
      ++wrong;
      if (first_problem.empty()) first_problem = "repetition " + std::to_string(i) + ": 'ok' got another reply";
    }
  }
  std::printf("%s: %ld/%ld killed as expected, %ld wrong, %ld lost, %ld not served afterwards%s%s\n", entry.c_str(), killed, reps,
              wrong, lost, unsent, first_problem.empty() ? "" : "; first: ", first_problem.c_str());
  return killed == reps && wrong == 0 && lost == 0 ? 0 : 1;
}

bool has_flag(int argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], flag) == 0) return true;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = arg(argc, argv, "--to"), path = arg(argc, argv, "--cargo"), entry = arg(argc, argv, "--entry");
  const std::string expect = arg(argc, argv, "--expect"), message = arg(argc, argv, "--message");
  const long reps = std::atol(arg(argc, argv, "--reps", "1").c_str());
  const bool vanishing = has_flag(argc, argv, "--vanish"), child = has_flag(argc, argv, "--child");
  if (to.empty() || path.empty() || entry.empty() || (expect.empty() && !vanishing && !child) || reps < 1)
    die("usage: xcargo-adversary --to HOST:PORT --cargo FILE --entry NAME (--expect STATUS | --vanish) --reps N "
        "[--message TEXT] [--u64 N]");
  Bytes input;
  if (std::string n = arg(argc, argv, "--u64"); !n.empty()) {
    const uint64_t v = std::strtoull(n.c_str(), nullptr, 0);
    input.resize(8);
    std::memcpy(input.data(), &v, 8);
  }
  auto bytes = read_file(path, 1u << 30);
  if (!bytes.ok()) die(bytes.error().message());
  auto parsed = parse_container(*bytes);
  if (!parsed.ok()) die(path + ": " + parsed.error().message());
  const Digest digest = parsed->digest;
  if (child) return vanishing_client(to, *bytes, digest, entry, input);
  if (vanishing) {
    std::vector<char*> child_argv(argv, argv + argc);
    child_argv.push_back(const_cast<char*>("--child"));
    child_argv.push_back(nullptr);
    return vanish(child_argv.data(), to, digest, entry, reps);
  }

  client::ConnectOptions co;
  co.retry_ms = 15000;  // a worker restarting after a crash
  co.refused_retry_ms = 15000;
  co.connect_timeout_ms = 15000;
  std::unique_ptr<client::Connection> c;
  long as_expected = 0, wrong = 0, lost = 0, unserved = 0;
  std::string first_problem;
  auto problem = [&](const std::string& what) {
    if (first_problem.empty()) first_problem = what;
  };
  for (long i = 0; i < reps; ++i) {
    if (!c) {
      auto nc = client::connect(to, co);
      if (!nc.ok()) die("repetition " + std::to_string(i) + ": " + nc.error().message());
      c = std::move(*nc);
      auto p = c->push(*bytes);
      if (!p.ok() || p->status != wire::ReplyStatus::ok)
        die("repetition " + std::to_string(i) + ": push failed: " + (p.ok() ? p->message : p.error().message()));
    }
    auto r = c->invoke(digest, entry, input);
    if (!r.ok()) {
      ++lost;
      problem("repetition " + std::to_string(i) + ": no reply: " + r.error().message());
      c.reset();
      continue;
    }
    const std::string status = wire::status_name(r->result.status);
    if (status == expect && !r->result.message.empty() == (r->result.status != wire::ReplyStatus::ok) &&
        r->result.message.find(message) != std::string::npos) {
      ++as_expected;
    } else {
      ++wrong;
      problem("repetition " + std::to_string(i) + ": " + status + ": " + r->result.message);
    }
    if (restarts_worker(r->result.status)) {
      c.reset();  // that worker is gone; the next one gets a new connection
      auto nc = client::connect(to, co);
      if (!nc.ok()) die("repetition " + std::to_string(i) + ": the node did not come back: " + nc.error().message());
      c = std::move(*nc);
      auto p = c->push(*bytes);
      if (!p.ok() || p->status != wire::ReplyStatus::ok) die("repetition " + std::to_string(i) + ": push after restart failed");
    }
    auto fine = c->invoke(digest, "ok", {});
    if (!fine.ok() || fine->result.status != wire::ReplyStatus::ok ||
        std::string(fine->output.begin(), fine->output.end()) != "fine") {
      ++unserved;
      problem("repetition " + std::to_string(i) + ": the node did not serve 'ok' afterwards");
      c.reset();
    }
  }
  std::printf("%s: %ld/%ld %s as expected, %ld wrong, %ld lost, %ld not served afterwards%s%s\n", entry.c_str(), as_expected,
              reps, expect.c_str(), wrong, lost, unserved, first_problem.empty() ? "" : "; first: ", first_problem.c_str());
  return as_expected == reps && unserved == 0 ? 0 : 1;
}
