// SCM_RIGHTS, closing what a process must not inherit, and a child's end, in one place
// (processes.h).
#include "sandbox/processes.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace xcargo::loader::sandbox {

namespace {
struct OneFd {
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))] = {};
};
// A message of iov's bytes with room for one descriptor.
msghdr message(iovec& iov, OneFd& control) {
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control.space;
  m.msg_controllen = sizeof control.space;
  return m;
}
}  // namespace

bool send_fd(int socket, int fd, std::string_view text) {
  iovec iov{const_cast<char*>(text.data()), text.size()};
  OneFd control;
  msghdr m = message(iov, control);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  while ((n = ::sendmsg(socket, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return n == ssize_t(text.size());
}

ssize_t receive_fd(int socket, char* buf, size_t size, int* fd) {
  *fd = -1;
  iovec iov{buf, size};
  OneFd control;
  msghdr m = message(iov, control);
  ssize_t n;
  while ((n = ::recvmsg(socket, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
      std::memcpy(fd, CMSG_DATA(c), sizeof *fd);
  return n;
}

void close_all_but(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned from = 3;
  for (int fd : keep) {
    if (fd < 3 || unsigned(fd) < from) continue;
    if (unsigned(fd) > from) ::syscall(SYS_close_range, from, unsigned(fd) - 1, 0);
    from = unsigned(fd) + 1;
  }
  ::syscall(SYS_close_range, from, ~0u, 0);
}

std::string exit_text(int ws) {
  return WIFSIGNALED(ws) ? std::string("killed by signal ") + std::to_string(WTERMSIG(ws)) + " (" + strsignal(WTERMSIG(ws)) + ")"
                         : "exited with status " + std::to_string(WEXITSTATUS(ws));
}

int reap_within(pid_t pid, std::chrono::milliseconds grace) {
  int ws = 0;
  const auto kill_at = std::chrono::steady_clock::now() + grace;
  for (;;) {
    const pid_t r = ::waitpid(pid, &ws, WNOHANG);
    if (r == pid) return ws;
    if (r < 0 && errno != EINTR) return 0;
    if (std::chrono::steady_clock::now() > kill_at) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace xcargo::loader::sandbox
