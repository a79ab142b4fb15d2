// Runs the format's test vectors (format-spec/vectors/vectors.txt) and checks that the
// generator still produces exactly the committed files.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "support.h"
#include "xcargo/file.h"

using namespace xcargo;

namespace {

struct VectorCase {
  std::string name, expect;
};

std::vector<VectorCase> read_index() {
  std::ifstream in(test::vectors_dir() + "/vectors.txt");
  REQUIRE(in.good());
  std::vector<VectorCase> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    VectorCase v;
    std::string word;
    ls >> v.name >> word >> v.expect;
    REQUIRE(word == "expect:");
    out.push_back(v);
  }
  return out;
}

}  // namespace

TEST_CASE("every test vector gives its expected outcome", "[vectors]") {
  auto cases = read_index();
  REQUIRE(cases.size() >= 20);
  TrustStore trust = test::vector_trust();
  size_t successes = 0;
  for (const auto& v : cases) {
    INFO("vector " << v.name << " expects " << v.expect);
    auto bytes = read_file(test::vectors_dir() + "/" + v.name + ".xcargo", format::kMaxCargoSize);
    REQUIRE(bytes.ok());
    auto cargo = load_cargo(std::move(*bytes), &trust);
    if (v.expect == "success") {
      CHECK(cargo.ok());
      if (!cargo.ok()) FAIL(cargo.error().message());
      ++successes;
    } else {
      REQUIRE_FALSE(cargo.ok());
      CHECK(errc_name(cargo.error().code()) == v.expect);
      CHECK(is_verification_failure(cargo.error().code()));
    }
  }
  CHECK(successes >= 1);
}

TEST_CASE("the generator reproduces the committed vectors byte for byte", "[vectors]") {
  test::ScratchDir dir;
  std::string cmd = std::string(XCARGO_VECTORS_TOOL) + " " + test::vectors_dir() + "/keys " + dir.path() + " > " +
                    (dir / "generator.out");
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto index = read_file(dir / "vectors.txt", 1 << 20);
  auto committed_index = read_file(test::vectors_dir() + "/vectors.txt", 1 << 20);
  REQUIRE(index.ok());
  REQUIRE(committed_index.ok());
  CHECK(*index == *committed_index);
  for (const auto& v : read_index()) {
    INFO("vector " << v.name);
    auto fresh = read_file(dir / (v.name + ".xcargo"), format::kMaxCargoSize);
    auto committed = read_file(test::vectors_dir() + "/" + v.name + ".xcargo", format::kMaxCargoSize);
    REQUIRE(fresh.ok());
    REQUIRE(committed.ok());
    CHECK(*fresh == *committed);
  }
}
