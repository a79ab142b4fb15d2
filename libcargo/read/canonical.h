// The manifest's canonical encoding (format-spec/xcargo-format.md, section 5.3): a tree of
// integers, strings, mappings and sequences, and the one text that encodes it. The writer
// emits this text; readers parse, re-emit and require the stored bytes to be identical.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xcargo/error.h"

namespace xcargo::canon {

struct Node {
  enum class Type { integer, string, mapping, sequence };
  Type type = Type::string;
  uint64_t integer = 0;
  std::string string;
  std::vector<std::pair<std::string, Node>> mapping;  // keys unique
  std::vector<Node> sequence;                         // items are not sequences

  // Declared here, defined once Node is complete (below): clang with libstdc++ refuses to
  // instantiate the members' destructors for a still-incomplete Node.
  Node();
  Node(const Node&);
  Node(Node&&) noexcept;
  Node& operator=(const Node&);
  Node& operator=(Node&&) noexcept;
  ~Node();

  static Node of(uint64_t v) { Node n; n.type = Type::integer; n.integer = v; return n; }
  static Node of(std::string s) { Node n; n.type = Type::string; n.string = std::move(s); return n; }
  static Node map() { Node n; n.type = Type::mapping; return n; }
  static Node seq() { Node n; n.type = Type::sequence; return n; }
  Node& add(std::string key, Node value) { mapping.emplace_back(std::move(key), std::move(value)); return *this; }
  Node& push(Node item) { sequence.push_back(std::move(item)); return *this; }
};
inline Node::Node() = default;
inline Node::Node(const Node&) = default;
inline Node::Node(Node&&) noexcept = default;
inline Node& Node::operator=(const Node&) = default;
inline Node& Node::operator=(Node&&) noexcept = default;
inline Node::~Node() = default;

// True for a key written without quotes: [a-z][a-z0-9_]* and not a word that some YAML
// schema types as a boolean or null (null true false yes no on off y n).
bool is_plain_key(const std::string& key);

// The canonical text of a top-level mapping. Precondition: keys are unique in every mapping
// and no sequence holds a sequence (what a reader's tree and the writer's always satisfy).
std::string emit(const Node& root);

// The tree of a manifest text (printable ASCII and LF, checked by the caller) that is in
// canonical form; an `Errc::manifest` error otherwise, naming the line. Section 5.3's
// "parse it, re-encode it and compare": read_canonical, and when that refuses, read_yaml
// for the reason.
Result<Node> parse(std::string_view text);

// The two readers parse() combines, each exposed for the test that compares them:
// read_canonical reads only section 5.3's grammar, a line at a time (about 50 times faster
// than yaml-cpp), and accepts a text only if it re-emits identically; read_yaml parses any
// YAML with yaml-cpp, types the tree as section 5.3 does, and then requires the same.
// Whenever read_canonical accepts a text, read_yaml accepts it with the same tree.
std::optional<Node> read_canonical(std::string_view text);
Result<Node> read_yaml(std::string_view text);

}  // namespace xcargo::canon
