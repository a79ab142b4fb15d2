// Tests of the TLS keeper against fake workers (their ends of channels): connections wait,
// never refused, while no worker serves; each reaches the serving worker unread; a worker
// whose channel was shut down or closed loses none; a worker's dials reach the cluster's peers
// and nothing else; whatever else a worker sends is dropped; a second loader cannot take the port.
#include "tls_keeper.h"

#include <fcntl.h>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <algorithm>

#include <sys/resource.h>

#include "net/door.h"
#include "net/ucx.h"
#include "sandbox/processes.h"
#include "server/door_channel.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

struct FakeWorker {
  int mine = -1, keepers = -1;
  FakeWorker() {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
    mine = sv[0];
    keepers = sv[1];
  }
  ~FakeWorker() {
    for (int fd : {mine, keepers})
      if (fd >= 0) ::close(fd);
  }
  // The next connection passed within 10 s (a generous ceiling), or -1.
  int next() const {
    pollfd p{mine, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return -1;
    char tag = 0;
    int fd = -1;
    if (sandbox::receive_fd(mine, &tag, 1, &fd) != 1 || tag != 'c') return -1;
    return fd;
  }
  bool nothing_within(int ms) const {
    pollfd p{mine, POLLIN, 0};
    return ::poll(&p, 1, ms) == 0;
  }
};

// Raises this process's soft limit on open files toward 4096 (its hard limit allowing);
// returns the limit now.
rlim_t raise_open_files() {
  rlimit nofile{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &nofile) == 0);
  nofile.rlim_cur = std::max<rlim_t>(nofile.rlim_cur, std::min<rlim_t>(nofile.rlim_max, 4096));
  (void)::setrlimit(RLIMIT_NOFILE, &nofile);
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &nofile) == 0);
  return nofile.rlim_cur;
}

// A client's connection to `at`, its route (key[0] = first) sent first unless `route` is
// false: its socket, or -1 with errno.
int dial(const std::string& at, bool route = true, uint8_t first = 0) {
  socklen_t len = 0;
  auto a = net::parse_host_port(at, &len);
  REQUIRE(a.ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&*a), len) != 0) {
    const int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  door::Route r;
  r.key[0] = first;
  if (route) REQUIRE(door::write_frame(fd, door::route(r), std::chrono::seconds(10)).ok());
  return fd;
}

// Whether `server` (a passed descriptor) is the other end of `client`: a byte sent through
// the one arrives at the other, and nothing was read from it before.
bool same_connection(int client, int server) {
  if (::write(client, "x", 1) != 1) return false;
  pollfd p{server, POLLIN, 0};
  char b = 0;
  return ::poll(&p, 1, 10000) == 1 && ::read(server, &b, 1) == 1 && b == 'x';
}

}  // namespace

TEST_CASE("tls keeper: connections wait for a worker, then reach it with nothing read past their route", "[tls_keeper]") {
  auto k = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);
  REQUIRE(k.ok());
  const std::string at = (*k)->address();
  CHECK(at.rfind("127.0.0.1:", 0) == 0);
  CHECK(at != "127.0.0.1:0");

  // No worker yet: the connection is taken into the backlog, not refused.
  const int early = dial(at);
  REQUIRE(early >= 0);
  FakeWorker w1;
  (*k)->serve("", w1.keepers);
  const int s1 = w1.next();
  REQUIRE(s1 >= 0);
  CHECK(same_connection(early, s1));

  // Between workers: a new connection waits; the next worker gets it, the old one nothing.
  (*k)->serve("", -1);
  const int between = dial(at);
  REQUIRE(between >= 0);
  CHECK(w1.nothing_within(200));
  FakeWorker w2;
  (*k)->serve("", w2.keepers);
  const int s2 = w2.next();
  REQUIRE(s2 >= 0);
  CHECK(same_connection(between, s2));
  // Counted just after the send, which the worker may see first: waited for (10 s, a ceiling).
  for (int i = 0; i < 1000 && (*k)->passed() < 2; ++i) ::usleep(10 * 1000);
  CHECK((*k)->passed() == 2);
  for (int fd : {early, s1, between, s2}) ::close(fd);
}

TEST_CASE("tls keeper: a connection without its route first never reaches a worker", "[tls_keeper]") {
  auto k = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);
  REQUIRE(k.ok());
  FakeWorker w;
  (*k)->serve("", w.keepers);
  // A TLS ClientHello's first bytes, an HTTP request, half a route then silence, silence:
  // each is closed (silence once the route's 2 s are up), and the worker hears of none.
  const Bytes route = door::encode(door::route(door::Route{}));
  const std::vector<Bytes> openings = {Bytes{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03, 0x00},
                                       Bytes{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1'},
                                       Bytes(route.begin(), route.begin() + 20), Bytes{}};
  for (const Bytes& opening : openings) {
    const int fd = dial((*k)->address(), false);
    REQUIRE(fd >= 0);
    if (!opening.empty()) REQUIRE(::write(fd, opening.data(), opening.size()) == ssize_t(opening.size()));
    pollfd p{fd, POLLIN, 0};
    char b;
    CHECK((::poll(&p, 1, 10000) == 1 && ::read(fd, &b, 1) <= 0));  // closed by the keeper
    ::close(fd);
  }
  CHECK(w.nothing_within(100));
  CHECK((*k)->passed() == 0);
  // What follows a route is the worker's to read: the keeper read the route alone.
  const int fd = dial((*k)->address(), false);
  Bytes both = route;
  both.push_back('t');
  REQUIRE(::write(fd, both.data(), both.size()) == ssize_t(both.size()));
  const int s = w.next();
  REQUIRE(s >= 0);
  pollfd p{s, POLLIN, 0};
  char b = 0;
  CHECK((::poll(&p, 1, 10000) == 1 && ::read(s, &b, 1) == 1 && b == 't'));
  ::close(fd);
  ::close(s);
}

TEST_CASE("tls keeper: connections that hold back their route cannot keep a client out", "[tls_keeper]") {
  std::mutex m;
  std::vector<std::string> lines;
  auto k = TlsKeeper::open("127.0.0.1:0", {}, {}, [&](const std::string& line) {
    std::lock_guard<std::mutex> g(m);
    lines.push_back(line);
  });
  REQUIRE(k.ok());
  FakeWorker w;
  (*k)->serve("", w.keepers);
  // More silent connections (or a route's first bytes, then nothing) than may be routing,
  // and than the keeper holds in all where this process may open enough (both ends are here).
  const rlim_t open_max = raise_open_files();
  const size_t n = open_max >= 1600 ? 700 : TlsKeeper::kMaxRouting + 64;
  const Bytes route = door::encode(door::route(door::Route{}));
  std::vector<int> silent;
  for (size_t i = 0; i < n; ++i) {
    const int fd = dial((*k)->address(), false);
    REQUIRE(fd >= 0);
    if (i % 2) REQUIRE(::write(fd, route.data(), 4) == 4);
    silent.push_back(fd);
  }
  // A client's connection, its route sent at once, still reaches the worker (well before the
  // silent ones' 2 s are up: the oldest made way for it).
  const int client = dial((*k)->address());
  REQUIRE(client >= 0);
  const int s = w.next();
  REQUIRE(s >= 0);
  CHECK(same_connection(client, s));
  // The oldest silent ones were closed to make way, and the keeper said so.
  pollfd p{silent.front(), POLLIN, 0};
  char b;
  CHECK((::poll(&p, 1, 10000) == 1 && ::read(silent.front(), &b, 1) <= 0));
  k->reset();  // its thread ends: lines is ours
  CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& l) { return l.find("to make way for new ones") != std::string::npos; }));
  for (int fd : silent) ::close(fd);
  ::close(client);
  ::close(s);
}

TEST_CASE("tls keeper: connections for a tenant without a worker cannot keep others out, and can be turned away", "[tls_keeper]") {
  std::mutex m;
  std::vector<std::string> lines;
  auto k = TlsKeeper::open(
      "127.0.0.1:0", {}, {},
      [&](const std::string& line) {
        std::lock_guard<std::mutex> g(m);
        lines.push_back(line);
      },
      [](const door::Route& r) -> Result<std::string> { return std::string(r.key[0] == 1 ? "a" : "b"); });
  REQUIRE(k.ok());
  FakeWorker a;
  (*k)->serve("a", a.keepers);
  const rlim_t open_max = raise_open_files();
  // More whole routes for b (no worker: they wait) than the keeper holds, where this process
  // may open that many (both ends are here).
  const size_t n = open_max >= 1400 ? 600 : 200;
  std::vector<int> waiting;
  for (size_t i = 0; i < n; ++i) {
    const int fd = dial((*k)->address(), true, 2);
    REQUIRE(fd >= 0);
    waiting.push_back(fd);
  }
  // a's client still reaches a's worker.
  const int ca = dial((*k)->address(), true, 1);
  const int sa = a.next();
  REQUIRE(sa >= 0);
  CHECK(same_connection(ca, sa));
  // b cannot be served now: its connections are told so (refused: try later), in place of TLS.
  (*k)->turn_away("b", "its workers could not start");
  auto told = door::read_frame(waiting.back(), std::chrono::seconds(10), "the keeper");
  REQUIRE(told.ok());
  CHECK(told->kind == door::Kind::refused);
  CHECK(std::string(told->body.begin(), told->body.end()).find("cannot be served now: its workers could not start") != std::string::npos);
  if (n > 512) {  // the oldest made way, and the keeper said so
    pollfd p{waiting.front(), POLLIN, 0};
    char b;
    CHECK((::poll(&p, 1, 10000) == 1 && ::read(waiting.front(), &b, 1) <= 0));
    k->reset();
    CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& l) { return l.find("to make way") != std::string::npos; }));
  }
  for (int fd : waiting) ::close(fd);
  ::close(ca);
  ::close(sa);
}

TEST_CASE("tls keeper: each route reaches its tenant's worker; a tenant without one is asked for", "[tls_keeper]") {
  std::mutex m;
  std::vector<std::string> wanted;
  auto k = TlsKeeper::open(
      "127.0.0.1:0", {}, {}, nullptr,
      [](const door::Route& r) -> Result<std::string> {
        if (r.key[0] == 1) return std::string("a");
        if (r.key[0] == 2) return std::string("b");
        return Error(Errc::unauthenticated, "the route's key is not among this loader's clients");
      },
      [&](const std::string& t) {
        std::lock_guard<std::mutex> g(m);
        wanted.push_back(t);
      });
  REQUIRE(k.ok());
  FakeWorker a;
  (*k)->serve("a", a.keepers);
  const int ca = dial((*k)->address(), true, 1);
  const int sa = a.next();
  REQUIRE(sa >= 0);
  CHECK(same_connection(ca, sa));
  // b has no worker: its connection waits, b is asked for, and a hears nothing of it.
  const int cb = dial((*k)->address(), true, 2);
  for (int i = 0; i < 1000; ++i) {
    {
      std::lock_guard<std::mutex> g(m);
      if (!wanted.empty()) break;
    }
    ::usleep(10 * 1000);
  }
  {
    std::lock_guard<std::mutex> g(m);
    REQUIRE_FALSE(wanted.empty());
    CHECK(wanted.front() == "b");
  }
  CHECK(a.nothing_within(100));
  FakeWorker b;
  (*k)->serve("b", b.keepers);
  const int sb = b.next();
  REQUIRE(sb >= 0);
  CHECK(same_connection(cb, sb));
  // A key no tenant has: denied (a door frame in place of TLS), closed, passed to nobody.
  const int stranger = dial((*k)->address(), true, 9);
  auto denied = door::read_frame(stranger, std::chrono::seconds(10), "the keeper");
  REQUIRE(denied.ok());
  CHECK(denied->kind == door::Kind::denied);
  pollfd p{stranger, POLLIN, 0};
  char byte;
  CHECK((::poll(&p, 1, 10000) == 1 && ::read(stranger, &byte, 1) <= 0));
  CHECK(a.nothing_within(100));
  CHECK(b.nothing_within(0));
  for (int fd : {ca, sa, cb, sb, stranger}) ::close(fd);
}

TEST_CASE("tls keeper: a worker whose channel was shut down loses no connection", "[tls_keeper]") {
  auto k = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);
  REQUIRE(k.ok());
  FakeWorker w1;
  (*k)->serve("", w1.keepers);
  REQUIRE(::shutdown(w1.mine, SHUT_RDWR) == 0);  // what a kernel in that worker could do
  const int c = dial((*k)->address());
  REQUIRE(c >= 0);
  FakeWorker w2;
  (*k)->serve("", w2.keepers);
  const int s = w2.next();
  REQUIRE(s >= 0);
  CHECK(same_connection(c, s));
  ::close(c);
  ::close(s);
}

TEST_CASE("tls keeper: descriptors a worker sends are closed; a closed channel is let go", "[tls_keeper]") {
  auto k = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);
  REQUIRE(k.ok());
  FakeWorker w1;
  (*k)->serve("", w1.keepers);
  // What a kernel could park on its channel against the uid's limit of descriptors in flight.
  int p[2];
  REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  REQUIRE(sandbox::send_fd(w1.mine, p[1], "x"));
  ::close(p[1]);
  pollfd r{p[0], POLLIN, 0};
  char b;
  CHECK((::poll(&r, 1, 10000) == 1 && ::read(p[0], &b, 1) == 0));  // the keeper closed the last copy
  ::close(p[0]);

  // The worker's end closed (the worker died), or shut for writing (a kernel): the keeper
  // lets the channel go without spinning on it, and the next connection waits for the next
  // worker.
  const bool shut_wr = GENERATE(false, true);
  if (shut_wr) REQUIRE(::shutdown(w1.mine, SHUT_WR) == 0);
  else ::close(std::exchange(w1.mine, -1));
  timespec t0{}, t1{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t0);
  ::usleep(500 * 1000);
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t1);
  const double cpu_ms = double(t1.tv_sec - t0.tv_sec) * 1e3 + double(t1.tv_nsec - t0.tv_nsec) / 1e6;
  CHECK(cpu_ms < 100);  // a generous ceiling: a spinning thread takes about all of its 500 ms
  const int c = dial((*k)->address());
  REQUIRE(c >= 0);
  FakeWorker w2;
  (*k)->serve("", w2.keepers);
  const int s = w2.next();
  REQUIRE(s >= 0);
  CHECK(same_connection(c, s));
  ::close(c);
  ::close(s);
}

TEST_CASE("tls keeper: the port is the loader's until it stops", "[tls_keeper]") {
  std::string at;
  {
    auto k = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);
    REQUIRE(k.ok());
    at = (*k)->address();
    auto again = TlsKeeper::open(at, {}, {}, nullptr);
    REQUIRE_FALSE(again.ok());
    CHECK(again.error().message() == "tls-listen " + at + ": cannot listen: Address already in use");
    REQUIRE(again.error().hints().size() == 1);
    CHECK(again.error().hints()[0].find("another process has the port") != std::string::npos);
  }
  // Stopped: nothing listens, and a client is refused at once.
  CHECK(dial(at) == -1);
  CHECK(errno == ECONNREFUSED);
  auto bad = TlsKeeper::open("not-an-address", {}, {}, nullptr);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().rfind("tls-listen not-an-address: ", 0) == 0);
}

TEST_CASE("tls keeper: dials the cluster's peers for its worker, and nothing else", "[tls_keeper]") {
  // A peer's front door: another keeper, whose fake worker receives what the dial connected.
  auto peer = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);
  REQUIRE(peer.ok());
  FakeWorker peer_worker;
  (*peer)->serve("", peer_worker.keepers);
  auto stranger = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);  // listening, but no peer
  REQUIRE(stranger.ok());
  FakeWorker stranger_worker;
  (*stranger)->serve("", stranger_worker.keepers);

  auto k = TlsKeeper::open("127.0.0.1:0", {(*peer)->address()}, {}, nullptr);
  REQUIRE(k.ok());
  FakeWorker w;
  (*k)->serve("", w.keepers);
  // The worker's request, and the keeper's answer (a door_channel message, maybe a descriptor).
  auto ask = [&](uint64_t id, const std::string& to) {
    const Bytes b = door_channel::encode(door_channel::Message{door_channel::Kind::dial, id, {}, 0, 0, Bytes(to.begin(), to.end())});
    REQUIRE(::send(w.mine, b.data(), b.size(), 0) == ssize_t(b.size()));
  };
  auto answer = [&](int* fd) -> std::optional<door_channel::Message> {
    pollfd p{w.mine, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1) return std::nullopt;
    char buf[door_channel::kMaxMessage];
    const ssize_t got = sandbox::receive_fd(w.mine, buf, sizeof buf, fd);
    if (got <= 0) return std::nullopt;
    return door_channel::decode(ByteView(reinterpret_cast<const uint8_t*>(buf), size_t(got)));
  };

  ask(7, (*peer)->address());
  int fd = -1;
  auto a = answer(&fd);
  REQUIRE(a);
  CHECK(a->kind == door_channel::Kind::dialed);
  CHECK(a->id == 7);
  REQUIRE(fd >= 0);
  pollfd connected{fd, POLLOUT, 0};
  REQUIRE(::poll(&connected, 1, 10000) == 1);  // made in the background, non-blocking
  const int at_peer = peer_worker.next();
  REQUIRE(at_peer >= 0);
  CHECK(same_connection(fd, at_peer));
  CHECK((*k)->dialed() == 1);

  // Any other address, listening or not: refused, and no connection made.
  for (const std::string& to : {(*stranger)->address(), std::string("127.0.0.1:1"), std::string("not an address")}) {
    ask(8, to);
    int none = -1;
    auto refused = answer(&none);
    REQUIRE(refused);
    CHECK(refused->kind == door_channel::Kind::dial_failed);
    CHECK(refused->id == 8);
    CHECK(none == -1);
    const std::string why(refused->bytes.begin(), refused->bytes.end());
    CHECK(why == to + ": not a TLS node of this loader's cluster");
  }
  CHECK(stranger_worker.nothing_within(200));
  CHECK((*k)->dialed() == 1);
  // Junk on the channel is read and dropped; the keeper still answers.
  REQUIRE(::send(w.mine, "junk", 4, 0) == 4);
  ask(9, (*peer)->address());
  int again = -1;
  auto b = answer(&again);
  REQUIRE(b);
  CHECK(b->kind == door_channel::Kind::dialed);
  CHECK(again >= 0);
  const int at_peer2 = peer_worker.next();
  for (int f : {fd, at_peer, again, at_peer2})
    if (f >= 0) ::close(f);
}
