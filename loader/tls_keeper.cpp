// TlsKeeper: the supervisor's thread that listens for the TLS front door and passes each
// connection to the serving worker.
#include "tls_keeper.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <set>
#include <map>
#include <cstring>
#include <mutex>
#include <thread>

#include "net/door.h"
#include "net/ucx.h"
#include "sandbox/processes.h"
#include "server/door_channel.h"

namespace xcargo::loader {

using Clock = std::chrono::steady_clock;

// Messages from a worker read per turn of the keeper's loop (more wait a turn): a flood of
// them takes turns with connections to accept.
constexpr int kMessagesPerTurn = 64;
// Connections held at once, routed and waiting for a worker or dialled (each a descriptor of
// the supervisor's); more wait in the listening socket's backlog. Those still routing are
// kMaxRouting more.
constexpr size_t kMaxHeld = 512;
// How long a connection has to send its route (a client sends it at once, in one write), and
// a dial to connect to its peer.
constexpr auto kRouteLimit = std::chrono::milliseconds(2000);
// How long a routed connection waits for its tenant's worker: a first worker starts in about
// 0.2 s, and a client gives up connecting after 5 s.
constexpr auto kWaitLimit = std::chrono::milliseconds(10000);
constexpr auto kDialLimit = std::chrono::milliseconds(5000);

struct TlsKeeper::Impl {
  std::function<void(const std::string&)> log;
  std::string address;
  std::array<uint8_t, 32> node_key{};  // the route of its dials
  // What a worker may have dialed, resolved once at open (no name lookup in the keeper's loop).
  struct Peer {
    std::string host_port;
    sockaddr_storage addr{};
    socklen_t len = 0;
    std::string unresolved;  // why not, if it did not resolve
  };
  std::vector<Peer> peers;
  int listener = -1, wake = -1;
  std::thread thread;
  std::atomic<uint64_t> passed{0}, dialed{0};

  std::function<Result<std::string>(const door::Route&)> route;  // unset: every route to tenant ""
  std::function<void(const std::string&)> wanted_tenant;

  std::mutex m;  // guards what serve() and the destructor hand the thread
  std::condition_variable applied_cv;
  bool stop = false;
  std::vector<std::pair<std::string, int>> changes;  // serve()'s (tenant, channel), in order
  std::vector<std::pair<std::string, std::string>> turned_away;  // turn_away()'s (tenant, why)
  uint64_t wanted = 0, applied = 0;  // serve() calls made, and taken up by the thread

  // The thread's own: each tenant's serving worker's channel (the keeper's copy), and the
  // connections routed to it that it has not taken yet (the channel full, or no worker).
  struct Waiting {
    int fd = -1;
    Clock::time_point since;
  };
  struct Tenant {
    int channel = -1;
    std::deque<Waiting> ready;
  };
  std::map<std::string, Tenant> tenants;
  struct Routing {
    int fd = -1;
    door::RouteReading reading;
    Clock::time_point until;
  };
  std::vector<Routing> routing;  // accepted, their route not yet whole
  struct Dial {
    int fd = -1;
    uint64_t id = 0;
    std::string to;
    Clock::time_point until;
    std::string tenant;  // the asking worker's: its route names it
  };
  std::vector<Dial> dials;  // connecting to a peer for the worker
  Clock::time_point quiet_until{};

  void poke() {
    const uint64_t one = 1;
    (void)!::write(wake, &one, sizeof one);
  }
  size_t held() const {  // past their route
    size_t n = dials.size();
    for (const auto& [name, t] : tenants) n += t.ready.size();
    return n;
  }
  void drop_channel(Tenant& t) {
    if (t.channel >= 0) ::close(t.channel);
    t.channel = -1;
  }

  // Passes t's oldest routed connection to its serving worker; false if the channel cannot
  // take it now (full: wait for room; gone: connections wait for the next worker).
  bool pass(Tenant& t) {
    if (sandbox::send_fd(t.channel, t.ready.front().fd, "c")) {
      ::close(t.ready.front().fd);
      t.ready.pop_front();
      passed.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK) drop_channel(t);  // the worker's end is closed or shut down
    return false;
  }

  // Reads up to n messages the worker sent and starts its dials; a descriptor sent along
  // (a kernel's, parked here against the uid's limit of descriptors in flight) is closed. The
  // end of its sending side (a kernel's shutdown(SHUT_WR): readable for ever) lets the channel
  // go: its worker, whose end then hangs up, is replaced, and connections wait for the next.
  void from_worker(const std::string& name, Tenant& t, int n) {
    for (int i = 0; i < n && t.channel >= 0; ++i) {
      uint8_t buf[door_channel::kMaxMessage];
      int fd = -1;
      const ssize_t got = sandbox::receive_fd(t.channel, reinterpret_cast<char*>(buf), sizeof buf, &fd);
      if (fd >= 0) ::close(fd);
      if (got == 0) drop_channel(t);
      if (got <= 0) return;
      const auto m = door_channel::decode(ByteView(buf, size_t(got)));
      if (m && m->kind == door_channel::Kind::dial) dial(name, m->id, std::string(m->bytes.begin(), m->bytes.end()));
    }
  }

  // The answer to a worker's dial: `dialed` with the connection (its route sent), or
  // `dial_failed` saying why. One the channel cannot take now is dropped (the worker's wait
  // for that peer times out).
  void answer(const std::string& tenant, uint64_t id, int fd, const std::string& host_port, const std::string& why) {
    const auto it = tenants.find(tenant);
    const int channel = it == tenants.end() ? -1 : it->second.channel;
    door_channel::Message a{fd >= 0 ? door_channel::Kind::dialed : door_channel::Kind::dial_failed, id, {}, 0, 0, {}};
    const std::string text = fd >= 0 ? host_port : host_port + ": " + why;
    a.bytes.assign(text.begin(), text.end());
    const Bytes b = door_channel::encode(a);
    if (fd >= 0) {
      // Counted before the hand-over, so whoever reads the answer also reads the count.
      dialed.fetch_add(1, std::memory_order_relaxed);
      if (channel < 0 || !sandbox::send_fd(channel, fd, std::string_view(reinterpret_cast<const char*>(b.data()), b.size())))
        dialed.fetch_sub(1, std::memory_order_relaxed);
      ::close(fd);
    } else if (channel >= 0) {
      (void)!::send(channel, b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    }
  }

  // Starts a worker's dial of host_port if it is one of the peers (non-blocking, TCP_NODELAY);
  // it is answered once connected and its route sent, or at once with why not.
  void dial(const std::string& tenant, uint64_t id, const std::string& host_port) {
    const auto peer = std::find_if(peers.begin(), peers.end(), [&](const Peer& p) { return p.host_port == host_port; });
    if (peer == peers.end()) return answer(tenant, id, -1, host_port, "not a TLS node of this loader's cluster");
    if (!peer->unresolved.empty()) return answer(tenant, id, -1, host_port, peer->unresolved);
    if (held() >= kMaxHeld) return answer(tenant, id, -1, host_port, "the supervisor holds too many connections");
    std::string why;
    const int fd = connect_to(*peer, &why);
    if (fd < 0) return answer(tenant, id, -1, host_port, why);
    dials.push_back(Dial{fd, id, host_port, Clock::now() + kDialLimit, tenant});
  }

  // A dial's socket is writable: connected (or failed). Its route goes first: this node's
  // key, for the asking worker's tenant.
  void finish_dial(const Dial& d) {
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(d.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
      ::close(d.fd);
      return answer(d.tenant, d.id, -1, d.to, std::string("connect: ") + std::strerror(err));
    }
    const Bytes r = door::encode(door::route(door::Route{node_key, d.tenant}));
    if (::send(d.fd, r.data(), r.size(), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(r.size())) {  // a new socket takes it whole
      ::close(d.fd);
      return answer(d.tenant, d.id, -1, d.to, "could not send the route");
    }
    answer(d.tenant, d.id, d.fd, d.to, {});
  }

  static int connect_to(const Peer& p, std::string* why) {
    const int fd = ::socket(p.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return *why = std::string("socket: ") + std::strerror(errno), -1;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&p.addr), p.len) != 0 && errno != EINPROGRESS) {
      *why = std::string("connect: ") + std::strerror(errno);
      ::close(fd);
      return -1;
    }
    return fd;
  }

  // Answers fd in place of TLS with a door frame (denied, or refused: try later) and closes it.
  // A fresh socket's buffer takes the frame at once: the keeper does not wait.
  static void answer_instead(int fd, door::Kind kind, const std::string& why, const std::string& hint) {
    const std::string text = why + "\n" + hint;
    (void)door::write_frame(fd, door::Frame{kind, Bytes(text.begin(), text.end())}, std::chrono::milliseconds(0));
    // The ClientHello that followed the route, read away: closed with bytes unread, the
    // socket would reset the connection, and the client could lose the frame.
    uint8_t junk[4096];
    for (int k = 0; k < 4 && ::recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0; ++k) {
    }
    ::close(fd);
  }

  // Full: the connection that has waited longest for a worker is closed, so that routes keep
  // being read (a tenant whose workers do not start cannot keep the others' clients out).
  void make_way() {
    Tenant* oldest = nullptr;
    for (auto& [name, t] : tenants)
      if (!t.ready.empty() && (!oldest || t.ready.front().since < oldest->ready.front().since)) oldest = &t;
    if (!oldest) return;
    ::close(oldest->ready.front().fd);
    oldest->ready.pop_front();
    note("closed the connection that had waited longest for its tenant's worker, to make way (" + std::to_string(kMaxHeld) +
         " held at most)");
  }

  // Reads what a connection sent of its route; a whole one is ready to pass, anything else
  // closes it (nothing of TLS has been said yet: no alert to send).
  void read_routing(size_t i) {
    door::Route r;
    std::string why;
    switch (door::read_route(routing[i].fd, routing[i].reading, &r, &why)) {
      case door::RouteStep::more:
        return;
      case door::RouteStep::done:
        if (auto tenant = route ? route(r) : Result<std::string>(std::string()); tenant.ok()) {
          if (held() >= kMaxHeld) make_way();
          Tenant& t = tenants[*tenant];
          t.ready.push_back(Waiting{routing[i].fd, Clock::now()});
          if (t.channel < 0 && wanted_tenant) wanted_tenant(*tenant);
        } else {
          answer_instead(routing[i].fd, door::Kind::denied, "the TLS front door: " + tenant.error().message(),
                         "the loader's admin lists a client's key in its clients file");
          note("denied a connection's route: " + tenant.error().message());
        }
        break;
      case door::RouteStep::failed:
        ::close(routing[i].fd);
        note("closed a connection that sent no route first (" + why + ")");
        break;
    }
    routing.erase(routing.begin() + long(i));
  }

  // A line about a refused connection, at most every 10 s.
  void note(const std::string& line) {
    if (Clock::now() < quiet_until) return;
    quiet_until = Clock::now() + std::chrono::seconds(10);
    log("the TLS front door " + line);
  }

  void accept_some() {
    for (int i = 0; i < 64; ++i) {  // bounded past: routing (kMaxRouting), held (make_way)
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          // Out of descriptors: the connection waits in the backlog; no busy loop meanwhile.
          note("cannot accept a connection: " + std::string(std::strerror(errno)) + "; it waits");
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        return;
      }
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // a reply leaves at once
      if (routing.size() >= kMaxRouting) {  // the longest silent makes way
        ::close(routing.front().fd);
        routing.erase(routing.begin());
        note("closed connections that held back their route, to make way for new ones (" + std::to_string(kMaxRouting) +
             " may be routing at once)");
      }
      routing.push_back(Routing{fd, {}, Clock::now() + kRouteLimit});
    }
  }

  // Closes routes and dials past their time.
  void expire() {
    const auto now = Clock::now();
    for (size_t i = 0; i < routing.size();)
      if (now > routing[i].until) {
        ::close(routing[i].fd);
        note("closed a connection that sent no route in time");
        routing.erase(routing.begin() + long(i));
      } else {
        ++i;
      }
    for (auto& [name, t] : tenants)
      while (!t.ready.empty() && now - t.ready.front().since > kWaitLimit) {
        answer_instead(t.ready.front().fd, door::Kind::refused, "the TLS front door: no worker of this client's tenant took the connection within " +
                                                                    std::to_string(kWaitLimit.count() / 1000) + " s",
                       "the loader's log says why; try again later");
        t.ready.pop_front();
        note("closed connections that waited too long for their tenant's worker");
      }
    for (size_t i = 0; i < dials.size();)
      if (now > dials[i].until) {
        const Dial d = dials[i];
        dials.erase(dials.begin() + long(i));
        ::close(d.fd);
        answer(d.tenant, d.id, -1, d.to, "no connection in time");
      } else {
        ++i;
      }
  }

  void run() {
    std::vector<pollfd> fds;
    for (;;) {
      {
        std::lock_guard<std::mutex> g(m);
        if (stop) break;
        for (auto& [name, why] : turned_away) {
          Tenant& t = tenants[name];
          for (const Waiting& w : t.ready)
            answer_instead(w.fd, door::Kind::refused, "the TLS front door: this client's tenant cannot be served now: " + why,
                           "the loader's log says why; try again later");
          t.ready.clear();
        }
        turned_away.clear();
        if (applied != wanted) {
          for (auto& [name, chan] : changes) {
            Tenant& t = tenants[name];
            drop_channel(t);
            t.channel = chan;
          }
          changes.clear();
          applied = wanted;
          applied_cv.notify_all();
        }
      }
      // Full: poll waits for room; gone: connections wait for the next worker.
      for (auto& [name, t] : tenants)
        while (t.channel >= 0 && !t.ready.empty() && pass(t)) {
        }
      expire();
      fds.clear();
      fds.push_back({wake, POLLIN, 0});
      fds.push_back({listener, POLLIN, 0});
      // What each worker says on its channel (dials, and whatever a kernel writes there), and
      // room in it for a routed connection.
      std::vector<Tenant*> polled;
      std::vector<const std::string*> names;
      for (auto& [name, t] : tenants)
        if (t.channel >= 0) {
          fds.push_back({t.channel, short(POLLIN | (t.ready.empty() ? 0 : POLLOUT)), 0});
          polled.push_back(&t);
          names.push_back(&name);
        }
      const size_t first_routing = fds.size();
      for (const Routing& r : routing) fds.push_back({r.fd, POLLIN, 0});
      for (const Dial& d : dials) fds.push_back({d.fd, POLLOUT, 0});
      // Connections waiting for a worker: only their hang-up is looked at (then closed here).
      const size_t first_waiting = fds.size();
      for (auto& [name, t] : tenants)
        for (const Waiting& w : t.ready) fds.push_back({w.fd, POLLRDHUP, 0});
      if (::poll(fds.data(), fds.size(), routing.empty() && dials.empty() ? -1 : 100) < 0 && errno != EINTR) {
        log("the TLS front door's keeper cannot wait: " + std::string(std::strerror(errno)) + "; retrying");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      if (fds[0].revents) {
        uint64_t v;
        (void)!::read(wake, &v, sizeof v);
      }
      std::vector<size_t> routed, connected;
      for (size_t i = 0; i < routing.size(); ++i)
        if (fds[first_routing + i].revents) routed.push_back(i);
      for (size_t i = 0; i < dials.size(); ++i)
        if (fds[first_routing + routing.size() + i].revents) connected.push_back(i);
      for (auto it = connected.rbegin(); it != connected.rend(); ++it) {
        const Dial d = dials[*it];
        dials.erase(dials.begin() + long(*it));
        finish_dial(d);
      }
      std::set<int> hung_up;
      for (size_t i = first_waiting; i < fds.size(); ++i)
        if (fds[i].revents) hung_up.insert(fds[i].fd);
      if (!hung_up.empty())
        for (auto& [name, t] : tenants)
          for (auto it = t.ready.begin(); it != t.ready.end();) {
            if (!hung_up.count(it->fd)) {
              ++it;
              continue;
            }
            ::close(it->fd);
            it = t.ready.erase(it);
          }
      for (auto it = routed.rbegin(); it != routed.rend(); ++it) read_routing(*it);
      for (size_t i = 0; i < polled.size(); ++i) {
        if (fds[2 + i].revents & POLLIN) from_worker(*names[i], *polled[i], kMessagesPerTurn);
        // The worker's end is closed: connections wait for the next worker.
        if (fds[2 + i].revents & (POLLHUP | POLLERR | POLLNVAL)) drop_channel(*polled[i]);
      }
      if (fds[1].revents & POLLIN) accept_some();
    }
    for (const Routing& r : routing) ::close(r.fd);
    for (auto& [name, t] : tenants) {
      for (const Waiting& w : t.ready) ::close(w.fd);
      drop_channel(t);
    }
    for (const Dial& d : dials) ::close(d.fd);
  }
};

TlsKeeper::TlsKeeper(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<TlsKeeper>> TlsKeeper::open(const std::string& host_port, std::vector<std::string> peers,
                                                   const std::array<uint8_t, 32>& node_key,
                                                   std::function<void(const std::string&)> log, Route route,
                                                   std::function<void(const std::string&)> wanted) {
  socklen_t len = 0;
  auto a = net::parse_host_port(host_port, &len);
  if (!a.ok()) return Error(a.error().code(), "tls-listen " + host_port + ": " + a.error().message());
  auto impl = std::make_unique<Impl>();
  impl->log = log ? std::move(log) : [](const std::string&) {};
  impl->node_key = node_key;
  impl->route = std::move(route);
  impl->wanted_tenant = std::move(wanted);
  for (const std::string& hp : peers) {
    Impl::Peer p;
    p.host_port = hp;
    if (auto a = net::parse_host_port(hp, &p.len); a.ok()) p.addr = *a;
    else p.unresolved = a.error().message();
    impl->peers.push_back(std::move(p));
  }
  impl->listener = ::socket(a->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (impl->listener < 0) return Error(Errc::io, "tls-listen " + host_port + ": cannot open a socket: " + std::strerror(errno));
  const int one = 1;
  ::setsockopt(impl->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // a restarted loader gets its port back
  if (::bind(impl->listener, reinterpret_cast<const sockaddr*>(&*a), len) != 0 || ::listen(impl->listener, 1024) != 0) {
    const int e = errno;
    ::close(impl->listener);
    Error err(Errc::unreachable, "tls-listen " + host_port + ": cannot listen: " + std::strerror(e));
    if (e == EADDRINUSE) err.hint("another process has the port (another loader?): choose another, or 0 for a free one");
    else err.hint("check the address: it must be one of this host's");
    return err;
  }
  sockaddr_storage bound{};
  socklen_t blen = sizeof bound;
  if (::getsockname(impl->listener, reinterpret_cast<sockaddr*>(&bound), &blen) != 0) {
    ::close(impl->listener);
    return Error(Errc::io, "tls-listen " + host_port + ": " + std::strerror(errno));
  }
  impl->address = net::to_host_port(reinterpret_cast<const sockaddr*>(&bound));
  impl->wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->wake < 0) {
    ::close(impl->listener);
    return Error(Errc::io, std::string("eventfd failed: ") + std::strerror(errno));
  }
  Impl* p = impl.get();
  impl->thread = std::thread([p] { p->run(); });
  return std::unique_ptr<TlsKeeper>(new TlsKeeper(std::move(impl)));
}

const std::string& TlsKeeper::address() const { return impl_->address; }

uint64_t TlsKeeper::passed() const { return impl_->passed.load(std::memory_order_relaxed); }
uint64_t TlsKeeper::dialed() const { return impl_->dialed.load(std::memory_order_relaxed); }

void TlsKeeper::serve(const std::string& tenant, int channel_fd) {
  int copy = channel_fd >= 0 ? ::fcntl(channel_fd, F_DUPFD_CLOEXEC, 0) : -1;
  // Never blocked by a worker that does not read: the keeper waits for room in poll.
  if (copy >= 0) ::fcntl(copy, F_SETFL, ::fcntl(copy, F_GETFL) | O_NONBLOCK);
  std::unique_lock<std::mutex> g(impl_->m);
  impl_->changes.emplace_back(tenant, copy);
  const uint64_t mine = ++impl_->wanted;
  impl_->poke();
  // The thread never blocks but in poll, which the poke ends: this wait is short.
  impl_->applied_cv.wait(g, [&] { return impl_->applied >= mine; });
}

void TlsKeeper::turn_away(const std::string& tenant, const std::string& why) {
  std::lock_guard<std::mutex> g(impl_->m);
  impl_->turned_away.emplace_back(tenant, why);
  impl_->poke();
}

TlsKeeper::~TlsKeeper() {
  {
    std::lock_guard<std::mutex> g(impl_->m);
    impl_->stop = true;
  }
  impl_->poke();
  impl_->thread.join();
  for (const auto& [tenant, fd] : impl_->changes)
    if (fd >= 0) ::close(fd);
  ::close(impl_->listener);
  ::close(impl_->wake);
}

}  // namespace xcargo::loader
