// The metrics endpoint (see metrics_server.h).
#include "stats/metrics_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "stats/http_request.h"
#include "stats/prometheus.h"
#include "net/ucx.h"

namespace xcargo::loader {

namespace {

Error sys(const std::string& what) { return Error(Errc::io, "metrics " + what + ": " + std::strerror(errno)); }

Result<int> bind_unix(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    return Error(Errc::invalid_argument, "metrics unix:" + path + ": a socket path is 1 to " + std::to_string(sizeof a.sun_path - 1) + " bytes");
  std::memcpy(a.sun_path, path.data(), path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys("socket");
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      ::close(fd);
      return Error(Errc::invalid_argument, "metrics unix:" + path + ": exists and is not a socket").hint("choose another path");
    }
    const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool served = probe >= 0 && ::connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (probe >= 0) ::close(probe);
    if (served) {
      ::close(fd);
      return Error(Errc::invalid_argument, "metrics unix:" + path + ": another process serves it").hint("choose another path, or stop that loader");
    }
    ::unlink(path.c_str());  // a socket left by a loader that ended
  }
  const mode_t old = ::umask(0117);  // 0660: the loader's user and group (give a scraper the group)
  const int b = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::umask(old);
  if (b != 0 || ::listen(fd, 16) != 0) {
    Error e = sys("unix:" + path);
    ::close(fd);
    return e;
  }
  return fd;
}

struct Conn {
  int fd = -1;
  std::chrono::steady_clock::time_point deadline;
  size_t used = 0;
  bool draining = false;  // answered: what the client still sends is read and dropped until it closes
  char head[kMaxHttpHead];  // fixed: a request cannot make this process allocate
};

// Sends all of r within the connection's deadline; false if it did not go.
bool send_all(const Conn& c, const std::string& r) {
  size_t off = 0;
  while (off < r.size()) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) return false;
    pollfd p{c.fd, POLLOUT, 0};
    if (::poll(&p, 1, int(std::min<long long>(left, 200))) < 0 && errno != EINTR) return false;
    const ssize_t n = ::send(c.fd, r.data() + off, r.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) off += size_t(n);
    else if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
  }
  return true;
}

}  // namespace

Result<int> bind_metrics(const std::string& address, bool any_address, std::string* described) {
  if (address.rfind("unix:", 0) == 0) {
    *described = address;
    return bind_unix(address.substr(5));
  }
  socklen_t len = 0;
  auto a = net::parse_host_port(address, &len);
  if (!a.ok())
    return Error(Errc::invalid_argument, "metrics " + address + ": " + a.error().message()).hint("give unix:/PATH or 127.0.0.1:PORT");
  if (!any_address && !net::is_loopback(*a))
    return Error(Errc::invalid_argument, "metrics " + address + ": not a loopback address; every host that reaches it would read "
                                         "the node's counts (cargo names, client keys), unauthenticated")
        .hint("serve it on 127.0.0.1:PORT or unix:/PATH and let a local agent forward it")
        .hint("or pass --metrics-any-address (metrics-any-address: true) if the network in front of it is trusted");
  const int fd = ::socket(a->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return sys("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&*a), len) != 0 || ::listen(fd, 16) != 0) {
    Error e = sys(address);
    ::close(fd);
    return e;
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &blen);
  *described = net::to_host_port(reinterpret_cast<const sockaddr*>(&bound));
  return fd;
}

int serve_metrics(int listen_fd, const NodeStats& stats, const std::atomic<bool>& stop) {
  using Clock = std::chrono::steady_clock;
  ::fcntl(listen_fd, F_SETFL, ::fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
  std::vector<Conn> conns(kMaxMetricsConnections);  // allocated once
  while (!stop) {
    pollfd fds[kMaxMetricsConnections + 1];
    int n = 0;
    // Where the next connection goes: a free slot, else the slot of the oldest connection
    // whose request is still incomplete, which it replaces (connections that never finish
    // their request cannot keep a scrape out); none while all are answered: new ones wait.
    Conn* next = nullptr;
    for (Conn& c : conns) {
      if (c.fd >= 0) fds[n++] = {c.fd, POLLIN, 0};
      if (c.fd < 0) next = &c;
    }
    if (!next)
      for (Conn& c : conns)
        if (!c.draining && (!next || c.deadline < next->deadline)) next = &c;
    const int listening = n;
    if (next) fds[n++] = {listen_fd, POLLIN, 0};
    if (::poll(fds, nfds_t(n), 200) < 0 && errno != EINTR) return 1;
    const Clock::time_point now = Clock::now();
    if (next && listening < n && (fds[listening].revents & POLLIN)) {
      const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd >= 0) {
        if (next->fd >= 0) ::close(next->fd);
        next->fd = fd;
        next->used = 0;
        next->draining = false;
        next->deadline = now + std::chrono::milliseconds(kMetricsDeadlineMs);
      }
    }
    for (Conn& c : conns) {
      if (c.fd < 0) continue;
      bool done = now > c.deadline;
      while (!done && (c.draining || c.used < sizeof c.head)) {
        if (c.draining) c.used = 0;
        const ssize_t r = ::recv(c.fd, c.head + c.used, sizeof c.head - c.used, 0);
        if (r > 0) c.used += size_t(r);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) done = true;
        if (r <= 0) break;
      }
      if (!done && !c.draining) {
        const HttpRequest q = parse_http_request(std::string_view(c.head, c.used));
        if (q.verdict != HttpVerdict::incomplete) {
          timespec ts{};
          ::clock_gettime(CLOCK_REALTIME, &ts);
          const std::string body = q.verdict == HttpVerdict::metrics ? prometheus_text(stats.snapshot(), double(ts.tv_sec) + ts.tv_nsec / 1e9) : "";
          // Then no more from this side; the socket closes once the client has closed its
          // side (or at the deadline): closed with unread bytes, it would reset the
          // connection, and the client could lose the response.
          done = !send_all(c, http_response(q.verdict, q.head_only, body)) || ::shutdown(c.fd, SHUT_WR) != 0;
          c.draining = true;
        }
      }
      if (done) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
  }
  return 0;
}

}  // namespace xcargo::loader
