// Tests of the trust directory's cargo rules: the version order, each malformed line, and
// load_cargo refusing revoked and rolled-back cargos with the rule that refused them.
#include <catch2/catch.hpp>

#include <filesystem>

#include "support.h"
#include "xcargo/file.h"
#include "build/keys.h"
#include "xcargo/rules.h"
#include "xcargo/trust.h"

using namespace xcargo;

namespace {

int cmp(std::string_view a, std::string_view b) {
  auto o = compare_versions(a, b);
  REQUIRE(o.has_value());
  return *o < 0 ? -1 : *o > 0 ? 1 : 0;
}

// The error message of a rules file that must not parse.
std::string revoked_error(std::string_view text) {
  CargoRules r;
  auto s = r.parse_revoked_cargos(text, "t/revoked-cargos.txt");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == Errc::key);
  return s.error().message();
}
std::string minimum_error(std::string_view text) {
  CargoRules r;
  auto s = r.parse_minimum_versions(text, "t/minimum-versions.txt");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == Errc::key);
  return s.error().message();
}

Bytes signed_cargo(const std::string& version, std::vector<const SigningKey*> keys) {
  Manifest m = test::small_manifest();
  m.version = version;
  auto b = write_cargo(m, test::small_payloads());
  REQUIRE(b.ok());
  Bytes out = *b;
  for (const SigningKey* k : keys) {
    auto s = sign_cargo(out, *k);
    REQUIRE(s.ok());
    out = *s;
  }
  return out;
}

Digest digest_of(const Bytes& cargo) {
  auto c = parse_container(cargo);
  REQUIRE(c.ok());
  return c->digest;
}

}  // namespace

TEST_CASE("versions are ordered by numeric components, then pre-releases", "[rules]") {
  CHECK(cmp("1.0", "2.0") < 0);
  CHECK(cmp("2.0", "1.0") > 0);
  CHECK(cmp("1.9", "1.10") < 0);  // numbers, not text
  CHECK(cmp("1", "1.0.0") == 0);  // missing components are 0
  CHECK(cmp("1.0.1", "1") > 0);
  CHECK(cmp("2024.01.15", "2024.1.15") == 0);  // leading zeros do not count
  CHECK(cmp("99999999999999999999999.0", "99999999999999999999998.9") > 0);  // any length
  CHECK(cmp("2.0.0-rc.1", "2.0.0") < 0);
  CHECK(cmp("2.0.0-rc.1", "1.9") > 0);
  CHECK(cmp("1.0.0-alpha", "1.0.0-alpha.1") < 0);  // SemVer 2.0.0, 11.4
  CHECK(cmp("1.0.0-alpha.1", "1.0.0-alpha.beta") < 0);
  CHECK(cmp("1.0.0-beta.2", "1.0.0-beta.11") < 0);
  CHECK(cmp("1.0.0-beta.11", "1.0.0-rc.1") < 0);
  CHECK(cmp("1.0.0+build.5", "1.0.0+other") == 0);  // build metadata is ignored
  for (const char* bad : {"", "v1.0", "1..0", "1.0.", ".1", "1.0-", "1.0-rc..1", "1.0+", "latest", "1.0_2", "1.0-r c"})
    CHECK_FALSE(is_ordered_version(bad));
  CHECK_FALSE(compare_versions("beta", "1.0").has_value());
  CHECK_FALSE(is_ordered_version(std::string(65, '1')));  // longer than a manifest version
}

TEST_CASE("revoked-cargos.txt: one digest per line, comments give the reason", "[rules]") {
  const std::string hex(64, 'a');
  CargoRules r;
  REQUIRE(r.parse_revoked_cargos("# revoked cargos\n\nsha256:" + hex + "  # leaked build\r\n" + std::string(63, 'b') + "B\n" +
                                     hex + "\n",  // twice: revoked either way
                                 "t/revoked-cargos.txt")
              .ok());
  REQUIRE(r.revoked().size() == 2);
  CHECK(r.revoked()[0].reason == "leaked build");
  CHECK(r.revoked()[0].where == "t/revoked-cargos.txt:3");
  CHECK(r.revoked()[1].where == "t/revoked-cargos.txt:4");
  Digest d{};
  d.fill(0xaa);
  auto s = r.check_digest(d);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code() == Errc::revoked);
  CHECK(s.error().message() == "cargo " + hex + " is revoked by t/revoked-cargos.txt:3 (leaked build)");
  d.fill(0xab);
  CHECK(r.check_digest(d).ok());
}

TEST_CASE("malformed lines of revoked-cargos.txt are errors naming the line", "[rules]") {
  CHECK(revoked_error("abc\n") == "t/revoked-cargos.txt: line 1: 'abc' is not a cargo digest");
  CHECK(revoked_error("\n" + std::string(64, 'a') + " extra\n").starts_with("t/revoked-cargos.txt: line 2: "));
  CHECK(revoked_error("sha512:" + std::string(64, 'a')).find("line 1: 'sha512:") != std::string::npos);
  CHECK(revoked_error(std::string(64, 'g')).find("is not a cargo digest") != std::string::npos);
  CHECK(revoked_error(std::string(64, 'a') + std::string("\0", 1)).find("line 1: holds a control character") != std::string::npos);
  CHECK(revoked_error("# " + std::string(kMaxRuleLineLength, 'x')).find("line 1: longer than 1024 bytes") != std::string::npos);
  std::string many;
  for (size_t i = 0; i <= kMaxRules; ++i) many += std::string(59, 'a') + (std::to_string(10000 + i)) + "\n";
  CHECK(revoked_error(many).find("line 10001: more than 10000 rules") != std::string::npos);
}

TEST_CASE("minimum-versions.txt: name, signer or '*', version", "[rules]") {
  CargoRules r;
  REQUIRE(r.parse_minimum_versions("# rollback protection\nhello * 2.0\nhello 0123456789abcdef 3.1.0-rc.1 # ci\n"
                                   "\tsgemm\t0123456789ABCDEF\t1\n",
                                   "t/minimum-versions.txt")
              .ok());
  REQUIRE(r.minimums().size() == 3);
  CHECK_FALSE(r.minimums()[0].signer.has_value());
  CHECK(r.minimums()[1].version == "3.1.0-rc.1");
  CHECK(r.minimums()[2].where == "t/minimum-versions.txt:4");

  CHECK(minimum_error("hello 2.0\n") == "t/minimum-versions.txt: line 1: 2 fields, not 3");
  CHECK(minimum_error("Hello * 2.0\n").find("line 1: 'Hello' is not a cargo name") != std::string::npos);
  CHECK(minimum_error("hello 0123 2.0\n").find("'0123' is not a key id or '*'") != std::string::npos);
  CHECK(minimum_error("hello * latest\n").find("'latest' is not an ordered version") != std::string::npos);
  CHECK(minimum_error("hello * 1\nhello * 2\n") == "t/minimum-versions.txt: line 2: hello * already has a minimum version at t/minimum-versions.txt:1");
}

TEST_CASE("a minimum version applies to its name, and to its signer or every signer", "[rules]") {
  const KeyId a{1, 2, 3, 4, 5, 6, 7, 8}, b{8, 7, 6, 5, 4, 3, 2, 1};
  CargoRules r;
  REQUIRE(r.parse_minimum_versions("hello " + to_hex(a) + " 2.0\nsgemm * 1.5\n", "m").ok());
  CHECK(r.check_version("hello", "2.0.0", {a}).ok());
  CHECK(r.check_version("hello", "10", {a}).ok());
  CHECK(r.check_version("hello", "1.0", {b}).ok());  // another signer's line has no minimum
  CHECK(r.check_version("other", "0.1", {a}).ok());
  auto low = r.check_version("hello", "1.0", {a});
  REQUIRE_FALSE(low.ok());
  CHECK(low.error().code() == Errc::revoked);
  CHECK(low.error().message() == "hello 1.0 is below the minimum version 2.0 that m:1 sets for hello signed by " + to_hex(a));
  // Co-signed by a and b: a's rule applies (b's signature does not lift it).
  CHECK_FALSE(r.check_version("hello", "1.0", {b, a}).ok());
  auto any = r.check_version("sgemm", "1.4.9", {b});
  REQUIRE_FALSE(any.ok());
  CHECK(any.error().message().find("m:2 sets for sgemm (every signer)") != std::string::npos);
  auto unordered = r.check_version("sgemm", "nightly", {});
  REQUIRE_FALSE(unordered.ok());
  CHECK(unordered.error().code() == Errc::revoked);
  CHECK(unordered.error().message().find("sgemm version 'nightly' cannot be compared with the minimum version 1.5") != std::string::npos);
  CHECK(r.check_version("hello", "nightly", {b}).ok());  // no rule applies: any version loads
}

TEST_CASE("load_cargo refuses revoked and rolled-back cargos, naming the rule", "[rules][trust]") {
  test::ScratchDir dir;
  std::filesystem::create_directory(dir / "trust");
  std::filesystem::copy_file(test::vectors_dir() + "/keys/vector-signer.pub", dir / "trust/vector-signer.pub");
  const SigningKey signer = test::vector_signer(), other = test::other_signer();
  const Bytes v1 = signed_cargo("1.0", {&signer}), v2 = signed_cargo("2.0", {&signer}),
              v1_cosigned = signed_cargo("1.0", {&other, &signer});
  const std::string id = to_hex(signer.public_key().id);

  auto plain = TrustStore::load(dir / "trust");
  REQUIRE(plain.ok());
  CHECK(plain->rules().size() == 0);
  CHECK(load_cargo(v1, &*plain).ok());

  const std::string trust = dir / "trust";
  REQUIRE(write_file(dir / "trust/minimum-versions.txt", as_bytes("small " + id + " 2.0\n")).ok());
  REQUIRE(write_file(dir / "trust/revoked-cargos.txt", as_bytes("# bad build\n" + to_hex(digest_of(v2)) + "  # miscompiled\n")).ok());
  auto ruled = TrustStore::load(trust);
  REQUIRE(ruled.ok());
  CHECK(ruled->rules().size() == 2);

  auto old = load_cargo(v1, &*ruled);
  REQUIRE_FALSE(old.ok());
  CHECK(old.error().code() == Errc::revoked);
  CHECK(old.error().message().find("small 1.0 is below the minimum version 2.0 that " + trust + "/minimum-versions.txt:1") != std::string::npos);
  CHECK_FALSE(load_cargo(v1_cosigned, &*ruled).ok());  // other-signer is unknown here; the rule is for signer

  auto revoked = load_cargo(v2, &*ruled);
  REQUIRE_FALSE(revoked.ok());
  CHECK(revoked.error().code() == Errc::revoked);
  CHECK(revoked.error().message() == "cargo " + to_hex(digest_of(v2)) + " is revoked by " + trust + "/revoked-cargos.txt:2 (miscompiled)");
  CHECK(load_cargo(signed_cargo("2.0.1", {&signer}), &*ruled).ok());
  CHECK(load_cargo(v1, nullptr).ok());  // inspect: no trust, no rules

  // An unparseable or oversized rules file is an error, never rules silently dropped.
  REQUIRE(write_file(dir / "trust/minimum-versions.txt", as_bytes("small " + id + "\n")).ok());
  auto bad = TrustStore::load(trust);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message() == trust + "/minimum-versions.txt: line 1: 2 fields, not 3");
  CHECK_FALSE(bad.error().hints().empty());
  REQUIRE(write_file(dir / "trust/minimum-versions.txt", Bytes(kMaxRulesFileSize + 1, '#')).ok());
  auto big = TrustStore::load(trust);
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().message().starts_with(trust + "/minimum-versions.txt: "));
}

// Issue 48: a revoked signer's refusal had the hint of an unknown signer ("the trust
// directory must hold the signer's .pub key", which it did).
TEST_CASE("a cargo signed only by revoked keys is refused with the hints of a revocation", "[rules][trust]") {
  const SigningKey signer = test::vector_signer();
  const std::string id = to_hex(signer.public_key().id);
  TrustStore trust;
  trust.add(signer.public_key());
  trust.revoke(signer.public_key().id);

  auto refused = load_cargo(signed_cargo("1.0", {&signer}), &trust);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == Errc::untrusted);
  CHECK(refused.error().message().find("revoked: " + id) != std::string::npos);
  CHECK(is_revoked_signers_message(refused.error().message()));  // what a client sees of a node's refusal
  CHECK(refused.error().hints() == revoked_signer_hints());
  const std::vector<std::string> hints = refused.error().hints();
  REQUIRE(hints.size() == 3);
  CHECK(hints[0].find("revoked.txt") != std::string::npos);  // what revocation is
  CHECK(hints[1].find("deletes its line from revoked.txt") != std::string::npos);  // how an admin undoes it
  CHECK(hints[2].find("signed again by a key that is trusted and not revoked") != std::string::npos);
  for (const std::string& h : hints) CHECK(h.find("must hold the signer's .pub key") == std::string::npos);

  // A signer that is merely unknown keeps its own refusal and hint.
  const TrustStore none;
  auto unknown = load_cargo(signed_cargo("1.0", {&signer}), &none);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().code() == Errc::untrusted);
  CHECK_FALSE(is_revoked_signers_message(unknown.error().message()));
  CHECK(unknown.error().hints().front().find("add the signer's .pub file") != std::string::npos);
}
