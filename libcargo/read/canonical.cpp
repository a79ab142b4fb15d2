// The canonical manifest text (spec section 5.3); see canonical.h.
#include "read/canonical.h"

#include <algorithm>

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

}  // namespace xcargo::canon
