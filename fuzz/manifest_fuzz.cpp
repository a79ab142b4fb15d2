// Fuzz target: the manifest parser (YAML), and its canonical form: a manifest that parses
// emits to text that parses to the same manifest.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "xcargo/manifest.h"
#include "xcargo/writer.h"

using namespace xcargo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto m = parse_manifest(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!m.ok()) return 0;
  const std::string text = emit_manifest(*m);
  auto again = parse_manifest(text);
  if (!again.ok() || emit_manifest(*again) != text) std::abort();
  return 0;
}
