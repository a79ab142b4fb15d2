// Known nodes: the file a client pins node keys in, read and appended to.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <fstream>

#include "support.h"
#include "xcargo/identity.h"
#include "auth/known_nodes.h"

using namespace xcargo;
using namespace xcargo::auth;

TEST_CASE("known nodes: a key per address, added once, a different one refused", "[known_nodes]") {
  test::ScratchDir dir;
  const std::string path = dir / "config/known_nodes";
  const SigningKey a = test::fresh_key(), b = test::fresh_key();
  auto none = KnownNodes::load(path);
  REQUIRE(none.ok());
  CHECK(none->find("10.0.0.1:7400") == nullptr);

  REQUIRE(KnownNodes::add(path, "10.0.0.1:7400", a.public_key(), "node-a").ok());
  REQUIRE(KnownNodes::add(path, "10.0.0.1:7400", a.public_key()).ok());  // the same pin again: nothing changes
  REQUIRE(KnownNodes::add(path, "10.0.0.2:7400", b.public_key()).ok());
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((dir / "config").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);

  auto known = KnownNodes::load(path);
  REQUIRE(known.ok());
  REQUIRE(known->all().size() == 2);
  REQUIRE(known->find("10.0.0.1:7400"));
  CHECK(known->find("10.0.0.1:7400")->key.raw == a.public_key().raw);
  CHECK(known->find("10.0.0.1:7400")->name == "node-a");
  CHECK(known->find("10.0.0.2:7400")->line == 2);

  auto changed = KnownNodes::add(path, "10.0.0.1:7400", b.public_key());
  REQUIRE_FALSE(changed.ok());
  CHECK(changed.error().message() == path + ": line 1 pins 10.0.0.1:7400 to another key (" + to_hex(a.public_key().id) + ")");
}

TEST_CASE("known nodes: a line that is not a pin names its file and line", "[known_nodes]") {
  const SigningKey a = test::fresh_key(), b = test::fresh_key();
  std::string word_a, word_b;
  {
    test::ScratchDir dir;
    REQUIRE(KnownNodes::add(dir / "k", "h:1", a.public_key()).ok());
    REQUIRE(KnownNodes::add(dir / "k", "h:2", b.public_key()).ok());
    auto k = KnownNodes::load(dir / "k");
    REQUIRE(k.ok());
    std::ifstream in(dir / "k");
    in >> word_a >> word_a;
    std::string skip;
    in >> skip >> word_b;
  }
  CHECK(KnownNodes::parse("# comment\n\nh:1 " + word_a + " # a node\n", "kn")->find("h:1")->line == 3);
  auto bad = KnownNodes::parse("h:1\n", "kn");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == "kn: line 1: not 'HOST:PORT KEY [NAME]'");
  CHECK(KnownNodes::parse("nohost " + word_a + "\n", "kn").error().message() == "kn: line 1: not 'HOST:PORT KEY [NAME]'");
  CHECK(KnownNodes::parse("h:1 AAAA\n", "kn").error().message() == "kn: line 1: not an Ed25519 public key");
  CHECK(KnownNodes::parse("h:1 " + word_a + "\nh:1 " + word_b + "\n", "kn").error().message() == "kn: line 2: h:1 has another key on line 1");
}
