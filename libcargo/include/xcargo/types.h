// Byte buffers, digests and key ids shared by every part of libcargo.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace xcargo {

using Bytes = std::vector<uint8_t>;
using ByteView = std::span<const uint8_t>;
using Digest = std::array<uint8_t, 32>;  // SHA-256
using KeyId = std::array<uint8_t, 8>;    // first 8 bytes of SHA-256(raw Ed25519 public key)

Digest sha256(ByteView data);
std::string to_hex(ByteView data);
// Parses lowercase or uppercase hex of exactly out.size() bytes; false on anything else.
bool from_hex(std::string_view hex, std::span<uint8_t> out);

inline ByteView as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace xcargo
