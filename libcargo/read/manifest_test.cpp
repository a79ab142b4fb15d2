// Tests of the manifest schema: emission round trip and one test per invalid form.
#include <catch2/catch.hpp>

#include "support.h"
#include "xcargo/manifest.h"
#include "build/writer.h"

using namespace xcargo;

static std::string valid_yaml() { return test::small_manifest_text(); }

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

TEST_CASE("fp: \"strict\" round-trips; any other value is a manifest error", "[manifest]") {
  // Canonical order: 'fp' between 'format' and 'name'.
  auto m = parse_manifest(edit(valid_yaml(), "name: \"small\"\n", "fp: \"strict\"\nname: \"small\"\n"));
  REQUIRE(m.ok());
  CHECK(m->fp == "strict");
  CHECK(parse_manifest(emit_manifest(*m)).ok());
  CHECK(emit_manifest(*m).find("fp: \"strict\"\n") != std::string::npos);
  CHECK(parse_manifest(valid_yaml())->fp.empty());
  CHECK(error_of(edit(valid_yaml(), "name: \"small\"\n", "fp: \"fast\"\nname: \"small\"\n")) == Errc::manifest);
  CHECK(error_of(edit(valid_yaml(), "name: \"small\"\n", "fp: 1\nname: \"small\"\n")) == Errc::manifest);
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
  // In canonical form: keys sorted, so 'license' goes between 'format' and 'name'.
  CHECK(parse_manifest(edit(valid_yaml(), "name: \"small\"\n", "license: \"MIT\"\nname: \"small\"\n")).ok());
  CHECK(parse_manifest(edit(valid_yaml(), "name: \"small\"\n", "license:\n  spdx: \"MIT\"\n  x:\n    - 1\n    - {}\nname: \"small\"\n")).ok());
  CHECK(error_of(edit(valid_yaml(), "name: \"small\"\n", "name: \"small\"\nlicense: \"MIT\"\n")) == Errc::manifest);
}

TEST_CASE("invalid manifests are refused with a manifest error", "[manifest]") {
  std::string y = valid_yaml();
  CHECK(error_of("") == Errc::manifest);
  CHECK(error_of("- a\n- b\n") == Errc::manifest);
  CHECK(error_of("- \"a\"\n- \"b\"\n") == Errc::manifest);
  CHECK(error_of("{{{") == Errc::manifest);
  CHECK(error_of(edit(y, "name: \"small\"\n", "")) == Errc::manifest);
  CHECK(error_of(edit(y, "name: \"small\"", "name: \"Small\"")) == Errc::manifest);
  CHECK(error_of(edit(y, "name: \"small\"\n", "name: \"small\"\nname: \"small\"\n")) == Errc::manifest);
  CHECK(error_of(edit(y, "entries:\n  - \"add\"\n  - \"sub\"", "entries:\n  - \"add\"\n  - \"add\"")) == Errc::manifest);
  CHECK(error_of(edit(y, "entries:\n  - \"add\"\n  - \"sub\"", "entries:\n  - \"add\"\n  - \"9sub\"")) == Errc::manifest);
  CHECK(error_of(edit(y, "entries:\n  - \"add\"\n  - \"sub\"", "entries: []")) == Errc::manifest);
  CHECK(error_of(edit(y, "kind: \"object\"", "kind: \"script\"")) == Errc::manifest);
  CHECK(error_of(edit(y, "section: 2", "section: -2")) == Errc::manifest);
  CHECK(error_of(edit(y, "section: 2", "section: 1")) == Errc::manifest);
  CHECK(error_of(edit(y, "section: 2", "section: 0")) == Errc::manifest);
  CHECK(error_of(edit(y, "section: 2", "section: 18446744073709551616")) == Errc::manifest);
  const std::string raw_size = "raw_size: " + std::to_string(test::small_payloads()[1].raw.size());
  CHECK(error_of(edit(y, raw_size, "raw_size: 2e2")) == Errc::manifest);
  CHECK(error_of(edit(y, raw_size, "raw_size: \"2\"")) == Errc::manifest);
  CHECK(error_of(edit(y, "sha256: \"", "sha256: \"zz")) == Errc::manifest);
  CHECK(error_of(edit(y, "name: \"x86_64\"", "name: \"bitcode\"")) == Errc::manifest);
  CHECK(error_of(edit(y, "      - \"memcpy\"\n", "      - \"a b\"\n")) == Errc::manifest);
  CHECK(error_of(edit(y, "    entries:\n      add: \"add\"\n      sub: \"sub\"\n    imports:\n      - \"memcpy\"",
                      "    entries:\n      add: \"add\"\n    imports:\n      - \"memcpy\"")) == Errc::manifest);
}

// Section 5.3: one text per manifest. Each of these is YAML 1.2 that yaml-cpp reads as the
// same manifest (or one that a core-schema reader types differently), and each is refused.
TEST_CASE("a manifest not in canonical form is refused, naming the line", "[manifest]") {
  const std::string y = valid_yaml();
  REQUIRE(parse_manifest(y).ok());
  auto refused = [&](const std::string& text) {
    auto m = parse_manifest(text);
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().code() == Errc::manifest);
    return m.error().message();
  };
  std::string crlf;
  for (char c : y) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  CHECK(refused("\xEF\xBB\xBF" + y).find("byte 0xef") != std::string::npos);
  CHECK(refused(crlf).find("byte 0x0d") != std::string::npos);
  CHECK(refused(edit(y, "format: 1", "format: 1 # the format")).find("line 4 is 'format: 1 # the format'") != std::string::npos);
  CHECK(refused(y + "\n").find("canonical") != std::string::npos);
  CHECK(refused(y.substr(0, y.size() - 1)).find("canonical") != std::string::npos);
  CHECK(refused("---\n" + y).find("canonical") != std::string::npos);
  CHECK(refused(edit(y, "name: \"small\"", "name: small")).find("line 5 is 'name: small'") != std::string::npos);
  CHECK(refused(edit(y, "name: \"small\"", "name: 'small'")).find("canonical") != std::string::npos);
  CHECK(refused(edit(y, "name: \"small\"", "name: !!str \"small\"")).find("canonical") != std::string::npos);
  CHECK(refused(edit(y, "format: 1", "format: 01")).find("canonical") != std::string::npos);
  CHECK(refused(edit(y, "format: 1", "format: \"1\"")).find("'format' must be an unsigned decimal number") != std::string::npos);
  CHECK(refused(edit(y, "entries:\n  - \"add\"\n  - \"sub\"", "entries: [\"add\", \"sub\"]")).find("canonical") != std::string::npos);
  CHECK(refused(edit(y, "entries:\n  - \"add\"\n  - \"sub\"", "entries:\n- \"add\"\n- \"sub\"")).find("canonical") != std::string::npos);
  CHECK(refused(edit(y, "entries:\n  - \"add\"", "entries:\n  - &a \"add\"")).find("canonical") != std::string::npos);
}

TEST_CASE("canonical keys: plain when no YAML schema could type them, quoted otherwise", "[manifest]") {
  Manifest m = test::small_manifest();
  m.entries = {"True", "null", "n", "add"};
  m.toolchain = {{"clang", "14.0.6"}, {"Opt", "x \"y\" \\z"}};
  uint32_t i = 1;
  for (auto& p : test::small_payloads()) {
    p.variant.section = i++;
    p.variant.raw_size = p.raw.size();
    p.variant.sha256 = sha256(p.raw);
    p.variant.entries = {{"True", "True"}, {"null", "null"}, {"n", "n"}, {"add", "add"}};
    m.variants.push_back(p.variant);
  }
  const std::string y = emit_manifest(m);
  CHECK(y.find("\n  - \"True\"\n") != std::string::npos);
  CHECK(y.find("\n      \"True\": \"True\"\n") != std::string::npos);
  CHECK(y.find("\n      \"null\": \"null\"\n") != std::string::npos);
  CHECK(y.find("\n      \"n\": \"n\"\n") != std::string::npos);
  CHECK(y.find("\n      add: \"add\"\n") != std::string::npos);
  CHECK(y.find("\n  \"Opt\": \"x \\\"y\\\" \\\\z\"\n") != std::string::npos);
  CHECK(y.find("\n  clang: \"14.0.6\"\n") != std::string::npos);
  auto back = parse_manifest(y);
  REQUIRE(back.ok());
  CHECK(back->entries == m.entries);
  CHECK(back->toolchain[0].second == "x \"y\" \\z");
  CHECK(emit_manifest(*back) == y);
}

TEST_CASE("an unknown manifest format number is unsupported", "[manifest]") {
  CHECK(error_of(edit(valid_yaml(), "format: 1", "format: 2")) == Errc::unsupported);
}

TEST_CASE("hostile YAML is refused without crashing", "[manifest]") {
  CHECK(error_of(std::string(5000, '[')) == Errc::manifest);
  CHECK(error_of("a: &a [*a, *a]\n") == Errc::manifest);
  CHECK(error_of(std::string(300 * 1024, 'x')) == Errc::limit);
}
