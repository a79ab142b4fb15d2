// Tests of the same-host door: its frame (one case per failure class), the exchange, the
// refusals, and the user-id checks of both ends.
#include <catch2/catch.hpp>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "net/door.h"

using namespace xcargo;
using namespace std::chrono_literals;

namespace {

// A name no other test or loader uses.
std::string unique_address(const char* what) { return std::string("door-test-") + what + ":" + std::to_string(::getpid()); }

int accept_one(int listener) {
  for (int i = 0; i < 1000; ++i) {
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return fd;
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

}  // namespace

TEST_CASE("door frames: each malformed header is refused before its body is read", "[door]") {
  const door::Ticket ticket{};
  const Bytes ok = door::encode(door::offer(ticket, Bytes{1, 2, 3}));
  REQUIRE(ok.size() == door::kHeaderSize + 16 + 3);
  auto len = door::decode_header(ok);
  REQUIRE(len.ok());
  CHECK(*len == 19);
  auto broken = [&](size_t at, uint8_t v) {
    Bytes b = ok;
    b[at] = v;
    auto r = door::decode_header(b);
    REQUIRE_FALSE(r.ok());
    return r.error();
  };
  CHECK(broken(0, 'Y').message().find("bad magic") != std::string::npos);
  CHECK(broken(4, 2).code() == Errc::unsupported);
  CHECK(broken(5, 9).message().find("unknown door frame kind 9") != std::string::npos);
  CHECK(broken(6, 1).message().find("reserved") != std::string::npos);
  CHECK(broken(11, 1).code() == Errc::limit);  // 16 MiB and more
  Bytes over = door::encode(door::Frame{door::Kind::refused, {}});
  over[8] = uint8_t((door::kMaxBody + 1) & 0xff), over[9] = uint8_t((door::kMaxBody + 1) >> 8);
  CHECK(door::decode_header(over).error().code() == Errc::limit);
  CHECK(door::decode_header(door::encode(door::offer(ticket, {}))).error().message().find("without a worker address") !=
        std::string::npos);
  CHECK(door::decode_header(door::encode(door::Frame{door::Kind::refused, {}})).ok());
  CHECK_FALSE(door::decode_header(ByteView(ok.data(), 11)).ok());
}

TEST_CASE("door frames: a route holds a key and a node's tenant, and nothing longer", "[door]") {
  door::Route c;
  for (size_t i = 0; i < c.key.size(); ++i) c.key[i] = uint8_t(i + 1);
  const Bytes client = door::encode(door::route(c));
  REQUIRE(client.size() == door::kHeaderSize + 32);
  auto len = door::decode_header(client);
  REQUIRE(len.ok());
  CHECK(*len == 32);
  auto back = door::parse_route(door::Frame{door::Kind::route, Bytes(client.begin() + door::kHeaderSize, client.end())});
  REQUIRE(back.ok());
  CHECK(back->key == c.key);
  CHECK(back->tenant.empty());
  c.tenant = std::string(32, 't');
  const Bytes node = door::encode(door::route(c));
  REQUIRE(door::decode_header(node).ok());
  back = door::parse_route(door::Frame{door::Kind::route, Bytes(node.begin() + door::kHeaderSize, node.end())});
  REQUIRE(back.ok());
  CHECK(back->tenant == c.tenant);
  // Too short (no whole key) or too long: refused from the header, before the body is read.
  c.tenant = std::string(33, 't');
  CHECK(door::decode_header(door::encode(door::route(c))).error().message() ==
        "a route of 65 bytes (a 32-byte key, then at most 32 of a tenant's name)");
  CHECK_FALSE(door::decode_header(door::encode(door::Frame{door::Kind::route, Bytes(31, 0)})).ok());
  CHECK_FALSE(door::parse_route(door::Frame{door::Kind::route, Bytes(31, 0)}).ok());
  CHECK(door::parse_route(door::Frame{door::Kind::offer, Bytes(48, 0)}).error().message() == "the first frame is not a route");
}

TEST_CASE("door: a route is read in pieces as they come, and nothing after it", "[door]") {
  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  door::Route c;
  c.key.fill(7);
  c.tenant = "lab";
  Bytes bytes = door::encode(door::route(c));
  const std::string after = "\x16\x03\x01 a TLS handshake follows";
  bytes.insert(bytes.end(), after.begin(), after.end());
  door::RouteReading r;
  door::Route got;
  std::string why;
  CHECK(door::read_route(sv[1], r, &got, &why) == door::RouteStep::more);  // nothing yet
  REQUIRE(::write(sv[0], bytes.data(), 5) == 5);
  CHECK(door::read_route(sv[1], r, &got, &why) == door::RouteStep::more);
  REQUIRE(::write(sv[0], bytes.data() + 5, 20) == 20);
  CHECK(door::read_route(sv[1], r, &got, &why) == door::RouteStep::more);
  REQUIRE(::write(sv[0], bytes.data() + 25, bytes.size() - 25) == ssize_t(bytes.size() - 25));
  REQUIRE(door::read_route(sv[1], r, &got, &why) == door::RouteStep::done);
  CHECK(got.key == c.key);
  CHECK(got.tenant == "lab");
  char rest[64];
  CHECK(::recv(sv[1], rest, sizeof rest, MSG_DONTWAIT) == ssize_t(after.size()));  // left for TLS
  ::close(sv[0]);
  ::close(sv[1]);

  auto fails = [](const Bytes& sent, bool end) {
    int p[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) == 0);
    REQUIRE(::write(p[0], sent.data(), sent.size()) == ssize_t(sent.size()));
    if (end) ::close(p[0]);
    door::RouteReading rr;
    door::Route out;
    std::string w;
    const door::RouteStep step = door::read_route(p[1], rr, &out, &w);
    if (!end) ::close(p[0]);
    ::close(p[1]);
    CHECK(step == door::RouteStep::failed);
    return w;
  };
  CHECK(fails(door::encode(door::offer(door::Ticket{}, Bytes{1})), false) == "the first frame is not a route");
  CHECK(fails(Bytes{'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P', '/', '1'}, false).find("bad magic") != std::string::npos);
  const Bytes whole = door::encode(door::route(c));
  CHECK(fails(Bytes(whole.begin(), whole.begin() + 20), true) == "the connection ended before its route");
}

TEST_CASE("door: the loader's offer reaches its own user, and the connection stays as the lifeline", "[door]") {
  const std::string at = unique_address("trade");
  auto listener = door::listen(at);
  REQUIRE(listener.ok());
  auto again = door::listen(at);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().hints().size() == 1);
  ::close(accept_one(*listener));  // its check of who holds the name connected once

  std::string server_saw;
  std::thread server([&] {
    const int fd = accept_one(*listener);
    if (fd < 0) return;
    auto who = door::peer_of(fd);
    if (who.ok() && who->uid == ::geteuid() && who->pid == ::getpid()) server_saw = "me";
    auto route = door::read_frame(fd, 10s, "client");  // the client's first frame
    if (route.ok() && door::parse_route(*route).ok() && door::parse_route(*route)->key[0] == 9) server_saw += " routed";
    door::Ticket t;
    for (size_t i = 0; i < t.size(); ++i) t[i] = uint8_t(i + 1);
    (void)door::write_frame(fd, door::offer(t, Bytes{'s', 'r', 'v'}), 10s);
    char c;
    if (::read(fd, &c, 1) == 0) server_saw += " hung up";  // the client's end of the lifeline
    ::close(fd);
  });
  door::Route mine;
  mine.key[0] = 9;
  auto opened = door::open(at, mine, 10s);
  REQUIRE(opened.ok());
  CHECK(std::string(opened->address.begin(), opened->address.end()) == "srv");
  CHECK(opened->ticket[0] == 1);
  CHECK(opened->ticket[15] == 16);
  ::close(opened->fd);
  server.join();
  CHECK(server_saw == "me routed hung up");
  ::close(*listener);
}

TEST_CASE("door: a refusal reaches the client as an error with its hint", "[door]") {
  const std::string at = unique_address("refuse");
  auto listener = door::listen(at);
  REQUIRE(listener.ok());
  std::thread server([&] {
    const int fd = accept_one(*listener);
    if (fd < 0) return;
    const std::string why = "this loader serves only its own user here\nuse tls://127.0.0.1:7401";
    (void)door::write_frame(fd, door::Frame{door::Kind::refused, Bytes(why.begin(), why.end())}, 10s);
    ::close(fd);
  });
  auto opened = door::open(at, door::Route{}, 10s);
  server.join();
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.error().code() == Errc::unreachable);  // a client retries one: a restart, say
  CHECK(opened.error().message() == at + ": this loader serves only its own user here");
  REQUIRE(opened.error().hints().size() == 1);
  CHECK(opened.error().hints()[0] == "use tls://127.0.0.1:7401");
  ::close(*listener);
}

TEST_CASE("door: a TLS client finds a front door's denial in the first bytes it received, and nothing else", "[door]") {
  const std::string why = "the TLS front door: the route's key is not among this loader's clients\nask its admin";
  const Bytes denied = door::encode(door::Frame{door::Kind::denied, Bytes(why.begin(), why.end())});
  auto e = door::refusal_in(denied, "tls://h:1");
  REQUIRE(e.has_value());
  CHECK(e->code() == Errc::unauthenticated);  // not tried again
  CHECK(e->message() == "tls://h:1: the TLS front door: the route's key is not among this loader's clients");
  CHECK(e->hints() == std::vector<std::string>{"ask its admin"});
  // A TLS record, a frame cut short, an offer, a damaged header: no refusal.
  const Bytes tls_alert = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28};
  CHECK_FALSE(door::refusal_in(tls_alert, "h").has_value());
  CHECK_FALSE(door::refusal_in(ByteView(denied).first(denied.size() - 1), "h").has_value());
  CHECK_FALSE(door::refusal_in(ByteView(denied).first(5), "h").has_value());
  CHECK_FALSE(door::refusal_in(door::encode(door::offer(door::Ticket{}, Bytes(8, 1))), "h").has_value());
  Bytes bad = denied;
  bad[6] = 1;  // reserved
  CHECK_FALSE(door::refusal_in(bad, "h").has_value());
}

TEST_CASE("door: nobody listening, and an end that says nothing", "[door]") {
  auto none = door::open(unique_address("nobody"), door::Route{}, 10s);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code() == Errc::unreachable);
  CHECK(none.error().message().find("no loader listens there") != std::string::npos);

  const std::string at = unique_address("silent");
  auto listener = door::listen(at);
  REQUIRE(listener.ok());
  // Never accepted: connected (the listener's backlog), the offer never comes.
  auto silent = door::open(at, door::Route{}, 200ms);
  REQUIRE_FALSE(silent.ok());
  CHECK(silent.error().message().find("sent nothing in time") != std::string::npos);
  ::close(*listener);
}

TEST_CASE("door: both ends see the other's user id; a client refuses another user's door", "[door]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot run a process as another user here");
    return;
  }
  const std::string at = unique_address("uid");
  int ready[2], done[2];
  REQUIRE(::pipe(ready) == 0);
  REQUIRE(::pipe(done) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // another user's process holding the door
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
    auto l = door::listen(at);
    if (!l.ok()) ::_exit(3);
    (void)!::write(ready[1], "r", 1);
    char c;
    (void)!::read(done[0], &c, 1);  // holds the name until the parent is done
    ::_exit(0);
  }
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  auto opened = door::open(at, door::Route{}, 10s);
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.error().code() == Errc::unauthenticated);
  CHECK(opened.error().message().find("runs as uid 65534, not as this user (uid 0)") != std::string::npos);
  auto squatted = door::listen(at);  // a loader whose door name another user took says who
  REQUIRE_FALSE(squatted.ok());
  CHECK(squatted.error().message().find("is held by a process of uid 65534 (pid " + std::to_string(child) + "), not of this user") !=
        std::string::npos);
  REQUIRE(::write(done[1], "d", 1) == 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) ::close(fd);
}
