// The TLS front door against real clients on loopback: who gets in, what reaches the server
// (whole frames of accepted peers only), and what is closed (refused keys, junk, silence,
// frames over the limit) without an event the server did not ask for.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/front_door.h"
#include "tls_keeper.h"
#include "net/door.h"
#include "net/ucx.h"

using namespace xcargo;
using namespace xcargo::loader;
using namespace std::chrono_literals;

namespace {

SigningKey new_key() {
  auto k = SigningKey::generate();
  REQUIRE(k.ok());
  return std::move(*k);
}

tls::Credential node_credential(const SigningKey& node) {
  auto ephemeral = new_key();
  auto leaf = tls::certificate(node, ephemeral.public_key().raw, std::chrono::hours(2));
  auto root = tls::certificate(node, node.public_key().raw, std::chrono::hours(2));
  REQUIRE(leaf.ok());
  REQUIRE(root.ok());
  return tls::Credential{std::move(ephemeral), {std::move(*leaf), std::move(*root)}};
}

struct Seen {
  int accepted = 0, ready = 0, frames = 0, lost = 0;
  bool lost_in_handshake = false;
  std::string why;
  tls::RawKey identity{};
  std::string last_header;
};

// A front door that admits `client`'s key, answering each frame with its header reversed.
struct Door {
  SigningKey node = new_key();
  Seen seen;
  std::unique_ptr<TlsKeeper> keeper;  // kept: the supervisor's keeper listens, the door takes from it
  int keepers_end = -1;               // kept: the keeper's end of the channel
  int workers_end = -1;               // kept: the door's end (it owns it)
  std::unique_ptr<FrontDoor> door;
  std::string address;
  uint64_t max_data = 1 << 20;
  uint64_t max_partial_per_key = UINT64_MAX, max_partial_total = UINT64_MAX;
  bool accept_tcp = true;

  explicit Door(const SigningKey& client, bool kept = false) {
    ::signal(SIGPIPE, SIG_IGN);  // as the loader does (front_door.h)
    const tls::RawKey allowed = client.public_key().raw;
    auto ctx = tls::Context::create(tls::Context::server, node_credential(node), [allowed](const tls::Peer& p, std::string* why) {
      if (p.identity == allowed && !p.certified) return true;
      *why = "not an authorized key";
      return false;
    });
    REQUIRE(ctx.ok());
    FrontDoor::Events ev;
    ev.accepted = [this](TlsConn&) { return ++seen.accepted, accept_tcp; };
    ev.ready = [this](TlsConn&, const tls::Peer& p) { ++seen.ready, seen.identity = p.identity; };
    ev.frame = [this](TlsConn& c, wire::Frame& f) {
      ++seen.frames;
      seen.last_header.assign(f.header.begin(), f.header.end());
      Bytes back(f.header.rbegin(), f.header.rend());
      door->send(c, wire::MsgType::result, back, Bytes(f.data));
    };
    ev.lost = [this](TlsConn&, const std::string& why, bool in_handshake) {
      ++seen.lost, seen.why = why, seen.lost_in_handshake = in_handshake;
    };
    ev.max_data = [this] { return max_data; };
    ev.max_partial_per_key = [this] { return max_partial_per_key; };
    ev.max_partial_total = [this] { return max_partial_total; };
    if (kept) {
      auto k = TlsKeeper::open("127.0.0.1:0", {}, {}, nullptr);
      REQUIRE(k.ok());
      keeper = std::move(*k);
      address = keeper->address();
      int sv[2];
      REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
      keepers_end = sv[1];
      workers_end = sv[0];
      keeper->serve("", keepers_end);
      auto d = FrontDoor::from_keeper(sv[0], *ctx, std::move(ev));
      REQUIRE(d.ok());
      door = std::move(*d);
    } else {
      auto d = FrontDoor::listen("127.0.0.1:0", *ctx, std::move(ev), 0ms, &address);
      REQUIRE(d.ok());
      door = std::move(*d);
    }
  }
  ~Door() {
    door.reset();
    keeper.reset();
    if (keepers_end >= 0) ::close(keepers_end);
  }
  // Polls until done() or 20 s (a ceiling for a busy machine).
  template <typename Done>
  bool poll_until(Done done) {
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (!done()) {
      if (std::chrono::steady_clock::now() > end) return false;
      if (!door->poll()) std::this_thread::sleep_for(200us);
    }
    return true;
  }
};

// A client's connection; through a keeper (`routed`), its route sent first, as a client
// library's is (a front door that listens itself is reached without one).
int dial(const std::string& address, bool routed = false) {
  socklen_t len = 0;
  auto a = net::parse_host_port(address, &len);
  REQUIRE(a.ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&*a), len) == 0);
  if (routed) REQUIRE(door::write_frame(fd, door::route(door::Route{}), std::chrono::seconds(10)).ok());
  timeval tv{20, 0};  // a blocking client never waits forever
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// A blocking TLS client in its own thread: handshake, one frame, its reply; outcome in result.
struct Client {
  std::thread t;
  std::atomic<bool> done{false};
  std::string result;
  Client(const std::string& address, const SigningKey& me, const SigningKey& node, Bytes header, Bytes data, bool routed = false) {
    auto cred = tls::Credential::self_signed(me);
    REQUIRE(cred.ok());
    const tls::RawKey want = node.public_key().raw;
    auto ctx = tls::Context::create(tls::Context::client, *cred, [want](const tls::Peer& p, std::string* why) {
      return p.identity == want && p.certified ? true : (*why = "wrong node", false);
    });
    REQUIRE(ctx.ok());
    const int fd = dial(address, routed);
    t = std::thread([this, c = *ctx, fd, header = std::move(header), data = std::move(data)] {
      auto ch = tls::Channel::start(c, fd);
      if (!ch.ok()) return result = "start: " + ch.error().message(), done = true, void();
      auto hs = (*ch)->handshake();
      if (!hs.ok()) return result = "handshake: " + hs.error().message(), done = true, void();
      auto s = (*ch)->send(wire::MsgType::invoke, header, data);
      wire::Frame f;
      auto r = s.ok() ? (*ch)->receive(f, 1 << 20) : s;
      if (!r.ok()) result = "error: " + r.error().message();
      else if (*r != tls::Channel::Io::done) result = "closed";
      else result = "reply: " + std::string(f.header.begin(), f.header.end()) + " " + std::to_string(f.data.size());
      done = true;
    });
  }
  ~Client() { t.join(); }
};

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

tls::Credential own_credential(const SigningKey& me) {
  auto cred = tls::Credential::self_signed(me);
  REQUIRE(cred.ok());
  return std::move(*cred);
}

// A client that starts a frame of `size` data bytes and sends no more of it than its socket
// takes at once: the rest never comes. Its connection stays open while it lives.
struct Stalled {
  std::unique_ptr<tls::Channel> ch;
  Bytes data;
  std::thread t;
  std::atomic<bool> done{false};
  std::string result;
  Stalled(const std::string& address, const SigningKey& me, const SigningKey& node, size_t size) : data(size, 1) {
    const tls::RawKey want = node.public_key().raw;
    auto ctx = tls::Context::create(tls::Context::client, own_credential(me), [want](const tls::Peer& p, std::string*) {
      return p.identity == want && p.certified;
    });
    REQUIRE(ctx.ok());
    auto c = tls::Channel::start(*ctx, dial(address));
    REQUIRE(c.ok());
    ch = std::move(*c);
    t = std::thread([this] {
      auto hs = ch->handshake();
      if (!hs.ok()) return result = "handshake: " + hs.error().message(), done = true, void();
      ::fcntl(ch->fd(), F_SETFL, ::fcntl(ch->fd(), F_GETFL) | O_NONBLOCK);
      auto sent = ch->send_view(wire::MsgType::invoke, text("abc"), data);
      result = sent.ok() ? (*sent == tls::Channel::Io::done ? "all sent" : "started") : "error: " + sent.error().message();
      done = true;
    });
  }
  ~Stalled() { t.join(); }
};

}  // namespace

TEST_CASE("front door: an admitted client's frames reach the server, and its replies the client", "[front_door]") {
  const SigningKey me = new_key();
  Door d(me);
  Client c(d.address, me, d.node, text("abc"), Bytes(100000, 7));
  REQUIRE(d.poll_until([&] { return c.done.load(); }));
  CHECK(c.result == "reply: cba 100000");
  CHECK(d.seen.ready == 1);
  CHECK(d.seen.identity == me.public_key().raw);
  CHECK(d.seen.frames == 1);
  REQUIRE(d.poll_until([&] { return d.seen.lost == 1; }));  // the client's end closed its socket
  CHECK_FALSE(d.seen.lost_in_handshake);
  CHECK(d.door->size() == 0);
}

TEST_CASE("front door: connections passed by the supervisor's keeper are served, and its channel's end is found", "[front_door]") {
  const SigningKey me = new_key();
  for (int how = 0; how < 2; ++how) {
    Door d(me, true);
    {
      Client c(d.address, me, d.node, text("abc"), Bytes(1000, 7), true);
      REQUIRE(d.poll_until([&] { return c.done.load(); }));
      CHECK(c.result == "reply: cba 1000");
      CHECK(d.seen.ready == 1);
      CHECK(d.door->deaf().empty());
    }
    // What a kernel could do to the worker's end of the channel: close it, or shut it down.
    const int channel = d.workers_end;
    REQUIRE(channel >= 0);
    if (how == 0) ::close(channel);
    else ::shutdown(channel, SHUT_RDWR);
    CHECK(d.door->deaf().find("its channel from the supervisor") != std::string::npos);
    d.door->stop_listening();  // on purpose: not deaf
    CHECK(d.door->deaf().empty());
  }
}

TEST_CASE("front door: a key the server does not admit never sends a frame", "[front_door]") {
  const SigningKey me = new_key(), stranger = new_key();
  Door d(me);
  Client c(d.address, stranger, d.node, text("abc"), {});
  REQUIRE(d.poll_until([&] { return c.done.load() && d.seen.lost == 1; }));
  CHECK(d.seen.lost_in_handshake);
  CHECK(d.seen.why.find("not an authorized key") != std::string::npos);
  CHECK(d.seen.frames == 0);
  CHECK(d.seen.ready == 0);
  CHECK(c.result.rfind("reply", 0) != 0);
}

TEST_CASE("front door: bytes that are not TLS, and silence, are closed before any frame", "[front_door]") {
  const SigningKey me = new_key();
  Door d(me);
  for (const Bytes& junk : {Bytes(64, 0), text("GET / HTTP/1.1\r\n\r\n"), Bytes(70000, 0x16)}) {
    const int fd = dial(d.address);
    REQUIRE(::write(fd, junk.data(), junk.size()) > 0);
    const int lost = d.seen.lost;
    REQUIRE(d.poll_until([&] { return d.seen.lost == lost + 1; }));
    CHECK(d.seen.lost_in_handshake);
    ::close(fd);
  }
  CHECK(d.seen.frames == 0);
  // A connection that says nothing is closed at the handshake deadline.
  const int quiet = dial(d.address);
  REQUIRE(d.poll_until([&] { return d.door->size() == 1; }));
  d.door->sweep(std::chrono::steady_clock::now() + 1s, 500ms, {});
  CHECK(d.door->size() == 0);
  CHECK(d.seen.why.find("no TLS handshake within") != std::string::npos);
  ::close(quiet);
}

TEST_CASE("front door: a frame over the limit closes its connection before it is read", "[front_door]") {
  const SigningKey me = new_key();
  Door d(me);
  d.max_data = 1000;
  Client c(d.address, me, d.node, text("abc"), Bytes(5000, 1));
  REQUIRE(d.poll_until([&] { return c.done.load() && d.seen.lost == 1; }));
  CHECK(d.seen.frames == 0);
  CHECK_FALSE(d.seen.lost_in_handshake);
}

TEST_CASE("front door: a connection the server does not take is closed unread", "[front_door]") {
  const SigningKey me = new_key();
  Door d(me);
  d.accept_tcp = false;
  Client c(d.address, me, d.node, text("abc"), {});
  REQUIRE(d.poll_until([&] { return c.done.load(); }));
  CHECK(d.seen.accepted == 1);
  CHECK(d.seen.ready == 0);
  CHECK(d.seen.lost == 0);  // never taken in: no event
  CHECK(d.door->size() == 0);
}

TEST_CASE("front door: frames still arriving are bounded by key and in all, and dropped once stalled", "[front_door]") {
  const SigningKey me = new_key();
  Door d(me);
  d.max_data = 16 << 20;
  d.max_partial_per_key = 24 << 20;  // room for one 16 MiB frame in progress per key
  // One frame arrives in part (a socket takes a few MiB at once): it holds its declared size.
  Stalled first(d.address, me, d.node, 16 << 20);
  REQUIRE(d.poll_until([&] { return first.done.load() && d.door->partial_total() == (16u << 20); }));
  CHECK(first.result == "started");
  // Another frame of the same key would pass the key's share: its connection is closed at
  // the frame's head, nothing allocated for it, with the reason.
  Stalled second(d.address, me, d.node, 16 << 20);
  REQUIRE(d.poll_until([&] { return second.done.load() && d.seen.lost == 1; }));
  CHECK(d.seen.why.find("room left by the requests still arriving") != std::string::npos);
  CHECK(d.door->partial_total() == (16u << 20));
  // A frame that stops arriving is dropped at its transfer deadline; its bytes are free again.
  d.door->sweep(std::chrono::steady_clock::now() + 1h, 10s, [](uint64_t) { return std::chrono::milliseconds(1000); });
  CHECK(d.seen.lost == 2);
  CHECK(d.seen.why.find("did not arrive within 1 s") != std::string::npos);
  CHECK(d.door->partial_total() == 0);
  // The total over all keys bounds them the same way.
  d.max_partial_per_key = UINT64_MAX;
  d.max_partial_total = 8 << 20;
  Stalled third(d.address, me, d.node, 16 << 20);
  REQUIRE(d.poll_until([&] { return third.done.load() && d.seen.lost == 3; }));
  CHECK(d.seen.why.find("8388608 bytes") != std::string::npos);
  // A small frame passes however full the total is: others' large frames cannot stop it.
  d.max_partial_total = 0;
  Client small(d.address, me, d.node, text("abc"), Bytes(100, 1));
  REQUIRE(d.poll_until([&] { return small.done.load(); }));
  CHECK(small.result == "reply: cba 100");
}

TEST_CASE("front door: a connection it dials sends what waited for its handshake, and hears the answer", "[front_door]") {
  const SigningKey me = new_key();
  Door server(me), client(new_key());
  const tls::RawKey want = server.node.public_key().raw;
  auto ctx = tls::Context::create(tls::Context::client, own_credential(me), [want](const tls::Peer& p, std::string* why) {
    return p.identity == want && p.certified ? true : (*why = "not the node", false);
  });
  REQUIRE(ctx.ok());
  std::string why;
  TlsConn* c = client.door->dial(server.address, *ctx, &why);
  REQUIRE(c);
  CHECK(c->dialed);
  CHECK(client.door->send(*c, wire::MsgType::invoke, text("hello"), Bytes(10, 3)));  // before its handshake
  const auto both = [&] {
    server.door->poll();
    return client.seen.frames == 1;
  };
  REQUIRE(client.poll_until(both));
  CHECK(server.seen.last_header == "hello");
  CHECK(client.seen.last_header == "olleh");
  CHECK(client.seen.ready == 1);
  CHECK(client.seen.identity == want);
  CHECK(client.seen.accepted == 0);  // dialed, not accepted
  // A port where nobody listens: lost in its handshake, with the reason.
  client.door->close(c);  // no event
  auto closed = server.address;
  server.door.reset();
  TlsConn* nowhere = client.door->dial(closed, *ctx, &why);
  REQUIRE(nowhere);
  REQUIRE(client.poll_until([&] { return client.seen.lost == 1; }));
  CHECK(client.seen.lost_in_handshake);
  INFO(client.seen.why);
  CHECK(client.seen.why.find("refused") != std::string::npos);
}

// The descriptor of the listening TCP socket bound at ADDRESS, found as a kernel would.
int listening_fd(const std::string& address) {
  for (int fd = 0; fd < 4096; ++fd) {
    int on = 0;
    socklen_t len = sizeof on;
    sockaddr_storage a{};
    socklen_t al = sizeof a;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 && on &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &al) == 0 && net::to_host_port(reinterpret_cast<sockaddr*>(&a)) == address)
      return fd;
  }
  return -1;
}

TEST_CASE("front door: a listening socket closed, shut down or replaced under it is found", "[front_door]") {
  const SigningKey me = new_key();
  for (int how = 0; how < 3; ++how) {
    Door s(me);
    CHECK(s.door->deaf().empty());
    const int fd = listening_fd(s.address);
    REQUIRE(fd >= 0);
    if (how == 0) {
      ::close(fd);
      CHECK(s.door->deaf().find("was closed or no longer listens") != std::string::npos);
    } else if (how == 1) {
      ::shutdown(fd, SHUT_RDWR);
      CHECK(s.door->deaf().find("was closed or no longer listens") != std::string::npos);
    } else {  // another socket in its place, listening on the same port: epoll does not watch it
      socklen_t len = 0;
      auto a = net::parse_host_port(s.address, &len);
      REQUIRE(a.ok());
      const int other = ::socket(AF_INET, SOCK_STREAM, 0);  // before the close: another number
      ::close(fd);
      const int one = 1;
      ::setsockopt(other, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      REQUIRE(::bind(other, reinterpret_cast<const sockaddr*>(&*a), len) == 0);
      REQUIRE(::listen(other, 8) == 0);
      REQUIRE(::dup2(other, fd) == fd);
      ::close(other);
      CHECK(s.door->deaf().find("is no longer watched") != std::string::npos);
    }
    s.door->stop_listening();  // on purpose: not deaf
    CHECK(s.door->deaf().empty());
  }
}
