// The allow-list of the spec (format-spec/xcargo-format.md, section 5.5) and the code's are
// one list: the table between the spec's allow-list markers is parsed and compared.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support.h"
#include "read/abi.h"

using namespace xcargo;

namespace {

// The first column of each table row between "<!-- allow-list: begin -->" and "... end -->",
// without its backquotes; the header and separator rows are skipped.
std::vector<std::string> spec_allow_list() {
  std::ifstream in(test::source_dir() + "/format-spec/xcargo-format.md");
  REQUIRE(in.good());
  std::vector<std::string> names;
  std::string line;
  bool inside = false, ended = false;
  while (std::getline(in, line)) {
    if (line == "<!-- allow-list: begin -->") inside = true;
    else if (line == "<!-- allow-list: end -->") ended = inside;
    if (!inside || ended || line.rfind("| `", 0) != 0) continue;
    const auto close = line.find('`', 3);
    REQUIRE(close != std::string::npos);
    names.push_back(line.substr(3, close - 3));
  }
  REQUIRE(ended);
  return names;
}

}  // namespace

TEST_CASE("the spec's allow-list table is the code's allow-list, in the same order", "[abi]") {
  const std::vector<std::string> spec = spec_allow_list();
  const std::vector<std::string> code(abi::allowed_imports().begin(), abi::allowed_imports().end());
  for (const auto& name : spec) {
    INFO("in the spec's table: " << name);
    CHECK(abi::is_allowed_import(name));
  }
  for (const auto& name : code) {
    INFO("in libcargo/read/abi.cpp: " << name);
    CHECK(std::find(spec.begin(), spec.end(), name) != spec.end());
  }
  CHECK(spec == code);
}
