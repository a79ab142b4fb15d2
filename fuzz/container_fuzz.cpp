// Fuzz target: the container reader, all of it: header, section table, signatures against a
// trust store, manifest, and every variant's decompression and digest.
#include <cstdint>

#include "xcargo/cargo.h"
#include "xcargo/trust.h"

using namespace xcargo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const TrustStore trust = [] {
    auto t = TrustStore::load(XCARGO_SOURCE_DIR "/format-spec/vectors/keys/vector-signer.pub");
    return t.ok() ? std::move(*t) : TrustStore();
  }();
  Limits limits;  // small, so that a fuzzer's declared sizes meet the limits quickly
  limits.max_cargo_size = 1 << 20;
  limits.max_section_raw_size = 4 << 20;
  limits.max_total_raw_size = 8 << 20;
  (void)parse_container(ByteView(data, size), limits);
  for (const TrustStore* t : {&trust, static_cast<const TrustStore*>(nullptr)}) {
    auto cargo = load_cargo(Bytes(data, data + size), t, limits);
    if (!cargo.ok()) continue;
    for (const auto& v : cargo->manifest().variants) (void)cargo->variant_payload(v);
  }
  return 0;
}
