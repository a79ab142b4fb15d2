// Tests of the container parser: one test per malformed structure, and the digest's scope.
#include <catch2/catch.hpp>

#include "common/le.h"
#include "read/dictionary.h"
#include "support.h"
#include "xcargo/cargo.h"

using namespace xcargo;
namespace fmt = xcargo::format;

static Errc parse_error(const Bytes& b, const Limits& limits = {}) {
  auto c = parse_container(b, limits);
  REQUIRE_FALSE(c.ok());
  return c.error().code();
}

TEST_CASE("a written cargo parses with its sections in order", "[container]") {
  Bytes b = test::small_cargo();
  auto c = parse_container(b);
  REQUIRE(c.ok());
  CHECK(c->version_major == 1);
  REQUIRE(c->sections.size() == 3);
  CHECK(c->sections[0].kind == uint16_t(fmt::SectionKind::manifest));
  CHECK(c->sections[1].kind == uint16_t(fmt::SectionKind::bitcode));
  CHECK(c->sections[2].kind == uint16_t(fmt::SectionKind::elf_object));
  CHECK(c->signatures.empty());
  CHECK(c->digest == sha256(ByteView(b).first(fmt::kHeaderSize + 3 * fmt::kSectionEntrySize)));
}

TEST_CASE("signing does not change the cargo digest", "[container]") {
  Bytes b = test::small_cargo();
  auto before = parse_container(b);
  auto signed_b = sign_cargo(b, test::vector_signer());
  REQUIRE(signed_b.ok());
  auto after = parse_container(*signed_b);
  REQUIRE(after.ok());
  CHECK(before->digest == after->digest);
  CHECK(after->signatures.size() == 1);
}

TEST_CASE("empty and short inputs are truncated, not crashes", "[container]") {
  CHECK(parse_error({}) == Errc::malformed);
  Bytes b = test::small_cargo();
  for (size_t n : {size_t(1), size_t(8), size_t(63)}) CHECK(parse_error(Bytes(b.begin(), b.begin() + n)) == Errc::malformed);
}

TEST_CASE("header fields are checked", "[container]") {
  Bytes good = test::small_cargo();
  auto with = [&](auto edit) {
    Bytes b = good;
    edit(b.data());
    return parse_error(b);
  };
  CHECK(with([](uint8_t* h) { h[1] = 'Y'; }) == Errc::malformed);
  CHECK(with([](uint8_t* h) { le::store16(h + fmt::kHdrVersionMajor, 0); }) == Errc::unsupported);
  CHECK(with([](uint8_t* h) { le::store16(h + fmt::kHdrHeaderSize, 80); }) == Errc::malformed);
  CHECK(with([](uint8_t* h) { le::store16(h + fmt::kHdrEntrySize, 32); }) == Errc::malformed);
  CHECK(with([](uint8_t* h) { le::store32(h + fmt::kHdrSectionCount, 0); }) == Errc::malformed);
  CHECK(with([](uint8_t* h) { le::store32(h + fmt::kHdrSectionCount, 0xFFFFFFFF); }) == Errc::limit);
  CHECK(with([](uint8_t* h) { le::store32(h + fmt::kHdrFlags, 1); }) == Errc::malformed);
  CHECK(with([](uint8_t* h) { h[63] = 1; }) == Errc::malformed);
  CHECK(with([](uint8_t* h) { le::store64(h + fmt::kHdrContentSize, 100); }) == Errc::malformed);
  CHECK(with([](uint8_t* h) { le::store64(h + fmt::kHdrContentSize, ~0ull); }) == Errc::malformed);
}

TEST_CASE("a newer minor version is accepted", "[container]") {
  Bytes b = test::small_cargo();
  le::store16(b.data() + fmt::kHdrVersionMinor, 7);
  auto c = parse_container(b);
  REQUIRE(c.ok());
  CHECK(c->version_minor == 7);
}

TEST_CASE("section table entries are checked", "[container]") {
  Bytes good = test::small_cargo();
  auto with = [&](size_t i, auto edit) {
    Bytes b = good;
    edit(b.data() + fmt::kHeaderSize + i * fmt::kSectionEntrySize);
    return parse_error(b);
  };
  CHECK(with(0, [](uint8_t* e) { le::store16(e, uint16_t(fmt::SectionKind::bitcode)); }) == Errc::malformed);
  CHECK(with(1, [](uint8_t* e) { le::store16(e, uint16_t(fmt::SectionKind::manifest)); }) == Errc::malformed);
  CHECK(with(1, [](uint8_t* e) { le::store16(e, 0x0077); }) == Errc::unsupported);
  CHECK(with(1, [](uint8_t* e) { e[fmt::kSecCompression] = 3; }) == Errc::unsupported);
  CHECK(with(1, [](uint8_t* e) { e[fmt::kSecReserved1] = 1; }) == Errc::malformed);
  CHECK(with(1, [](uint8_t* e) { le::store64(e + fmt::kSecOffset, le::load64(e + fmt::kSecOffset) - 1); }) == Errc::malformed);
  CHECK(with(1, [](uint8_t* e) { le::store64(e + fmt::kSecStoredSize, 0); }) == Errc::malformed);
  CHECK(with(2, [](uint8_t* e) { le::store64(e + fmt::kSecStoredSize, 1ull << 62); }) == Errc::malformed);
  CHECK(with(1, [](uint8_t* e) { le::store64(e + fmt::kSecRawSize, fmt::kMaxSectionRawSize + 1); }) == Errc::limit);
  CHECK(with(0, [](uint8_t* e) { le::store64(e + fmt::kSecRawSize, fmt::kMaxManifestSize + 1); }) == Errc::limit);
}

TEST_CASE("a caller's lower limits apply before anything is allocated", "[container]") {
  Bytes b = test::small_cargo();
  Limits small;
  small.max_section_raw_size = 100;
  CHECK(parse_error(b, small) == Errc::limit);
  Limits tiny_file;
  tiny_file.max_cargo_size = 64;
  CHECK(parse_error(b, tiny_file) == Errc::limit);
}

TEST_CASE("the signature block must account for every byte", "[container]") {
  Bytes b = test::small_cargo();
  auto c = parse_container(b);
  REQUIRE(c.ok());
  Bytes no_block(b.begin(), b.begin() + c->content_size);
  CHECK(parse_error(no_block) == Errc::malformed);
  Bytes bad_magic = b;
  bad_magic[c->content_size] = 'Y';
  CHECK(parse_error(bad_magic) == Errc::malformed);
  Bytes extra = b;
  extra.push_back(0);
  CHECK(parse_error(extra) == Errc::malformed);
  Bytes claims_one = b;
  le::store32(claims_one.data() + c->content_size + 4, 1);
  CHECK(parse_error(claims_one) == Errc::malformed);
}

TEST_CASE("two signatures by the same key are refused", "[container]") {
  auto once = sign_cargo(test::small_cargo(), test::vector_signer());
  REQUIRE(once.ok());
  auto c = parse_container(*once);
  REQUIRE(c.ok());
  Bytes twice = *once;
  twice.insert(twice.end(), once->end() - fmt::kSigEntrySize, once->end());
  le::store32(twice.data() + c->content_size + 4, 2);
  CHECK(parse_error(twice) == Errc::malformed);
}

TEST_CASE("the embedded dictionary is dictionary 1 of the spec", "[container]") {
  CHECK(dictionary1().size() == fmt::kDictionary1Size);
  CHECK(to_hex(sha256(dictionary1())) == fmt::kDictionary1Sha256);
}

TEST_CASE("sections compress with the dictionary by default, plain zstd on request", "[container]") {
  auto with_dict = parse_container(test::small_cargo());
  REQUIRE(with_dict.ok());
  for (const auto& s : with_dict->sections) CHECK(s.compression == fmt::Compression::zstd_dict1);
  auto plain_bytes = write_cargo(test::small_manifest(), test::small_payloads(), {19, false});
  REQUIRE(plain_bytes.ok());
  auto plain = parse_container(*plain_bytes);
  REQUIRE(plain.ok());
  for (const auto& s : plain->sections) CHECK(s.compression == fmt::Compression::zstd);
  CHECK(load_cargo(*plain_bytes, nullptr).ok());
}
