// Variant selection rules (loader/README.md, "Variant selection").
#include "engine/select.h"

#include <algorithm>

namespace xcargo::loader {

namespace {

std::string arch_of(const std::string& triple) { return triple.substr(0, triple.find('-')); }

bool has_all(const HostInfo& host, std::initializer_list<const char*> features) {
  return std::all_of(features.begin(), features.end(), [&](const char* f) { return host.features.count(f) > 0; });
}

// x86-64 micro-architecture levels (psABI): only these and exact CPU matches are proven.
int x86_level(const HostInfo& host) {
  if (!has_all(host, {"cx16", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"})) return 1;
  if (!has_all(host, {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe"})) return 2;
  if (!has_all(host, {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})) return 3;
  return 4;
}

// Higher is more specific; negative means the host cannot run it.
int native_rank(const Variant& v, const HostInfo& host) {
  if (v.kind != VariantKind::object || arch_of(v.triple) != host.arch) return -1;
  if (v.cpu == host.cpu) return 100;
  if (host.arch == "x86_64" && v.cpu.starts_with("x86-64-v") && v.cpu.size() == 9) {
    int level = v.cpu[8] - '0';
    return level >= 2 && level <= 4 && level <= x86_level(host) ? 10 + level : -1;
  }
  return cpu_runs_on(v.cpu, host) ? 1 : -1;
}

bool bitcode_fits(const Variant& v, const HostInfo& host) {
  return v.kind == VariantKind::bitcode && (v.triple.starts_with("le64-") || arch_of(v.triple) == host.arch);
}

}  // namespace

bool cpu_runs_on(const std::string& cpu, const HostInfo& host) {
  if (cpu == host.cpu) return true;
  if (host.arch == "x86_64") return cpu == "x86-64";
  if (host.arch == "aarch64") return cpu == "generic";
  if (host.arch == "riscv64") return cpu == "generic-rv64";
  return false;
}

Result<const Variant*> select_variant(const Manifest& manifest, const HostInfo& host, Prefer prefer) {
  const Variant* native = nullptr;
  int best = -1;
  const Variant* bitcode = nullptr;
  for (const auto& v : manifest.variants) {
    int rank = native_rank(v, host);
    if (rank > best) best = rank, native = &v;
    if (!bitcode && bitcode_fits(v, host)) bitcode = &v;
  }
  const Variant* first = prefer == Prefer::native ? native : bitcode;
  const Variant* second = prefer == Prefer::native ? bitcode : native;
  if (first) return first;
  if (second) return second;
  std::string offered;
  for (const auto& v : manifest.variants) offered += (offered.empty() ? "" : ", ") + v.name + " (" + v.triple + ")";
  return Error(Errc::unsupported, "no variant runs on this node (" + host.triple + ", cpu " + host.cpu +
                                      "); the cargo has " + offered)
      .hint("rebuild with --target bitcode, or a target for " + host.arch);
}

}  // namespace xcargo::loader
