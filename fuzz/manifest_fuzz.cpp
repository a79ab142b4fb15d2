// Fuzz target: the manifest parser (YAML), and its canonical form: a manifest that parses
// emits to text that parses to the same manifest; and the two readers of that form agree:
// what the canonical reader accepts, yaml-cpp's path accepts with the same tree.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "read/canonical.h"
#include "xcargo/manifest.h"
#include "build/writer.h"

using namespace xcargo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  if (auto fast = canon::read_canonical(input)) {
    auto slow = canon::read_yaml(input);
    if (!slow.ok() || canon::emit(*slow) != canon::emit(*fast)) std::abort();
  }
  auto m = parse_manifest(input);
  if (!m.ok()) return 0;
  const std::string text = emit_manifest(*m);
  auto again = parse_manifest(text);
  if (!again.ok() || emit_manifest(*again) != text) std::abort();
  return 0;
}
