// The same-host door: abstract Unix sockets, SO_PEERCRED, and the one frame each end sends.
#include "net/door.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace xcargo::door {

namespace {

constexpr uint8_t kMagic[4] = {'X', 'C', 'D', 'R'};

using Clock = std::chrono::steady_clock;

sockaddr_un address_of(const std::string& host_port, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  const std::string name = socket_name(host_port);
  const size_t n = std::min(name.size(), sizeof a.sun_path - 1);
  std::memcpy(a.sun_path + 1, name.data(), n);  // sun_path[0] == 0: the abstract namespace
  *len = socklen_t(offsetof(sockaddr_un, sun_path) + 1 + n);
  return a;
}

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? int(left) : 0;
}

// Waits until fd is ready for `events` or the deadline passes.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

// Reads exactly size bytes by the deadline: "" or why not.
std::string read_all(int fd, uint8_t* to, size_t size, Clock::time_point deadline) {
  for (size_t got = 0; got < size;) {
    const ssize_t n = ::recv(fd, to + got, size - got, MSG_DONTWAIT);
    if (n > 0) {
      got += size_t(n);
      continue;
    }
    if (n == 0) return "closed the connection";
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return std::strerror(errno);
    if (!wait_for(fd, POLLIN, deadline)) return "sent nothing in time";
  }
  return {};
}

void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (8 * i));
}

}  // namespace

std::string socket_name(const std::string& host_port) { return "xcargo-door:" + host_port; }

Bytes encode(const Frame& f) {
  Bytes out(kHeaderSize + f.body.size());
  std::memcpy(out.data(), kMagic, 4);
  out[4] = kVersion;
  out[5] = uint8_t(f.kind);
  put32(out.data() + 8, uint32_t(f.body.size()));
  std::copy(f.body.begin(), f.body.end(), out.begin() + long(kHeaderSize));
  return out;
}

Result<size_t> decode_header(ByteView h) {
  if (h.size() < kHeaderSize) return Error(Errc::malformed, "a door frame's header is 12 bytes");
  if (std::memcmp(h.data(), kMagic, 4) != 0) return Error(Errc::malformed, "not a door frame (bad magic)");
  if (h[4] != kVersion)
    return Error(Errc::unsupported, "door version " + std::to_string(h[4]) + " (this side speaks " +
                                        std::to_string(kVersion) + ")");
  if (h[5] < uint8_t(Kind::offer) || h[5] > uint8_t(Kind::denied))
    return Error(Errc::malformed, "unknown door frame kind " + std::to_string(h[5]));
  if (h[6] != 0 || h[7] != 0) return Error(Errc::malformed, "a door frame's reserved bytes are not 0");
  const uint32_t len = uint32_t(h[8]) | uint32_t(h[9]) << 8 | uint32_t(h[10]) << 16 | uint32_t(h[11]) << 24;
  if (len > kMaxBody)
    return Error(Errc::limit, "a door frame of " + std::to_string(len) + " bytes (at most " + std::to_string(kMaxBody) + ")");
  if (h[5] == uint8_t(Kind::offer) && len <= sizeof(Ticket)) return Error(Errc::malformed, "an offer without a worker address");
  if (h[5] == uint8_t(Kind::route) && (len < kRouteKey || len > kRouteKey + kMaxRouteTenant))
    return Error(Errc::malformed, "a route of " + std::to_string(len) + " bytes (a 32-byte key, then at most 32 of a tenant's name)");
  return size_t(len);
}

Frame route(const Route& c) {
  Frame f{Kind::route, Bytes(c.key.begin(), c.key.end())};
  f.body.insert(f.body.end(), c.tenant.begin(), c.tenant.end());
  return f;
}

Result<Route> parse_route(const Frame& f) {
  if (f.kind != Kind::route) return Error(Errc::malformed, "the first frame is not a route");
  if (f.body.size() < kRouteKey || f.body.size() > kRouteKey + kMaxRouteTenant)
    return Error(Errc::malformed, "a route of " + std::to_string(f.body.size()) + " bytes");
  Route c;
  std::copy_n(f.body.begin(), kRouteKey, c.key.begin());
  c.tenant.assign(f.body.begin() + long(kRouteKey), f.body.end());
  return c;
}

Frame offer(const Ticket& ticket, ByteView worker_address) {
  Frame f{Kind::offer, Bytes(ticket.begin(), ticket.end())};
  f.body.insert(f.body.end(), worker_address.begin(), worker_address.end());
  return f;
}

RouteStep read_route(int fd, RouteReading& r, Route* out, std::string* why) {
  for (;;) {
    const ssize_t n = ::recv(fd, r.buf + r.got, r.want - r.got, MSG_DONTWAIT);
    if (n == 0) return *why = "the connection ended before its route", RouteStep::failed;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return RouteStep::more;
      return *why = std::strerror(errno), RouteStep::failed;
    }
    r.got += size_t(n);
    if (r.got < r.want) continue;
    if (r.want == kHeaderSize) {
      auto len = decode_header(ByteView(r.buf, kHeaderSize));
      if (!len.ok()) return *why = len.error().message(), RouteStep::failed;
      if (r.buf[5] != uint8_t(Kind::route)) return *why = "the first frame is not a route", RouteStep::failed;
      r.want = kHeaderSize + *len;  // within the buffer: decode_header bounds a route
      continue;
    }
    auto route = parse_route(Frame{Kind::route, Bytes(r.buf + kHeaderSize, r.buf + r.want)});
    if (!route.ok()) return *why = route.error().message(), RouteStep::failed;
    *out = std::move(*route);
    return RouteStep::done;
  }
}

Result<Credentials> peer_of(int fd) {
  ucred c{};
  socklen_t len = sizeof c;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) != 0)
    return Error(Errc::io, std::string("cannot tell who is at the door's other end: ") + std::strerror(errno));
  return Credentials{c.pid, c.uid};
}

Result<int> listen(const std::string& host_port) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error(Errc::io, std::string("cannot open the same-host door: ") + std::strerror(errno));
  socklen_t len = 0;
  const sockaddr_un a = address_of(host_port, &len);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0 || ::listen(fd, 128) != 0) {
    const int e = errno;
    ::close(fd);
    Error err(Errc::io, "cannot open the same-host door of " + host_port + ": " + std::strerror(e));
    if (e != EADDRINUSE) return err;
    // Who holds the name: another loader of this user's, or another user's process.
    std::string holder;
    if (const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0); probe >= 0) {
      if (::connect(probe, reinterpret_cast<const sockaddr*>(&a), len) == 0)
        if (auto who = peer_of(probe); who.ok() && who->uid != ::geteuid())
          holder = "uid " + std::to_string(who->uid) + " (pid " + std::to_string(who->pid) + ")";
      ::close(probe);
    }
    if (holder.empty()) return err.hint("another loader listens on " + host_port + " on this host (in this network namespace)");
    return Error(Errc::io, "cannot open the same-host door of " + host_port + ": its name (@" + socket_name(host_port) +
                               ") is held by a process of " + holder + ", not of this user")
        .hint("another user's process took this loader's door name; listen on another port, and have the admin look at that process");
  }
  return fd;
}

Result<Frame> read_frame(int fd, std::chrono::milliseconds limit, const std::string& from) {
  const auto deadline = Clock::now() + limit;
  uint8_t h[kHeaderSize];
  if (std::string why = read_all(fd, h, sizeof h, deadline); !why.empty())
    return Error(Errc::unreachable, from + ": " + why + " at the same-host door");
  auto len = decode_header(ByteView(h, sizeof h));
  if (!len.ok()) return Error(len.error().code(), from + ": " + len.error().message());
  Frame f;
  f.kind = Kind(h[5]);
  f.body.resize(*len);
  if (std::string why = read_all(fd, f.body.data(), f.body.size(), deadline); !why.empty())
    return Error(Errc::unreachable, from + ": " + why + " in the middle of a door frame");
  return f;
}

Status write_frame(int fd, const Frame& f, std::chrono::milliseconds limit) {
  if (f.body.size() > kMaxBody) return Error(Errc::limit, "a door frame over " + std::to_string(kMaxBody) + " bytes");
  const auto deadline = Clock::now() + limit;
  const Bytes bytes = encode(f);
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      sent += size_t(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return Error(Errc::unreachable, std::strerror(errno));
    if (!wait_for(fd, POLLOUT, deadline)) return Error(Errc::unreachable, "the other end reads nothing");
  }
  return {};
}

Result<int> connect(const std::string& host_port, const Route& route, bool* refused) {
  if (refused) *refused = false;
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error(Errc::io, std::string("cannot open a Unix socket: ") + std::strerror(errno));
  socklen_t len = 0;
  const sockaddr_un a = address_of(host_port, &len);
  while (::connect(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    if (errno == EINTR) continue;
    const int e = errno;
    ::close(fd);
    if (e == EAGAIN)
      return Error(Errc::unreachable, "could not reach " + host_port + ": its same-host door is full (too many connections at once)");
    if (e == ECONNREFUSED && refused) *refused = true;
    const std::string why = e == ECONNREFUSED ? "connection refused" : std::strerror(e);
    return Error(Errc::unreachable, host_port + ": " + why + ": no loader listens there on this host")
        .hint("is xcargo-loader running there, on this port? Its first log line says where it listens");
  }
  auto who = peer_of(fd);
  if (!who.ok()) {
    ::close(fd);
    return who.take_error();
  }
  if (who->uid != ::geteuid()) {
    ::close(fd);
    return Error(Errc::unauthenticated, host_port + ": the process at its same-host door runs as uid " + std::to_string(who->uid) +
                                            ", not as this user (uid " + std::to_string(::geteuid()) + ")")
        .hint("shared memory is for the loader's own user; reach another user's loader over TLS: tls://HOST:PORT of its "
              "tls-listen");
  }
  // A new connection's socket buffer takes the route at once.
  if (auto s = write_frame(fd, door::route(route), std::chrono::milliseconds(1000)); !s.ok()) {
    ::close(fd);
    return Error(Errc::unreachable, host_port + ": " + s.error().message() + " (sending the route at the same-host door)");
  }
  return fd;
}

namespace {

// A `refused` or `denied` frame as the client's error: its text, then its hint.
Error refusal(const std::string& host_port, const Frame& f) {
  const std::string text(f.body.begin(), f.body.end());
  const size_t nl = text.find('\n');
  Error e(f.kind == Kind::denied ? Errc::unauthenticated : Errc::unreachable, host_port + ": " + text.substr(0, nl));
  if (nl != std::string::npos) e.hint(text.substr(nl + 1));
  return e;
}

}  // namespace

std::optional<Error> refusal_in(ByteView first, const std::string& host_port) {
  if (first.size() < kHeaderSize || std::memcmp(first.data(), kMagic, 4) != 0) return std::nullopt;
  auto len = decode_header(first.subspan(0, kHeaderSize));
  if (!len.ok() || first.size() < kHeaderSize + *len) return std::nullopt;
  Frame f;
  f.kind = Kind(first[5]);
  if (f.kind != Kind::refused && f.kind != Kind::denied) return std::nullopt;
  f.body.assign(first.begin() + kHeaderSize, first.begin() + long(kHeaderSize + *len));
  return refusal(host_port, f);
}

Result<Opened> read_offer(int fd, const std::string& host_port, std::chrono::milliseconds limit) {
  auto f = read_frame(fd, limit, host_port);
  if (!f.ok()) {
    ::close(fd);
    return f.take_error();
  }
  if (f->kind == Kind::refused || f->kind == Kind::denied) {
    ::close(fd);
    return refusal(host_port, *f);
  }
  Opened o;
  o.fd = fd;
  std::copy_n(f->body.begin(), o.ticket.size(), o.ticket.begin());
  o.address.assign(f->body.begin() + long(o.ticket.size()), f->body.end());
  return o;
}

Result<Opened> open(const std::string& host_port, const Route& route, std::chrono::milliseconds limit) {
  auto fd = connect(host_port, route);
  XC_TRY(fd);
  return read_offer(*fd, host_port, limit);
}

}  // namespace xcargo::door
