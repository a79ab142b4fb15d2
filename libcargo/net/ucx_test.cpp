// Tests of the UCX settings the loader derives without UCX: the transports its worker may
// use, whatever UCX_TLS asks for.
#include <catch2/catch.hpp>

#include "net/ucx.h"

using namespace xcargo;

TEST_CASE("transports are left out of any UCX_TLS", "[ucx]") {
  const std::vector<std::string> drop = {"cma", "knem", "xpmem", "posix"};
  auto tls = [&](const char* in) {
    auto r = net::tls_without(in, drop);
    REQUIRE(r.ok());
    return *r;
  };
  CHECK(tls(nullptr) == "^cma,knem,xpmem,posix");
  CHECK(tls("") == "^cma,knem,xpmem,posix");
  CHECK(tls("all") == "^cma,knem,xpmem,posix");
  CHECK(tls("shm,tcp") == "sysv,tcp");
  CHECK(tls("tcp") == "tcp");
  CHECK(tls("sm,self,tcp,cma") == "sysv,self,tcp");
  CHECK(tls("mm,posix") == "sysv");
  CHECK(tls("^ib") == "^ib,cma,knem,xpmem,posix");
  CHECK(tls("^cma,ib") == "^cma,ib,knem,xpmem,posix");
  CHECK(*net::tls_without("shm,tcp", {"posix", "sysv", "cma", "knem", "xpmem"}) == "tcp");
  auto none = net::tls_without("cma", drop);
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message().find("UCX_TLS=cma") != std::string::npos);
}

TEST_CASE("whether UCX_TLS leaves UCX a shared-memory transport", "[ucx]") {
  auto with = [](const char* v) {
    ::setenv("UCX_TLS", v, 1);
    const bool on = net::shm_enabled();
    ::unsetenv("UCX_TLS");
    return on;
  };
  CHECK(with("shm,tcp"));
  CHECK(with("sysv,tcp"));
  CHECK(with("all"));
  CHECK(with("^cma,knem,xpmem,posix"));  // a worker's: sysv stays
  CHECK_FALSE(with("tcp"));
  CHECK_FALSE(with("^posix,sysv"));
  CHECK_FALSE(with("^shm"));
  CHECK_FALSE(with("tcp,self"));
  CHECK(net::sysv_enabled(nullptr));
  CHECK(net::sysv_enabled("^cma,knem,xpmem,posix"));
  CHECK(net::sysv_enabled("shm,tcp"));
  CHECK_FALSE(net::sysv_enabled("posix,tcp"));
  CHECK_FALSE(net::sysv_enabled("^sysv"));
  CHECK_FALSE(net::sysv_enabled("tcp"));
}

TEST_CASE("addresses: HOST:PORT, HOST alone for the default port, IPv6 refused with its reason", "[ucx]") {
  auto port_of = [](const std::string& hp) -> int {
    auto a = net::parse_host_port(hp);
    if (!a.ok()) return -1;
    return net::to_host_port(reinterpret_cast<const sockaddr*>(&*a)) == "" ? -2 : 0;
  };
  auto text = [](const std::string& hp) {
    auto a = net::parse_host_port(hp);
    return a.ok() ? net::to_host_port(reinterpret_cast<const sockaddr*>(&*a)) : "error: " + a.error().message();
  };
  CHECK(text("127.0.0.1:7500") == "127.0.0.1:7500");
  CHECK(text("127.0.0.1") == "127.0.0.1:7400");
  CHECK(text("[::1]:7500").find("IPv6 addresses do not work with this UCX") != std::string::npos);
  CHECK(text("localhost:0") == "127.0.0.1:0");
  CHECK(port_of("::1:7400") == -1);       // IPv6 without brackets is ambiguous
  CHECK(port_of("127.0.0.1:") == -1);
  CHECK(port_of("[::1]7400") == -1);
  CHECK(port_of("[::1:7400") == -1);
  CHECK(port_of("[nothost]:1") == -1);
  CHECK(port_of("127.0.0.1:65536") == -1);
  CHECK(port_of(":7400") == -1);
}
