// The --target table: variant name, triple, default CPU and clang flags per architecture.
#include <algorithm>

#include "compile/compile.h"

namespace xcargo {

std::vector<std::string> default_targets() { return {"bitcode", "x86_64", "aarch64"}; }

static bool is_cpu_name(std::string_view s) {
  return !s.empty() && s.size() <= 48 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' || c == '+';
  });
}

Result<Target> parse_target(std::string_view spec) {
  std::string_view arch = spec, cpu;
  if (auto colon = spec.find(':'); colon != std::string_view::npos) {
    arch = spec.substr(0, colon);
    cpu = spec.substr(colon + 1);
    if (!is_cpu_name(cpu)) return Error(Errc::invalid_argument, "target '" + std::string(spec) + "': bad CPU name");
  }
  Target t;
  t.name = std::string(spec);
  if (arch == "bitcode") {
    if (!cpu.empty())
      return Error(Errc::invalid_argument, "target 'bitcode' takes no CPU: the loader compiles it for its own CPU");
    // le64 is clang's portable 64-bit little-endian target: no CPU features and no
    // architecture macros, so the loader can retarget the module to its host.
    t.kind = VariantKind::bitcode;
    t.triple = "le64-unknown-unknown";
    t.cpu = "generic";
    // Vectorizing is left to the loader, which knows its CPU's vector width and costs: vectors
    // chosen for le64 (no cost model) are kept by the loader's own -O2 and run slower than
    // what it would have chosen (tests/bench/kernels' intmix: 7% slower than native).
    // Line tables name the FILE:LINE of what xcargo build refuses; they are stripped before
    // the bitcode is shipped.
    t.clang_flags = {"--target=" + t.triple, "-emit-llvm", "-fno-vectorize", "-fno-slp-vectorize", "-gline-tables-only"};
    return t;
  }
  if (arch == "x86_64") {
    t.triple = "x86_64-unknown-linux-gnu";
    t.cpu = cpu.empty() ? "x86-64" : std::string(cpu);
    t.clang_flags = {"--target=" + t.triple, "-march=" + t.cpu};
  } else if (arch == "aarch64") {
    t.triple = "aarch64-unknown-linux-gnu";
    t.cpu = cpu.empty() ? "generic" : std::string(cpu);
    t.clang_flags = {"--target=" + t.triple, "-mcpu=" + t.cpu, "-mno-outline-atomics"};
  } else if (arch == "riscv64") {
    t.triple = "riscv64-unknown-linux-gnu";
    t.cpu = cpu.empty() ? "generic-rv64" : std::string(cpu);
    t.clang_flags = {"--target=" + t.triple, "-march=rv64gc", "-mabi=lp64d", "-mno-relax"};
    if (!cpu.empty()) t.clang_flags.push_back("-mcpu=" + t.cpu);
  } else {
    return Error(Errc::invalid_argument, "unknown target '" + std::string(spec) + "'")
        .hint("targets are: bitcode, x86_64[:CPU], aarch64[:CPU], riscv64[:CPU]");
  }
  t.kind = VariantKind::object;
  return t;
}

}  // namespace xcargo
