// Tests of private key files: encryption with a passphrase, wrong and missing passphrases,
// the permission check, and interoperability of encrypted keys with openssl.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "support.h"
#include "xcargo/file.h"
#include "xcargo/identity.h"
#include "xcargo/passphrase.h"

using namespace xcargo;

namespace {

// A source that reads only the variable `name` and never asks on a terminal: a test that
// prompted would hang when run from one.
PassphraseSource from_env(const std::string& name) { return PassphraseSource{name, false}; }

std::string text_of(const std::string& path) {
  auto b = read_file(path, 1 << 16);
  REQUIRE(b.ok());
  return std::string(b->begin(), b->end());
}

bool mentions(const Error& e, const std::string& what) {
  if (e.message().find(what) != std::string::npos) return true;
  for (const auto& h : e.hints())
    if (h.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("an encrypted key is PKCS#8 with scrypt, 0600, and loads with its passphrase", "[identity]") {
  test::ScratchDir dir;
  ::setenv("XC_TEST_PASS", "correct horse", 1);
  const PassphraseSource pass = from_env("XC_TEST_PASS");
  auto made = generate_key_files(dir / "e.key", false, &pass);
  REQUIRE(made.ok());
  const std::string pem = text_of(dir / "e.key");
  CHECK(pem.rfind("-----BEGIN ENCRYPTED PRIVATE KEY-----", 0) == 0);
  struct stat st {};
  REQUIRE(::stat((dir / "e.key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  auto loaded = SigningKey::load(dir / "e.key", pass);
  REQUIRE(loaded.ok());
  CHECK(loaded->public_key().id == made->public_key().id);
  // openssl reads it with the same passphrase, and says which scheme it is.
  CHECK(std::system(("openssl pkey -in " + dir / "e.key" + " -passin env:XC_TEST_PASS -noout").c_str()) == 0);
  CHECK(std::system(("openssl asn1parse -in " + dir / "e.key" + " | grep -q ':scrypt'").c_str()) == 0);
  CHECK(std::system(("openssl asn1parse -in " + dir / "e.key" + " | grep -q ':aes-256-cbc'").c_str()) == 0);
  ::unsetenv("XC_TEST_PASS");
}

TEST_CASE("a key encrypted by openssl (PBES2, PBKDF2) loads too", "[identity]") {
  test::ScratchDir dir;
  REQUIRE(std::system(("openssl genpkey -algorithm ed25519 -aes-256-cbc -pass pass:from-openssl -out " + dir / "o.key").c_str()) == 0);
  ::chmod((dir / "o.key").c_str(), 0600);
  ::setenv("XC_TEST_PASS", "from-openssl", 1);
  CHECK(SigningKey::load(dir / "o.key", from_env("XC_TEST_PASS")).ok());
  ::unsetenv("XC_TEST_PASS");
}

TEST_CASE("a wrong or missing passphrase is a key error that says so", "[identity]") {
  test::ScratchDir dir;
  ::setenv("XC_TEST_PASS", "right", 1);
  const PassphraseSource pass = from_env("XC_TEST_PASS");
  REQUIRE(generate_key_files(dir / "e.key", false, &pass).ok());

  ::setenv("XC_TEST_PASS", "wrong", 1);
  auto wrong = SigningKey::load(dir / "e.key", pass);
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.error().code() == Errc::key);
  CHECK(wrong.error().message() == dir / "e.key" + ": wrong passphrase (or damaged key)");
  CHECK(mentions(wrong.error(), "XC_TEST_PASS"));
  CHECK_FALSE(mentions(wrong.error(), "wrong\n"));

  ::unsetenv("XC_TEST_PASS");
  auto unset = SigningKey::load(dir / "e.key", pass);
  REQUIRE_FALSE(unset.ok());
  CHECK(unset.error().code() == Errc::key);
  CHECK(mentions(unset.error(), "XC_TEST_PASS is not set"));

  ::setenv("XC_TEST_PASS", "", 1);
  auto empty = SigningKey::load(dir / "e.key", pass);
  REQUIRE_FALSE(empty.ok());
  CHECK(mentions(empty.error(), "is empty"));
  ::unsetenv("XC_TEST_PASS");

  // A damaged key: one base64 character of the ciphertext changed.
  std::string pem = text_of(dir / "e.key");
  const size_t at = pem.find('\n', pem.find('\n') + 1) + 10;
  pem[at] = pem[at] == 'A' ? 'B' : 'A';
  REQUIRE(write_file(dir / "d.key", as_bytes(pem), 0600).ok());
  ::setenv("XC_TEST_PASS", "right", 1);
  auto damaged = SigningKey::load(dir / "d.key", pass);
  REQUIRE_FALSE(damaged.ok());
  CHECK(damaged.error().code() == Errc::key);
  ::unsetenv("XC_TEST_PASS");
}

TEST_CASE("an unencrypted key never asks for a passphrase", "[identity]") {
  test::ScratchDir dir;
  REQUIRE(generate_key_files(dir / "k", false).ok());
  CHECK(text_of(dir / "k").rfind("-----BEGIN PRIVATE KEY-----", 0) == 0);
  ::unsetenv("XC_TEST_PASS");
  CHECK(SigningKey::load(dir / "k", from_env("XC_TEST_PASS")).ok());
}

TEST_CASE("an empty or overlong passphrase is refused for a new key", "[identity]") {
  test::ScratchDir dir;
  ::setenv("XC_TEST_PASS", "", 1);
  const PassphraseSource pass = from_env("XC_TEST_PASS");
  auto k = generate_key_files(dir / "e.key", false, &pass);
  REQUIRE_FALSE(k.ok());
  CHECK(k.error().code() == Errc::key);
  CHECK_FALSE(std::filesystem::exists(dir / "e.key"));
  // Nor one longer than OpenSSL's PEM readers would give back: the key could never be read.
  ::setenv("XC_TEST_PASS", std::string(1001, 'x').c_str(), 1);
  CHECK_FALSE(generate_key_files(dir / "e.key", false, &pass).ok());
  ::setenv("XC_TEST_PASS", std::string(1000, 'x').c_str(), 1);
  REQUIRE(generate_key_files(dir / "e.key", false, &pass).ok());
  CHECK(SigningKey::load(dir / "e.key", pass).ok());
  ::unsetenv("XC_TEST_PASS");
  auto fresh = SigningKey::generate();
  REQUIRE(fresh.ok());
  CHECK_FALSE(fresh->encrypted_private_pem("").ok());
}

TEST_CASE("a private key file that group or others may read or write is refused", "[identity]") {
  test::ScratchDir dir;
  REQUIRE(generate_key_files(dir / "k", false).ok());
  const std::string k = dir / "k";
  for (unsigned mode : {0644u, 0640u, 0604u, 0620u, 0602u, 0660u, 0666u, 0610u}) {
    INFO("mode " << std::oct << mode);
    REQUIRE(::chmod(k.c_str(), mode) == 0);
    auto r = SigningKey::load(k);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code() == Errc::key);
    CHECK(mentions(r.error(), k + ": private key permissions 0"));
    CHECK(mentions(r.error(), "chmod 600 " + k));
  }
  for (unsigned mode : {0600u, 0400u, 0700u}) {
    INFO("mode " << std::oct << mode);
    REQUIRE(::chmod(k.c_str(), mode) == 0);
    CHECK(SigningKey::load(k).ok());
  }
  // Encrypted or not, the mode is checked before any passphrase is asked for.
  ::setenv("XC_TEST_PASS", "p", 1);
  const PassphraseSource pass = from_env("XC_TEST_PASS");
  REQUIRE(generate_key_files(dir / "e.key", false, &pass).ok());
  ::unsetenv("XC_TEST_PASS");
  REQUIRE(::chmod((dir / "e.key").c_str(), 0644) == 0);
  auto open = SigningKey::load(dir / "e.key", pass);
  REQUIRE_FALSE(open.ok());
  CHECK(mentions(open.error(), "permissions 0644"));
  // A public key given as the private one is named for what it is, whatever its mode.
  auto pub = SigningKey::load(dir / "k.pub");
  REQUIRE_FALSE(pub.ok());
  CHECK(mentions(pub.error(), "not a PEM private key"));
}

TEST_CASE("a private key must belong to its user or to root", "[identity]") {
  CHECK(check_private_key_permissions("k", 0100600, 1000, 1000).ok());
  CHECK(check_private_key_permissions("k", 0100600, 0, 1000).ok());
  CHECK(check_private_key_permissions("k", 0100600, 0, 0).ok());
  auto other = check_private_key_permissions("k", 0100600, 1001, 1000);
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code() == Errc::key);
  CHECK(other.error().message() == "k: private key belongs to uid 1001, not to this user (uid 1000)");
  CHECK_FALSE(check_private_key_permissions("k", 0100600, 1000, 0).ok());  // root too: another user could swap it
  if (::geteuid() == 0) {  // a real file of another user's: only root can make one
    test::ScratchDir dir;
    REQUIRE(generate_key_files(dir / "k", false).ok());
    REQUIRE(::chown((dir / "k").c_str(), 4242, 4242) == 0);
    auto theirs = SigningKey::load(dir / "k");
    REQUIRE_FALSE(theirs.ok());
    CHECK(theirs.error().message() == dir / "k" + ": private key belongs to uid 4242, not to this user (uid 0)");
  }
  auto open = check_private_key_permissions("k", 0100644, 1000, 1000);
  REQUIRE_FALSE(open.ok());
  CHECK(open.error().message().find("k: private key permissions 0644 are too open") == 0);
}

TEST_CASE("a passphrase read from the environment can be wiped from it", "[identity]") {
  ::setenv("XC_TEST_PASS", "secret", 1);
  auto p = read_passphrase(from_env("XC_TEST_PASS"), "k", true);
  REQUIRE(p.ok());
  CHECK(*p == "secret");
  forget_passphrase_env(from_env("XC_TEST_PASS"));
  CHECK(std::getenv("XC_TEST_PASS") == nullptr);
  auto gone = read_passphrase(from_env("XC_TEST_PASS"), "k", false);
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code() == Errc::key);
}
