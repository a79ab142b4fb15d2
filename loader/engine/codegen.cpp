// Bitcode variants to host objects, through the disk cache (codegen.h).
#include "engine/codegen.h"

namespace xcargo::loader {

std::string cache_key(const Digest& digest, const Variant& v, const HostInfo& h, bool fp_strict) {
  std::string features;
  for (const auto& f : h.features) features += f + ",";
  std::string key = "xcargo-jit-v1\n" + to_hex(digest) + "\n" + v.name + "\n" + to_hex(v.sha256) + "\n" + h.triple +
                    "\n" + h.cpu + "\n" + features + "\nllvm " + Jit::llvm_version() + "\n" + Jit::pipeline() + "\n" + (fp_strict ? "fp strict\n" : "");
  return to_hex(sha256(as_bytes(key)));
}

Result<CompiledObject> compile_or_fetch(const Jit& jit, const DiskCache& cache, const Cargo& cargo, const Variant& v, bool allow_quick) {
  CompiledObject out;
  out.cache_enabled = cache.enabled();
  const bool fp_strict = cargo.manifest().fp == "strict";
  const std::string key = cache_key(cargo.digest(), v, jit.host(), fp_strict);
  if (auto hit = cache.get(key, &out.cache_damaged)) {
    out.object = std::move(*hit);
    out.cache_hit = true;
    return out;
  }
  auto payload = cargo.variant_payload(v);
  XC_TRY(payload);
  auto compiled = jit.compile_bitcode(*payload, cargo.manifest().name + " " + v.name, fp_strict, allow_quick, &out.quick);
  XC_TRY(compiled);
  out.object = std::move(*compiled);
  if (out.quick) return out;  // only -O2 objects are kept
  std::vector<KeyId> signers;
  for (const Signer& s : cargo.signers())
    if (s.trusted) signers.push_back(s.key_id);
  if (auto s = cache.put(key, out.object, signers); !s.ok()) out.store_error = key + ": " + s.error().message();
  return out;
}

}  // namespace xcargo::loader
