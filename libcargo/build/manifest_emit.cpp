// Canonical YAML emission of a manifest (spec section 5.3).
#include <yaml-cpp/yaml.h>

#include "xcargo/writer.h"

namespace xcargo {

std::string emit_manifest(const Manifest& m) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "format" << YAML::Value << m.format;
  out << YAML::Key << "name" << YAML::Value << m.name;
  out << YAML::Key << "version" << YAML::Value << YAML::DoubleQuoted << m.version;
  out << YAML::Key << "entries" << YAML::Value << YAML::Flow << m.entries;
  out << YAML::Key << "toolchain" << YAML::Value << YAML::BeginMap;
  for (const auto& [tool, version] : m.toolchain) out << YAML::Key << tool << YAML::Value << YAML::DoubleQuoted << version;
  out << YAML::EndMap;
  out << YAML::Key << "variants" << YAML::Value << YAML::BeginSeq;
  for (const auto& v : m.variants) {
    out << YAML::BeginMap;
    out << YAML::Key << "name" << YAML::Value << YAML::DoubleQuoted << v.name;
    out << YAML::Key << "kind" << YAML::Value << variant_kind_name(v.kind);
    out << YAML::Key << "section" << YAML::Value << v.section;
    out << YAML::Key << "triple" << YAML::Value << v.triple;
    out << YAML::Key << "cpu" << YAML::Value << YAML::DoubleQuoted << v.cpu;
    out << YAML::Key << "raw_size" << YAML::Value << v.raw_size;
    out << YAML::Key << "sha256" << YAML::Value << to_hex(v.sha256);
    out << YAML::Key << "entries" << YAML::Value << YAML::BeginMap;
    for (const auto& e : v.entries) out << YAML::Key << e.entry << YAML::Value << e.symbol;
    out << YAML::EndMap;
    out << YAML::Key << "imports" << YAML::Value << YAML::Flow << v.imports;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace xcargo
