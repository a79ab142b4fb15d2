// Corruption sweep, in process: every single-byte change and every truncation of a small
// signed cargo is refused as a verification failure (never accepted, never a crash).
#include <catch2/catch.hpp>

#include "support.h"

using namespace xcargo;

static Bytes signed_small() {
  auto b = sign_cargo(test::small_cargo(), test::vector_signer());
  REQUIRE(b.ok());
  return *b;
}

TEST_CASE("every single-byte flip of a signed cargo is refused", "[corruption]") {
  const Bytes good = signed_small();
  const TrustStore trust = test::vector_trust();
  REQUIRE(load_cargo(good, &trust).ok());
  size_t refused = 0;
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xFF)}) {
      Bytes b = good;
      b[i] ^= mask;
      auto r = load_cargo(std::move(b), &trust);
      if (r.ok()) FAIL("flip of byte " << i << " with mask " << int(mask) << " was accepted");
      if (!is_verification_failure(r.error().code()))
        FAIL("byte " << i << ": unexpected error kind " << errc_name(r.error().code()));
      ++refused;
    }
  }
  CHECK(refused == good.size() * 3);
}

TEST_CASE("every truncation and extension of a signed cargo is refused", "[corruption]") {
  const Bytes good = signed_small();
  const TrustStore trust = test::vector_trust();
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = load_cargo(Bytes(good.begin(), good.begin() + n), &trust);
    if (r.ok()) FAIL("truncation to " << n << " bytes was accepted");
  }
  Bytes longer = good;
  longer.push_back(0);
  CHECK_FALSE(load_cargo(longer, &trust).ok());
}

TEST_CASE("corruption without a trust store is still caught by the digests", "[corruption]") {
  const Bytes good = test::small_cargo();
  auto c = parse_container(good);
  REQUIRE(c.ok());
  // Every byte of section data is covered by its section's digest.
  for (size_t i = c->sections[0].offset; i < c->content_size; ++i) {
    Bytes b = good;
    b[i] ^= 0x01;
    auto r = load_cargo(std::move(b), nullptr);
    if (r.ok()) FAIL("unsigned cargo: flip of data byte " << i << " was accepted");
  }
}
