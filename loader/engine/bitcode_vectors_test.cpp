// Runs the portable-subset vectors (format-spec/vectors/bitcode.txt): each module, made
// bitcode by llvm-as and signed into a bitcode-only cargo, is loaded by an engine that JIT-
// compiles bitcode; it must load, or be refused with the class and text the vector names.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "engine/engine.h"
#include "support.h"
#include "xcargo/file.h"
#include "build/keys.h"
#include "build/writer.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

struct Vector {
  std::string file, expect, message;
};

std::vector<Vector> read_vectors() {
  std::ifstream in(test::vectors_dir() + "/bitcode.txt");
  std::vector<Vector> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line.starts_with("vector ")) {
      Vector v;
      std::string expect;
      std::istringstream(line.substr(7)) >> v.file >> expect >> v.expect;
      REQUIRE(expect == "expect:");
      out.push_back(v);
    } else {
      REQUIRE(line.starts_with("  message: "));
      REQUIRE_FALSE(out.empty());
      out.back().message = line.substr(11);
    }
  }
  return out;
}

Bytes bitcode_cargo(const test::ScratchDir& dir, const std::string& ll) {
  const std::string bc = dir / "module.bc";
  const std::string cmd = "/usr/lib/llvm-16/bin/llvm-as -disable-verify " + test::vectors_dir() + "/bitcode/" + ll + " -o " + bc;
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto raw = read_file(bc, 1 << 20);
  REQUIRE(raw.ok());
  Manifest m;
  m.name = "vector";
  m.version = "1";
  m.entries = {"run"};
  std::vector<std::string> imports;
  if (ll == "valid.ll") imports = {"xc_reply"};
  Payload p{{"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"run", "run"}}, imports}, *raw};
  auto bytes = write_cargo(m, {p});
  REQUIRE(bytes.ok());
  auto signed_bytes = sign_cargo(*bytes, test::vector_signer());
  REQUIRE(signed_bytes.ok());
  return *signed_bytes;
}

}  // namespace

TEST_CASE("bitcode vectors: a loader refuses what is outside the portable subset before compiling", "[engine][vectors]") {
  const auto vectors = read_vectors();
  REQUIRE(vectors.size() >= 12);
  for (const Vector& v : vectors) {
    INFO(v.file);
    test::ScratchDir dir;
    EngineConfig c;
    c.prefer = Prefer::bitcode;
    auto e = Engine::create(c, test::vector_trust());
    REQUIRE(e.ok());
    auto r = (*e)->load(bitcode_cargo(dir, v.file));
    if (v.expect == "success") {
      CHECK(r.ok());
      continue;
    }
    REQUIRE_FALSE(r.ok());
    CHECK(errc_name(r.error().code()) == v.expect);
    INFO(r.error().message());
    CHECK(r.error().message().find(v.message) != std::string::npos);
    CHECK((*e)->stats().jit_compiles == 0);  // refused before any code was generated
  }
}
