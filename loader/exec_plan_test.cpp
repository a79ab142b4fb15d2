// Tests of starting a process by exec from a plan made before the fork: the new program finds
// its start record at the descriptor the environment names, keeps the descriptors the plan
// keeps, and nothing else of the parent's.
#include "exec_plan.h"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

using namespace xcargo;
using namespace xcargo::loader;

namespace {
// Runs the plan in a forked child with `script` on its standard input; what it printed.
std::string run(const ExecPlan& plan, const std::string& script) {
  int in[2], out[2];
  REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    exec_planned(plan);
    _exit(126);
  }
  ::close(in[0]);
  ::close(out[1]);
  REQUIRE(::write(in[1], script.data(), script.size()) == ssize_t(script.size()));
  ::close(in[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;) got.append(buf, size_t(n));
  ::close(out[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return got;
}
}  // namespace

TEST_CASE("exec plan: the program reads its record and keeps only the planned descriptors", "[exec_plan]") {
  const int sh = ::open("/bin/sh", O_RDONLY | O_CLOEXEC);
  REQUIRE(sh >= 0);
  int kept[2], dropped[2];
  REQUIRE(::pipe2(kept, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(dropped, O_CLOEXEC) == 0);
  ::setenv("XCARGO_TEST_START", "stale", 1);  // replaced, not doubled
  const std::string record = "the record\n";
  auto plan = plan_exec(sh, "sh", "XCARGO_TEST_START", ByteView(reinterpret_cast<const uint8_t*>(record.data()), record.size()),
                        {kept[1], -1});
  ::unsetenv("XCARGO_TEST_START");
  REQUIRE(plan.ok());
  const std::string start = std::to_string(plan->start);
  const std::string got =
      run(*plan, "cat /proc/self/fd/$XCARGO_TEST_START; env | grep -c '^XCARGO_TEST_START='; echo $XCARGO_TEST_START; "
                 "[ -e /proc/self/fd/" + std::to_string(kept[1]) + " ] && echo kept; [ -e /proc/self/fd/" +
                 std::to_string(dropped[1]) + " ] && echo leaked; exit 0\n");
  CHECK(got == "the record\n1\n" + start + "\nkept\n");
  // The parent's copies stay close-on-exec: only the child cleared the flag.
  CHECK((::fcntl(kept[1], F_GETFD) & FD_CLOEXEC) != 0);
  CHECK((::fcntl(plan->start, F_GETFD) & FD_CLOEXEC) != 0);
  for (int fd : {sh, kept[0], kept[1], dropped[0], dropped[1]}) ::close(fd);
}

TEST_CASE("exec plan: a moved plan still points at its own strings, and its record file is closed with it", "[exec_plan]") {
  int start = -1;
  {
    auto plan = plan_exec(-1, "n", "XCARGO_TEST_START", ByteView(), {});
    REQUIRE(plan.ok());
    ExecPlan moved = std::move(*plan);
    start = moved.start;
    CHECK(plan->start == -1);
    REQUIRE(moved.argv.size() == 2);
    CHECK(moved.argv[0] == moved.args[0].data());
    CHECK(moved.argv[1] == nullptr);
    CHECK(moved.envp.back() == nullptr);
    CHECK(std::string(moved.envp[moved.envp.size() - 2]) == "XCARGO_TEST_START=" + std::to_string(start));
    CHECK(::fcntl(start, F_GETFD) >= 0);
  }
  CHECK(::fcntl(start, F_GETFD) == -1);  // closed
}
