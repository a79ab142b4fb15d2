// Reading and verifying .xcargo containers (format spec sections 3-8): the read side that
// the loader links. Nothing here signs, compresses or compiles.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/format.h"
#include "xcargo/manifest.h"
#include "xcargo/trust.h"
#include "xcargo/types.h"

namespace xcargo {

// Upper bounds a reader applies before allocating. Defaults are the format's limits;
// a caller may only lower them.
struct Limits {
  uint64_t max_cargo_size = format::kMaxCargoSize;
  uint64_t max_section_raw_size = format::kMaxSectionRawSize;
  uint64_t max_total_raw_size = format::kMaxTotalRawSize;
  uint64_t max_manifest_size = format::kMaxManifestSize;
};

struct SectionEntry {
  uint16_t kind = 0;
  format::Compression compression = format::Compression::none;
  uint64_t offset = 0;
  uint64_t stored_size = 0;
  uint64_t raw_size = 0;
  Digest stored_sha256{};

  bool ancillary() const { return kind & format::kAncillaryBit; }
};

struct SignatureEntry {
  uint16_t algorithm = format::kSigAlgEd25519;
  KeyId key_id{};
  std::array<uint8_t, 64> signature{};
};

// The container's structure (header, section table, signature block), checked against
// the format and the limits, with no section decompressed and nothing trusted yet.
struct Container {
  uint16_t version_major = 0;
  uint16_t version_minor = 0;
  uint64_t content_size = 0;
  std::vector<SectionEntry> sections;
  std::vector<SignatureEntry> signatures;
  Digest digest{};  // the cargo digest: SHA-256 of header and section table (its identity)
};

// Verification steps 1-3 of the spec: structure only. Errors name the field and offset.
Result<Container> parse_container(ByteView bytes, const Limits& limits = {});

// The bytes a signature signs: kSignedContext followed by the cargo digest.
std::array<uint8_t, format::kSignedMessageSize> signed_message(const Digest& cargo_digest);

struct Signer {
  KeyId key_id{};
  bool trusted = false;   // key is in the trust store and the signature verified
  std::string key_source; // the .pub file of a trusted key
};

// A cargo whose structure, manifest and every section digest have been checked.
class Cargo {
public:
  const Container& container() const { return container_; }
  const Manifest& manifest() const { return manifest_; }
  const Digest& digest() const { return container_.digest; }
  const std::vector<Signer>& signers() const { return signers_; }
  ByteView bytes() const { return bytes_; }
  // "section 2 (x86_64 object)": how messages name a section.
  std::string describe_section(uint32_t index) const;
  // Decompresses one section, bounded by its declared size, and checks its digests.
  Result<Bytes> section_data(uint32_t index) const;
  Result<Bytes> variant_payload(const Variant& variant) const;

private:
  friend Result<Cargo> load_cargo(Bytes, const TrustStore*, const Limits&);
  Bytes bytes_;
  Container container_;
  Manifest manifest_;
  std::vector<Signer> signers_;
};

// Full verification in the spec's order (section 8). With a trust store, at least one
// signature by a trusted key is required and every signature by a trusted key must verify,
// before any section is decompressed, and the store's cargo rules apply (Errc::revoked: a
// revoked digest before the signatures are checked, a minimum version once the manifest is
// read). Without one (inspect), signatures are listed but not checked, and the structure,
// manifest and digests are still checked in full.
Result<Cargo> load_cargo(Bytes bytes, const TrustStore* trust, const Limits& limits = {});

// Takes load_cargo's first-use costs now (OpenSSL's SHA-256 and Ed25519 fetches, a zstd
// decompression context, the YAML parser, the first page faults of each), so that the first
// cargo a loader verifies does not pay them while its client waits.
void warm_up_verification();

// Reads a whole cargo file, refusing files larger than limits.max_cargo_size before reading.
Result<Bytes> read_cargo_file(const std::string& path, const Limits& limits = {});

// The memory an ELF object occupies once loaded (its SHF_ALLOC sections, .bss included):
// `limit` over format::kMaxObjectMemory, `malformed` if its section headers are not inside
// it. load_cargo checks object variants; a loader checks what it JIT-compiled the same way.
Result<uint64_t> object_loaded_size(ByteView object, const std::string& what);

}  // namespace xcargo
