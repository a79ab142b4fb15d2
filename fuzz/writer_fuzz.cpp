// Fuzz target: write then read. Any payload written into a cargo (compressed with the
// dictionary or plain zstd, or stored) is read back byte for byte.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "xcargo/cargo.h"
#include "build/writer.h"

using namespace xcargo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > (1 << 16)) return 0;
  const uint8_t mode = data[0];
  Payload p;
  p.variant = {"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"e", "e"}}, {"xc_reply"}};
  p.raw = {'B', 'C', 0xC0, 0xDE};  // what a bitcode payload must start with
  p.raw.insert(p.raw.end(), data + 1, data + size);
  Manifest m;
  m.name = "fuzz";
  m.version = "1.0.0";
  m.entries = {"e"};
  WriteOptions o;
  o.zstd_level = mode % 3 == 0 ? 0 : 1;
  o.dictionary = mode % 3 == 1;
  auto bytes = write_cargo(m, {p}, o);
  if (!bytes.ok()) std::abort();
  auto cargo = load_cargo(std::move(*bytes), nullptr);
  if (!cargo.ok()) std::abort();
  auto back = cargo->variant_payload(cargo->manifest().variants.at(0));
  if (!back.ok() || *back != p.raw) std::abort();
  return 0;
}
