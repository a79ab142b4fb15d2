// Tests of the canonical manifest reader: it accepts exactly what yaml-cpp's path accepts in
// canonical form, with the same tree, and refuses (leaving the reason to yaml-cpp) the rest.
#include <catch2/catch.hpp>

#include <random>

#include "read/canonical.h"
#include "support.h"
#include "xcargo/manifest.h"
#include "build/writer.h"

using namespace xcargo;
using canon::Node;

namespace {

bool same(const Node& a, const Node& b) {
  if (a.type != b.type) return false;
  switch (a.type) {
    case Node::Type::integer: return a.integer == b.integer;
    case Node::Type::string: return a.string == b.string;
    case Node::Type::mapping:
      if (a.mapping.size() != b.mapping.size()) return false;
      for (size_t i = 0; i < a.mapping.size(); ++i)
        if (a.mapping[i].first != b.mapping[i].first || !same(a.mapping[i].second, b.mapping[i].second)) return false;
      return true;
    case Node::Type::sequence:
      if (a.sequence.size() != b.sequence.size()) return false;
      for (size_t i = 0; i < a.sequence.size(); ++i)
        if (!same(a.sequence[i], b.sequence[i])) return false;
      return true;
  }
  return false;
}

// The contract: what read_canonical accepts, read_yaml accepts with the same tree.
// Returns whether read_canonical accepted.
bool agree(const std::string& text) {
  auto fast = canon::read_canonical(text);
  if (!fast) return false;
  auto slow = canon::read_yaml(text);
  INFO(text);
  REQUIRE(slow.ok());
  CHECK(same(*fast, *slow));
  return true;
}

// Canonical text nested `depth` mappings deep below the top level's.
std::string nested(int depth) {
  std::string t;
  for (int i = 0; i < depth; ++i) t += std::string(2 * i, ' ') + "k:\n";
  return t + std::string(2 * depth, ' ') + "v: 1\n";
}

}  // namespace

TEST_CASE("the canonical reader reads what the writer emits, as yaml-cpp does", "[manifest][canonical]") {
  const std::string y = test::small_manifest_text();
  CHECK(agree(y));
  CHECK(agree("a: {}\nb: []\nc: 0\nd: \"\"\n"));
  CHECK(agree("\"A\": \"quote \\\" and backslash \\\\\"\nlist:\n  - {}\n  - 18446744073709551615\n  - \"s\"\n"
              "  - a: 1\n    b:\n      - 2\n"));
  CHECK(agree(nested(7)));  // the top level and 8 nested: the deepest tree read_yaml takes
}

TEST_CASE("the canonical reader refuses what has no canonical form", "[manifest][canonical]") {
  const char* refused[] = {
      "",                                  // no top-level mapping
      "a: 1",                              // no final LF
      "a: 1\na: 1\n",                      // a key twice
      "b: 1\na: 2\n",                      // keys out of order
      "a: 01\n",                           // a leading zero
      "a: 18446744073709551616\n",         // over 2^64-1
      "a: -1\n",                           // a sign
      "a: 'x'\n",                          // single quotes
      "a: x\n",                            // a plain string
      "a:  1\n",                           // two spaces
      "a: \"\\n\"\n",                      // an escape other than \" and \\ .
      "\"a\": 1\n",                        // a plain key quoted
      "true: 1\n",                         // a key YAML types as a boolean, unquoted
      "a: [1]\n",                          // a flow sequence
      "a:\n- 1\n",                         // an item not indented
      "a:\n  -\n    - 1\n",                // a list in a list
      "a:\n  - \n",                        // an empty item
      "- 1\n",                             // a top-level list
      "a: 1\n\n",                          // an empty line
      "a: 1 \n",                           // a space at a line's end
      "a:\n   b: 1\n",                     // three spaces
      "---\na: 1\n",                       // a document marker
      "a: 1 # note\n",                     // a comment
  };
  for (const char* text : refused) {
    INFO(text);
    CHECK_FALSE(canon::read_canonical(text));
    CHECK_FALSE(canon::parse(text).ok());
  }
  CHECK_FALSE(canon::read_canonical(nested(8)));  // one level deeper than read_yaml takes
  CHECK_FALSE(canon::read_yaml(nested(8)).ok());
}

TEST_CASE("mutated manifests: whatever the canonical reader accepts, yaml-cpp accepts the same way", "[manifest][canonical]") {
  const std::string y = test::small_manifest_text();
  const std::string alphabet = " \n\"\\:-{}[]0123456789abz_A#'";
  std::mt19937 rng(17);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string t = y;
    const int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits && !t.empty(); ++e) {
      const size_t at = rng() % t.size();
      switch (rng() % 4) {
        case 0: t[at] = alphabet[rng() % alphabet.size()]; break;           // replace a byte
        case 1: t.erase(at, 1); break;                                       // drop one
        case 2: t.insert(at, 1, alphabet[rng() % alphabet.size()]); break;   // add one
        default: {                                                           // swap two lines
          const size_t a = t.rfind('\n', at), b = t.find('\n', at);
          if (a == std::string::npos || b == std::string::npos) break;
          const size_t c = t.find('\n', b + 1);
          if (c == std::string::npos) break;
          const std::string first = t.substr(a + 1, b - a), second = t.substr(b + 1, c - b);
          t.replace(a + 1, c - a, second + first);
        }
      }
    }
    if (agree(t)) ++accepted;
  }
  INFO("mutations the canonical reader accepted: " << accepted);
  CHECK(accepted > 0);  // some edits keep the form (a digit in a hash), and were compared
  CHECK(accepted < 3000);
}

TEST_CASE("parse gives yaml-cpp's reasons for what the canonical reader refuses", "[manifest][canonical]") {
  auto r = canon::parse("b: 1\na: 2\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::manifest);
  CHECK(r.error().message().find("canonical") != std::string::npos);
  auto y = canon::parse("a: [1\n");
  REQUIRE_FALSE(y.ok());
  CHECK(y.error().message().find("not valid YAML") != std::string::npos);
}
