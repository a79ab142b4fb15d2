// Formats a cargo's manifest, sections, variants and signers for people and for scripts.
#include "describe.h"

#include <algorithm>
#include <cstdio>

namespace xcargo::cli {

namespace {

const SectionEntry& section_of(const Cargo& c, const Variant& v) { return c.container().sections.at(v.section); }

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : sep) + i;
  return s;
}

// Which variants run on a node of each architecture (a loader's default, native-first
// policy), e.g. {"x86_64": "x86_64:x86-64-v3 or x86_64 object", "aarch64": "aarch64 object",
// "any other": "bitcode, JIT-compiled there"}; in manifest order.
std::vector<std::pair<std::string, std::string>> runs_on(const Manifest& m) {
  std::vector<std::pair<std::string, std::vector<std::string>>> by_arch;
  bool bitcode = false;
  for (const auto& v : m.variants) {
    if (v.kind == VariantKind::bitcode) {
      bitcode = true;
      continue;
    }
    const std::string arch = arch_of(v.triple);
    auto it = std::find_if(by_arch.begin(), by_arch.end(), [&](const auto& a) { return a.first == arch; });
    if (it == by_arch.end()) by_arch.push_back({arch, {v.name}});
    else it->second.push_back(v.name);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [arch, names] : by_arch)
    out.push_back({arch, names.size() == 1 ? names[0] + " object"
                                           : join(names, " or ") + " object (the most specific the node's CPU runs)"});
  out.push_back({"any other", bitcode ? "bitcode, JIT-compiled there" : "nothing: refused (no bitcode)"});
  return out;
}

}  // namespace

std::string arch_of(const std::string& triple) { return triple.substr(0, triple.find('-')); }

nlohmann::json cargo_json(const Cargo& cargo, const std::string& file, bool checked) {
  const Manifest& m = cargo.manifest();
  nlohmann::json j;
  j["file"] = file;
  j["name"] = m.name;
  j["version"] = m.version;
  j["format"] = std::to_string(cargo.container().version_major) + "." + std::to_string(cargo.container().version_minor);
  j["digest"] = to_hex(cargo.digest());
  j["size"] = cargo.bytes().size();
  j["entries"] = m.entries;
  j["toolchain"] = nlohmann::json::object();
  for (const auto& [tool, ver] : m.toolchain) j["toolchain"][tool] = ver;
  j["fp"] = m.fp.empty() ? "contract" : m.fp;
  j["runs_on"] = nlohmann::json::object();
  for (const auto& [arch, what] : runs_on(m)) j["runs_on"][arch] = what;
  j["variants"] = nlohmann::json::array();
  for (const auto& v : m.variants) {
    nlohmann::json jv;
    jv["name"] = v.name;
    jv["kind"] = variant_kind_name(v.kind);
    jv["triple"] = v.triple;
    jv["cpu"] = v.cpu;
    jv["section"] = v.section;
    jv["stored_size"] = section_of(cargo, v).stored_size;
    jv["raw_size"] = v.raw_size;
    jv["sha256"] = to_hex(v.sha256);
    jv["entries"] = nlohmann::json::object();
    for (const auto& e : v.entries) jv["entries"][e.entry] = e.symbol;
    jv["imports"] = v.imports;
    j["variants"].push_back(jv);
  }
  const SectionEntry& ms = cargo.container().sections[0];
  j["manifest"] = {{"stored_size", ms.stored_size}, {"raw_size", ms.raw_size}};
  j["signatures"] = nlohmann::json::array();
  for (const auto& s : cargo.signers()) {
    nlohmann::json js;
    js["key_id"] = to_hex(s.key_id);
    js["checked"] = checked;
    js["trusted"] = checked && s.trusted;
    if (s.trusted) js["key"] = s.key_source;
    j["signatures"].push_back(js);
  }
  return j;
}

std::string cargo_text(const Cargo& cargo, const std::string& file, bool checked) {
  const Manifest& m = cargo.manifest();
  std::string out;
  char line[512];
  auto add = [&](const std::string& s) { out += s + "\n"; };
  add("cargo      " + m.name + " " + m.version + " (format " + std::to_string(cargo.container().version_major) + "." +
      std::to_string(cargo.container().version_minor) + ")");
  add("file       " + file + ", " + std::to_string(cargo.bytes().size()) + " bytes");
  add("digest     " + to_hex(cargo.digest()));
  add("entries    " + join(m.entries, ", "));
  std::vector<std::string> tools;
  for (const auto& [tool, ver] : m.toolchain) tools.push_back(tool + " " + ver);
  add("toolchain  " + join(tools, "; "));
  add(m.fp == "strict" ? "fp         strict: no fused multiply-adds; every variant gives bit-identical results"
                       : "fp         contract: variants may round differently (fused multiply-adds where a target has them)");
  const SectionEntry& ms = cargo.container().sections[0];
  add("manifest   " + std::to_string(ms.stored_size) + " bytes stored, " + std::to_string(ms.raw_size) + " raw");
  add("variants");
  std::snprintf(line, sizeof line, "  %-18s %-8s %-26s %-12s %8s %8s  %s", "name", "kind", "triple", "cpu", "stored",
                "raw", "sha256");
  add(line);
  for (const auto& v : m.variants) {
    std::snprintf(line, sizeof line, "  %-18s %-8s %-26s %-12s %8llu %8llu  %s", v.name.c_str(), variant_kind_name(v.kind),
                  v.triple.c_str(), v.cpu.c_str(), (unsigned long long)section_of(cargo, v).stored_size,
                  (unsigned long long)v.raw_size, to_hex(v.sha256).substr(0, 16).c_str());
    add(line);
  }
  add("runs on    (a loader's default policy: native objects first)");
  for (const auto& [arch, what] : runs_on(m)) add("  " + arch + (arch == "any other" ? "" : " nodes") + ": " + what);
  add("imports");
  for (const auto& v : m.variants) add("  " + v.name + ": " + (v.imports.empty() ? "(none)" : join(v.imports, " ")));
  add("signatures");
  if (cargo.signers().empty()) add("  (none: the cargo is unsigned)");
  for (const auto& s : cargo.signers()) {
    std::string state = !checked ? "not checked (pass --trust to check)"
                        : s.trusted ? "valid, trusted (" + s.key_source + ")"
                                    : "unknown key, not checked";
    add("  key " + to_hex(s.key_id) + "  " + state);
  }
  return out;
}


}  // namespace xcargo::cli
