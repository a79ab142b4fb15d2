// spawn_local(): a private xcargo-loader child speaking framed messages over its stdin/stdout.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "client/session.h"
#include "xcargo/file.h"
#include "xcargo/interrupt.h"

extern char** environ;

namespace xcargo::client {

using namespace wire;

namespace {

class LocalConnection final : public Session {
public:
  LocalConnection(pid_t pid, int to_child, int from_child, unsigned timeout_s)
      : pid_(pid), to_(to_child), from_(from_child), timeout_s_(timeout_s) {}
  ~LocalConnection() override { close(); }
  void close() override {
    if (to_ >= 0) ::close(to_);  // EOF: the loader exits
    if (from_ >= 0) ::close(from_);
    to_ = from_ = -1;
    if (pid_ > 0) {
      int ws = 0;
      for (int i = 0; i < 100 && ::waitpid(pid_, &ws, WNOHANG) == 0; ++i) ::usleep(10000);
      if (::waitpid(pid_, &ws, WNOHANG) == 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &ws, 0);
      }
      untrack_child(pid_);
      pid_ = -1;
    }
  }
  std::string peer() const override { return "local loader"; }
  Status start() { return handshake(nullptr, {}); }  // a private loader: no authentication

protected:
  Result<Frame> roundtrip(MsgType type, ByteView header, ByteView data) override {
    if (to_ < 0) return Error(Errc::unreachable, "the local loader connection is closed");
    if (!write_all(to_, encode_frame(type, header, data)).ok()) return lost();
    // Invocations may run up to the time limit; the loader gets one more second.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s_ + 1);
    Bytes head(kFrameHeaderSize);
    XC_TRY(read_exact(head.data(), head.size(), deadline));
    const uint64_t max_data = 1ull << 31;
    auto h = decode_frame_head(head, max_data);
    if (!h.ok()) return Error(Errc::malformed, "local loader: " + h.error().message());
    Bytes all = head;
    all.resize(kFrameHeaderSize + h->header_len + h->data_len);
    XC_TRY(read_exact(all.data() + kFrameHeaderSize, h->header_len + size_t(h->data_len), deadline));
    return decode_frame(all, max_data);
  }

private:
  Status read_exact(uint8_t* p, size_t n, std::chrono::steady_clock::time_point deadline) {
    switch (xcargo::read_exact(from_, p, n, deadline)) {
      case ReadEnd::done: return {};
      case ReadEnd::timed_out: return timed_out();
      default: return lost();
    }
  }
  Error timed_out() {
    ::kill(pid_, SIGKILL);
    int ws = 0;
    ::waitpid(pid_, &ws, 0);
    untrack_child(pid_);
    pid_ = -1;
    return Error(Errc::remote, "the kernel ran past the time limit of " + std::to_string(timeout_s_) + " s and was stopped")
        .hint("raise the limit with --timeout SECONDS if the kernel needs longer");
  }
  Error lost() {
    int ws = 0;
    if (pid_ > 0 && ::waitpid(pid_, &ws, 0) == pid_) {
      untrack_child(pid_);
      pid_ = -1;
      if (WIFSIGNALED(ws) && WTERMSIG(ws) == SIGSYS)
        return Error(Errc::remote, "the sandbox stopped the kernel: it made a system call itself (kernels may only "
                                   "call the xcargo API); the local loader was killed by signal " + std::to_string(SIGSYS));
      if (WIFSIGNALED(ws))
        return Error(Errc::remote, std::string("the kernel crashed: the local loader was killed by signal ") +
                                       std::to_string(WTERMSIG(ws)) + " (" + strsignal(WTERMSIG(ws)) + ")");
      return Error(Errc::remote, "the local loader exited with status " + std::to_string(WEXITSTATUS(ws)));
    }
    return Error(Errc::remote, "lost the local loader");
  }
  pid_t pid_;
  int to_, from_;
  unsigned timeout_s_;
};

}  // namespace

Result<std::unique_ptr<Connection>> spawn_local(const LocalOptions& o) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
    return Error(Errc::io, std::string("pipe: ") + std::strerror(errno));
  std::vector<std::string> args = {o.loader, "--exec", "--trust", o.trust};
  if (!o.cache.empty()) args.insert(args.end(), {"--cache", o.cache});
  if (!o.prefer.empty()) args.insert(args.end(), {"--prefer", o.prefer});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, o.loader.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    return Error(Errc::io, "cannot start " + o.loader + ": " + std::strerror(rc))
        .hint("xcargo-loader is installed next to xcargo; set XCARGO_LOADER to its path otherwise");
  }
  track_child(pid);  // an interrupted caller ends it (the loader also dies with its parent)
  ::signal(SIGPIPE, SIG_IGN);  // a dead loader must give an error, not kill us
  auto c = std::make_unique<LocalConnection>(pid, in[1], out[0], o.timeout_s);
  XC_TRY(c->start());
  return std::unique_ptr<Connection>(std::move(c));
}

}  // namespace xcargo::client
