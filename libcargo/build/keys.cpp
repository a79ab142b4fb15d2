// Adding a signature to a cargo.
#include "build/keys.h"

#include <cstring>
#include <filesystem>

#include "common/le.h"
#include "xcargo/cargo.h"
#include "xcargo/file.h"
#include "xcargo/format.h"

namespace xcargo {

Result<Bytes> add_signature(ByteView cargo, const SigningKey& key) {
  using namespace format;
  // Reads only what placing a signature needs, so that test vectors with a deliberately
  // broken header or section table can still carry a valid signature.
  if (cargo.size() < kHeaderSize) return Error(Errc::malformed, "truncated header");
  const uint64_t count = le::load32(cargo.data() + kHdrSectionCount);
  const uint64_t table_end = kHeaderSize + count * kSectionEntrySize;
  const uint64_t content = le::load64(cargo.data() + kHdrContentSize);
  if (count > kMaxSections || table_end > content || content > cargo.size() ||
      cargo.size() - content < kSigBlockHeaderSize || std::memcmp(cargo.data() + content, kSigMagic, sizeof(kSigMagic)) != 0)
    return Error(Errc::malformed, "cannot locate the section table and signature block");
  const uint32_t n = le::load32(cargo.data() + content + 4);
  if (n >= kMaxSignatures || cargo.size() != content + kSigBlockHeaderSize + uint64_t(n) * kSigEntrySize)
    return Error(Errc::malformed, "signature block is full or inconsistent");
  for (uint32_t i = 0; i < n; ++i)
    if (std::memcmp(cargo.data() + content + kSigBlockHeaderSize + i * kSigEntrySize + 8, key.public_key().id.data(), kKeyIdSize) == 0)
      return Error(Errc::invalid_argument, "already signed by key " + to_hex(key.public_key().id));
  auto sig = key.sign(signed_message(sha256(cargo.first(size_t(table_end)))));
  XC_TRY(sig);
  Bytes out(cargo.begin(), cargo.end());
  le::store32(out.data() + content + 4, n + 1);
  uint8_t entry[kSigEntrySize] = {};
  le::store16(entry, kSigAlgEd25519);
  std::memcpy(entry + 8, key.public_key().id.data(), kKeyIdSize);
  std::memcpy(entry + 16, sig->data(), kEd25519SignatureSize);
  out.insert(out.end(), entry, entry + kSigEntrySize);
  return out;
}

Result<Bytes> sign_cargo(ByteView cargo, const SigningKey& key, bool* already_signed) {
  if (already_signed) *already_signed = false;
  // Never sign something that is not a valid cargo.
  auto checked = load_cargo(Bytes(cargo.begin(), cargo.end()), nullptr);
  XC_TRY(checked);
  const auto& sigs = checked->container().signatures;
  for (const auto& s : sigs)
    if (s.key_id == key.public_key().id) {
      if (already_signed) *already_signed = true;
      return Bytes(cargo.begin(), cargo.end());
    }
  if (sigs.size() >= format::kMaxSignatures)
    return Error(Errc::limit, "the cargo already has " + std::to_string(format::kMaxSignatures) + " signatures, the most allowed");
  return add_signature(cargo, key);
}

}  // namespace xcargo
