// The cargo manifest (format spec section 5): what a cargo holds, as a typed struct.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo {

enum class VariantKind { object, bitcode };
const char* variant_kind_name(VariantKind kind);  // "object" / "bitcode"

struct EntrySymbol {
  std::string entry;   // the name callers use ("add")
  std::string symbol;  // the symbol that implements it in this variant
};

struct Variant {
  std::string name;         // "x86_64", "aarch64", "bitcode", "x86_64:x86-64-v3"
  VariantKind kind = VariantKind::object;
  uint32_t section = 0;     // index into the section table
  std::string triple;       // "x86_64-unknown-linux-gnu", "le64-unknown-unknown"
  std::string cpu;          // "x86-64", "generic", ...
  uint64_t raw_size = 0;    // uncompressed payload size
  Digest sha256{};          // of the uncompressed payload
  std::vector<EntrySymbol> entries;
  std::vector<std::string> imports;  // undefined symbols, sorted
};

struct Manifest {
  uint32_t format = 1;
  std::string name;
  std::string version;
  std::vector<std::string> entries;  // entry point names, sorted
  std::vector<std::pair<std::string, std::string>> toolchain;  // tool -> version, in order
  std::vector<Variant> variants;
  // Floating point: "" (absent: a compiler may contract a*b+c into a fused multiply-add where
  // the target has one, so variants may round differently) or "strict" (no variant may: every
  // variant gives bit-identical results; loaders JIT-compile its bitcode without fusing).
  std::string fp;

  const Variant* find_variant(std::string_view name) const;
};

// Parses and validates a manifest's YAML against the schema (types, names, limits,
// uniqueness). Cross-checks against the section table are done by load_cargo().
Result<Manifest> parse_manifest(std::string_view yaml);

// True if s is a C identifier of 1..64 characters (entry points and symbols).
bool is_identifier(std::string_view s);
// True if s is a valid cargo name: [a-z0-9][a-z0-9._-]{0,63}.
bool is_cargo_name(std::string_view s);

}  // namespace xcargo
