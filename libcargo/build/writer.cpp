// Lays out a cargo: header, section table, zstd-compressed sections, empty signature block.
#include "build/writer.h"

#include <zstd.h>

#include <cstring>
#include <memory>

#include "common/le.h"
#include "read/dictionary.h"
#include "xcargo/format.h"

namespace xcargo {

using namespace format;

namespace {

Result<Bytes> compress(ByteView raw, int level, bool dictionary) {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  if (!cctx) return Error(Errc::io, "zstd: out of memory");
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);  // readers require the size
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_checksumFlag, 0);     // SHA-256 covers integrity
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_dictIDFlag, 0);
  if (dictionary) {
    ByteView d = dictionary1();
    size_t rc = ZSTD_CCtx_loadDictionary(cctx.get(), d.data(), d.size());
    if (ZSTD_isError(rc)) return Error(Errc::io, std::string("zstd dictionary: ") + ZSTD_getErrorName(rc));
  }
  Bytes out(ZSTD_compressBound(raw.size()));
  size_t n = ZSTD_compress2(cctx.get(), out.data(), out.size(), raw.data(), raw.size());
  if (ZSTD_isError(n)) return Error(Errc::io, std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

}  // namespace

Result<Bytes> write_sections(const std::vector<RawSection>& sections, const WriteOptions& options) {
  if (sections.empty() || sections.size() > kMaxSections)
    return Error(Errc::limit, "a cargo holds 1 to " + std::to_string(kMaxSections) + " sections");
  struct Stored {
    Compression compression;
    Bytes bytes;
  };
  std::vector<Stored> stored;
  for (const auto& s : sections) {
    if (s.raw.size() > kMaxSectionRawSize)
      return Error(Errc::limit, "a section of " + std::to_string(s.raw.size()) + " bytes is over the limit of " +
                                    std::to_string(kMaxSectionRawSize));
    if (options.zstd_level == 0) {
      stored.push_back({Compression::none, s.raw});
      continue;
    }
    auto z = compress(s.raw, options.zstd_level, options.dictionary);
    XC_TRY(z);
    stored.push_back({options.dictionary ? Compression::zstd_dict1 : Compression::zstd, std::move(*z)});
  }
  const uint64_t table_end = kHeaderSize + sections.size() * kSectionEntrySize;
  uint64_t content = table_end;
  for (const auto& s : stored) content += s.bytes.size();

  Bytes out(content + kSigBlockHeaderSize, 0);
  uint8_t* h = out.data();
  std::memcpy(h + kHdrMagic, kMagic, sizeof(kMagic));
  le::store16(h + kHdrVersionMajor, kVersionMajor);
  le::store16(h + kHdrVersionMinor, kVersionMinor);
  le::store16(h + kHdrHeaderSize, kHeaderSize);
  le::store16(h + kHdrEntrySize, kSectionEntrySize);
  le::store32(h + kHdrSectionCount, uint32_t(sections.size()));
  le::store64(h + kHdrContentSize, content);
  uint64_t offset = table_end;
  for (size_t i = 0; i < sections.size(); ++i) {
    uint8_t* e = out.data() + kHeaderSize + i * kSectionEntrySize;
    le::store16(e + kSecKind, sections[i].kind);
    e[kSecCompression] = uint8_t(stored[i].compression);
    le::store64(e + kSecOffset, offset);
    le::store64(e + kSecStoredSize, stored[i].bytes.size());
    le::store64(e + kSecRawSize, sections[i].raw.size());
    Digest d = sha256(stored[i].bytes);
    std::memcpy(e + kSecStoredSha256, d.data(), d.size());
    std::memcpy(out.data() + offset, stored[i].bytes.data(), stored[i].bytes.size());
    offset += stored[i].bytes.size();
  }
  std::memcpy(out.data() + content, kSigMagic, sizeof(kSigMagic));  // zero signatures follow
  return out;
}

Result<Bytes> write_cargo(Manifest manifest, std::vector<Payload> payloads, const WriteOptions& options) {
  if (payloads.empty()) return Error(Errc::invalid_argument, "a cargo needs at least one variant");
  if (payloads.size() >= kMaxSections) return Error(Errc::limit, "too many variants");
  manifest.variants.clear();
  std::vector<RawSection> sections(1);
  sections[0].kind = uint16_t(SectionKind::manifest);
  for (size_t i = 0; i < payloads.size(); ++i) {
    Variant v = payloads[i].variant;
    v.section = uint32_t(i + 1);
    v.raw_size = payloads[i].raw.size();
    v.sha256 = sha256(payloads[i].raw);
    manifest.variants.push_back(std::move(v));
    sections.push_back({uint16_t(payloads[i].variant.kind == VariantKind::object ? SectionKind::elf_object
                                                                                  : SectionKind::bitcode),
                        std::move(payloads[i].raw)});
  }
  std::string yaml = emit_manifest(manifest);
  // What we write must be what any reader accepts.
  auto check = parse_manifest(yaml);
  if (!check.ok()) return Error(check.error().code(), "internal: emitted an invalid manifest: " + check.error().message());
  sections[0].raw.assign(yaml.begin(), yaml.end());
  return write_sections(sections, options);
}

}  // namespace xcargo
