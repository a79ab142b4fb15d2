// Tests of the manifest schema: emission round trip and one test per invalid form.
#include <catch2/catch.hpp>

#include "support.h"
#include "xcargo/manifest.h"
#include "xcargo/writer.h"

using namespace xcargo;

static std::string valid_yaml() {
  Manifest m = test::small_manifest();
  uint32_t i = 1;
  for (auto& p : test::small_payloads()) {
    p.variant.section = i++;
    p.variant.raw_size = p.raw.size();
    p.variant.sha256 = sha256(p.raw);
    m.variants.push_back(p.variant);
  }
  return emit_manifest(m);
}

static std::string edit(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  REQUIRE(pos != std::string::npos);
  return s.replace(pos, from.size(), to);
}

static Errc error_of(const std::string& yaml) {
  auto m = parse_manifest(yaml);
  REQUIRE_FALSE(m.ok());
  return m.error().code();
}

TEST_CASE("an emitted manifest parses back to the same manifest", "[manifest]") {
  std::string y = valid_yaml();
  auto m = parse_manifest(y);
  REQUIRE(m.ok());
  CHECK(m->name == "small");
  CHECK(m->version == "1.2.3");
  CHECK(m->entries == std::vector<std::string>{"add", "sub"});
  REQUIRE(m->variants.size() == 2);
  CHECK(m->variants[1].name == "x86_64");
  CHECK(m->variants[1].kind == VariantKind::object);
  CHECK(m->variants[1].imports == std::vector<std::string>{"memcpy", "xc_reply"});
  CHECK(emit_manifest(*m) == y);
}

TEST_CASE("versions that look like numbers stay strings", "[manifest]") {
  Manifest m = test::small_manifest();
  m.version = "1.0";
  auto p = test::small_payloads();
  auto b = write_cargo(m, p);
  REQUIRE(b.ok());
  auto c = load_cargo(*b, nullptr);
  REQUIRE(c.ok());
  CHECK(c->manifest().version == "1.0");
}

TEST_CASE("unknown keys are ignored for forward compatibility", "[manifest]") {
  CHECK(parse_manifest(edit(valid_yaml(), "name: small\n", "name: small\nlicense: MIT\n")).ok());
}

TEST_CASE("invalid manifests are refused with a manifest error", "[manifest]") {
  std::string y = valid_yaml();
  CHECK(error_of("") == Errc::manifest);
  CHECK(error_of("- a\n- b\n") == Errc::manifest);
  CHECK(error_of("{{{") == Errc::manifest);
  CHECK(error_of(edit(y, "name: small\n", "")) == Errc::manifest);
  CHECK(error_of(edit(y, "name: small", "name: Small")) == Errc::manifest);
  CHECK(error_of(edit(y, "name: small\n", "name: small\nname: small\n")) == Errc::manifest);
  CHECK(error_of(edit(y, "entries: [add, sub]", "entries: [add, add]")) == Errc::manifest);
  CHECK(error_of(edit(y, "entries: [add, sub]", "entries: [add, 9sub]")) == Errc::manifest);
  CHECK(error_of(edit(y, "entries: [add, sub]", "entries: []")) == Errc::manifest);
  CHECK(error_of(edit(y, "kind: object", "kind: script")) == Errc::manifest);
  CHECK(error_of(edit(y, "section: 2", "section: -2")) == Errc::manifest);
  CHECK(error_of(edit(y, "section: 2", "section: 1")) == Errc::manifest);
  CHECK(error_of(edit(y, "section: 2", "section: 0")) == Errc::manifest);
  CHECK(error_of(edit(y, "raw_size: 200", "raw_size: 2e2")) == Errc::manifest);
  CHECK(error_of(edit(y, "sha256: ", "sha256: zz")) == Errc::manifest);
  CHECK(error_of(edit(y, "name: \"x86_64\"", "name: \"bitcode\"")) == Errc::manifest);
  CHECK(error_of(edit(y, "imports: [memcpy, xc_reply]", "imports: [memcpy, \"a b\"]")) == Errc::manifest);
  CHECK(error_of(edit(y, "    entries:\n      add: add\n      sub: sub\n    imports: [memcpy",
                      "    entries:\n      add: add\n    imports: [memcpy")) == Errc::manifest);
}

TEST_CASE("an unknown manifest format number is unsupported", "[manifest]") {
  CHECK(error_of(edit(valid_yaml(), "format: 1", "format: 2")) == Errc::unsupported);
}

TEST_CASE("hostile YAML is refused without crashing", "[manifest]") {
  CHECK(error_of(std::string(5000, '[')) == Errc::manifest);
  CHECK(error_of("a: &a [*a, *a]\n") == Errc::manifest);
  CHECK(error_of(std::string(300 * 1024, 'x')) == Errc::limit);
}
