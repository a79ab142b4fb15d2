// Tests of TenantUsers: a uid of its own per tenant, kept across restarts by its cache directory.
#include "tenant_users.h"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

using namespace xcargo;
using namespace xcargo::loader;

TEST_CASE("tenant users: one uid per tenant, in the range, the same for the same tenant", "[tenant_users]") {
  TenantUsers users;
  std::set<uid_t> seen;
  for (int i = 0; i < 200; ++i) {
    auto u = users.of("t" + std::to_string(i));
    REQUIRE(u.ok());
    CHECK(u->uid >= TenantUsers::kFirst);
    CHECK(u->uid <= TenantUsers::kLast);
    CHECK(u->gid == gid_t(u->uid));
    CHECK(seen.insert(u->uid).second);  // none shared
  }
  CHECK(users.of("t7")->uid == users.of("t7")->uid);
  CHECK(users.of("t7")->name == "xcargo-t7");
  // A new loader gives a tenant without a cache directory the same first choice.
  TenantUsers again;
  CHECK(again.of("t0")->uid == TenantUsers().of("t0")->uid);
}

TEST_CASE("tenant users: a tenant keeps the uid its cache directory has, whoever starts first", "[tenant_users]") {
  if (::geteuid() != 0) SUCCEED("needs root to give a directory to another uid");
  if (::geteuid() != 0) return;
  char tmpl[] = "/tmp/xcargo-tenant-users-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  // bob's directory belongs to the uid another tenant's name would hash to first.
  const uid_t evils_first = TenantUsers().of("evil")->uid;
  REQUIRE(std::filesystem::create_directory(dir + "/bob"));
  REQUIRE(::chown((dir + "/bob").c_str(), evils_first, evils_first) == 0);
  REQUIRE(std::filesystem::create_directory(dir + "/root-owned"));  // not in the range: reserves nothing
  TenantUsers users(dir);
  auto evil = users.of("evil");  // first, as a stranger's route could make it
  REQUIRE(evil.ok());
  CHECK(evil->uid != evils_first);
  CHECK(users.of("bob")->uid == evils_first);
  std::filesystem::remove_all(dir);
}
