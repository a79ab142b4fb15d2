// xcargo-vectors: writes the format's test vectors (one valid cargo and one per failure
// class) and their index, vectors.txt. Deterministic: Ed25519 signatures are deterministic
// and the keys are fixed (keys/), so regenerating gives the committed bytes.
//
// usage: xcargo-vectors KEYDIR OUTDIR
#include <zstd.h>

#include <cstdio>
#include <cstring>
#include <algorithm>
#include <functional>
#include <memory>
#include <string>

#include "../../libcargo/common/le.h"
#include "xcargo/cargo.h"
#include "xcargo/file.h"
#include "xcargo/format.h"
#include "build/keys.h"
#include "build/writer.h"
#include "tiny_elf.h"

using namespace xcargo;
namespace fmt = xcargo::format;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "xcargo-vectors: %s\n", what.c_str());
  std::exit(1);
}

template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) die(std::string(what) + ": " + r.error().message());
  return std::move(r).value();
}

// The vectors' keys are published on purpose (mode 0644 in git), so they are read as PEM:
// SigningKey::load refuses a private key file that others can read.
SigningKey published_key(const std::string& path) {
  Bytes pem = must(read_file(path, 64 * 1024), path.c_str());
  return must(SigningKey::from_pem(std::string_view(reinterpret_cast<const char*>(pem.data()), pem.size()), path), path.c_str());
}

// A minimal x86_64 relocatable object whose undefined symbols are the x86_64 variant's
// imports: enough for the payload checks (section 5.4), not linkable code.
Bytes fake_object() { return tiny_elf::object(62, {"memcpy", "xc_reply"}); }

Bytes fake_bitcode() {
  const std::string_view tail = "xcargo test vector bitcode payload";
  Bytes b(4 + tail.size());
  const uint8_t magic[4] = {'B', 'C', 0xC0, 0xDE};
  std::memcpy(b.data(), magic, 4);
  std::memcpy(b.data() + 4, tail.data(), tail.size());
  return b;
}

Manifest base_manifest() {
  Manifest m;
  m.name = "vector";
  m.version = "1.0.0";
  m.entries = {"add"};
  m.toolchain = {{"xcargo", "test-vectors"}};
  return m;
}

std::vector<Payload> base_payloads() {
  Payload bc{{"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"add", "add"}}, {"xc_reply"}},
             fake_bitcode()};
  Payload obj{{"x86_64", VariantKind::object, 0, "x86_64-unknown-linux-gnu", "x86-64", 0, {}, {{"add", "add"}}, {"memcpy", "xc_reply"}},
              fake_object()};
  return {bc, obj};
}

Bytes unsigned_cargo(int level = 19, bool dictionary = true) {
  return must(write_cargo(base_manifest(), base_payloads(), {level, dictionary}), "write");
}

// The manifest text of the base cargo, for vectors that edit it.
std::string base_manifest_text() {
  Manifest m = base_manifest();
  uint32_t i = 1;
  for (auto& p : base_payloads()) {
    p.variant.section = i++;
    p.variant.raw_size = p.raw.size();
    p.variant.sha256 = sha256(p.raw);
    m.variants.push_back(p.variant);
  }
  return emit_manifest(m);
}

// The x86_64 variant's imports in the base manifest text.
const char kObjectImports[] = "imports:\n      - \"memcpy\"\n      - \"xc_reply\"\n";

// The base manifest text of a cargo whose one entry point is called `entry`.
std::string manifest_text_with_entry(const std::string& entry) {
  Manifest m = base_manifest();
  m.entries = {entry};
  uint32_t i = 1;
  for (auto& p : base_payloads()) {
    p.variant.section = i++;
    p.variant.raw_size = p.raw.size();
    p.variant.sha256 = sha256(p.raw);
    p.variant.entries = {{entry, entry}};
    m.variants.push_back(p.variant);
  }
  return emit_manifest(m);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (s.find(from) == std::string::npos) die("vector edit: '" + from + "' not found");
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) s.replace(pos, from.size(), to);
  return s;
}

// The sections of the base cargo with the given manifest text.
std::vector<RawSection> sections_with(const std::string& yaml) {
  std::vector<RawSection> s = {{uint16_t(fmt::SectionKind::manifest), Bytes(yaml.begin(), yaml.end())}};
  for (auto& p : base_payloads())
    s.push_back({uint16_t(p.variant.kind == VariantKind::object ? fmt::SectionKind::elf_object : fmt::SectionKind::bitcode),
                 p.raw});
  return s;
}

// A cargo whose manifest is the given text, with the base payloads.
Bytes with_manifest(const std::string& yaml) { return must(write_sections(sections_with(yaml)), "write_sections"); }

std::string replace(std::string s, const std::string& from, const std::string& to) {
  auto pos = s.find(from);
  if (pos == std::string::npos) die("vector edit: '" + from + "' not found");
  return s.replace(pos, from.size(), to);
}

// The base cargo with the x86_64 variant's object replaced by `object` (and its manifest's
// raw_size and sha256 to match, imports unchanged).
Bytes with_object(const Bytes& object) {
  std::string y = base_manifest_text();
  y = replace(y, "raw_size: " + std::to_string(fake_object().size()) + "\n", "raw_size: " + std::to_string(object.size()) + "\n");
  y = replace(y, to_hex(sha256(fake_object())), to_hex(sha256(object)));
  std::vector<RawSection> s = sections_with(y);
  s[2].raw = object;
  return must(write_sections(s), "write_sections");
}

uint8_t* section_entry(Bytes& b, size_t i) { return b.data() + fmt::kHeaderSize + i * fmt::kSectionEntrySize; }

// A zstd frame of `size` zero bytes, compressed in 1 MiB steps (the generator never holds
// the whole): a decompression bomb. with_size: the frame header states the content size.
Bytes zero_bomb(uint64_t size, bool with_size) {
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, 1);
  ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, with_size ? 1 : 0);
  if (with_size) ZSTD_CCtx_setPledgedSrcSize(cctx.get(), size);
  const Bytes zeros(1 << 20, 0);
  Bytes out(1 << 20);
  Bytes frame;
  for (uint64_t done = 0; done < size;) {
    const size_t n = size_t(std::min<uint64_t>(zeros.size(), size - done));
    done += n;
    ZSTD_inBuffer in{zeros.data(), n, 0};
    const ZSTD_EndDirective end = done == size ? ZSTD_e_end : ZSTD_e_continue;
    size_t left = 0;
    do {
      ZSTD_outBuffer o{out.data(), out.size(), 0};
      left = ZSTD_compressStream2(cctx.get(), &o, &in, end);
      if (ZSTD_isError(left)) die(std::string("zstd: ") + ZSTD_getErrorName(left));
      frame.insert(frame.end(), out.begin(), out.begin() + o.pos);
    } while (in.pos < in.size || (end == ZSTD_e_end && left != 0));
  }
  return frame;
}

// Rewrites the content size in a zstd frame header (a 4-byte field) to `size`.
Bytes with_frame_content_size(Bytes frame, uint32_t size) {
  const uint8_t fhd = frame[4];
  const bool single = (fhd >> 5) & 1;
  const size_t did[] = {0, 1, 2, 4};
  const size_t pos = 5 + (single ? 0 : 1) + did[fhd & 3];
  if ((fhd >> 6) != 2) die("zstd bomb: expected a 4-byte content size field");
  le::store32(frame.data() + pos, size);
  return frame;
}

// A zstd frame holding `raw` in raw blocks, whose header declares the content size and a
// window of 2^window_log bytes (not single-segment): what a writer with --long=28 produces.
Bytes frame_with_window(const Bytes& raw, unsigned window_log) {
  Bytes f = {0x28, 0xB5, 0x2F, 0xFD, 0xC0, uint8_t((window_log - 10) << 3)};  // FCS 8 bytes, window descriptor
  f.resize(f.size() + 8);
  le::store64(f.data() + 6, raw.size());
  size_t done = 0;
  do {
    const size_t n = std::min<size_t>(raw.size() - done, 128 << 10);
    const uint32_t block = uint32_t(n << 3) | (done + n == raw.size() ? 1 : 0);  // Raw_Block, last flag
    f.push_back(uint8_t(block)), f.push_back(uint8_t(block >> 8)), f.push_back(uint8_t(block >> 16));
    f.insert(f.end(), raw.begin() + done, raw.begin() + done + n);
    done += n;
  } while (done < raw.size());
  return f;
}

// `b` with section i's stored bytes replaced by `stored` (compression 1), the table and
// content size adjusted. The signature block must be empty (sign afterwards).
Bytes with_stored(Bytes b, size_t i, const Bytes& stored) {
  auto c = must(parse_container(b), "parse");
  const auto& s = c.sections[i];
  Bytes tail(b.begin() + s.offset + s.stored_size, b.end());
  const int64_t delta = int64_t(stored.size()) - int64_t(s.stored_size);
  b.resize(s.offset);
  b.insert(b.end(), stored.begin(), stored.end());
  b.insert(b.end(), tail.begin(), tail.end());
  uint8_t* e = section_entry(b, i);
  e[fmt::kSecCompression] = uint8_t(fmt::Compression::zstd);
  le::store64(e + fmt::kSecStoredSize, stored.size());
  const Digest d = sha256(stored);
  std::memcpy(e + fmt::kSecStoredSha256, d.data(), d.size());
  for (size_t j = i + 1; j < c.sections.size(); ++j)
    le::store64(section_entry(b, j) + fmt::kSecOffset, uint64_t(int64_t(c.sections[j].offset) + delta));
  le::store64(b.data() + fmt::kHdrContentSize, uint64_t(int64_t(c.content_size) + delta));
  return b;
}

// The base cargo (plain zstd) plus an ancillary section (kind 0x8001) that declares raw_size
// bytes and whose stored bytes are `stored`, with the table's stored size and digest to match.
Bytes with_ancillary_stored(const Bytes& stored, uint64_t raw_size) {
  std::vector<RawSection> s = sections_with(base_manifest_text());
  s.push_back({0x8001, Bytes(raw_size, 0)});
  Bytes b = must(write_sections(s, {1, false}), "write");
  auto c = must(parse_container(b), "parse");
  const size_t last = c.sections.size() - 1;
  const uint64_t offset = c.sections[last].offset;
  Bytes tail(b.begin() + c.content_size, b.end());  // the empty signature block
  b.resize(offset);
  b.insert(b.end(), stored.begin(), stored.end());
  uint8_t* e = section_entry(b, last);
  le::store64(e + fmt::kSecStoredSize, stored.size());
  le::store64(e + fmt::kSecRawSize, raw_size);
  const Digest d = sha256(stored);
  std::memcpy(e + fmt::kSecStoredSha256, d.data(), d.size());
  le::store64(b.data() + fmt::kHdrContentSize, b.size());
  b.insert(b.end(), tail.begin(), tail.end());
  return b;
}

struct Vector {
  const char* name;
  const char* expect;  // "success" or an errc_name()
  const char* about;
  std::function<Bytes()> make;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) die("usage: xcargo-vectors KEYDIR OUTDIR");
  const std::string keydir = argv[1], outdir = argv[2];
  const SigningKey signer = published_key(keydir + "/vector-signer.key");
  const SigningKey other = published_key(keydir + "/other-signer.key");
  auto sign = [&](Bytes b) { return must(add_signature(b, signer), "sign"); };

  const std::vector<Vector> vectors = {
      {"valid", "success", "two variants, zstd sections, signed by vector-signer", [&] { return sign(unsigned_cargo()); }},
      {"valid-uncompressed", "success", "sections stored without compression", [&] { return sign(unsigned_cargo(0)); }},
      {"valid-plain-zstd", "success", "sections compressed with zstd and no dictionary (compression 1)",
       [&] { return sign(unsigned_cargo(19, false)); }},
      {"valid-cosigned", "success", "signed by other-signer (unknown to the verifier) and vector-signer",
       [&] { return sign(must(add_signature(unsigned_cargo(), other), "sign")); }},
      {"valid-ancillary", "success", "an unknown ancillary section (kind 0x8001) that readers skip",
       [&] {
         std::vector<RawSection> s = sections_with(base_manifest_text());
         s.push_back({0x8001, Bytes{'n', 'o', 't', 'e'}});
         return sign(must(write_sections(s), "write"));
       }},
      {"bad-magic", "malformed", "first byte changed", [&] { Bytes b = sign(unsigned_cargo()); b[0] = 0x88; return b; }},
      {"truncated-header", "malformed", "only the first 40 bytes", [&] { Bytes b = sign(unsigned_cargo()); b.resize(40); return b; }},
      {"truncated", "malformed", "cut in the middle of the last section",
       [&] { Bytes b = sign(unsigned_cargo()); auto c = must(parse_container(b), "parse"); b.resize(c.content_size - 5); return b; }},
      {"unsupported-version", "unsupported", "format major version 2",
       [&] { Bytes b = unsigned_cargo(); le::store16(b.data() + fmt::kHdrVersionMajor, 2); return sign(b); }},
      {"reserved-nonzero", "malformed", "a reserved header byte set",
       [&] { Bytes b = unsigned_cargo(); b[fmt::kHdrReserved + 7] = 1; return sign(b); }},
      {"section-reserved-nonzero", "malformed", "a reserved byte of section 1 set",
       [&] { Bytes b = unsigned_cargo(); section_entry(b, 1)[fmt::kSecReserved2] = 1; return sign(b); }},
      {"oversized-declared-size", "limit", "section 1 declares 2^40 raw bytes",
       [&] { Bytes b = unsigned_cargo(); le::store64(section_entry(b, 1) + fmt::kSecRawSize, 1ull << 40); return sign(b); }},
      {"too-many-sections", "limit", "section_count 65",
       [&] { Bytes b = unsigned_cargo(); le::store32(b.data() + fmt::kHdrSectionCount, 65); return b; }},
      {"section-gap", "malformed", "section 2 starts one byte after section 1 ends",
       [&] {
         Bytes b = unsigned_cargo();
         uint8_t* e = section_entry(b, 2);
         le::store64(e + fmt::kSecOffset, le::load64(e + fmt::kSecOffset) + 1);
         return sign(b);
       }},
      {"duplicate-section", "malformed", "section 1 is a second manifest",
       [&] { Bytes b = unsigned_cargo(); le::store16(section_entry(b, 1) + fmt::kSecKind, 1); return sign(b); }},
      {"unknown-critical-section", "unsupported", "section 1 has critical kind 0x0042",
       [&] { Bytes b = unsigned_cargo(); le::store16(section_entry(b, 1) + fmt::kSecKind, 0x42); return sign(b); }},
      {"dictionary-missing", "malformed", "section 1 was compressed with dictionary 1 but is labelled plain zstd (compression 1)",
       [&] {
         std::vector<RawSection> s = sections_with(base_manifest_text());
         // The frame refers to dictionary content that a plain zstd decoder does not have.
         Bytes b = must(write_sections(s, {19, true}), "write");
         section_entry(b, 1)[fmt::kSecCompression] = uint8_t(fmt::Compression::zstd);
         return sign(b);
       }},
      {"unknown-compression", "unsupported", "section 1 uses compression 7",
       [&] { Bytes b = unsigned_cargo(); section_entry(b, 1)[fmt::kSecCompression] = 7; return sign(b); }},
      {"trailing-data", "malformed", "one byte after the signature block",
       [&] { Bytes b = sign(unsigned_cargo()); b.push_back(0); return b; }},
      {"digest-mismatch", "digest_mismatch", "a byte of section 2's stored data changed; signature still valid",
       [&] {
         Bytes b = sign(unsigned_cargo());
         auto c = must(parse_container(b), "parse");
         b[c.sections[2].offset + c.sections[2].stored_size / 2] ^= 0x01;
         return b;
       }},
      {"raw-digest-mismatch", "digest_mismatch", "the manifest's sha256 of the x86_64 payload is wrong; signed",
       [&] {
         std::string y = base_manifest_text();
         std::string good = to_hex(sha256(fake_object()));
         std::string bad = good;
         bad[0] = bad[0] == '0' ? '1' : '0';
         return sign(with_manifest(replace(y, good, bad)));
       }},
      {"zstd-size-mismatch", "malformed", "section 1's zstd frame holds more bytes than its declared raw size",
       [&] {
         std::vector<RawSection> s = {{uint16_t(fmt::SectionKind::manifest), {}}, {uint16_t(fmt::SectionKind::bitcode), fake_bitcode()}};
         std::string y = base_manifest_text();
         s[0].raw.assign(y.begin(), y.end());
         s.push_back({uint16_t(fmt::SectionKind::elf_object), fake_object()});
         s[1].raw.resize(s[1].raw.size() + 4096, 0);  // the frame decompresses to 4 KiB more
         Bytes b = must(write_sections(s), "write");
         le::store64(section_entry(b, 1) + fmt::kSecRawSize, fake_bitcode().size());
         return sign(b);
       }},
      {"zstd-bomb", "malformed", "section 3 (ancillary, raw size 1 MiB) is a zstd frame of 1 GiB of zeros (32 KiB stored) that says so",
       [&] { return sign(with_ancillary_stored(zero_bomb(1ull << 30, true), 1 << 20)); }},
      {"zstd-bomb-unsized", "malformed", "section 3 is the 1 GiB bomb with no content size in its frame header",
       [&] { return sign(with_ancillary_stored(zero_bomb(1ull << 30, false), 1 << 20)); }},
      {"zstd-bomb-lying", "malformed", "section 3 is the 1 GiB bomb whose frame header claims the 1 MiB of its raw size",
       [&] { return sign(with_ancillary_stored(with_frame_content_size(zero_bomb(1ull << 30, true), 1 << 20), 1 << 20)); }},
      {"zstd-window-too-large", "malformed", "the manifest's zstd frame declares a 256 MiB window (windowLog 28; the limit is 27)",
       [&] {
         const std::string y = base_manifest_text();
         return sign(with_stored(unsigned_cargo(), 0, frame_with_window(Bytes(y.begin(), y.end()), 28)));
       }},
      {"manifest-oversized", "limit", "the manifest declares a raw size of 256 KiB + 1",
       [&] { Bytes b = unsigned_cargo(); le::store64(section_entry(b, 0) + fmt::kSecRawSize, (256u << 10) + 1); return sign(b); }},
      {"total-raw-size-over-limit", "limit", "five ancillary sections each declare 60 MiB: 300 MiB in all",
       [&] {
         std::vector<RawSection> s = sections_with(base_manifest_text());
         for (int i = 0; i < 5; ++i) s.push_back({0x8001, Bytes(64, uint8_t(i))});
         Bytes b = must(write_sections(s, {19, false}), "write");
         for (size_t i = 3; i < s.size(); ++i) le::store64(section_entry(b, i) + fmt::kSecRawSize, 60ull << 20);
         return sign(b);
       }},
      {"payload-not-elf", "malformed", "the object variant's payload is not ELF",
       [&] {
         std::vector<RawSection> s = {{uint16_t(fmt::SectionKind::manifest), {}}, {uint16_t(fmt::SectionKind::bitcode), fake_bitcode()}};
         Bytes notelf = fake_object();
         notelf[1] = 'X';
         s.push_back({uint16_t(fmt::SectionKind::elf_object), notelf});
         std::string y = replace(base_manifest_text(), to_hex(sha256(fake_object())), to_hex(sha256(notelf)));
         s[0].raw.assign(y.begin(), y.end());
         return sign(must(write_sections(s), "write"));
       }},
      {"malformed-manifest", "manifest", "the manifest is not valid YAML; signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), "variants:", "variants: [\n"))); }},
      {"manifest-missing-field", "manifest", "a variant without 'triple'; signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), "    triple: \"x86_64-unknown-linux-gnu\"\n", ""))); }},
      {"manifest-duplicate-key", "manifest", "the key 'name' twice at the top level; signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), "name: \"vector\"\n", "name: \"vector\"\nname: \"other\"\n"))); }},
      {"manifest-duplicate-variant-section", "manifest", "two variants name section 1; signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), "section: 2", "section: 1"))); }},
      {"manifest-section-mismatch", "manifest", "a variant's raw_size differs from the section table; signed",
       [&] {
         std::string y = base_manifest_text();
         std::string from = "raw_size: " + std::to_string(fake_object().size());
         return sign(with_manifest(replace(y, from, "raw_size: 1")));
       }},
      {"manifest-imports-unsorted", "manifest", "the x86_64 variant's imports are not in ascending byte order; signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), kObjectImports, "imports:\n      - \"xc_reply\"\n      - \"memcpy\"\n"))); }},
      {"manifest-import-not-allowed", "manifest", "the x86_64 variant imports 'system', which is not on the allow-list; signed",
       [&] {
         return sign(with_manifest(replace(base_manifest_text(), kObjectImports, "imports:\n      - \"memcpy\"\n      - \"system\"\n      - \"xc_reply\"\n")));
       }},
      // Section 5.3: each is valid YAML 1.2 describing the base manifest (or, for the last
      // three, a manifest a core-schema reader types differently), but not its canonical bytes.
      {"manifest-bom", "manifest", "the manifest starts with a UTF-8 byte order mark; signed",
       [&] { return sign(with_manifest("\xEF\xBB\xBF" + base_manifest_text())); }},
      {"manifest-crlf", "manifest", "the manifest's lines end with CR LF; signed",
       [&] { return sign(with_manifest(replace_all(base_manifest_text(), "\n", "\r\n"))); }},
      {"manifest-alias", "manifest", "the entry name is an anchor that the variants' entries refer to by alias; signed",
       [&] {
         std::string y = replace(base_manifest_text(), "entries:\n  - \"add\"", "entries:\n  - &e \"add\"");
         return sign(with_manifest(replace_all(y, "      add: \"add\"", "      add: *e")));
       }},
      {"manifest-flow-style", "manifest", "the x86_64 variant's imports in flow style, [\"memcpy\", \"xc_reply\"]; signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), kObjectImports, "imports: [\"memcpy\", \"xc_reply\"]\n"))); }},
      {"manifest-tag", "manifest", "the name carries an explicit tag, !!str \"vector\"; signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), "name: \"vector\"", "name: !!str \"vector\""))); }},
      {"manifest-keys-unsorted", "manifest", "'format' is the first key at the top level, before 'entries'; signed",
       [&] {
         std::string y = replace(base_manifest_text(), "format: 1\n", "");
         return sign(with_manifest("format: 1\n" + y));
       }},
      {"manifest-plain-true", "manifest", "the entry point 'True' written unquoted (a core-schema reader reads a boolean); signed",
       [&] { return sign(with_manifest(replace_all(manifest_text_with_entry("True"), "\"True\"", "True"))); }},
      {"manifest-quoted-integer", "manifest", "the x86_64 variant's section is the string \"2\" (canonical, but not an integer); signed",
       [&] { return sign(with_manifest(replace(base_manifest_text(), "section: 2", "section: \"2\""))); }},
      {"object-import-unlisted", "manifest", "the x86_64 object imports 'memcpy', 'xc_log' and 'xc_reply'; its variant lists only 'memcpy' and 'xc_reply'; signed",
       [&] { return sign(with_object(tiny_elf::object(62, {"memcpy", "xc_log", "xc_reply"}))); }},
      {"object-import-system", "manifest", "the x86_64 object imports 'system', which its variant's imports omit; signed",
       [&] { return sign(with_object(tiny_elf::object(62, {"memcpy", "system", "xc_reply"}))); }},
      {"object-import-extra", "manifest", "the x86_64 variant lists 'memcpy', which its object does not import; signed",
       [&] { return sign(with_object(tiny_elf::object(62, {"xc_reply"}))); }},
      {"object-bad-symtab", "malformed", "the x86_64 object's symbol table extends past its end; signed",
       [&] {
         Bytes o = fake_object();
         const size_t symtab_header = le::load64(o.data() + 0x28) + 64;
         le::store64(o.data() + symtab_header + 0x20, 24 * 1000);
         return sign(with_object(o));
       }},
      {"unsigned", "not_signed", "no signatures", [&] { return unsigned_cargo(); }},
      {"unknown-key", "untrusted", "signed only by other-signer", [&] { return must(add_signature(unsigned_cargo(), other), "sign"); }},
      {"bad-signature", "bad_signature", "one bit of vector-signer's signature flipped",
       [&] { Bytes b = sign(unsigned_cargo()); b[b.size() - 1] ^= 0x80; return b; }},
      {"too-many-signatures", "limit", "the signature block declares 17 signatures",
       [&] { Bytes b = sign(unsigned_cargo()); auto c = must(parse_container(b), "parse"); le::store32(b.data() + c.content_size + 4, 17); return b; }},
  };

  std::string index =
      "# xcargo format 1 test vectors, generated by format-spec/vectors/generate.cpp. Do not edit.\n"
      "# Verify each NAME.xcargo with the trust store keys/vector-signer.pub; the result must be\n"
      "# 'success' or an error of the class after 'expect:' (see xcargo-format.md, section 9).\n";
  for (const auto& v : vectors) {
    Bytes b = v.make();
    if (auto s = write_file(outdir + "/" + v.name + ".xcargo", b); !s.ok())
      die(outdir + "/" + v.name + ".xcargo: " + s.error().message());
    index += std::string(v.name) + " expect: " + v.expect + "  # " + v.about + "\n";
  }
  if (auto s = write_file(outdir + "/vectors.txt", as_bytes(index)); !s.ok()) die("vectors.txt: " + s.error().message());
  std::printf("wrote %zu vectors to %s\n", vectors.size(), outdir.c_str());
  return 0;
}
