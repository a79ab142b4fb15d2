// Writing .xcargo containers (build side): manifest emission, compression, layout.
#pragma once

#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/manifest.h"
#include "xcargo/types.h"

namespace xcargo {

// One payload for write_cargo: its description (section, raw_size and sha256 are filled
// in by the writer) and its uncompressed bytes.
struct Payload {
  Variant variant;
  Bytes raw;
};

struct WriteOptions {
  int zstd_level = 19;     // 0 stores sections uncompressed
  bool dictionary = true;  // compress with built-in dictionary 1 (compression 2), else plain zstd
};

// The canonical YAML text of a manifest: same Manifest, same bytes.
std::string emit_manifest(const Manifest& manifest);

// Lays out an unsigned cargo (signature block with no entries). The manifest's variants
// are taken from the payloads in order; the result is byte-identical for identical input.
Result<Bytes> write_cargo(Manifest manifest, std::vector<Payload> payloads, const WriteOptions& options = {});

// Lower level, for test vectors: lays out sections exactly as given, section 0 first.
struct RawSection {
  uint16_t kind;
  Bytes raw;
};
Result<Bytes> write_sections(const std::vector<RawSection>& sections, const WriteOptions& options = {});

}  // namespace xcargo
