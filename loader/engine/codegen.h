// A bitcode variant of a verified cargo as a host object: from the disk cache, or JIT-compiled
// and stored there. The engine does this in-process when it owns the cache (tests); the
// loader's worker asks its compile service (loader/compiler/), which does it in a child.
#pragma once

#include <functional>
#include <string>

#include "engine/disk_cache.h"
#include "engine/jit.h"
#include "xcargo/cargo.h"

namespace xcargo::loader {

struct CompiledObject {
  Bytes object;
  bool cache_enabled = false;  // a cache was consulted
  bool cache_hit = false;
  bool cache_damaged = false;  // an entry was there but did not check out: removed, compiled again
  std::string store_error;     // why the new object could not be stored (it is used anyway)
  // The quick tier (Jit::compile_bitcode's allow_quick), never cached: ask again without
  // allow_quick for the -O2 object that replaces it.
  bool quick = false;
};

// How an engine gets the object for a bitcode variant of a cargo it verified; allow_quick:
// the quick tier will do if there is no -O2 object in the cache.
using Compiler = std::function<Result<CompiledObject>(const Cargo& cargo, const Variant& variant, bool allow_quick)>;

// The cache key: everything the object depends on (cargo, variant, host CPU and features,
// LLVM version, optimisation level, the cargo's floating-point mode).
std::string cache_key(const Digest& cargo, const Variant& variant, const HostInfo& host, bool fp_strict = false);

Result<CompiledObject> compile_or_fetch(const Jit& jit, const DiskCache& cache, const Cargo& cargo, const Variant& variant,
                                        bool allow_quick = false);

}  // namespace xcargo::loader
