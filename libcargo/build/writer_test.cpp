// Tests of writing and signing: round trips, reproducibility, signature policy.
#include <catch2/catch.hpp>

#include "support.h"
#include "xcargo/cargo.h"
#include "build/keys.h"
#include "build/writer.h"

using namespace xcargo;

TEST_CASE("write then load gives back the manifest and payloads", "[writer]") {
  for (int level : {0, 1, 19}) {
    Bytes b = test::small_cargo(level);
    auto c = load_cargo(b, nullptr);
    REQUIRE(c.ok());
    CHECK(c->manifest().name == "small");
    auto payloads = test::small_payloads();
    REQUIRE(c->manifest().variants.size() == payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
      const Variant& v = c->manifest().variants[i];
      CHECK(v.section == i + 1);
      CHECK(v.sha256 == sha256(payloads[i].raw));
      auto raw = c->variant_payload(v);
      REQUIRE(raw.ok());
      CHECK(*raw == payloads[i].raw);
    }
  }
}

TEST_CASE("the same input gives byte-identical cargos", "[writer]") {
  CHECK(test::small_cargo() == test::small_cargo());
  auto a = sign_cargo(test::small_cargo(), test::vector_signer());
  auto b = sign_cargo(test::small_cargo(), test::vector_signer());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
}

TEST_CASE("compression shrinks redundant payloads", "[writer]") {
  CHECK(test::small_cargo(19).size() < test::small_cargo(0).size());
}

TEST_CASE("verification needs a signature by a trusted key", "[writer][verify]") {
  TrustStore trust = test::vector_trust();
  Bytes unsigned_b = test::small_cargo();
  auto r = load_cargo(unsigned_b, &trust);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::not_signed);

  auto by_other = sign_cargo(unsigned_b, test::other_signer());
  REQUIRE(by_other.ok());
  r = load_cargo(*by_other, &trust);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::untrusted);

  auto cosigned = sign_cargo(*by_other, test::vector_signer());
  REQUIRE(cosigned.ok());
  r = load_cargo(*cosigned, &trust);
  REQUIRE(r.ok());
  REQUIRE(r->signers().size() == 2);
  CHECK_FALSE(r->signers()[0].trusted);
  CHECK(r->signers()[1].trusted);
}

TEST_CASE("a bad signature by a trusted key fails even next to a good one", "[writer][verify]") {
  TrustStore trust = test::vector_trust();
  trust.add(test::other_signer().public_key());
  auto a = sign_cargo(test::small_cargo(), test::vector_signer());
  REQUIRE(a.ok());
  auto b = sign_cargo(*a, test::other_signer());
  REQUIRE(b.ok());
  Bytes bad = *b;
  bad.at(bad.size() - 10) ^= 1;  // inside the second signature
  auto r = load_cargo(bad, &trust);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::bad_signature);
}

TEST_CASE("signing twice with one key changes nothing", "[writer][sign]") {
  auto once = sign_cargo(test::small_cargo(), test::vector_signer());
  REQUIRE(once.ok());
  bool already = false;
  auto twice = sign_cargo(*once, test::vector_signer(), &already);
  REQUIRE(twice.ok());
  CHECK(already);
  CHECK(*twice == *once);
}

TEST_CASE("an invalid cargo is never signed", "[writer][sign]") {
  Bytes b = test::small_cargo();
  b[b.size() - 20] ^= 0xFF;  // inside the last section's data
  auto r = sign_cargo(b, test::vector_signer());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::digest_mismatch);
}

TEST_CASE("the writer refuses what readers would refuse", "[writer]") {
  Manifest m = test::small_manifest();
  m.name = "Bad Name";
  auto r = write_cargo(m, test::small_payloads());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::manifest);
  CHECK_FALSE(write_cargo(test::small_manifest(), {}).ok());
}
