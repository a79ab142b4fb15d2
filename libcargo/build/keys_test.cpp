// Tests of key files: modes, refusal to overwrite, PEM interoperability with openssl.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "support.h"
#include "xcargo/cargo.h"
#include "xcargo/file.h"
#include "build/keys.h"
#include "xcargo/trust.h"

using namespace xcargo;

static unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
}

TEST_CASE("keygen writes a private key 0600 and a public key 0644", "[keys]") {
  test::ScratchDir dir;
  auto k = generate_key_files(dir / "k", false);
  REQUIRE(k.ok());
  CHECK(mode_of(dir / "k") == 0600);
  CHECK(mode_of(dir / "k.pub") == 0644);
  auto priv = SigningKey::load(dir / "k");
  REQUIRE(priv.ok());
  auto pub = load_public_key(dir / "k.pub");
  REQUIRE(pub.ok());
  CHECK(pub->id == priv->public_key().id);
  CHECK(pub->id == k->public_key().id);
}

TEST_CASE("keygen never overwrites a key unless asked", "[keys]") {
  test::ScratchDir dir;
  REQUIRE(generate_key_files(dir / "k", false).ok());
  auto again = generate_key_files(dir / "k", false);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == Errc::io);
  CHECK_FALSE(again.error().hints().empty());
  CHECK(generate_key_files(dir / "k", true).ok());
}

TEST_CASE("keys are standard PEM that openssl reads", "[keys]") {
  test::ScratchDir dir;
  REQUIRE(generate_key_files(dir / "k", false).ok());
  CHECK(std::system(("openssl pkey -in " + dir / "k" + " -noout").c_str()) == 0);
  CHECK(std::system(("openssl pkey -pubin -in " + dir / "k.pub" + " -noout").c_str()) == 0);
  // And the other way round: a key made by openssl works here.
  REQUIRE(std::system(("openssl genpkey -algorithm ed25519 -out " + dir / "o.key").c_str()) == 0);
  REQUIRE(std::system(("openssl pkey -in " + dir / "o.key" + " -pubout -out " + dir / "o.pub").c_str()) == 0);
  auto priv = SigningKey::load(dir / "o.key");
  auto pub = load_public_key(dir / "o.pub");
  REQUIRE(priv.ok());
  REQUIRE(pub.ok());
  CHECK(priv->public_key().raw == pub->raw);
}

TEST_CASE("wrong key files give key errors with hints", "[keys]") {
  test::ScratchDir dir;
  REQUIRE(generate_key_files(dir / "k", false).ok());
  auto pub_as_priv = SigningKey::load(dir / "k.pub");
  REQUIRE_FALSE(pub_as_priv.ok());
  CHECK(pub_as_priv.error().code() == Errc::key);
  CHECK_FALSE(pub_as_priv.error().hints().empty());
  CHECK(load_public_key(dir / "k").error().code() == Errc::key);
  CHECK(load_public_key(dir / "missing.pub").error().code() == Errc::key);
  REQUIRE(std::system(("openssl genpkey -algorithm rsa -pkeyopt rsa_keygen_bits:1024 -out " + dir / "rsa.key 2>/dev/null").c_str()) == 0);
  CHECK(SigningKey::load(dir / "rsa.key").error().code() == Errc::key);
}

TEST_CASE("a trust directory loads every .pub and nothing else", "[keys][trust]") {
  test::ScratchDir dir;
  std::filesystem::create_directory(dir / "trust");
  REQUIRE(generate_key_files(dir / "trust/a", false).ok());
  REQUIRE(generate_key_files(dir / "trust/b", false).ok());
  auto t = TrustStore::load(dir / "trust");
  REQUIRE(t.ok());
  CHECK(t->size() == 2);
  std::filesystem::create_directory(dir / "empty");
  CHECK(TrustStore::load(dir / "empty").error().code() == Errc::key);
  CHECK(TrustStore::load(dir / "nope").error().code() == Errc::io);
}

TEST_CASE("a revocation list in the trust directory turns keys away, cargos included", "[keys][trust]") {
  test::ScratchDir dir;
  std::filesystem::create_directory(dir / "trust");
  std::filesystem::copy_file(test::vectors_dir() + "/keys/vector-signer.pub", dir / "trust/vector-signer.pub");
  auto cargo = read_file(test::vectors_dir() + "/valid.xcargo", 1 << 20);
  REQUIRE(cargo.ok());
  auto plain = TrustStore::load(dir / "trust");
  REQUIRE(plain.ok());
  const KeyId id = plain->keys().at(0).id;
  REQUIRE(load_cargo(*cargo, &*plain).ok());

  const std::string list = dir / "trust/revoked.txt";
  REQUIRE(write_file(list, as_bytes("# revoked after the leak\n\n  " + to_hex(id) + "  # ci key\n")).ok());
  auto revoked = TrustStore::load(dir / "trust");
  REQUIRE(revoked.ok());
  CHECK(revoked->revoked(id));
  CHECK(revoked->find(id) == nullptr);
  auto refused = load_cargo(*cargo, &*revoked);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == Errc::untrusted);
  CHECK(refused.error().message().find("revoked: " + to_hex(id)) != std::string::npos);

  REQUIRE(write_file(list, as_bytes("0123\n")).ok());
  auto bad = TrustStore::load(dir / "trust");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("revoked.txt: line 1: '0123' is not a key id") != std::string::npos);
}
