// The log: a process that flushes and _exit()s loses no line, whenever its flusher ran.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "log.h"
#include "support.h"

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

namespace {

// Forks a child that starts the log copier into `path` (rotated at max_size), writes each of
// `writes` to its stderr as a kernel would (raw bytes, 20 ms apart), and ends the copier.
void copy_through_log(const std::string& path, uint64_t max_size, const std::vector<std::string>& writes) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (!start_log_copier(path, max_size).ok()) ::_exit(1);
    for (const std::string& w : writes) {
      for (size_t done = 0; done < w.size();) {
        const ssize_t n = ::write(2, w.data() + done, w.size() - done);
        if (n <= 0) ::_exit(2);
        done += size_t(n);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    close_log();
    ::_exit(0);
  }
  int ws = 0;
  ::waitpid(pid, &ws, 0);
  REQUIRE(WIFEXITED(ws));
  REQUIRE(WEXITSTATUS(ws) == 0);
}

std::string contents(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("the log copier writes no text direction override, even split over two writes", "[log]") {
  xcargo::test::ScratchDir dir;
  const std::string path = dir / "node.log";
  // U+202E (E2 80 AE) whole, then U+2066 (E2 81 A6) split over two writes, then U+2028.
  copy_through_log(path, 1 << 20, {"entry \xe2\x80\xae" "fdp.exe\n", "isolate \xe2\x81", "\xa6x and \xe2\x80\xa8 end\n"});
  const std::string log = contents(path);
  CHECK(log.find("\xe2\x80\xae") == std::string::npos);
  CHECK(log.find("\xe2\x81\xa6") == std::string::npos);
  CHECK(log.find("\xe2\x80\xa8") == std::string::npos);
  CHECK(log.find("entry ???fdp.exe\n") != std::string::npos);
  CHECK(log.find("isolate ???x and ??? end\n") != std::string::npos);
}

TEST_CASE("a line without end is cut into pieces that keep the log file within its size", "[log]") {
  xcargo::test::ScratchDir dir;
  const std::string path = dir / "node.log";
  copy_through_log(path, kMinLogFileSize, {std::string(200 << 10, 'Z')});
  for (const std::string& p : {path, path + ".1"}) {
    INFO(p);
    CHECK(contents(p).size() <= kMinLogFileSize);
  }
}
