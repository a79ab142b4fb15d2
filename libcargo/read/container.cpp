// Parses the header, section table and signature block (spec section 8, steps 1-3).
#include <zstd.h>

#include <cstring>
#include <set>

#include "common/le.h"
#include "xcargo/cargo.h"

namespace xcargo {

using namespace format;

static std::string at(uint64_t offset) { return "offset " + std::to_string(offset); }

static Error malformed(const std::string& msg) { return Error(Errc::malformed, msg); }

static bool known_kind(uint16_t kind) {
  return kind == uint16_t(SectionKind::manifest) || kind == uint16_t(SectionKind::bitcode) ||
         kind == uint16_t(SectionKind::elf_object);
}

static Status parse_header(ByteView b, const Limits& limits, Container& c, uint32_t& count) {
  if (b.size() < kHeaderSize) {
    if (b.size() >= sizeof(kMagic) && std::memcmp(b.data(), kMagic, sizeof(kMagic)) != 0)
      return malformed("not an xcargo file (bad magic)");
    return malformed("truncated: " + std::to_string(b.size()) + " bytes is shorter than the " +
                     std::to_string(kHeaderSize) + "-byte header");
  }
  if (b.size() > limits.max_cargo_size)
    return Error(Errc::limit, "cargo is " + std::to_string(b.size()) + " bytes, over the limit of " +
                                  std::to_string(limits.max_cargo_size));
  const uint8_t* h = b.data();
  if (std::memcmp(h + kHdrMagic, kMagic, sizeof(kMagic)) != 0)
    return Error(malformed("not an xcargo file (bad magic)"))
        .hint("an xcargo file starts with the bytes 89 58 43 47 0d 0a 1a 0a");
  c.version_major = le::load16(h + kHdrVersionMajor);
  c.version_minor = le::load16(h + kHdrVersionMinor);
  if (c.version_major != kVersionMajor)
    return Error(Errc::unsupported, "unsupported format version " + std::to_string(c.version_major) + "." +
                                        std::to_string(c.version_minor) + " (this reader supports " +
                                        std::to_string(kVersionMajor) + ".x)")
        .hint("use an xcargo release that supports this format version");
  if (le::load16(h + kHdrHeaderSize) != kHeaderSize)
    return malformed("header: header_size is " + std::to_string(le::load16(h + kHdrHeaderSize)) + ", must be 64");
  if (le::load16(h + kHdrEntrySize) != kSectionEntrySize)
    return malformed("header: section_entry_size is " + std::to_string(le::load16(h + kHdrEntrySize)) +
                     ", must be 64");
  if (le::load32(h + kHdrFlags) != 0) return malformed("header: reserved flags at " + at(kHdrFlags) + " are not zero");
  if (!le::all_zero(h + kHdrReserved, kHeaderSize - kHdrReserved))
    return malformed("header: reserved bytes at " + at(kHdrReserved) + " are not zero");
  count = le::load32(h + kHdrSectionCount);
  if (count == 0) return malformed("header: section_count is 0 (a cargo needs at least its manifest)");
  if (count > kMaxSections)
    return Error(Errc::limit, "header: section_count " + std::to_string(count) + " is over the limit of " +
                                  std::to_string(kMaxSections));
  c.content_size = le::load64(h + kHdrContentSize);
  uint64_t table_end = kHeaderSize + uint64_t(count) * kSectionEntrySize;
  if (c.content_size < table_end)
    return malformed("header: content_size " + std::to_string(c.content_size) + " ends inside the section table");
  if (c.content_size > b.size())
    return malformed("truncated: content_size is " + std::to_string(c.content_size) + " bytes but the file has " +
                     std::to_string(b.size()));
  return {};
}

static Status parse_sections(ByteView b, const Limits& limits, uint32_t count, Container& c) {
  uint64_t expected_offset = kHeaderSize + uint64_t(count) * kSectionEntrySize;
  uint64_t total_raw = 0;
  c.sections.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    const uint64_t base = kHeaderSize + uint64_t(i) * kSectionEntrySize;
    const uint8_t* e = b.data() + base;
    const std::string where = "section " + std::to_string(i);
    SectionEntry s;
    s.kind = le::load16(e + kSecKind);
    uint8_t comp = e[kSecCompression];
    if (e[kSecReserved1] != 0 || le::load32(e + kSecReserved2) != 0)
      return malformed(where + ": reserved bytes at " + at(base + kSecReserved1) + " are not zero");
    s.offset = le::load64(e + kSecOffset);
    s.stored_size = le::load64(e + kSecStoredSize);
    s.raw_size = le::load64(e + kSecRawSize);
    std::memcpy(s.stored_sha256.data(), e + kSecStoredSha256, 32);

    if (i == 0 && s.kind != uint16_t(SectionKind::manifest))
      return malformed("section 0: kind is " + std::to_string(s.kind) +
                       ", the first section must be the manifest");
    if (i > 0 && s.kind == uint16_t(SectionKind::manifest))
      return malformed(where + ": duplicate section: a second manifest");
    if (!s.ancillary() && !known_kind(s.kind))
      return Error(Errc::unsupported, where + ": unknown critical section kind " + std::to_string(s.kind))
          .hint("the cargo needs a newer reader, or it was damaged");
    if (comp > uint8_t(Compression::zstd_dict1))
      return Error(Errc::unsupported, where + ": unknown compression " + std::to_string(comp));
    s.compression = Compression(comp);

    if (s.offset != expected_offset)
      return malformed(where + ": data offset " + std::to_string(s.offset) + " should be " +
                       std::to_string(expected_offset) + " (sections are contiguous, in table order)");
    const uint64_t raw_limit = s.kind == uint16_t(SectionKind::manifest) ? limits.max_manifest_size
                                                                         : limits.max_section_raw_size;
    if (s.raw_size > raw_limit)
      return Error(Errc::limit, where + ": declared size " + std::to_string(s.raw_size) + " is over the limit of " +
                                    std::to_string(raw_limit));
    total_raw += s.raw_size;
    if (total_raw > limits.max_total_raw_size)
      return Error(Errc::limit, where + ": total declared size is over the limit of " +
                                    std::to_string(limits.max_total_raw_size));
    if (s.compression == Compression::none && s.stored_size != s.raw_size)
      return malformed(where + ": stored size differs from raw size for an uncompressed section");
    if (s.compression != Compression::none &&
        (s.stored_size == 0 || s.stored_size > ZSTD_compressBound(s.raw_size)))
      return malformed(where + ": stored size " + std::to_string(s.stored_size) +
                       " is impossible for a zstd frame of raw size " + std::to_string(s.raw_size));
    if (s.stored_size > c.content_size - s.offset)
      return malformed(where + ": data at " + at(s.offset) + " runs past the content end (" +
                       std::to_string(c.content_size) + ")");
    expected_offset = s.offset + s.stored_size;
    c.sections.push_back(s);
  }
  if (expected_offset != c.content_size)
    return malformed("header: content_size is " + std::to_string(c.content_size) + " but the sections end at " +
                     std::to_string(expected_offset));
  return {};
}

static Status parse_signatures(ByteView b, Container& c) {
  const uint64_t start = c.content_size;
  const uint64_t avail = b.size() - start;
  if (avail < kSigBlockHeaderSize)
    return malformed("truncated: the signature block at " + at(start) + " is missing or cut short");
  const uint8_t* p = b.data() + start;
  if (std::memcmp(p, kSigMagic, sizeof(kSigMagic)) != 0)
    return malformed("signature block at " + at(start) + ": bad magic");
  uint32_t n = le::load32(p + 4);
  if (n > kMaxSignatures)
    return Error(Errc::limit, "signature block: " + std::to_string(n) + " signatures, over the limit of " +
                                  std::to_string(kMaxSignatures));
  const uint64_t need = kSigBlockHeaderSize + uint64_t(n) * kSigEntrySize;
  if (avail < need) return malformed("truncated: the signature block declares " + std::to_string(n) + " signatures");
  if (avail > need)
    return malformed("trailing data: " + std::to_string(avail - need) + " byte(s) after the signature block at " +
                     at(start + need));
  std::set<KeyId> seen;
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t off = start + kSigBlockHeaderSize + uint64_t(i) * kSigEntrySize;
    const uint8_t* e = b.data() + off;
    SignatureEntry s;
    s.algorithm = le::load16(e);
    if (s.algorithm != kSigAlgEd25519)
      return Error(Errc::unsupported, "signature " + std::to_string(i) + ": unknown algorithm " +
                                          std::to_string(s.algorithm));
    if (le::load16(e + 2) != 0 || le::load32(e + 4) != 0)
      return malformed("signature " + std::to_string(i) + ": reserved bytes at " + at(off + 2) + " are not zero");
    std::memcpy(s.key_id.data(), e + 8, kKeyIdSize);
    std::memcpy(s.signature.data(), e + 16, kEd25519SignatureSize);
    if (!seen.insert(s.key_id).second)
      return malformed("signature " + std::to_string(i) + ": duplicate signature by key " + to_hex(s.key_id));
    c.signatures.push_back(s);
  }
  return {};
}

Result<Container> parse_container(ByteView bytes, const Limits& limits) {
  Container c;
  uint32_t count = 0;
  XC_TRY(parse_header(bytes, limits, c, count));
  XC_TRY(parse_sections(bytes, limits, count, c));
  XC_TRY(parse_signatures(bytes, c));
  c.digest = sha256(bytes.first(kHeaderSize + size_t(count) * kSectionEntrySize));
  return c;
}

std::array<uint8_t, kSignedMessageSize> signed_message(const Digest& cargo_digest) {
  std::array<uint8_t, kSignedMessageSize> m{};
  std::memcpy(m.data(), kSignedContext, sizeof(kSignedContext));
  std::memcpy(m.data() + sizeof(kSignedContext), cargo_digest.data(), cargo_digest.size());
  return m;
}

}  // namespace xcargo
