// Tests of the UCX settings the loader derives without UCX: the transports its worker may
// use, whatever UCX_TLS asks for.
#include <catch2/catch.hpp>

#include "xcargo/ucx.h"

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
