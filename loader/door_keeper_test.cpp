// Tests of the door keeper against a fake worker (the other end of its channel): offers and
// tickets, lifelines both ways, dials to a second keeper, worker changes, malformed
// messages, and other users refused unread.
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>
#include <ctime>

#include "server/door_channel.h"
#include "door_keeper.h"
#include "net/door.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace std::chrono_literals;
using Kind = door_channel::Kind;

namespace {

std::string unique_address(const char* what) { return std::string("keeper-test-") + what + ":" + std::to_string(::getpid()); }

// A fake worker: its end of a channel, the keeper's end handed to serve().
struct FakeWorker {
  int mine = -1, keepers = -1;
  FakeWorker() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    mine = sv[0];
    keepers = sv[1];
  }
  ~FakeWorker() {
    ::close(mine);
    ::close(keepers);
  }
  void say(const door_channel::Message& m) const {
    const Bytes b = door_channel::encode(m);
    REQUIRE(::send(mine, b.data(), b.size(), MSG_NOSIGNAL) == ssize_t(b.size()));
  }
  void say_address(const std::string& a) const { say(door_channel::Message{Kind::address, 0, {}, 0, 0, Bytes(a.begin(), a.end())}); }
  // Whether no message comes within ms.
  bool nothing_within(int ms) const {
    pollfd p{mine, POLLIN, 0};
    return ::poll(&p, 1, ms) == 0;
  }
  // The next message within a generous ceiling.
  std::optional<door_channel::Message> hear() const {
    pollfd p{mine, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return std::nullopt;
    uint8_t buf[door_channel::kMaxMessage];
    const ssize_t n = ::recv(mine, buf, sizeof buf, 0);
    if (n <= 0) return std::nullopt;
    return door_channel::decode(ByteView(buf, size_t(n)));
  }
};

std::unique_ptr<DoorKeeper> keeper_at(const std::string& at, std::string other_users = "") {
  auto k = DoorKeeper::open(DoorKeeper::Options{at, std::move(other_users), {}, nullptr});
  REQUIRE(k.ok());
  return std::move(*k);
}

// Whether fd's other end closed it within a generous ceiling.
bool hung_up(int fd) {
  pollfd p{fd, POLLIN, 0};
  char c;
  return ::poll(&p, 1, 10000) == 1 && ::read(fd, &c, 1) == 0;
}

}  // namespace

TEST_CASE("door keeper: the worker hears the ticket the client is offered; lifelines end both ways", "[door]") {
  const std::string at = unique_address("offer");
  auto keeper = keeper_at(at);
  FakeWorker w;
  keeper->serve("", w.keepers);
  w.say_address("worker-1");

  auto a = door::open(at, door::Route{}, 10s);
  REQUIRE(a.ok());
  CHECK(std::string(a->address.begin(), a->address.end()) == "worker-1");
  auto told = w.hear();
  REQUIRE(told);
  CHECK(told->kind == Kind::client);
  CHECK(told->ticket == a->ticket);
  CHECK(told->pid == uint32_t(::getpid()));
  CHECK(told->uid == uint32_t(::geteuid()));

  auto b = door::open(at, door::Route{}, 10s);
  REQUIRE(b.ok());
  auto told_b = w.hear();
  REQUIRE(told_b);
  CHECK(told_b->id != told->id);
  CHECK(told_b->ticket != told->ticket);

  ::close(a->fd);  // the client goes: the worker hears of it
  auto gone = w.hear();
  REQUIRE(gone);
  CHECK(gone->kind == Kind::gone);
  CHECK(gone->id == told->id);

  w.say(door_channel::Message{Kind::close, told_b->id, {}, 0, 0, {}});  // the worker drops b: b hears of it
  CHECK(hung_up(b->fd));
  ::close(b->fd);
}

TEST_CASE("door keeper: a connection between workers waits for the next; a worker's lifelines close when it is gone", "[door]") {
  const std::string at = unique_address("restart");
  auto keeper = keeper_at(at);
  auto first = std::make_unique<FakeWorker>();
  keeper->serve("", first->keepers);
  first->say_address("first");
  auto a = door::open(at, door::Route{}, 10s);
  REQUIRE(a.ok());
  REQUIRE(first->hear());

  keeper->serve("", -1);  // the first worker begins to end: it still answers what it has in flight
  pollfd still{a->fd, POLLIN | POLLRDHUP, 0};
  CHECK(::poll(&still, 1, 200) == 0);
  keeper->ended(first->keepers);  // and is gone
  CHECK(hung_up(a->fd));
  ::close(a->fd);

  auto fd = door::connect(at, door::Route{});  // while no worker serves
  REQUIRE(fd.ok());
  FakeWorker second;
  keeper->serve("", second.keepers);
  second.say_address("second");
  auto b = door::read_offer(*fd, at, 10s);
  REQUIRE(b.ok());
  CHECK(std::string(b->address.begin(), b->address.end()) == "second");
  auto told = second.hear();
  REQUIRE(told);
  CHECK(told->ticket == b->ticket);
  ::close(b->fd);
}

TEST_CASE("door keeper: a worker's channel shut down while it serves is dropped, without a spin; its lifelines end with it", "[door]") {
  const int how = GENERATE(int(SHUT_WR), int(SHUT_RD), int(SHUT_RDWR));  // as a kernel in the worker could
  const std::string at = unique_address("shut");
  auto keeper = keeper_at(at);
  FakeWorker w;
  keeper->serve("", w.keepers);
  w.say_address("worker");
  auto a = door::open(at, door::Route{}, 10s);
  REQUIRE(a.ok());
  REQUIRE(w.hear());

  REQUIRE(::shutdown(w.mine, how) == 0);
  if (how == SHUT_RD) {  // seen when the keeper next tells the worker something: a client
    auto fd = door::connect(at, door::Route{});
    REQUIRE(fd.ok());
    ::close(*fd);
  }
  // The keeper shuts its end both ways: what the supervisor watches reads as hung up.
  bool hup = false;
  for (int i = 0; i < 1000 && !hup; ++i) {
    pollfd p{w.keepers, 0, 0};
    hup = ::poll(&p, 1, 10) == 1 && (p.revents & POLLHUP);
  }
  CHECK(hup);
  // The worker still answers what its clients have in flight: their lifelines close once the
  // supervisor says it is gone.
  pollfd still{a->fd, POLLIN | POLLRDHUP, 0};
  CHECK(::poll(&still, 1, 200) == 0);
  keeper->ended(w.keepers);
  CHECK(hung_up(a->fd));
  ::close(a->fd);
  // An ended channel is not read again and again.
  timespec t0{}, t1{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  std::this_thread::sleep_for(300ms);
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 150);  // a spin takes 300
}

TEST_CASE("door keeper: out of descriptors, connections wait without a spin", "[door]") {
  const std::string at = unique_address("emfile");
  auto keeper = keeper_at(at);
  FakeWorker w;
  keeper->serve("", w.keepers);
  w.say_address("worker");
  rlimit was{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &was) == 0);
  rlimit low = was;
  low.rlim_cur = 256;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> fillers;  // every descriptor below the limit taken but the client's
  for (int fd; (fd = ::dup(0)) >= 0;) fillers.push_back(fd);
  REQUIRE(!fillers.empty());
  ::close(fillers.back());
  fillers.pop_back();
  auto client = door::connect(at, door::Route{});  // its socket takes the last descriptor: the keeper's accept fails
  REQUIRE(client.ok());
  timespec t0{}, t1{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  std::this_thread::sleep_for(300ms);
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  const long cpu_ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
  for (int fd : fillers) ::close(fd);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &was) == 0);
  CHECK(cpu_ms < 150);  // a spin takes 300
  auto offer = door::read_offer(*client, at, 10s);  // accepted once descriptors are free
  REQUIRE(offer.ok());
  CHECK(std::string(offer->address.begin(), offer->address.end()) == "worker");
  ::close(offer->fd);
}

TEST_CASE("door keeper: a connection is offered nothing until it sent a route, and refused for anything else", "[door]") {
  const std::string at = unique_address("route");
  auto keeper = keeper_at(at);
  FakeWorker w;
  keeper->serve("", w.keepers);
  w.say_address("worker");
  // A raw connection to the door, sending `bytes` (and nothing after them).
  auto raw = [&](const Bytes& bytes) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string name = door::socket_name(at);
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())) == 0);
    if (!bytes.empty()) REQUIRE(::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
    return fd;
  };
  // Half a route: no offer yet (the worker hears of no client), then the rest brings it.
  const Bytes route = door::encode(door::route(door::Route{}));
  const int half = raw(Bytes(route.begin(), route.begin() + 7));
  pollfd p{half, POLLIN, 0};
  CHECK(::poll(&p, 1, 200) == 0);
  REQUIRE(::write(half, route.data() + 7, route.size() - 7) == ssize_t(route.size() - 7));
  auto offer = door::read_offer(half, at, 10s);
  REQUIRE(offer.ok());
  CHECK(std::string(offer->address.begin(), offer->address.end()) == "worker");
  auto told = w.hear();
  REQUIRE(told);
  CHECK(told->kind == Kind::client);
  // Bytes that are no route (an offer, an HTTP request): refused, saying why; the worker hears nothing.
  for (const Bytes& wrong : {door::encode(door::offer(door::Ticket{}, Bytes{1})), Bytes{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1'}}) {
    const int fd = raw(wrong);
    auto refused = door::read_offer(fd, at, 10s);  // closes fd
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().message().find("the same-host door expected a route first") != std::string::npos);
  }
  // Silence: refused once the route's time is up (2 s; a generous ceiling here).
  const int silent = raw({});
  auto late = door::read_offer(silent, at, 10s);
  REQUIRE_FALSE(late.ok());
  CHECK(late.error().message().find("none came in time") != std::string::npos);
  pollfd q{w.mine, POLLIN, 0};
  CHECK(::poll(&q, 1, 0) == 0);  // the worker heard of the routed client only
  ::close(offer->fd);
}

TEST_CASE("door keeper: each route reaches its tenant's worker; a tenant without one is asked for", "[door]") {
  const std::string at = unique_address("tenants");
  std::mutex m;
  std::vector<std::string> wanted;
  DoorKeeper::Options o{at, "", {}, nullptr};
  o.route = [](const door::Route& r) -> Result<std::string> {
    if (r.key[0] == 1) return std::string("a");
    if (r.key[0] == 2) return std::string("b");
    if (r.key[0] == 3) return std::string("c");
    return Error(Errc::unauthenticated, "the route's key is not among this loader's clients");
  };
  o.wanted = [&](const std::string& t) {
    std::lock_guard<std::mutex> g(m);
    wanted.push_back(t);
  };
  auto k = DoorKeeper::open(std::move(o));
  REQUIRE(k.ok());
  FakeWorker a, b;
  (*k)->serve("a", a.keepers);
  (*k)->serve("b", b.keepers);
  a.say_address("worker-a");
  b.say_address("worker-b");
  auto route = [](uint8_t first) {
    door::Route r;
    r.key[0] = first;
    return r;
  };
  auto to_a = door::open(at, route(1), 10s);
  REQUIRE(to_a.ok());
  CHECK(std::string(to_a->address.begin(), to_a->address.end()) == "worker-a");
  auto heard_a = a.hear();
  REQUIRE(heard_a);
  CHECK(heard_a->ticket == to_a->ticket);
  auto to_b = door::open(at, route(2), 10s);
  REQUIRE(to_b.ok());
  CHECK(std::string(to_b->address.begin(), to_b->address.end()) == "worker-b");
  REQUIRE(b.hear());
  // A key no tenant has: refused, saying why; no worker hears of it.
  auto stranger = door::open(at, route(9), 10s);
  REQUIRE_FALSE(stranger.ok());
  CHECK(stranger.error().message().find("the route's key is not among this loader's clients") != std::string::npos);
  CHECK(stranger.error().code() == Errc::unauthenticated);  // denied: not to be tried again
  // Tenant c has no worker: the connection waits, and c is asked for; once one serves, it is offered.
  auto fd = door::connect(at, route(3));
  REQUIRE(fd.ok());
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard<std::mutex> g(m);
      if (!wanted.empty()) break;
    }
    std::this_thread::sleep_for(10ms);
  }
  {
    std::lock_guard<std::mutex> g(m);
    REQUIRE_FALSE(wanted.empty());
    CHECK(wanted.front() == "c");
  }
  FakeWorker c;
  (*k)->serve("c", c.keepers);
  c.say_address("worker-c");
  auto to_c = door::read_offer(*fd, at, 10s);
  REQUIRE(to_c.ok());
  CHECK(std::string(to_c->address.begin(), to_c->address.end()) == "worker-c");
  REQUIRE(c.hear());
  // No worker heard of another tenant's clients, nor of the stranger.
  CHECK(a.nothing_within(0));
  CHECK(b.nothing_within(0));
  CHECK(c.nothing_within(0));
  for (int f : {to_a->fd, to_b->fd, to_c->fd}) ::close(f);
}

TEST_CASE("door keeper: dials a peer's door for its worker and holds that lifeline", "[door]") {
  const std::string at_a = unique_address("dial-a"), at_b = unique_address("dial-b");
  auto keeper_a = keeper_at(at_a), keeper_b = keeper_at(at_b);
  FakeWorker wa, wb;
  keeper_a->serve("", wa.keepers);
  keeper_b->serve("", wb.keepers);
  wa.say_address("A");
  wb.say_address("B");

  wa.say(door_channel::Message{Kind::dial, 7, {}, 0, 0, Bytes(at_b.begin(), at_b.end())});
  auto dialed = wa.hear();
  REQUIRE(dialed);
  CHECK(dialed->kind == Kind::dialed);
  CHECK(dialed->id == 7);
  CHECK(std::string(dialed->bytes.begin(), dialed->bytes.end()) == "B");
  auto at_b_told = wb.hear();
  REQUIRE(at_b_told);
  CHECK(at_b_told->kind == Kind::client);
  CHECK(at_b_told->ticket == dialed->ticket);

  wb.say(door_channel::Message{Kind::close, at_b_told->id, {}, 0, 0, {}});  // B drops it: A's worker hears
  auto lost = wa.hear();
  REQUIRE(lost);
  CHECK(lost->kind == Kind::lost);
  CHECK(lost->id == 7);

  const std::string nowhere = unique_address("nowhere");
  wa.say(door_channel::Message{Kind::dial, 8, {}, 0, 0, Bytes(nowhere.begin(), nowhere.end())});
  auto failed = wa.hear();
  REQUIRE(failed);
  CHECK(failed->kind == Kind::dial_failed);
  CHECK(std::string(failed->bytes.begin(), failed->bytes.end()).find("no loader listens there") != std::string::npos);
}

TEST_CASE("door keeper: malformed messages from the worker are dropped", "[door]") {
  const std::string at = unique_address("junk");
  auto keeper = keeper_at(at);
  FakeWorker w;
  keeper->serve("", w.keepers);
  for (const Bytes& junk : {Bytes{}, Bytes(3, 0xff), Bytes(40, 0), Bytes(door_channel::kMaxMessage + 100, 1)})
    (void)!::send(w.mine, junk.data(), junk.size(), MSG_NOSIGNAL);
  w.say(door_channel::Message{Kind::gone, 1, {}, 0, 0, {}});  // a kind only the keeper sends
  w.say_address("after-junk");
  w.say_address("second-address-ignored");
  auto a = door::open(at, door::Route{}, 10s);
  REQUIRE(a.ok());
  CHECK(std::string(a->address.begin(), a->address.end()) == "after-junk");
  ::close(a->fd);

  CHECK_FALSE(door_channel::decode(Bytes(40, 0)));  // kind 0
  Bytes close_with_bytes = door_channel::encode(door_channel::Message{Kind::close, 1, {}, 0, 0, Bytes{1}});
  CHECK_FALSE(door_channel::decode(close_with_bytes));
  CHECK_FALSE(door_channel::decode(door_channel::encode(door_channel::Message{Kind::dial, 1, {}, 0, 0, {}})));
}

TEST_CASE("door keeper: another user's process is refused before a byte of it is read", "[door]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot run a process as another user here");
    return;
  }
  const std::string at = unique_address("other-user");
  // Forked before the keeper's thread exists: the child may allocate.
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // reads the keeper's answer without the client's own check of the door's user
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(1);
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    const std::string name = door::socket_name(at);
    std::memcpy(a.sun_path + 1, name.data(), name.size());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), socklen_t(offsetof(sockaddr_un, sun_path) + 1 + name.size())) != 0) ::_exit(3);
    (void)!::send(fd, "junk that nobody reads", 22, MSG_NOSIGNAL);
    auto f = door::read_frame(fd, 10s, "keeper");
    if (!f.ok() || f->kind != door::Kind::refused) ::_exit(4);
    const std::string text(f->body.begin(), f->body.end());
    ::_exit(text == "this loader's same-host door serves only its own user (uid 0)\nreach it over TLS: tls://127.0.0.1:7401" ? 0 : 5);
  }
  auto keeper = keeper_at(at, "reach it over TLS: tls://127.0.0.1:7401");
  FakeWorker w;
  keeper->serve("", w.keepers);
  w.say_address("root's worker");
  REQUIRE(::write(go[1], "g", 1) == 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  // Nothing reached the worker.
  pollfd p{w.mine, POLLIN, 0};
  CHECK(::poll(&p, 1, 100) == 0);
  ::close(go[0]);
  ::close(go[1]);
}
