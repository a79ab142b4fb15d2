// The canonical manifest text (spec section 5.3), written and read; see canonical.h.
#include "read/canonical.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <set>

namespace xcargo::canon {

namespace {

using Entry = std::pair<std::string, Node>;

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string scalar(const Node& n) { return n.type == Node::Type::integer ? std::to_string(n.integer) : quoted(n.string); }

std::vector<const Entry*> sorted(const Node& map) {
  std::vector<const Entry*> out;
  for (const auto& e : map.mapping) out.push_back(&e);
  std::stable_sort(out.begin(), out.end(), [](const Entry* a, const Entry* b) { return a->first < b->first; });
  return out;
}

void emit_mapping(std::string& out, const Node& map, size_t indent, bool first_inline);
void emit_sequence(std::string& out, const Node& seq, size_t indent);

// What follows "KEY:" for a value nested at `indent` + 2.
void emit_value(std::string& out, const Node& v, size_t indent) {
  switch (v.type) {
    case Node::Type::integer:
    case Node::Type::string: out += " " + scalar(v) + "\n"; break;
    case Node::Type::mapping:
      if (v.mapping.empty()) out += " {}\n";
      else out += "\n", emit_mapping(out, v, indent + 2, false);
      break;
    case Node::Type::sequence:
      if (v.sequence.empty()) out += " []\n";
      else out += "\n", emit_sequence(out, v, indent + 2);
      break;
  }
}

void emit_mapping(std::string& out, const Node& map, size_t indent, bool first_inline) {
  bool first = true;
  for (const Entry* e : sorted(map)) {
    if (!(first && first_inline)) out.append(indent, ' ');
    first = false;
    out += (is_plain_key(e->first) ? e->first : quoted(e->first)) + ":";
    emit_value(out, e->second, indent);
  }
}

void emit_sequence(std::string& out, const Node& seq, size_t indent) {
  for (const Node& item : seq.sequence) {
    out.append(indent, ' ');
    out += "-";
    if (item.type == Node::Type::mapping && !item.mapping.empty()) {
      out += " ";
      emit_mapping(out, item, indent + 2, true);
    } else if (item.type == Node::Type::mapping) {
      out += " {}\n";
    } else {
      out += " " + scalar(item) + "\n";  // a sequence never holds a sequence (precondition)
    }
  }
}


// The deepest node either reader takes (the top-level mapping is at depth 0).
constexpr int kMaxDepth = 8;

// Section 5.3's grammar, read a line at a time. Any text it cannot read, or whose tree does
// not re-emit to the same bytes, is left to read_yaml (which says why).
class CanonicalReader {
public:
  explicit CanonicalReader(std::string_view t) : t_(t) {}

  std::optional<Node> top() {
    Node root = Node::map();
    if (!mapping(root, 0, false, 0) || p_ != t_.size()) return std::nullopt;
    return root;
  }

private:
  bool at(char c) const { return p_ < t_.size() && t_[p_] == c; }
  bool at_digit() const { return p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9'; }
  bool eat(char c) { return at(c) ? (++p_, true) : false; }
  bool eat(std::string_view s) { return t_.substr(p_, s.size()) == s ? (p_ += s.size(), true) : false; }
  // At a line's start: its spaces, and whether they are followed by "-" (a sequence item).
  size_t indent() const {
    size_t i = p_;
    while (i < t_.size() && t_[i] == ' ') ++i;
    return i - p_;
  }
  bool item_at(size_t n) const { return p_ + n < t_.size() && t_[p_ + n] == '-'; }

  bool quoted(std::string& out) {
    if (!eat('"')) return false;
    for (;;) {
      if (p_ >= t_.size() || t_[p_] == '\n') return false;
      char c = t_[p_++];
      if (c == '"') return true;
      if (c == '\\') {
        if (!at('"') && !at('\\')) return false;  // the only two escapes
        c = t_[p_++];
      }
      out += c;
    }
  }
  // An integer (no sign, no leading zero, at most 2^64-1) or a string, then the line's end.
  bool scalar(Node& out) {
    if (at('"')) {
      out = Node::of(std::string());
      return quoted(out.string) && eat('\n');
    }
    const size_t start = p_;
    while (at_digit()) ++p_;
    const std::string_view digits = t_.substr(start, p_ - start);
    if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return false;
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec != std::errc() || end != digits.data() + digits.size()) return false;
    out = Node::of(v);
    return eat('\n');
  }
  // What follows "KEY:" in a mapping at indentation n and depth d.
  bool value(Node& out, size_t n, int d) {
    if (d + 1 > kMaxDepth) return false;
    if (eat(" {}\n")) return out = Node::map(), true;
    if (eat(" []\n")) return out = Node::seq(), true;
    if (eat(' ')) return scalar(out);
    if (!eat('\n') || indent() != n + 2) return false;
    if (item_at(n + 2)) return out = Node::seq(), sequence(out, n + 2, d + 1);
    out = Node::map();
    return mapping(out, n + 2, false, d + 1);
  }
  // Entries at indentation n, keys strictly ascending (so none twice); with first_inline the
  // first entry starts at p_, after a sequence item's "- ".
  bool mapping(Node& out, size_t n, bool first_inline, int d) {
    if (d > kMaxDepth) return false;
    for (bool first = true;; first = false) {
      if (!(first && first_inline)) {
        if (p_ >= t_.size() || indent() != n || item_at(n)) return !first;
        p_ += n;
      }
      std::string key;
      if (at('"')) {
        if (!quoted(key)) return false;
      } else {
        const size_t start = p_;
        while (p_ < t_.size() && t_[p_] != ':' && t_[p_] != '\n') ++p_;
        key.assign(t_.substr(start, p_ - start));
        if (!is_plain_key(key)) return false;
      }
      if (!eat(':') || (!out.mapping.empty() && !(out.mapping.back().first < key))) return false;
      Node v;
      if (!value(v, n, d)) return false;
      out.add(std::move(key), std::move(v));
    }
  }
  // Items at indentation n: scalars, empty mappings, or mappings whose first entry follows "- ".
  bool sequence(Node& out, size_t n, int d) {
    if (d > kMaxDepth) return false;
    while (p_ < t_.size() && indent() == n && item_at(n)) {
      p_ += n + 1;
      if (d + 1 > kMaxDepth) return false;
      Node item;
      if (eat(" {}\n")) item = Node::map();
      else if (!eat(' ')) return false;  // "-" alone: an empty value, or a list in a list
      else if (at('"') || at_digit()) {
        if (!scalar(item)) return false;
      } else {
        item = Node::map();
        if (!mapping(item, n + 2, true, d + 1)) return false;
      }
      out.push(std::move(item));
    }
    return !out.sequence.empty();
  }

  std::string_view t_;
  size_t p_ = 0;
};

Error bad(const std::string& msg) { return Error(Errc::manifest, "manifest: " + msg); }

// The tree of a YAML document, as section 5.3 types it: a quoted scalar is a string, a plain
// one an integer if it is one (anything else is a string, which re-emits quoted and so
// fails the byte comparison). Empty values, non-scalar keys, duplicate keys and lists in
// lists have no canonical form.
Result<Node> to_tree(const YAML::Node& y, const std::string& where, int depth) {
  if (depth > kMaxDepth) return bad(where + ": nested too deeply");
  switch (y.Type()) {
    case YAML::NodeType::Scalar: {
      const std::string& s = y.Scalar();
      uint64_t v = 0;
      const bool decimal = !s.empty() && (s == "0" || s[0] != '0') &&
                           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
      auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (y.Tag() == "?" && decimal && ec == std::errc() && p == s.data() + s.size()) return Node::of(v);
      return Node::of(s);
    }
    case YAML::NodeType::Map: {
      Node m = Node::map();
      std::set<std::string> seen;
      for (const auto& kv : y) {
        if (!kv.first.IsScalar()) return bad(where + ": keys must be strings");
        const std::string k = kv.first.Scalar();
        if (!seen.insert(k).second) return bad(where + ": duplicate key '" + k + "'");
        auto v = to_tree(kv.second, where + "." + k, depth + 1);
        XC_TRY(v);
        m.add(k, std::move(*v));
      }
      return m;
    }
    case YAML::NodeType::Sequence: {
      Node s = Node::seq();
      for (size_t i = 0; i < y.size(); ++i) {
        const std::string at = where + "[" + std::to_string(i) + "]";
        if (y[i].IsSequence()) return bad(at + ": a list inside a list has no canonical form");
        auto v = to_tree(y[i], at, depth + 1);
        XC_TRY(v);
        s.push(std::move(*v));
      }
      return s;
    }
    default: return bad(where + ": empty value");
  }
}

// Line `n` (1-based) of `text`, made printable for a message.
std::string line_of(std::string_view text, size_t n) {
  size_t start = 0;
  for (size_t i = 1; i < n && start != std::string_view::npos; ++i) {
    start = text.find('\n', start);
    if (start != std::string_view::npos) ++start;
  }
  if (start == std::string_view::npos || start >= text.size()) return "(end of text)";
  std::string_view line = text.substr(start, text.find('\n', start) - start);
  std::string out;
  for (unsigned char c : line.substr(0, 100)) {
    if (c >= 0x20 && c < 0x7f) out += char(c);
    else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + (line.size() > 100 ? "..." : "");
}

// Section 5.3: the stored bytes are exactly the canonical text of the tree they parse to.
Status check_canonical(std::string_view yaml, const Node& tree) {
  const std::string canonical = canon::emit(tree);
  if (canonical == yaml) return {};
  size_t line = 1;
  for (size_t i = 0; i < std::min(canonical.size(), yaml.size()) && canonical[i] == yaml[i]; ++i)
    if (yaml[i] == '\n') ++line;
  return bad("not in canonical form (section 5.3): line " + std::to_string(line) + " is '" + line_of(yaml, line) +
             "', the canonical encoding has '" + line_of(canonical, line) + "'")
      .hint("write the manifest as 'xcargo build' does: block style, keys sorted, strings double-quoted, LF line ends");
}

}  // namespace

bool is_plain_key(const std::string& key) {
  static const char* const kTyped[] = {"null", "true", "false", "yes", "no", "on", "off", "y", "n"};
  if (key.empty() || key[0] < 'a' || key[0] > 'z') return false;
  for (char c : key)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return std::none_of(std::begin(kTyped), std::end(kTyped), [&](const char* w) { return key == w; });
}

std::string emit(const Node& root) {
  std::string out;
  emit_mapping(out, root, 0, false);
  return out;
}

std::optional<Node> read_canonical(std::string_view text) {
  auto tree = CanonicalReader(text).top();
  if (!tree || emit(*tree) != text) return std::nullopt;
  return tree;
}

Result<Node> read_yaml(std::string_view text) {
  Node tree;
  try {
    YAML::Node root = YAML::Load(std::string(text));
    auto t = to_tree(root, "top level", 0);
    XC_TRY(t);
    tree = std::move(*t);
  } catch (const YAML::Exception& e) {
    return bad("not valid YAML: line " + std::to_string(e.mark.line + 1) + ": " + e.msg);
  } catch (const std::exception& e) {
    return bad(std::string("not valid YAML: ") + e.what());
  }
  if (tree.type != Node::Type::mapping) return bad("top level must be a mapping");
  XC_TRY(check_canonical(text, tree));
  return tree;
}

Result<Node> parse(std::string_view text) {
  if (auto tree = read_canonical(text)) return std::move(*tree);
  return read_yaml(text);
}

}  // namespace xcargo::canon
