// The manifest's canonical text (spec section 5.3): the tree of a Manifest, emitted by the
// same code that readers use to check that a stored manifest is canonical.
#include "read/canonical.h"
#include "build/writer.h"

namespace xcargo {

std::string emit_manifest(const Manifest& m) {
  using canon::Node;
  auto names = [](const std::vector<std::string>& list) {
    Node seq = Node::seq();
    for (const auto& s : list) seq.push(Node::of(s));
    return seq;
  };
  Node toolchain = Node::map();
  for (const auto& [tool, version] : m.toolchain) toolchain.add(tool, Node::of(version));
  Node variants = Node::seq();
  for (const auto& v : m.variants) {
    Node entries = Node::map();
    for (const auto& e : v.entries) entries.add(e.entry, Node::of(e.symbol));
    variants.push(Node::map()
                      .add("name", Node::of(v.name))
                      .add("kind", Node::of(std::string(variant_kind_name(v.kind))))
                      .add("section", Node::of(uint64_t(v.section)))
                      .add("triple", Node::of(v.triple))
                      .add("cpu", Node::of(v.cpu))
                      .add("raw_size", Node::of(v.raw_size))
                      .add("sha256", Node::of(to_hex(v.sha256)))
                      .add("entries", std::move(entries))
                      .add("imports", names(v.imports)));
  }
  Node root = Node::map();
  root.add("format", Node::of(uint64_t(m.format)))
      .add("name", Node::of(m.name))
      .add("version", Node::of(m.version))
      .add("entries", names(m.entries))
      .add("toolchain", std::move(toolchain))
      .add("variants", std::move(variants));
  if (!m.fp.empty()) root.add("fp", Node::of(m.fp));
  return canon::emit(root);
}

}  // namespace xcargo
