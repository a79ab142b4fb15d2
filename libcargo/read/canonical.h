// The manifest's canonical encoding (format-spec/xcargo-format.md, section 5.3): a tree of
// integers, strings, mappings and sequences, and the one text that encodes it. The writer
// emits this text; readers parse, re-emit and require the stored bytes to be identical.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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

}  // namespace xcargo::canon
