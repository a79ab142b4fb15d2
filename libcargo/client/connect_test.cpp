// connect() fails fast: a refused connection at once, over every route (the same-host door,
// ucx://, tls://), a tls:// peer that is no loader at once, and a listener that never answers
// within connect_timeout_ms. Time bounds
// here are generous ceilings (3 s, under the 5 s default), never measurements.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "xcargo/client.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kCeiling = std::chrono::seconds(3);

// A TCP socket bound to 127.0.0.1 on a port of the kernel's choosing; listening (with a
// backlog, never accepting) or not (then a connection to it is refused).
struct Port {
  int fd = -1;
  std::string address;
  explicit Port(bool listening) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), len) == 0);
    if (listening) REQUIRE(::listen(fd, 64) == 0);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  ~Port() { ::close(fd); }
};

client::ConnectOptions options(int timeout_ms) {
  client::ConnectOptions o;
  o.connect_timeout_ms = timeout_ms;
  o.identity_key = std::make_shared<const SigningKey>(std::move(*SigningKey::generate()));
  o.node_key = SigningKey::generate()->public_key();  // tls://: no known-nodes file needed
  return o;
}

// connect(address) fails as unreachable within the ceiling; its message.
std::string fails(const std::string& address, const client::ConnectOptions& o) {
  const auto start = Clock::now();
  auto c = client::connect(address, o);
  CHECK(Clock::now() - start < kCeiling);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().code() == Errc::unreachable);
  return c.error().message();
}

}  // namespace

TEST_CASE("connect: a refused connection fails at once at a same-host door and a front door, soon elsewhere", "[client][connect]") {
  Port closed(false);
  auto o = options(10000);  // a refusal does not wait for it
  o.refused_retry_ms = 10000;
  // The loader's supervisor holds both across worker restarts: refused, no loader runs. (The
  // ceiling is generous, far below the 10 s a retry would take.)
  auto start = Clock::now();
  CHECK(fails(closed.address, o) == closed.address + ": connection refused: no loader listens there on this host");
  CHECK(fails("tls://" + closed.address, o) == "tls://" + closed.address + ": connection refused");
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  // A worker's UCX listener may be closed for a moment while it is replaced: tried again for
  // refused_retry_ms (by default, well within the ceiling), then refused.
  o.refused_retry_ms = 1500;
  CHECK(fails("ucx://" + closed.address, o).find(closed.address + ": connection refused") == 0);
}

TEST_CASE("connect: refused_retry_ms tries a refused UCX connection again", "[client][connect]") {
  Port closed(false);
  auto o = options(10000);
  o.refused_retry_ms = 300;
  const auto start = Clock::now();
  CHECK(fails("ucx://" + closed.address, o).find(closed.address + ": connection refused") == 0);
  CHECK(Clock::now() - start >= std::chrono::milliseconds(250));  // by construction: it tried again
  o.connect_timeout_ms = 200;  // and never past the connect timeout
  CHECK(fails("ucx://" + closed.address, o).find(closed.address + ": connection refused") == 0);
}

TEST_CASE("connect: a tls:// peer that answers in something other than TLS fails at once", "[client][connect]") {
  Port junk(true);
  std::thread server([&] {  // answers each connection as an SSH server would, then closes it
    for (int i = 0; i < 8; ++i) {
      pollfd p{junk.fd, POLLIN, 0};
      if (::poll(&p, 1, 3000) != 1) return;
      const int c = ::accept(junk.fd, nullptr, nullptr);
      if (c < 0) return;
      static const char banner[] = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n";
      (void)!::write(c, banner, sizeof banner - 1);
      char buf[512];
      (void)!::read(c, buf, sizeof buf);
      ::close(c);
    }
  });
  auto o = options(10000);  // one try, far from the connect timeout
  const std::string why = fails("tls://" + junk.address, o);
  CHECK(why.rfind("tls://" + junk.address + ": TLS handshake: ", 0) == 0);
  ::shutdown(junk.fd, SHUT_RDWR);
  server.join();
}

TEST_CASE("connect: connect_timeout_ms bounds a listener that never answers", "[client][connect]") {
  Port silent(true);
  const auto o = options(300);
  CHECK(fails("tls://" + silent.address, o) == "tls://" + silent.address + ": no TLS handshake within 300 ms");
  CHECK(fails("ucx://" + silent.address, o) == silent.address + ": no answer within the connect timeout (300 ms)");
}
