// Parses and validates the YAML manifest (spec section 5) into a Manifest.
#include "xcargo/manifest.h"

#include <algorithm>
#include <set>

#include "read/canonical.h"
#include "read/abi.h"
#include "xcargo/format.h"

namespace xcargo {

const char* variant_kind_name(VariantKind kind) { return kind == VariantKind::object ? "object" : "bitcode"; }

const Variant* Manifest::find_variant(std::string_view name) const {
  for (const auto& v : variants)
    if (v.name == name) return &v;
  return nullptr;
}

bool is_identifier(std::string_view s) {
  if (s.empty() || s.size() > format::kMaxNameLength) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
}

bool is_cargo_name(std::string_view s) {
  if (s.empty() || s.size() > format::kMaxNameLength) return false;
  auto lower_digit = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!lower_digit(s[0])) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return lower_digit(c) || c == '.' || c == '_' || c == '-'; });
}

namespace {

Error bad(const std::string& msg) { return Error(Errc::manifest, "manifest: " + msg); }

// Printable ASCII without control characters, bounded: for names, versions, triples.
bool is_plain_text(std::string_view s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

using canon::Node;

const char* type_name(Node::Type t) {
  switch (t) {
    case Node::Type::integer: return "an integer";
    case Node::Type::string: return "a string";
    case Node::Type::mapping: return "a mapping";
    case Node::Type::sequence: return "a list";
  }
  return "?";
}

// A mapping of the manifest's tree, with typed accessors whose errors say where.
class Map {
public:
  static Result<Map> of(const Node& node, const std::string& where) {
    if (node.type != Node::Type::mapping) return bad(where + " must be a mapping, not " + type_name(node.type));
    Map m;
    m.where_ = where;
    m.node_ = &node;
    return m;
  }
  const Node* get(std::string_view key) const {
    for (const auto& [k, v] : node_->mapping)
      if (k == key) return &v;
    return nullptr;
  }
  Result<std::string> str(std::string_view key, size_t max = 256) const {
    const Node* n = get(key);
    if (!n) return bad(where_ + ": missing '" + std::string(key) + "'");
    if (n->type != Node::Type::string || !is_plain_text(n->string, max))
      return bad(where_ + ": '" + std::string(key) + "' must be a string of printable ASCII, 1 to " +
                 std::to_string(max) + " characters");
    return n->string;
  }
  Result<uint64_t> uint(std::string_view key) const {
    const Node* n = get(key);
    if (!n) return bad(where_ + ": missing '" + std::string(key) + "'");
    if (n->type != Node::Type::integer)
      return bad(where_ + ": '" + std::string(key) + "' must be an unsigned decimal number, not " + type_name(n->type));
    return n->integer;
  }
  const std::vector<std::pair<std::string, Node>>& items() const { return node_->mapping; }

private:
  std::string where_;
  const Node* node_ = nullptr;
};

Result<std::vector<std::string>> identifier_list(const Node* n, const std::string& where, size_t max) {
  if (!n) return bad("missing " + where);
  if (n->type != Node::Type::sequence) return bad(where + " must be a list");
  if (n->sequence.size() > max)
    return bad(where + " has " + std::to_string(n->sequence.size()) + " items, over the limit of " + std::to_string(max));
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& item : n->sequence) {
    if (item.type != Node::Type::string || !is_identifier(item.string))
      return bad(where + ": items must be C identifiers of 1 to 64 characters");
    if (!seen.insert(item.string).second) return bad(where + ": duplicate '" + item.string + "'");
    out.push_back(item.string);
  }
  return out;
}

Result<Variant> parse_variant(const Node& node, size_t index) {
  const std::string where = "variants[" + std::to_string(index) + "]";
  auto m = Map::of(node, where);
  XC_TRY(m);
  Variant v;
  auto name = m->str("name", format::kMaxNameLength);
  XC_TRY(name);
  v.name = *name;
  auto kind = m->str("kind", 16);
  XC_TRY(kind);
  if (*kind == "object") v.kind = VariantKind::object;
  else if (*kind == "bitcode") v.kind = VariantKind::bitcode;
  else return bad(where + ": kind must be 'object' or 'bitcode', got '" + *kind + "'");
  auto section = m->uint("section");
  XC_TRY(section);
  if (*section == 0 || *section >= format::kMaxSections)
    return bad(where + ": section " + std::to_string(*section) + " is out of range");
  v.section = uint32_t(*section);
  auto triple = m->str("triple", 128);
  XC_TRY(triple);
  v.triple = *triple;
  auto cpu = m->str("cpu", 128);
  XC_TRY(cpu);
  v.cpu = *cpu;
  auto raw = m->uint("raw_size");
  XC_TRY(raw);
  v.raw_size = *raw;
  auto digest = m->str("sha256", 64);
  XC_TRY(digest);
  if (!from_hex(*digest, v.sha256)) return bad(where + ": sha256 must be 64 hex digits");

  const Node* entries = m->get("entries");
  if (!entries) return bad(where + ": missing 'entries'");
  auto em = Map::of(*entries, where + ".entries");
  XC_TRY(em);
  if (em->items().size() > format::kMaxEntries) return bad(where + ".entries: too many entries");
  for (const auto& [entry, sym] : em->items()) {
    if (!is_identifier(entry)) return bad(where + ".entries: '" + entry + "' is not a C identifier");
    if (sym.type != Node::Type::string || !is_identifier(sym.string))
      return bad(where + ".entries." + entry + ": symbol must be a C identifier");
    v.entries.push_back({entry, sym.string});
  }
  auto imports = identifier_list(m->get("imports"), where + ".imports", format::kMaxImports);
  XC_TRY(imports);
  // Sorted bytewise (and so unique), every one on the kernel ABI's allow-list (spec 5.2, 5.4).
  for (size_t i = 1; i < imports->size(); ++i)
    if (!((*imports)[i - 1] < (*imports)[i]))
      return bad(where + ".imports: not sorted: '" + (*imports)[i] + "' comes after '" + (*imports)[i - 1] + "'")
          .hint("imports are listed in ascending byte order");
  for (const auto& name : *imports)
    if (!abi::is_allowed_import(name))
      return bad(where + ".imports: '" + name + "' is not on the kernel ABI's allow-list")
          .hint("kernels may import only the functions of the allow-list (format-spec/xcargo-format.md, section 5.5)");
  v.imports = std::move(*imports);
  return v;
}

Result<Manifest> parse_root(const Node& root) {
  auto m = Map::of(root, "top level");
  XC_TRY(m);
  Manifest out;
  auto fmt = m->uint("format");
  XC_TRY(fmt);
  if (*fmt != 1) return Error(Errc::unsupported, "manifest: format " + std::to_string(*fmt) + " is not supported (expected 1)");
  out.format = 1;
  auto name = m->str("name", format::kMaxNameLength);
  XC_TRY(name);
  if (!is_cargo_name(*name)) return bad("name '" + *name + "' must match [a-z0-9][a-z0-9._-]*");
  out.name = *name;
  auto version = m->str("version", 64);
  XC_TRY(version);
  out.version = *version;
  auto entries = identifier_list(m->get("entries"), "entries", format::kMaxEntries);
  XC_TRY(entries);
  if (entries->empty()) return bad("entries is empty: a cargo needs at least one entry point");
  out.entries = std::move(*entries);

  if (const Node* tc = m->get("toolchain")) {
    auto tm = Map::of(*tc, "toolchain");
    XC_TRY(tm);
    for (const auto& [tool, ver] : tm->items()) {
      if (!is_plain_text(tool, 64) || ver.type != Node::Type::string || !is_plain_text(ver.string, 256))
        return bad("toolchain: '" + tool + "' must map to a version string");
      out.toolchain.emplace_back(tool, ver.string);
    }
  }

  if (const Node* fp = m->get("fp")) {
    if (fp->type != Node::Type::string || fp->string != "strict")
      return bad("fp must be the string \"strict\" (or absent)").hint("xcargo build --fp strict writes it");
    out.fp = fp->string;
  }

  const Node* variants = m->get("variants");
  if (!variants || variants->type != Node::Type::sequence || variants->sequence.empty())
    return bad("'variants' must be a non-empty list");
  if (variants->sequence.size() >= format::kMaxSections) return bad("too many variants");
  std::set<std::string> names;
  std::set<uint32_t> sections;
  for (size_t i = 0; i < variants->sequence.size(); ++i) {
    auto v = parse_variant(variants->sequence[i], i);
    XC_TRY(v);
    if (!names.insert(v->name).second) return bad("duplicate variant name '" + v->name + "'");
    if (!sections.insert(v->section).second)
      return bad("variants[" + std::to_string(i) + "]: duplicate section: section " + std::to_string(v->section) +
                 " is used by two variants");
    // Every variant implements every entry point, and nothing else.
    if (v->entries.size() != out.entries.size())
      return bad("variant '" + v->name + "' maps " + std::to_string(v->entries.size()) + " entries, the cargo has " +
                 std::to_string(out.entries.size()));
    for (const auto& e : v->entries)
      if (std::find(out.entries.begin(), out.entries.end(), e.entry) == out.entries.end())
        return bad("variant '" + v->name + "' maps unknown entry '" + e.entry + "'");
    out.variants.push_back(std::move(*v));
  }
  return out;
}

}  // namespace

Result<Manifest> parse_manifest(std::string_view yaml) {
  if (yaml.size() > format::kMaxManifestSize) return Error(Errc::limit, "manifest: over the size limit");
  // Printable ASCII and LF only: no BOM, no CR, no tab, no other encoding of the same text.
  size_t line = 1;
  for (unsigned char c : yaml) {
    if (c == '\n') ++line;
    else if (c < 0x20 || c >= 0x7f)
      return bad("line " + std::to_string(line) + ": byte 0x" + "0123456789abcdef"[c >> 4] + "0123456789abcdef"[c & 15] +
                 " is not allowed: a manifest is printable ASCII and LF (section 5.3)")
          .hint(c == '\r' ? "lines end with LF, not CR LF" : c == 0xEF ? "remove the UTF-8 byte order mark" : "escape or remove it");
  }
  auto tree = canon::parse(yaml);
  XC_TRY(tree);
  return parse_root(*tree);
}

}  // namespace xcargo
