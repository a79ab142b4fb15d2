// Fuzz target: the loader's bitcode path. The input is the bitcode payload of a cargo that
// is otherwise valid and signed (by the test vectors' key, here, for each input: no
// signature check needs turning off); an engine loads it as a loader does: verification,
// selection, the bitcode rules, -O2 and code generation, the import check, linking. An LLVM
// fatal error ends this process (in a loader, the compile service's child absorbs it): a
// finding to report.
#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "xcargo/file.h"
#include "build/keys.h"
#include "build/writer.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

const std::string kKeys = XCARGO_SOURCE_DIR "/format-spec/vectors/keys/vector-signer";

// The vectors' key is published (mode 0644 in git): read as PEM, as their generator does.
const SigningKey& signer() {
  static const SigningKey key = [] {
    auto pem = read_file(kKeys + ".key", 64 * 1024);
    auto k = SigningKey::from_pem(std::string_view(reinterpret_cast<const char*>(pem->data()), pem->size()), kKeys);
    return std::move(*k);
  }();
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Manifest m;
  m.name = "fuzz";
  m.version = "1";
  m.entries = {"run"};
  Payload p{{"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"run", "run"}}, {}},
            Bytes(data, data + size)};
  auto cargo = write_cargo(m, {p});
  if (!cargo.ok()) return 0;  // what the writer refuses never reaches a loader
  auto signed_cargo = add_signature(*cargo, signer());
  auto trust = TrustStore::load(kKeys + ".pub");
  if (!signed_cargo.ok() || !trust.ok()) return 0;
  EngineConfig config;
  config.prefer = Prefer::bitcode;
  auto engine = Engine::create(config, std::move(*trust));  // one per input: nothing accumulates
  if (engine.ok()) (void)(*engine)->load(std::move(*signed_cargo));
  return 0;
}
