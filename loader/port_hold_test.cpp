// PortHold: the port is the loader's, a connection to it is refused, a second holder fails.
#include "port_hold.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "net/ucx.h"

using namespace xcargo;
using namespace xcargo::loader;

TEST_CASE("port hold: port 0 is resolved, connections are refused, the port is not shared", "[port_hold]") {
  auto h = PortHold::bind("127.0.0.1:0");
  REQUIRE(h.ok());
  const std::string at = h->address();
  CHECK(at.rfind("127.0.0.1:", 0) == 0);
  CHECK(at != "127.0.0.1:0");

  socklen_t len = 0;
  auto a = net::parse_host_port(at, &len);
  REQUIRE(a.ok());
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  CHECK(::connect(fd, reinterpret_cast<const sockaddr*>(&*a), len) != 0);
  CHECK(errno == ECONNREFUSED);  // bound, never listening: the kernel refuses, nothing is read
  ::close(fd);

  auto again = PortHold::bind(at);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message() == "listen " + at + ": cannot take the port: Address already in use");
  REQUIRE(again.error().hints().size() == 1);

  PortHold moved = std::move(*h);
  CHECK(moved.address() == at);
  moved = PortHold();  // released: the port is free again
  CHECK(PortHold::bind(at).ok());
}
