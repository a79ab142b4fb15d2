// The door keeper: one thread of the supervisor, polling the door, its worker's channel, the
// lifelines it holds and the peers' doors it is opening.
#include "door_keeper.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "server/door_channel.h"
#include "net/door.h"

namespace xcargo::loader {

namespace {

using Clock = std::chrono::steady_clock;
using Message = door_channel::Message;
using MsgKind = door_channel::Kind;

// How long a connection waits for a worker's address (between workers), and a peer's door
// for its offer: the client library's own limit.
constexpr auto kOfferLimit = std::chrono::milliseconds(2000);
// How long a connection has to say its route: a client sends it at once, in one write.
constexpr auto kRouteLimit = std::chrono::milliseconds(2000);
// Connections held at once (lifelines, waiting, dialing): each is a descriptor of the
// supervisor's, whose limit is 1024 by default.
constexpr size_t kMaxHeld = 512;
// Out of descriptors, the door takes no connection for this long: the pending ones keep it
// readable, and accepting again at once would spin.
constexpr auto kFullPause = std::chrono::milliseconds(100);

struct Lifeline {
  int fd = -1;
  uint64_t id = 0;
  bool dialed = false;  // opened for the worker (a peer's door), not accepted
  uint64_t worker = 0;  // whose session it is: its channel's inode (channel_id)
};
struct Waiting {
  int fd = -1;
  door::Credentials who;
  Clock::time_point until;
  std::string tenant;  // whose workers it waits for
};
// A connection of the loader's user whose route (its first frame) is not whole yet.
struct Routing {
  int fd = -1;
  door::Credentials who;
  door::RouteReading reading;
  Clock::time_point until;
};
struct Dialing {
  int fd = -1;
  uint64_t id = 0;  // the worker's number for the dial
  std::string to;
  Clock::time_point until;
  uint64_t worker = 0;  // the worker that asked: its channel's inode
};

// A channel's identity, the same for every descriptor of its socket (the supervisor's and
// the keeper's copies): its inode.
uint64_t channel_id(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? uint64_t(st.st_ino) : 0;
}

}  // namespace

struct DoorKeeper::Impl {
  Options o;
  int listener = -1, wake = -1;
  std::thread thread;

  std::mutex m;  // guards the three below, set by serve(), ended() and the destructor
  std::vector<std::pair<std::string, int>> changes;  // serve()'s (tenant, channel), in order
  bool stop = false;
  std::vector<uint64_t> ended_workers;

  // Each tenant's serving worker: new connections routed to it are offered to it.
  struct Serving {
    int channel = -1;
    Bytes address;  // once it said it
  };
  std::map<std::string, Serving> serving;
  std::map<int, std::string> tenant_of;  // each channel's tenant (serving or retiring)
  // Channels of workers that serve no new connection but still serve their own (a worker
  // ending in order answers what it has in flight). Lifelines end when the supervisor says
  // their worker is gone (ended()), not with its channel, which a kernel can shut down.
  std::vector<int> retiring;
  std::map<int, uint64_t> ids;  // channel_id of each channel above (and the serving ones)
  std::vector<int> lost;        // channels found ended (an EPIPE), dropped at the end of the round

  int fd_of(uint64_t worker) const {
    for (const auto& [fd, id] : ids)
      if (id == worker) return fd;
    return -1;
  }
  uint64_t id_of(int fd) const {
    auto it = ids.find(fd);
    return it == ids.end() ? 0 : it->second;
  }
  std::vector<Lifeline> lines;
  std::vector<Waiting> waiting;
  std::vector<Routing> routing;
  std::vector<Dialing> dialing;
  uint64_t next_id = 1;
  Clock::time_point quiet_until{};  // refusals are logged at most once a second
  uint64_t refused = 0, malformed = 0;
  Clock::time_point accept_after{};  // out of descriptors: no accept before this

  size_t held() const { return lines.size() + waiting.size() + routing.size() + dialing.size(); }

  void tell(uint64_t worker, const Message& msg) {
    const int chan = fd_of(worker);
    if (chan < 0) return;
    const Bytes b = door_channel::encode(msg);
    if (::send(chan, b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EPIPE) lost.push_back(chan);
  }

  // A worker's channel ended: its worker is gone, or a kernel shut the channel down while it
  // serves. It is shut down both ways, so that the worker and the supervisor (which hold the
  // other end and a copy of this one) see it ended: the worker ends, and its clients'
  // lifelines with it (worker_gone). Its dials cannot be answered: they end now.
  void drop_channel(int chan) {
    if (chan < 0) return;
    const uint64_t worker = id_of(chan);
    ::shutdown(chan, SHUT_RDWR);
    ::close(chan);
    ids.erase(chan);
    if (auto t = tenant_of.find(chan); t != tenant_of.end()) {
      if (auto sv = serving.find(t->second); sv != serving.end() && sv->second.channel == chan) serving.erase(sv);
      tenant_of.erase(t);
    }
    std::erase(retiring, chan);
    for (auto& d : dialing)
      if (d.worker == worker) ::close(d.fd);
    std::erase_if(dialing, [&](const Dialing& d) { return d.worker == worker; });
  }
  // The supervisor reaped the worker: its clients' sessions end.
  void worker_gone(uint64_t worker) {
    if (worker == 0) return;
    drop_channel(fd_of(worker));
    for (auto& l : lines)
      if (l.worker == worker) ::close(l.fd);
    std::erase_if(lines, [&](const Lifeline& l) { return l.worker == worker; });
  }
  void drop_lost() {
    std::vector<int> now;
    now.swap(lost);
    std::sort(now.begin(), now.end());
    now.erase(std::unique(now.begin(), now.end()), now.end());
    for (int chan : now)
      if (tenant_of.count(chan)) drop_channel(chan);
  }

  void refuse(int fd, const std::string& why, const std::string& hint, door::Kind kind = door::Kind::refused) {
    const std::string text = hint.empty() ? why : why + "\n" + hint;
    (void)door::write_frame(fd, door::Frame{kind, Bytes(text.begin(), text.end())}, std::chrono::milliseconds(100));
    ::close(fd);
  }

  void note_refusal(const std::string& what) {
    ++refused;
    if (Clock::now() < quiet_until) return;
    quiet_until = Clock::now() + std::chrono::seconds(1);
    o.log("same-host door: " + what + " (" + std::to_string(refused) + " refused so far)");
  }

  // Offers fd the serving worker of its tenant, telling the worker the ticket first: its
  // `door` message can only come after the worker has read it. Without a worker's address
  // (between workers, or none yet: it is asked for) fd waits for one, up to kOfferLimit.
  void offer(int fd, const door::Credentials& who, const std::string& tenant) {
    const auto sv = serving.find(tenant);
    if (sv == serving.end() || sv->second.address.empty()) {
      waiting.push_back(Waiting{fd, who, Clock::now() + kOfferLimit, tenant});
      if (sv == serving.end() && o.wanted) o.wanted(tenant);
      return;
    }
    const int channel = sv->second.channel;
    const Bytes address = sv->second.address;
    Message msg;
    msg.kind = MsgKind::client;
    msg.id = next_id++;
    msg.pid = uint32_t(who.pid);
    msg.uid = uint32_t(who.uid);
    if (::getrandom(msg.ticket.data(), msg.ticket.size(), 0) != ssize_t(msg.ticket.size())) {
      refuse(fd, "the loader could not make a ticket", "try again");
      return;
    }
    const Bytes b = door_channel::encode(msg);
    if (::send(channel, b.data(), b.size(), MSG_DONTWAIT | MSG_NOSIGNAL) != ssize_t(b.size())) {
      if (errno == EPIPE) {
        drop_channel(channel);
        waiting.push_back(Waiting{fd, who, Clock::now() + kOfferLimit, tenant});  // offered by the next worker
        return;
      }
      refuse(fd, "the loader is busy (its worker reads no new connections now)", "try again in a moment");
      return;
    }
    if (!door::write_frame(fd, door::offer(msg.ticket, address), std::chrono::milliseconds(100)).ok()) {
      ::close(fd);
      tell(id_of(channel), Message{MsgKind::gone, msg.id, {}, 0, 0, {}});
      return;
    }
    lines.push_back(Lifeline{fd, msg.id, false, id_of(channel)});
  }

  void accept_all() {
    for (int i = 0; i < 64; ++i) {
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          accept_after = Clock::now() + kFullPause;
          if (Clock::now() >= quiet_until) {
            quiet_until = Clock::now() + std::chrono::seconds(1);
            o.log(std::string("same-host door: the supervisor is out of descriptors (") + std::strerror(errno) +
                  "); new connections wait");
          }
        }
        return;
      }
      auto who = door::peer_of(fd);
      if (!who.ok()) {
        ::close(fd);
        continue;
      }
      if (who->uid != ::geteuid()) {
        refuse(fd, "this loader's same-host door serves only its own user (uid " + std::to_string(::geteuid()) + ")", o.other_users);
        note_refusal("refused a process of uid " + std::to_string(who->uid));
        continue;
      }
      if (held() >= kMaxHeld) {
        refuse(fd, "the loader holds " + std::to_string(kMaxHeld) + " same-host connections already", "close some, or try again later");
        note_refusal("full");
        continue;
      }
      routing.push_back(Routing{fd, *who, {}, Clock::now() + kRouteLimit});
    }
  }

  // Reads what a connection sent of its route; once whole, it is offered its worker.
  void read_routing(size_t i) {
    door::Route route;
    std::string why;
    switch (door::read_route(routing[i].fd, routing[i].reading, &route, &why)) {
      case door::RouteStep::more:
        return;
      case door::RouteStep::done:
        if (auto tenant = o.route ? o.route(route) : Result<std::string>(std::string()); tenant.ok()) {
          offer(routing[i].fd, routing[i].who, *tenant);  // or keeps it waiting for a worker's address
        } else {
          refuse(routing[i].fd, "the same-host door: " + tenant.error().message(),
                 "the loader's admin lists a client's key in its clients file", door::Kind::denied);
          note_refusal("refused a route: " + tenant.error().message());
        }
        break;
      case door::RouteStep::failed:
        refuse(routing[i].fd, "the same-host door expected a route first: " + why,
               "a client of this release sends its key's route first (format-spec/wire-protocol.md 2.4)");
        note_refusal("refused a connection that sent no route (" + why + ")");
        break;
    }
    routing.erase(routing.begin() + long(i));
  }

  void from_worker(int chan, const Message& msg) {
    switch (msg.kind) {
      case MsgKind::address:  // once per worker: said before any kernel ran
        if (auto t = tenant_of.find(chan); t != tenant_of.end())
          if (auto sv = serving.find(t->second); sv != serving.end() && sv->second.channel == chan && sv->second.address.empty())
            sv->second.address = msg.bytes;
        break;
      case MsgKind::close:
        for (size_t i = 0; i < lines.size(); ++i)
          if (lines[i].id == msg.id && lines[i].worker == id_of(chan)) {
            ::close(lines[i].fd);
            lines.erase(lines.begin() + long(i));
            break;
          }
        break;
      case MsgKind::dial: {
        const std::string to(msg.bytes.begin(), msg.bytes.end());
        if (held() >= kMaxHeld) {
          tell(id_of(chan), Message{MsgKind::dial_failed, msg.id, {}, 0, 0, as_bytes_copy("the supervisor holds too many connections")});
          break;
        }
        // Routed by this node's key, for the asking worker's tenant (none: a single one).
        auto t = tenant_of.find(chan);
        auto fd = door::connect(to, door::Route{o.node_key, t == tenant_of.end() ? std::string() : t->second});
        if (!fd.ok()) {
          tell(id_of(chan), Message{MsgKind::dial_failed, msg.id, {}, 0, 0, as_bytes_copy(fd.error().message())});
          break;
        }
        dialing.push_back(Dialing{*fd, msg.id, to, Clock::now() + kOfferLimit, id_of(chan)});
        break;
      }
      default:
        ++malformed;  // a kind only the keeper sends
        break;
    }
  }

  static Bytes as_bytes_copy(const std::string& s) { return Bytes(s.begin(), s.end()); }

  void read_channel(int chan) {
    static thread_local uint8_t buf[door_channel::kMaxMessage + 1];
    for (int i = 0; i < 64; ++i) {
      const ssize_t n = ::recv(chan, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      if (n == 0) {  // an empty datagram, or the end: only the end sets POLLHUP or POLLRDHUP
        pollfd p{chan, POLLIN | POLLRDHUP, 0};
        if (::poll(&p, 1, 0) != 1 || !(p.revents & (POLLHUP | POLLRDHUP))) {
          ++malformed;
          continue;
        }
      }
      if (n <= 0) {  // the worker's end closed or shut down
        lost.push_back(chan);
        return;
      }
      auto msg = size_t(n) <= door_channel::kMaxMessage ? door_channel::decode(ByteView(buf, size_t(n))) : std::nullopt;
      if (!msg) {
        if (malformed++ == 0) o.log("same-host door: the worker sent a malformed message (dropped; counted from here on)");
        continue;
      }
      from_worker(chan, *msg);
    }
  }

  // Ends what waited past its time: connections without a worker or a route, dials without
  // an offer.
  void expire(Clock::time_point now) {
    for (size_t i = 0; i < waiting.size();)
      if (now > waiting[i].until) {
        refuse(waiting[i].fd, "the loader is restarting its worker", "try again in a moment");
        waiting.erase(waiting.begin() + long(i));
      } else {
        ++i;
      }
    for (size_t i = 0; i < routing.size();)
      if (now > routing[i].until) {
        refuse(routing[i].fd, "the same-host door expected a route first: none came in time", "");
        note_refusal("refused a connection that sent no route in time");
        routing.erase(routing.begin() + long(i));
      } else {
        ++i;
      }
    for (size_t i = 0; i < dialing.size();)
      if (now > dialing[i].until) {
        ::close(dialing[i].fd);
        tell(dialing[i].worker,
             Message{MsgKind::dial_failed, dialing[i].id, {}, 0, 0, as_bytes_copy(dialing[i].to + ": no offer from its door in time")});
        dialing.erase(dialing.begin() + long(i));
      } else {
        ++i;
      }
  }

  void run() {
    std::vector<pollfd> fds;
    std::vector<uint64_t> gone;
    for (;;) {
      {
        std::lock_guard<std::mutex> g(m);
        if (stop) break;
        for (auto& [tenant, chan] : changes) {  // the keeper owns its copies of the channels (serve() dups them)
          if (auto sv = serving.find(tenant); sv != serving.end()) {
            retiring.push_back(sv->second.channel);
            serving.erase(sv);
          }
          if (chan >= 0) {
            serving[tenant] = Serving{chan, {}};
            tenant_of[chan] = tenant;
            ids[chan] = channel_id(chan);
          }
        }
        changes.clear();
        gone.swap(ended_workers);
      }
      for (uint64_t w : gone) worker_gone(w);
      gone.clear();
      const auto now = Clock::now();
      if (!waiting.empty()) {
        std::vector<Waiting> now_served;
        now_served.swap(waiting);  // offer() puts back those still without a worker
        for (auto& w : now_served) {
          const auto sv = serving.find(w.tenant);
          if (sv != serving.end() && !sv->second.address.empty()) offer(w.fd, w.who, w.tenant);
          else waiting.push_back(std::move(w));
        }
      }
      expire(now);

      fds.clear();
      fds.push_back({wake, POLLIN, 0});
      const bool paused = now < accept_after;
      fds.push_back({listener, short(paused ? 0 : POLLIN), 0});
      std::vector<int> channels;  // the serving ones, then the retiring ones
      for (const auto& [tenant, sv] : serving) channels.push_back(sv.channel);
      channels.insert(channels.end(), retiring.begin(), retiring.end());
      for (int c : channels) fds.push_back({c, POLLIN, 0});
      const size_t first_line = fds.size();
      for (auto& l : lines) fds.push_back({l.fd, POLLIN | POLLRDHUP, 0});
      for (auto& d : dialing) fds.push_back({d.fd, POLLIN, 0});
      for (auto& r : routing) fds.push_back({r.fd, POLLIN, 0});
      const int timeout = waiting.empty() && dialing.empty() && routing.empty() && !paused ? -1 : 100;
      if (::poll(fds.data(), fds.size(), timeout) < 0) continue;

      if (fds[0].revents) {
        uint64_t v;
        (void)!::read(wake, &v, sizeof v);
      }
      // Lifelines and dials first: their indices are those polled.
      std::vector<size_t> ended;
      for (size_t i = 0; i < lines.size(); ++i)
        if (fds[first_line + i].revents) ended.push_back(i);
      std::vector<size_t> answered;
      for (size_t i = 0; i < dialing.size(); ++i)
        if (fds[first_line + lines.size() + i].revents) answered.push_back(i);
      std::vector<size_t> routed;
      for (size_t i = 0; i < routing.size(); ++i)
        if (fds[first_line + lines.size() + dialing.size() + i].revents) routed.push_back(i);
      for (auto it = answered.rbegin(); it != answered.rend(); ++it) {
        Dialing d = dialing[*it];
        dialing.erase(dialing.begin() + long(*it));
        auto offer = door::read_offer(d.fd, d.to, std::chrono::milliseconds(100));  // closes d.fd on failure
        if (!offer.ok()) {
          tell(d.worker, Message{MsgKind::dial_failed, d.id, {}, 0, 0, as_bytes_copy(offer.error().message())});
          continue;
        }
        tell(d.worker, Message{MsgKind::dialed, d.id, offer->ticket, 0, 0, offer->address});
        lines.push_back(Lifeline{offer->fd, d.id, true, d.worker});
      }
      for (auto it = ended.rbegin(); it != ended.rend(); ++it) {
        const Lifeline l = lines[*it];
        lines.erase(lines.begin() + long(*it));
        ::close(l.fd);  // a byte on a lifeline ends it too: nothing else is sent there
        tell(l.worker, Message{l.dialed ? MsgKind::lost : MsgKind::gone, l.id, {}, 0, 0, {}});
      }
      for (auto it = routed.rbegin(); it != routed.rend(); ++it) read_routing(*it);
      for (size_t i = 0; i < channels.size(); ++i)
        if (fds[2 + i].revents) read_channel(channels[i]);
      drop_lost();  // before the door's new connections, which go to the serving worker
      if (fds[1].revents) accept_all();
      drop_lost();
    }
    for (auto& l : lines) ::close(l.fd);
    for (auto& d : dialing) ::close(d.fd);
    for (auto& w : waiting) ::close(w.fd);
    for (auto& r : routing) ::close(r.fd);
    routing.clear();
    lines.clear();
    dialing.clear();
    waiting.clear();
  }
};

DoorKeeper::DoorKeeper(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<DoorKeeper>> DoorKeeper::open(Options options) {
  auto impl = std::make_unique<Impl>();
  impl->o = std::move(options);
  if (!impl->o.log) impl->o.log = [](const std::string&) {};
  auto fd = door::listen(impl->o.host_port);
  XC_TRY(fd);
  impl->listener = *fd;
  impl->wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (impl->wake < 0) {
    ::close(impl->listener);
    return Error(Errc::io, std::string("eventfd failed: ") + std::strerror(errno));
  }
  Impl* p = impl.get();
  impl->thread = std::thread([p] { p->run(); });
  return std::unique_ptr<DoorKeeper>(new DoorKeeper(std::move(impl)));
}

void DoorKeeper::ended(int channel_fd) {
  const uint64_t id = channel_fd >= 0 ? channel_id(channel_fd) : 0;
  if (id == 0) return;
  {
    std::lock_guard<std::mutex> g(impl_->m);
    impl_->ended_workers.push_back(id);
  }
  const uint64_t one = 1;
  (void)!::write(impl_->wake, &one, sizeof one);
}

void DoorKeeper::serve(const std::string& tenant, int channel_fd) {
  const int copy = channel_fd >= 0 ? ::fcntl(channel_fd, F_DUPFD_CLOEXEC, 0) : -1;
  {
    std::lock_guard<std::mutex> g(impl_->m);
    impl_->changes.emplace_back(tenant, copy);
  }
  const uint64_t one = 1;
  (void)!::write(impl_->wake, &one, sizeof one);
}

DoorKeeper::~DoorKeeper() {
  {
    std::lock_guard<std::mutex> g(impl_->m);
    impl_->stop = true;
  }
  const uint64_t one = 1;
  (void)!::write(impl_->wake, &one, sizeof one);
  impl_->thread.join();
  for (const auto& [tenant, sv] : impl_->serving) ::close(sv.channel);
  for (const auto& [tenant, fd] : impl_->changes)
    if (fd >= 0) ::close(fd);
  for (int fd : impl_->retiring) ::close(fd);
  ::close(impl_->listener);
  ::close(impl_->wake);
}

}  // namespace xcargo::loader
