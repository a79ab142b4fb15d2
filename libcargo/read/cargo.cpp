// Full verification of a cargo in the spec's order (section 8) and bounded section decoding.
#include "xcargo/cargo.h"

#define ZSTD_STATIC_LINKING_ONLY  // ZSTD_getFrameHeader, to read the declared window
#include <zstd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>

#include "common/le.h"
#include "read/dictionary.h"
#include "read/elf.h"
#include "xcargo/file.h"

namespace xcargo {

using namespace format;

namespace {

std::string kind_label(uint16_t kind) {
  switch (kind) {
    case uint16_t(SectionKind::manifest): return "manifest";
    case uint16_t(SectionKind::bitcode): return "bitcode";
    case uint16_t(SectionKind::elf_object): return "object";
  }
  return "ancillary kind " + std::to_string(kind);
}

// Spec 4.2, before any decompression: one frame, declaring exactly the section's raw size.
Status check_frame(ByteView stored, const SectionEntry& s, const std::string& desc) {
  unsigned long long declared = ZSTD_getFrameContentSize(stored.data(), stored.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) return Error(Errc::malformed, desc + ": not a zstd frame");
  if (declared == ZSTD_CONTENTSIZE_UNKNOWN || declared != s.raw_size)
    return Error(Errc::malformed, desc + ": zstd frame size does not match the declared size " + std::to_string(s.raw_size));
  size_t frame = ZSTD_findFrameCompressedSize(stored.data(), stored.size());
  if (ZSTD_isError(frame) || frame != stored.size())
    return Error(Errc::malformed, desc + ": section must hold exactly one complete zstd frame");
  // The window the header declares, whatever path decompression takes: zstd's one-shot
  // decoder (and its streaming decoder when the output fits) ignores ZSTD_d_windowLogMax.
  ZSTD_frameHeader header{};
  if (ZSTD_getFrameHeader(&header, stored.data(), stored.size()) != 0)
    return Error(Errc::malformed, desc + ": unreadable zstd frame header");
  if (header.windowSize > (1ull << kMaxWindowLog))
    return Error(Errc::malformed, desc + ": zstd frame declares a window of " + std::to_string(header.windowSize) +
                                      " bytes, over the limit of " + std::to_string(1ull << kMaxWindowLog) + " (windowLog " +
                                      std::to_string(kMaxWindowLog) + ")")
        .hint("compress with a windowLog of at most " + std::to_string(kMaxWindowLog) + " (zstd --long=27 or less)");
  return {};
}

// A decompression context and the scratch buffer sections stream through, reset for each
// section and kept between sections and cargos, for whichever thread verifies next:
// creating them (~250 KiB: zstd's tables, a scratch buffer, the heap growing and shrinking
// around them) cost more than the rest of verifying a small cargo. One whose window grew
// large streaming a big section is freed after use rather than kept.
struct Decoder {
  ZSTD_DCtx* dctx = nullptr;
  Bytes scratch;
};

std::mutex g_spare_mu;
Decoder* g_spare = nullptr;  // guarded by g_spare_mu

class HeldDecoder {
public:
  HeldDecoder() {
    {
      std::lock_guard<std::mutex> l(g_spare_mu);
      std::swap(d_, g_spare);
    }
    if (!d_) {
      d_ = new Decoder;
      d_->dctx = ZSTD_createDCtx();
      d_->scratch.resize(ZSTD_DStreamOutSize());
    }
    if (d_->dctx) {
      ZSTD_DCtx_reset(d_->dctx, ZSTD_reset_session_and_parameters);
      ZSTD_DCtx_setParameter(d_->dctx, ZSTD_d_windowLogMax, kMaxWindowLog);  // at most 128 MiB of window
    }
  }
  ~HeldDecoder() {
    constexpr size_t kKeepAtMost = size_t(1) << 20;
    if (d_->dctx && ZSTD_sizeof_DCtx(d_->dctx) <= kKeepAtMost) {
      std::lock_guard<std::mutex> l(g_spare_mu);
      if (!g_spare) std::swap(d_, g_spare);
    }
    if (d_) {
      ZSTD_freeDCtx(d_->dctx);
      delete d_;
    }
  }
  HeldDecoder(const HeldDecoder&) = delete;
  HeldDecoder& operator=(const HeldDecoder&) = delete;
  ZSTD_DCtx* dctx() const { return d_->dctx; }
  Bytes& scratch() const { return d_->scratch; }

private:
  Decoder* d_ = nullptr;
};

// Decompresses a section into exactly raw_size bytes; the output buffer is sized from the
// declared size, which parse_container() already checked against the limits.
Result<Bytes> decode(ByteView stored, const SectionEntry& s, const std::string& desc) {
  if (sha256(stored) != s.stored_sha256) return Error(Errc::digest_mismatch, desc + ": digest mismatch");
  if (s.compression == Compression::none) return Bytes(stored.begin(), stored.end());
  XC_TRY(check_frame(stored, s, desc));
  HeldDecoder held;
  ZSTD_DCtx* dctx = held.dctx();
  if (!dctx) return Error(Errc::io, desc + ": out of memory");
  if (s.compression == Compression::zstd_dict1) {
    const ZSTD_DDict* dict = dictionary1_ddict();
    if (!dict) return Error(Errc::io, desc + ": cannot load zstd dictionary 1");
    ZSTD_DCtx_refDDict(dctx, dict);
  }
  Bytes raw(size_t(s.raw_size));
  size_t n = ZSTD_decompressDCtx(dctx, raw.data(), raw.size(), stored.data(), stored.size());
  if (ZSTD_isError(n)) return Error(Errc::malformed, desc + ": zstd: " + ZSTD_getErrorName(n));
  if (n != s.raw_size) return Error(Errc::malformed, desc + ": decompressed to " + std::to_string(n) + " bytes, declared " + std::to_string(s.raw_size));
  return raw;
}

// Incremental SHA-256 (OpenSSL EVP).
class Sha256Stream {
public:
  Sha256Stream() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) { EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr); }
  void update(const void* p, size_t n) { EVP_DigestUpdate(ctx_.get(), p, n); }
  Digest finish() {
    Digest d{};
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx_.get(), d.data(), &len);
    return d;
  }

private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

// The same checks as decode() followed by a raw digest comparison, without holding the
// raw bytes: the frame is decompressed in chunks through `scratch` and hashed as it goes.
// `head` receives the first bytes of the raw payload (for the payload magic checks).
Status check_streaming(ByteView stored, const SectionEntry& s, const std::string& desc, const Digest* raw_digest,
                       Bytes& head) {
  if (sha256(stored) != s.stored_sha256) return Error(Errc::digest_mismatch, desc + ": digest mismatch");
  head.clear();
  if (s.compression == Compression::none) {
    head.assign(stored.begin(), stored.begin() + std::min<size_t>(stored.size(), 64));
    if (raw_digest && s.stored_sha256 != *raw_digest) return Error(Errc::digest_mismatch, desc + ": digest mismatch");
    return {};
  }
  XC_TRY(check_frame(stored, s, desc));
  HeldDecoder held;
  ZSTD_DCtx* ds = held.dctx();
  if (!ds) return Error(Errc::io, desc + ": out of memory");
  Bytes& scratch = held.scratch();
  const ZSTD_DDict* dict = nullptr;
  if (s.compression == Compression::zstd_dict1 && !(dict = dictionary1_ddict()))
    return Error(Errc::io, desc + ": cannot load zstd dictionary 1");
  ZSTD_DCtx_refDDict(ds, dict);  // nullptr: no dictionary for this section
  Sha256Stream hash;
  ZSTD_inBuffer in{stored.data(), stored.size(), 0};
  uint64_t produced = 0;
  size_t ret = 1;
  while (ret != 0) {
    ZSTD_outBuffer out{scratch.data(), scratch.size(), 0};
    ret = ZSTD_decompressStream(ds, &out, &in);
    if (ZSTD_isError(ret)) return Error(Errc::malformed, desc + ": zstd: " + ZSTD_getErrorName(ret));
    produced += out.pos;
    if (produced > s.raw_size)
      return Error(Errc::malformed, desc + ": decompresses to more than the declared " + std::to_string(s.raw_size) + " bytes");
    if (head.size() < 64) head.insert(head.end(), scratch.data(), scratch.data() + std::min<size_t>(out.pos, 64 - head.size()));
    hash.update(scratch.data(), out.pos);
    if (ret != 0 && in.pos == in.size && out.pos == 0)
      return Error(Errc::malformed, desc + ": zstd frame is truncated");
  }
  if (produced != s.raw_size)
    return Error(Errc::malformed, desc + ": decompressed to " + std::to_string(produced) + " bytes, declared " + std::to_string(s.raw_size));
  if (raw_digest && hash.finish() != *raw_digest) return Error(Errc::digest_mismatch, desc + ": digest mismatch");
  return {};
}

uint16_t elf_machine_for(std::string_view triple) {
  if (triple.starts_with("x86_64-")) return 62;    // EM_X86_64
  if (triple.starts_with("aarch64-")) return 183;  // EM_AARCH64
  if (triple.starts_with("riscv64-")) return 243;  // EM_RISCV
  return 0;
}

// Cheap sanity checks of what a payload claims to be; the loader's linker checks the rest.
// raw: the payload, or at least its first 64 bytes.
Status check_payload(const Bytes& raw, const Variant& v, const std::string& desc) {
  if (v.kind == VariantKind::bitcode) {
    static const uint8_t kRaw[4] = {'B', 'C', 0xC0, 0xDE}, kWrapped[4] = {0xDE, 0xC0, 0x17, 0x0B};
    if (raw.size() < 4 || (std::memcmp(raw.data(), kRaw, 4) && std::memcmp(raw.data(), kWrapped, 4)))
      return Error(Errc::malformed, desc + ": not LLVM bitcode (bad magic)");
    return {};
  }
  if (raw.size() < 64 || std::memcmp(raw.data(), "\x7f" "ELF", 4) != 0)
    return Error(Errc::malformed, desc + ": not an ELF file");
  if (raw[4] != 2 || raw[5] != 1) return Error(Errc::malformed, desc + ": not a 64-bit little-endian ELF file");
  if (le::load16(raw.data() + 16) != 1) return Error(Errc::malformed, desc + ": not an ELF relocatable object (ET_REL)");
  uint16_t want = elf_machine_for(v.triple);
  if (want == 0) return Error(Errc::unsupported, desc + ": unsupported object triple '" + v.triple + "'");
  if (le::load16(raw.data() + 18) != want)
    return Error(Errc::malformed, desc + ": ELF machine " + std::to_string(le::load16(raw.data() + 18)) +
                                      " does not match triple " + v.triple);
  return {};
}

}  // namespace

Result<uint64_t> object_loaded_size(ByteView object, const std::string& what) {
  return elf::loaded_size(object, what, kMaxObjectMemory);
}

namespace {

// Spec 5.4: an object's undefined symbols are exactly its variant's `imports` (which the
// manifest check already holds to the allow-list): what the loader links is what was listed.
Status check_imports(const Bytes& object, const Variant& v, const std::string& desc) {
  auto undefined = elf::undefined_symbols(object, desc, kMaxImports);
  XC_TRY(undefined);
  std::vector<std::string> missing, extra;
  std::set_difference(undefined->begin(), undefined->end(), v.imports.begin(), v.imports.end(), std::back_inserter(missing));
  std::set_difference(v.imports.begin(), v.imports.end(), undefined->begin(), undefined->end(), std::back_inserter(extra));
  auto list = [](const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", '" : "'") + names[i] + "'";
    return out + (names.size() > 8 ? ", ..." : "");
  };
  if (!missing.empty())
    return Error(Errc::manifest, desc + ": the object imports " + list(missing) + ", which the variant's imports do not list")
        .hint("a variant's imports are exactly the object's undefined symbols (format-spec/xcargo-format.md, section 5.4)");
  if (!extra.empty())
    return Error(Errc::manifest, desc + ": the variant's imports list " + list(extra) + ", which the object does not import")
        .hint("a variant's imports are exactly the object's undefined symbols (format-spec/xcargo-format.md, section 5.4)");
  return {};
}

Status check_signatures(const Container& c, const TrustStore& trust, std::vector<Signer>& signers) {
  if (c.signatures.empty())
    return Error(Errc::not_signed, "cargo is not signed").hint("sign it with 'xcargo sign CARGO --key KEY'");
  const auto msg = signed_message(c.digest);
  size_t trusted = 0;
  std::string revoked;
  for (size_t i = 0; i < c.signatures.size(); ++i) {
    const auto& s = c.signatures[i];
    Signer& signer = signers[i];
    if (trust.revoked(s.key_id)) revoked += (revoked.empty() ? "" : ", ") + to_hex(s.key_id);
    const PublicKey* key = trust.find(s.key_id);
    if (!key) continue;  // a co-signer this verifier does not know: neither good nor bad
    if (!ed25519_verify(*key, msg, s.signature))
      return Error(Errc::bad_signature, "signature " + std::to_string(i) + " by key " + to_hex(s.key_id) + " (" +
                                            key->source + ") does not verify")
          .hint("the cargo was changed after it was signed, or the signature was damaged");
    signer.trusted = true;
    signer.key_source = key->source;
    ++trusted;
  }
  if (trusted == 0 && !revoked.empty()) return revoked_signers_error(revoked);
  if (trusted == 0) {
    std::string ids;
    for (const auto& s : c.signatures) ids += (ids.empty() ? "" : ", ") + to_hex(s.key_id);
    return Error(Errc::untrusted, "no signature by a trusted key (signed by " + ids + ")")
        .hint("add the signer's .pub file to the trust directory if you trust it")
        .hint("'xcargo inspect CARGO' shows who signed it");
  }
  return {};
}

std::vector<KeyId> trusted_signers(const std::vector<Signer>& signers) {
  std::vector<KeyId> ids;
  for (const Signer& s : signers)
    if (s.trusted) ids.push_back(s.key_id);
  return ids;
}

}  // namespace

std::string Cargo::describe_section(uint32_t index) const {
  for (const auto& v : manifest_.variants)
    if (v.section == index)
      return "section " + std::to_string(index) + " (" + v.name +
             (v.name == variant_kind_name(v.kind) ? "" : std::string(" ") + variant_kind_name(v.kind)) + ")";
  uint16_t kind = index < container_.sections.size() ? container_.sections[index].kind : 0;
  return "section " + std::to_string(index) + " (" + kind_label(kind) + ")";
}

Result<Bytes> Cargo::section_data(uint32_t index) const {
  if (index >= container_.sections.size())
    return Error(Errc::invalid_argument, "section " + std::to_string(index) + " does not exist");
  const SectionEntry& s = container_.sections[index];
  const std::string desc = describe_section(index);
  auto raw = decode(ByteView(bytes_).subspan(size_t(s.offset), size_t(s.stored_size)), s, desc);
  XC_TRY(raw);
  for (const auto& v : manifest_.variants)
    if (v.section == index && sha256(*raw) != v.sha256) return Error(Errc::digest_mismatch, desc + ": digest mismatch");
  return raw;
}

Result<Bytes> Cargo::variant_payload(const Variant& variant) const { return section_data(variant.section); }

Result<Cargo> load_cargo(Bytes bytes, const TrustStore* trust, const Limits& limits) {
  Cargo cargo;
  cargo.bytes_ = std::move(bytes);
  // Steps 1-3: structure and limits, nothing allocated from declared sizes yet.
  auto container = parse_container(cargo.bytes_, limits);
  XC_TRY(container);
  cargo.container_ = std::move(*container);
  const Container& c = cargo.container_;
  cargo.signers_.resize(c.signatures.size());
  for (size_t i = 0; i < c.signatures.size(); ++i) cargo.signers_[i].key_id = c.signatures[i].key_id;

  // A cargo the trust directory revokes by digest goes no further (trust-directory.md).
  if (trust) XC_TRY(trust->rules().check_digest(c.digest));

  // Step 4: signatures over the cargo digest, before any section is decompressed or parsed.
  if (trust) XC_TRY(check_signatures(c, *trust, cargo.signers_));

  // Step 5: the manifest.
  auto manifest_raw = cargo.section_data(0);
  XC_TRY(manifest_raw);
  auto manifest = parse_manifest(std::string_view(reinterpret_cast<const char*>(manifest_raw->data()), manifest_raw->size()));
  XC_TRY(manifest);
  cargo.manifest_ = std::move(*manifest);

  // The minimum versions for this name and the signers that made it trusted (rollback).
  if (trust) XC_TRY(trust->rules().check_version(cargo.manifest_.name, cargo.manifest_.version, trusted_signers(cargo.signers_)));

  // Step 6: the manifest and the section table describe the same sections.
  std::vector<int> used(c.sections.size(), 0);
  for (const auto& v : cargo.manifest_.variants) {
    const std::string where = "manifest: variant '" + v.name + "'";
    if (v.section >= c.sections.size())
      return Error(Errc::manifest, where + ": section " + std::to_string(v.section) + " does not exist");
    const SectionEntry& s = c.sections[v.section];
    const uint16_t want = uint16_t(v.kind == VariantKind::object ? SectionKind::elf_object : SectionKind::bitcode);
    if (s.kind != want)
      return Error(Errc::manifest, where + ": section " + std::to_string(v.section) + " is of kind " + kind_label(s.kind) +
                                       ", not " + variant_kind_name(v.kind));
    if (s.raw_size != v.raw_size)
      return Error(Errc::manifest, where + ": raw_size " + std::to_string(v.raw_size) + " differs from the section table's " +
                                       std::to_string(s.raw_size));
    used[v.section]++;
  }
  for (uint32_t i = 1; i < c.sections.size(); ++i)
    if (!c.sections[i].ancillary() && used[i] == 0)
      return Error(Errc::manifest, "section " + std::to_string(i) + " (" + kind_label(c.sections[i].kind) +
                                       ") is not described by the manifest");

  // Step 7: every section decompresses to its declared size and digest. Bitcode and
  // ancillary sections are streamed through one scratch buffer; an object is held whole
  // (bounded by the payload limit) to read its symbol table.
  Bytes head;
  for (uint32_t i = 1; i < c.sections.size(); ++i) {
    const SectionEntry& s = c.sections[i];
    const Variant* variant = nullptr;
    for (const auto& v : cargo.manifest_.variants)
      if (v.section == i) variant = &v;
    const std::string desc = cargo.describe_section(i);
    ByteView stored = ByteView(cargo.bytes_).subspan(size_t(s.offset), size_t(s.stored_size));
    if (variant && variant->kind == VariantKind::object) {
      // Objects are held whole (at most the payload limit): their symbol table is read.
      auto raw = decode(stored, s, desc);
      XC_TRY(raw);
      if (sha256(*raw) != variant->sha256) return Error(Errc::digest_mismatch, desc + ": digest mismatch");
      XC_TRY(check_payload(*raw, *variant, desc));
      XC_TRY(check_imports(*raw, *variant, desc));
      XC_TRY(object_loaded_size(*raw, desc));
      continue;
    }
    XC_TRY(check_streaming(stored, s, desc, variant ? &variant->sha256 : nullptr, head));
    if (variant) XC_TRY(check_payload(head, *variant, desc));
  }
  return cargo;
}

void warm_up_verification() {
  // RFC 8032 section 7.1, TEST 1 (the empty message): verifies.
  PublicKey key;
  std::array<uint8_t, 64> sig{};
  if (!from_hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", key.raw) ||
      !from_hex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b", sig))
    return;
  (void)ed25519_verify(key, {}, sig);
  (void)sha256(sig);
  // A manifest-like document (not a valid manifest: only the parser matters here).
  (void)parse_manifest("name: warm-up\nversion: 0.0.0\nentries: [a, b]\nvariants:\n  - {name: x, kind: object}\n");
  HeldDecoder held;  // created now, kept for the first cargo
}

Result<Bytes> read_cargo_file(const std::string& path, const Limits& limits) {
  return read_file(path, limits.max_cargo_size);
}

}  // namespace xcargo
