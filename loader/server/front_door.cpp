// FrontDoor: the TLS listener, its connections' handshakes, frames in and out.
#include "server/front_door.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "net/ucx.h"
#include "sandbox/processes.h"
#include "server/door_channel.h"

namespace xcargo::loader {

namespace {

Error socket_error(const std::string& what) { return Error(Errc::unreachable, what + ": " + std::strerror(errno)); }

}  // namespace

Result<std::unique_ptr<FrontDoor>> FrontDoor::listen(const std::string& host_port, std::shared_ptr<tls::Context> context,
                                                     Events events, std::chrono::milliseconds wait, std::string* address) {
  socklen_t len = 0;
  auto addr = net::parse_host_port(host_port, &len);
  XC_TRY(addr);
  std::unique_ptr<FrontDoor> d(new FrontDoor());
  d->context_ = std::move(context);
  d->ev_ = std::move(events);
  d->epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (d->epfd_ < 0) return socket_error("tls listener: epoll");
  d->listen_fd_ = ::socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (d->listen_fd_ < 0) return socket_error("tls listener " + host_port);
  const int one = 1;
  ::setsockopt(d->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted worker gets its port back
  const auto deadline = Clock::now() + wait;
  while (::bind(d->listen_fd_, reinterpret_cast<const sockaddr*>(&*addr), len) != 0) {
    if (errno != EADDRINUSE || Clock::now() >= deadline)
      return Error(Errc::unreachable, "cannot listen on " + host_port + " (tls): " + std::strerror(errno))
          .hint(errno == EADDRINUSE ? "another process holds the port; choose another or stop it" : "check the address");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (::listen(d->listen_fd_, 1024) != 0) return socket_error("tls listener " + host_port);
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  if (::getsockname(d->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &blen) != 0) return socket_error("tls listener");
  if (address) *address = net::to_host_port(reinterpret_cast<const sockaddr*>(&bound));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &d->listen_fd_;
  if (::epoll_ctl(d->epfd_, EPOLL_CTL_ADD, d->listen_fd_, &ev) != 0) return socket_error("tls listener: epoll");
  return d;
}

Result<std::unique_ptr<FrontDoor>> FrontDoor::from_keeper(int channel_fd, std::shared_ptr<tls::Context> context, Events events) {
  std::unique_ptr<FrontDoor> d(new FrontDoor());
  d->listen_fd_ = channel_fd;  // owned from here, whatever fails
  d->from_keeper_ = true;
  d->context_ = std::move(context);
  d->ev_ = std::move(events);
  if (::fcntl(channel_fd, F_SETFL, ::fcntl(channel_fd, F_GETFL) | O_NONBLOCK) != 0) return socket_error("tls keeper's channel");
  d->epfd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (d->epfd_ < 0) return socket_error("tls listener: epoll");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = &d->listen_fd_;
  if (::epoll_ctl(d->epfd_, EPOLL_CTL_ADD, channel_fd, &ev) != 0) return socket_error("tls keeper's channel: epoll");
  return d;
}

FrontDoor::~FrontDoor() {
  close_all();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epfd_ >= 0) ::close(epfd_);
}

void FrontDoor::stop_listening() {
  if (listen_fd_ < 0) return;
  ::epoll_ctl(epfd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  ::close(listen_fd_);
  listen_fd_ = -1;
}

std::string FrontDoor::deaf() const {
  if (listen_fd_ < 0) return {};
  if (from_keeper_) {
    int type = 0;
    socklen_t len = sizeof type;
    pollfd p{listen_fd_, POLLRDHUP, 0};
    if (::getsockopt(listen_fd_, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET ||
        (::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL))))
      return "its channel from the supervisor, which passes it new connections, was closed or shut down";
  } else {
    int on = 0;
    socklen_t len = sizeof on;
    if (::getsockopt(listen_fd_, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) != 0 || !on)
      return "its listening socket was closed or no longer listens";
  }
  // epoll knows a descriptor by its number and its file: a socket opened in the closed one's
  // place, even listening on the same port, is not watched.
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = const_cast<int*>(&listen_fd_);
  if (::epoll_ctl(epfd_, EPOLL_CTL_MOD, listen_fd_, &ev) != 0)
    return std::string("its listening socket is no longer watched (") + std::strerror(errno) + ")";
  return {};
}

void FrontDoor::close_all() {
  conns_.clear();
  partial_by_key_.clear();
  partial_total_ = 0;
}

uint64_t FrontDoor::allowance(const TlsConn& c) const {
  uint64_t room = ev_.max_data ? ev_.max_data() : 0;
  auto limit = [&](const std::function<uint64_t()>& cap, uint64_t others) {
    if (!cap) return;
    const uint64_t n = cap();
    room = std::min(room, n > others ? n - others : 0);
  };
  auto it = partial_by_key_.find(c.key);
  limit(ev_.max_partial_per_key, (it == partial_by_key_.end() ? 0 : it->second) - c.partial);
  // A small frame is never held up by other keys' large ones: two keys stalling large frames
  // must not stop every other request and every peer's forward (each connection holds at
  // most one frame in progress, so these cost at most kSmallFrame a connection).
  const uint64_t before_total = room;
  limit(ev_.max_partial_total, partial_total_ - c.partial);
  if (room < kSmallFrame) room = std::min(before_total, kSmallFrame);
  return room;
}

void FrontDoor::set_partial(TlsConn& c, uint64_t bytes) {
  if (bytes == c.partial) return;
  if (c.partial == 0) c.partial_since = Clock::now();
  partial_total_ = partial_total_ - c.partial + bytes;
  uint64_t& k = partial_by_key_[c.key];
  k = k - c.partial + bytes;
  if (k == 0) partial_by_key_.erase(c.key);
  c.partial = bytes;
}

size_t FrontDoor::queued_total() const {
  size_t n = 0;
  for (const auto& [p, c] : conns_) n += c->channel->queued();
  return n;
}

void FrontDoor::close(TlsConn* c) {
  auto it = conns_.find(c);
  if (it == conns_.end()) return;
  c->channel->close();
  set_partial(*c, 0);
  std::erase(failed_, c);  // its address may be a later connection's
  conns_.erase(it);        // the channel's destructor closes its socket, which leaves the epoll set
}

void FrontDoor::lose(TlsConn& c, const std::string& why) {
  set_partial(c, 0);
  if (ev_.lost) ev_.lost(c, why, !c.ready);
  std::erase(failed_, &c);
  conns_.erase(&c);
}

void FrontDoor::watch_writes(TlsConn& c, bool on) {
  if (c.writing == on) return;
  c.writing = on;
  epoll_event ev{};
  ev.events = EPOLLIN | (on ? uint32_t(EPOLLOUT) : 0u);
  ev.data.ptr = &c;
  ::epoll_ctl(epfd_, EPOLL_CTL_MOD, c.channel->fd(), &ev);
}

void FrontDoor::accept_all() {
  for (int i = 0; i < kAcceptsPerPoll && listen_fd_ >= 0; ++i) {
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    int fd = -1;
    if (from_keeper_) {
      char buf[door_channel::kMaxMessage];
      // Nothing more now, or the channel ended (deaf() says so): the rest wait with the keeper.
      const ssize_t got = sandbox::receive_fd(listen_fd_, buf, sizeof buf, &fd);
      if (got <= 0) return;
      // A dial's answer (a door_channel message), or a client's connection (its text "c").
      if (got > 1) {
        const auto m = door_channel::decode(ByteView(reinterpret_cast<const uint8_t*>(buf), size_t(got)));
        const bool answer = m && (m->kind == door_channel::Kind::dialed || m->kind == door_channel::Kind::dial_failed);
        if (answer && ev_.dial_answer) {
          std::string what(m->bytes.begin(), m->bytes.end());
          if (m->kind == door_channel::Kind::dial_failed && fd >= 0) ::close(fd), fd = -1;
          else if (m->kind == door_channel::Kind::dialed && fd < 0) what = what + ": the keeper's answer carried no connection";
          ev_.dial_answer(m->id, fd, what);
        } else if (fd >= 0) {
          ::close(fd);
        }
        continue;
      }
      if (fd < 0) continue;
      // The keeper made it non-blocking, with TCP_NODELAY. A socket that has no TCP peer is
      // no connection of a client (the keeper passes nothing else).
      if (::getpeername(fd, reinterpret_cast<sockaddr*>(&from), &len) != 0 || (from.ss_family != AF_INET && from.ss_family != AF_INET6)) {
        ::close(fd);
        continue;
      }
    } else {
      fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // none waiting, or out of descriptors: the rest wait in the backlog
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // a reply leaves at once
    }
    take(fd, net::to_host_port(reinterpret_cast<const sockaddr*>(&from)));
  }
}

void FrontDoor::take(int fd, const std::string& peer) {
  auto channel = tls::Channel::start(context_, fd);
  if (!channel.ok()) {
    ::close(fd);
    return;
  }
  auto c = std::make_unique<TlsConn>();
  c->channel = std::move(*channel);
  c->peer = peer;
  c->since = Clock::now();
  if (ev_.accepted && !ev_.accepted(*c)) return;  // closed (its channel's socket) before a byte is read
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = c.get();
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
    if (ev_.lost) ev_.lost(*c, std::string("cannot watch the connection: ") + std::strerror(errno), true);
    return;
  }
  TlsConn* p = c.get();
  conns_.emplace(p, std::move(c));
}

TlsConn* FrontDoor::dial(const std::string& host_port, std::shared_ptr<tls::Context> context, std::string* why) {
  socklen_t len = 0;
  auto addr = net::parse_host_port(host_port, &len);
  if (!addr.ok()) return *why = addr.error().message(), nullptr;
  const int fd = ::socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return *why = std::string("socket: ") + std::strerror(errno), nullptr;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*addr), len) != 0 && errno != EINPROGRESS) {
    *why = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  return adopt_dialed(fd, net::to_host_port(reinterpret_cast<const sockaddr*>(&*addr)), std::move(context), why);
}

bool FrontDoor::ask_dial(uint64_t id, const std::string& host_port, std::string* why) {
  if (!from_keeper_ || listen_fd_ < 0) return *why = "this worker has no channel to the TLS front door's keeper", false;
  const Bytes b = door_channel::encode(door_channel::Message{door_channel::Kind::dial, id, {}, 0, 0, Bytes(host_port.begin(), host_port.end())});
  if (::send(listen_fd_, b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(b.size()))
    return *why = std::string("cannot ask the TLS front door's keeper to dial: ") + std::strerror(errno), false;
  return true;
}

TlsConn* FrontDoor::adopt_dialed(int fd, const std::string& host_port, std::shared_ptr<tls::Context> context, std::string* why) {
  auto channel = tls::Channel::start(std::move(context), fd);
  if (!channel.ok()) {
    ::close(fd);
    return *why = channel.error().message(), nullptr;
  }
  auto c = std::make_unique<TlsConn>();
  c->channel = std::move(*channel);
  c->peer = host_port;
  c->since = Clock::now();
  c->dialed = true;
  c->connecting = true;
  c->writing = true;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;  // writable once connected
  ev.data.ptr = c.get();
  if (::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) != 0) return *why = std::string("epoll: ") + std::strerror(errno), nullptr;
  TlsConn* p = c.get();
  conns_.emplace(p, std::move(c));
  return p;
}

bool FrontDoor::drive(TlsConn& c) {
  c.busy = false;
  if (c.connecting) {  // its first event: connected, or why not
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(c.channel->fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    if (err) return lose(c, std::string("cannot connect: ") + std::strerror(err)), false;
    c.connecting = false;
  }
  if (!c.ready) {
    auto io = c.channel->handshake();
    if (!io.ok()) return lose(c, io.error().message()), false;
    if (*io != tls::Channel::Io::done) {
      watch_writes(c, *io == tls::Channel::Io::want_write);
      return true;
    }
    c.ready = true;
    c.key = c.channel->peer().identity;
    watch_writes(c, false);
    if (ev_.ready) ev_.ready(c, c.channel->peer());
    for (Held& h : c.held) {
      auto sent = c.channel->send_owned(h.type, h.header, std::move(h.data));
      if (!sent.ok()) return lose(c, sent.error().message()), false;
    }
    c.held.clear();
  }
  if (!flush_out(c)) return false;
  // Replies to the frames read now (those run at once) are held, and leave together after.
  c.channel->hold(true);
  const bool alive = receive_frames(c);
  if (!alive || !conns_.count(&c)) return false;
  c.channel->hold(false);
  for (TlsConn* f : failed_)
    if (f == &c) return true;  // lost at the next poll
  return flush_out(c);
}

bool FrontDoor::flush_out(TlsConn& c) {
  if (!c.channel->queued()) return true;
  auto io = c.channel->flush();
  if (!io.ok()) return lose(c, io.error().message()), false;
  watch_writes(c, *io != tls::Channel::Io::done);
  return true;
}

bool FrontDoor::receive_frames(TlsConn& c) {
  for (int i = 0; i < kFramesPerPoll; ++i) {
    const uint64_t room = allowance(c);
    auto io = c.channel->receive(c.in, room);
    if (!io.ok()) {
      std::string why = io.error().message();
      if (c.channel->receiving() == 0 && ev_.max_data && room < ev_.max_data() && why.find("bytes of data (at most") != std::string::npos)
        why += " (room left by the requests still arriving on this key's other connections, or on all: " + std::to_string(room) +
               " bytes)";
      return lose(c, why), false;
    }
    set_partial(c, *io == tls::Channel::Io::want_read ? c.channel->receiving() : 0);
    if (*io == tls::Channel::Io::closed) return lose(c, c.dialed ? "closed by the node" : "closed by its client"), false;
    if (*io != tls::Channel::Io::done) return true;
    if (ev_.frame) ev_.frame(c, c.in);
    for (TlsConn* f : failed_)
      if (f == &c) return true;  // lost at the next poll
    // Nothing more read yet: what is held goes now (a lone request's reply waits for no
    // read of the socket); held replies wait only for frames already read. The socket is
    // read again when epoll (level-triggered) says it is readable: a read that finds nothing
    // would cost a system call before the request runs.
    if (!c.channel->buffered()) return flush_out(c);
  }
  c.busy = true;  // frames may wait inside OpenSSL, where epoll cannot see them
  return true;
}

bool FrontDoor::poll() {
  bool any = false;
  if (!failed_.empty()) {
    std::vector<TlsConn*> failed;
    failed.swap(failed_);
    for (TlsConn* c : failed)
      if (conns_.count(c)) lose(*c, "the connection failed while sending"), any = true;  // lose() edits failed_, not this copy
  }
  std::vector<TlsConn*> again;
  for (const auto& [p, c] : conns_)
    if (c->busy) again.push_back(p);
  for (TlsConn* c : again)
    if (conns_.count(c)) drive(*c), any = true;
  epoll_event evs[64];
  const int n = ::epoll_wait(epfd_, evs, 64, 0);
  for (int i = 0; i < n; ++i) {
    any = true;
    if (evs[i].data.ptr == &listen_fd_) {
      accept_all();
      continue;
    }
    auto* c = static_cast<TlsConn*>(evs[i].data.ptr);
    if (conns_.count(c) && !c->busy) drive(*c);
  }
  return any;
}

void FrontDoor::sweep(Clock::time_point now, std::chrono::milliseconds deadline,
                      const std::function<std::chrono::milliseconds(uint64_t)>& transfer_deadline) {
  std::vector<std::pair<TlsConn*, std::string>> late;
  for (const auto& [p, c] : conns_)
    if (!c->ready && now - c->since > deadline) {
      late.emplace_back(p, "no TLS handshake within " + std::to_string(deadline.count() / 1000) + " s");
    } else if (c->partial && transfer_deadline) {
      const auto limit = transfer_deadline(c->partial);
      if (now - c->partial_since > limit)
        late.emplace_back(p, "a request of " + std::to_string(c->partial) + " data bytes did not arrive within " +
                                 std::to_string(limit.count() / 1000) + " s");
    }
  for (auto& [c, why] : late) lose(*c, why);
}

bool FrontDoor::send(TlsConn& c, wire::MsgType type, ByteView header, Bytes&& data) {
  for (TlsConn* f : failed_)
    if (f == &c) return false;
  if (!c.ready) {  // a dialed connection in its handshake: sent once it is done (drive)
    c.held.push_back({type, Bytes(header.begin(), header.end()), std::move(data)});
    return true;
  }
  auto io = c.channel->send_owned(type, header, std::move(data));
  if (!io.ok()) {
    failed_.push_back(&c);
    return false;
  }
  if (!c.channel->holding()) watch_writes(c, *io != tls::Channel::Io::done);  // else drive() flushes
  return true;
}

}  // namespace xcargo::loader
