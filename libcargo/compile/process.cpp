// posix_spawn-based runner for the external compiler and linker processes.
#include "compile/process.h"
#include "xcargo/interrupt.h"

#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

extern char** environ;

namespace xcargo {

static std::string quote_for_display(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

// A finished command's messages, written to stderr in one piece.
static void replay(int fd) {
  char buf[65536];
  if (::lseek(fd, 0, SEEK_SET) != 0) return;
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    std::fwrite(buf, 1, size_t(n), stderr);
  }
  std::fflush(stderr);
}

Status run_commands(const std::vector<Command>& commands, unsigned jobs, bool verbose, Progress* progress) {
  if (jobs == 0) jobs = 1;
  // Commands running side by side write their messages to files of their own, shown whole
  // as each ends: on a shared stderr two compilers' errors came out interleaved by the byte.
  const bool capture = jobs > 1 && commands.size() > 1;
  std::map<pid_t, int> captured;  // a running command's message file
  std::map<pid_t, size_t> running;
  std::vector<int> status(commands.size(), 0);
  std::vector<std::string> spawn_error(commands.size());
  size_t next = 0;
  bool failed = false;
  while (next < commands.size() || !running.empty()) {
    if (interrupted()) failed = true;  // start nothing more; the running ones were killed
    while (!failed && next < commands.size() && running.size() < jobs) {
      const Command& c = commands[next];
      if (verbose) std::fprintf(stderr, "xcargo: %s\n", quote_for_display(c.argv).c_str());
      std::vector<char*> argv;
      for (const auto& a : c.argv) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      posix_spawn_file_actions_t fa;
      posix_spawn_file_actions_init(&fa);
      if (!c.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, c.cwd.c_str());
      const int messages = capture ? ::memfd_create("xcargo-messages", MFD_CLOEXEC) : -1;  // -1: shared stderr
      if (messages >= 0) posix_spawn_file_actions_adddup2(&fa, messages, STDERR_FILENO);
      pid_t pid = 0;
      int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
      posix_spawn_file_actions_destroy(&fa);
      if (rc != 0) {
        spawn_error[next] = std::strerror(rc);
        failed = true;
        if (messages >= 0) ::close(messages);
      } else {
        running[pid] = next;
        if (messages >= 0) captured[pid] = messages;
        track_child(pid);
      }
      ++next;
    }
    if (running.empty()) break;
    int ws = 0;
    pid_t pid = ::waitpid(-1, &ws, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      for (const auto& [child, fd] : captured) ::close(fd);
      return Error(Errc::io, std::string("waitpid: ") + std::strerror(errno));
    }
    auto it = running.find(pid);
    if (it == running.end()) continue;
    untrack_child(pid);
    if (auto m = captured.find(pid); m != captured.end()) {
      replay(m->second);
      ::close(m->second);
      captured.erase(m);
    }
    status[it->second] = ws;
    if (!(WIFEXITED(ws) && WEXITSTATUS(ws) == 0)) failed = true;
    else if (progress && progress->show)
      std::fprintf(stderr, "xcargo: [%zu/%zu] %s\n", ++progress->done, progress->total, commands[it->second].description.c_str());
    running.erase(it);
  }
  if (int sig = interrupted()) return Error(Errc::io, "interrupted by signal " + std::to_string(sig));
  for (size_t i = 0; i < commands.size() && i < next; ++i) {
    const Command& c = commands[i];
    if (!spawn_error[i].empty())
      return Error(Errc::compile, c.description + ": cannot run " + c.argv[0] + ": " + spawn_error[i])
          .hint("scripts/setup installs clang-16 and lld-16; or set XCARGO_LLVM_BIN to their directory");
    int ws = status[i];
    if (WIFEXITED(ws) && WEXITSTATUS(ws) != 0)
      return Error(Errc::compile, c.description + ": " + c.argv[0] + " failed (exit " + std::to_string(WEXITSTATUS(ws)) + ")")
          .hint("the compiler's messages are above");
    if (WIFSIGNALED(ws))
      return Error(Errc::compile, c.description + ": " + c.argv[0] + " was killed by signal " + std::to_string(WTERMSIG(ws)));
  }
  return {};
}

}  // namespace xcargo
