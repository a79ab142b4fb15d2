// Which variant of a cargo a node runs: the best native object its CPU can execute, else
// the portable bitcode (or the other way round with prefer: bitcode).
#pragma once

#include <set>
#include <string>

#include "xcargo/error.h"
#include "xcargo/manifest.h"

namespace xcargo::loader {

struct HostInfo {
  std::string arch;                // "x86_64", "aarch64", "riscv64"
  std::string triple;              // LLVM's process triple
  std::string cpu;                 // LLVM's host CPU name, e.g. "znver4"
  std::set<std::string> features;  // enabled host features, e.g. "avx2"
};

enum class Prefer { native, bitcode };

// The variant to run on host, or Errc::unsupported naming what the cargo offers.
Result<const Variant*> select_variant(const Manifest& manifest, const HostInfo& host, Prefer prefer);

// True if code compiled for `cpu` on the host's architecture runs on this host.
bool cpu_runs_on(const std::string& cpu, const HostInfo& host);

}  // namespace xcargo::loader
