// The log: a process that flushes and _exit()s loses no line, whenever its flusher ran.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "log.h"

using namespace xcargo::loader;

namespace {

// Forks a child whose stderr is a pipe: it logs `line`, waits `pause` (long enough, at times,
// for the flusher thread to take the batch), then flush_log() and _exit(), as a worker ending
// after a kernel's crash does. Returns what it wrote.
std::string child_output(const std::string& line, std::chrono::microseconds pause) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(p[1], 2);
    ::close(p[0]);
    ::close(p[1]);
    log_line(line);
    std::this_thread::sleep_for(pause);
    flush_log();
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) != 0;)
    if (n > 0) out.append(buf, size_t(n));
    else if (errno != EINTR) break;
  ::close(p[0]);
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  return out;
}

}  // namespace

TEST_CASE("a line logged before flush_log is written, whether or not the flusher has taken it", "[log]") {
  // Pauses around the flusher's 20 ms batching: before it, while it takes the batch, after it.
  for (int i = 0; i < 60; ++i) {
    const std::string line = "failed invoke: the kernel crashed #" + std::to_string(i);
    const auto pause = std::chrono::microseconds(i < 10 ? 0 : 19000 + (i % 25) * 100);
    const std::string out = child_output(line, pause);
    INFO("pause " << pause.count() << " us, output: " << out);
    CHECK(out.find(line + "\n") != std::string::npos);
  }
}
