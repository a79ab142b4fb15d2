// Tests of tenancy: which tenant a route goes to, and which keys a tenant's workers accept.
#include "tenancy.h"

#include <catch2/catch.hpp>

#include "support.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {
auth::AuthorizedKey key(const SigningKey& k, uint16_t verbs, const std::string& tenant, const std::string& name) {
  return auth::AuthorizedKey{k.public_key(), verbs, name, tenant};
}
}  // namespace

TEST_CASE("tenancy: groups, keys alone, and node keys acting for a tenant", "[tenancy]") {
  const SigningKey alice = test::fresh_key(), bob = test::fresh_key(), carol = test::fresh_key(), node = test::fresh_key(),
                   stranger = test::fresh_key();
  auth::AuthorizedKeys keys;
  keys.add(key(alice, auth::kAllClientVerbs, "lab", "alice"));
  keys.add(key(bob, auth::kRun, "lab", "bob"));
  keys.add(key(carol, auth::kAllClientVerbs, "", "carol"));
  keys.add(key(node, auth::kForward, "", "node-1"));
  auto t = Tenancy::per_key(keys);
  REQUIRE(t.ok());
  CHECK_FALSE(t->single_tenant());
  const std::string carols = "key-" + to_hex(carol.public_key().id);
  CHECK(t->names() == std::vector<std::string>{"lab", carols});
  CHECK(*t->route(alice.public_key().raw, "") == "lab");
  CHECK(*t->route(bob.public_key().raw, "") == "lab");
  CHECK(*t->route(carol.public_key().raw, "") == carols);
  CHECK(*t->route(node.public_key().raw, "lab") == "lab");
  CHECK(*t->route(node.public_key().raw, carols) == carols);
  // What is refused: a stranger, a client naming a tenant (its own or another), a node
  // naming none or one that is not here.
  CHECK(t->route(stranger.public_key().raw, "").error().message() == "the route's key is not among this loader's clients");
  CHECK(t->route(alice.public_key().raw, carols).error().message() == "a client key's route names a tenant");
  CHECK(t->route(alice.public_key().raw, "lab").error().code() == Errc::unauthenticated);
  CHECK(t->route(node.public_key().raw, "").error().message() == "a node's route names no tenant");
  CHECK(t->route(node.public_key().raw, "elsewhere").error().message() == "no tenant 'elsewhere' here");
  // A tenant's workers accept its own keys and the node keys, nobody else's.
  const auth::AuthorizedKeys lab = t->keys_of("lab");
  CHECK(lab.size() == 3);
  CHECK(lab.find(alice.public_key().raw));
  CHECK(lab.find(bob.public_key().raw)->verbs == auth::kRun);
  CHECK(lab.find(node.public_key().raw));
  CHECK_FALSE(lab.find(carol.public_key().raw));
  const auth::AuthorizedKeys own = t->keys_of(carols);
  CHECK(own.size() == 2);
  CHECK(own.find(carol.public_key().raw));
  CHECK_FALSE(own.find(alice.public_key().raw));
}

TEST_CASE("tenancy: one tenant of every key, where the admin says so", "[tenancy]") {
  const SigningKey alice = test::fresh_key(), stranger = test::fresh_key();
  auth::AuthorizedKeys keys;
  keys.add(key(alice, auth::kAllClientVerbs, "lab", "alice"));
  const Tenancy t = Tenancy::single(keys);
  CHECK(t.single_tenant());
  CHECK(t.names() == std::vector<std::string>{"all"});
  CHECK(*t.route(alice.public_key().raw, "") == "all");
  CHECK(*t.route(stranger.public_key().raw, "anything") == "all");  // the worker authenticates
  CHECK(t.keys_of("all").size() == 1);
}

TEST_CASE("tenancy: a group may not take a name kept for keys alone", "[tenancy]") {
  auth::AuthorizedKeys keys;
  keys.add(key(test::fresh_key(), auth::kAllClientVerbs, "key-0000000000000000", "mallory"));
  auto t = Tenancy::per_key(keys);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().message() == "clients: key mallory: tenant=key-0000000000000000 is a name kept for keys alone");
}
