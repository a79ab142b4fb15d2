// Runs the cargo-rules vectors (format-spec/vectors/rules.txt): each scenario's trust
// directory is written to a scratch directory and the cargo verified against it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "support.h"
#include "xcargo/file.h"

using namespace xcargo;

namespace {

struct Scenario {
  std::string name, cargo, expect, message;
  std::map<std::string, std::string> files;  // rules file -> its text
};

std::vector<Scenario> read_scenarios() {
  std::ifstream in(test::vectors_dir() + "/rules.txt");
  std::vector<Scenario> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line.starts_with("scenario ")) {
      Scenario s;
      std::string expect;
      std::istringstream(line.substr(9)) >> s.name >> s.cargo >> expect >> s.expect;
      REQUIRE(expect == "expect:");
      out.push_back(s);
      continue;
    }
    REQUIRE(line.starts_with("  "));
    REQUIRE_FALSE(out.empty());
    const size_t colon = line.find(": ");
    REQUIRE(colon != std::string::npos);
    const std::string key = line.substr(2, colon - 2), value = line.substr(colon + 2);
    if (key == "message") out.back().message = value;
    else out.back().files[key] += value + "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("every cargo-rules vector gives its expected outcome", "[rules]") {
  const auto scenarios = read_scenarios();
  REQUIRE(scenarios.size() >= 10);
  for (const auto& s : scenarios) {
    INFO("scenario " << s.name);
    test::ScratchDir dir;
    std::filesystem::copy_file(test::vectors_dir() + "/keys/vector-signer.pub", dir / "vector-signer.pub");
    for (const auto& [file, text] : s.files) REQUIRE(write_file(dir / file, as_bytes(text)).ok());
    auto bytes = read_file(test::vectors_dir() + "/" + s.cargo + ".xcargo", format::kMaxCargoSize);
    REQUIRE(bytes.ok());
    std::string got, message;
    auto trust = TrustStore::load(dir.path());
    if (!trust.ok()) {
      got = errc_name(trust.error().code());
      message = trust.error().message();
    } else {
      auto c = load_cargo(*bytes, &*trust);
      got = c.ok() ? "success" : errc_name(c.error().code());
      message = c.ok() ? "" : c.error().message();
    }
    CHECK(got == s.expect);
    INFO("message: " << message);
    CHECK(message.find(s.message) != std::string::npos);
  }
}
