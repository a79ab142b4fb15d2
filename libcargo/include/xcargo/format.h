// Constants of the .xcargo container, format version 1: the one header paired with
// format-spec/xcargo-format.md. Change both together.
#pragma once

#include <cstddef>
#include <cstdint>

namespace xcargo::format {

// Header (section 3 of the spec). The magic follows PNG's design: a high-bit first byte,
// then "XCG", then CR LF, Ctrl-Z and LF, so that text-mode transfers are detected.
inline constexpr uint8_t kMagic[8] = {0x89, 'X', 'C', 'G', '\r', '\n', 0x1A, '\n'};
inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 0;
inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kSectionEntrySize = 64;

// Header field offsets.
inline constexpr size_t kHdrMagic = 0;
inline constexpr size_t kHdrVersionMajor = 8;
inline constexpr size_t kHdrVersionMinor = 10;
inline constexpr size_t kHdrHeaderSize = 12;
inline constexpr size_t kHdrEntrySize = 14;
inline constexpr size_t kHdrSectionCount = 16;
inline constexpr size_t kHdrFlags = 20;
inline constexpr size_t kHdrContentSize = 24;
inline constexpr size_t kHdrReserved = 32;  // 32 bytes, must be zero

// Section table entry field offsets (section 4 of the spec).
inline constexpr size_t kSecKind = 0;
inline constexpr size_t kSecCompression = 2;
inline constexpr size_t kSecReserved1 = 3;  // 1 byte, must be zero
inline constexpr size_t kSecReserved2 = 4;  // 4 bytes, must be zero
inline constexpr size_t kSecOffset = 8;
inline constexpr size_t kSecStoredSize = 16;
inline constexpr size_t kSecRawSize = 24;
inline constexpr size_t kSecStoredSha256 = 32;

// Section kinds. Bit 15 set = ancillary: a reader that does not know the kind skips it.
// Bit 15 clear = critical: a reader that does not know the kind must refuse the cargo.
enum class SectionKind : uint16_t {
  manifest = 0x0001,
  bitcode = 0x0002,     // LLVM bitcode module
  elf_object = 0x0003,  // ELF64 relocatable object (ET_REL)
};
inline constexpr uint16_t kAncillaryBit = 0x8000;

enum class Compression : uint8_t {
  none = 0,
  zstd = 1,        // a zstd frame without dictionary
  zstd_dict1 = 2,  // a zstd frame compressed with built-in dictionary 1 (spec section 4.3)
};

// Dictionary 1: format-spec/dictionary/xcargo-dict-1.zdict, embedded in the reader.
inline constexpr size_t kDictionary1Size = 16384;
inline constexpr char kDictionary1Sha256[] = "5cf56f9924d54faa872dd2c0640913140f7ee2137b8c1a422ebb8d76239b5d8e";

// Signature block (section 6 of the spec), immediately after the content.
inline constexpr uint8_t kSigMagic[4] = {'X', 'S', 'I', 'G'};
inline constexpr size_t kSigBlockHeaderSize = 8;
inline constexpr size_t kSigEntrySize = 80;
inline constexpr uint16_t kSigAlgEd25519 = 1;
inline constexpr size_t kKeyIdSize = 8;
inline constexpr size_t kEd25519SignatureSize = 64;
inline constexpr size_t kEd25519PublicKeySize = 32;
// Every signature signs kSignedContext (16 bytes, including the trailing zero padding)
// followed by the 32-byte cargo digest.
inline constexpr char kSignedContext[16] = "XCARGO-SIG-V1\0\0";
inline constexpr size_t kSignedMessageSize = 16 + 32;

// Limits (section 7 of the spec). A reader checks declared sizes against these before
// allocating anything; a stricter caller (the loader) may pass lower ones.
inline constexpr uint32_t kMaxSections = 64;
inline constexpr uint32_t kMaxSignatures = 16;
inline constexpr uint64_t kMaxManifestSize = 256 * 1024;
inline constexpr uint64_t kMaxSectionRawSize = 64ull * 1024 * 1024;
inline constexpr uint64_t kMaxTotalRawSize = 256ull * 1024 * 1024;
inline constexpr uint64_t kMaxCargoSize = 256ull * 1024 * 1024;
inline constexpr size_t kMaxNameLength = 64;
inline constexpr size_t kMaxEntries = 256;
inline constexpr size_t kMaxImports = 1024;
// The memory an object payload occupies once loaded: its SHF_ALLOC sections, .bss included.
inline constexpr uint64_t kMaxObjectMemory = 64ull * 1024 * 1024;
// The largest zstd window a frame header may declare (section 7): windowLog 27, 128 MiB.
inline constexpr unsigned kMaxWindowLog = 27;

}  // namespace xcargo::format
