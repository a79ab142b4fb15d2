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

// A peer's word (a cargo's version, say) for a log line: as it is when it holds only
// [A-Za-z0-9._+~-], else in double quotes with " and \ escaped, so that a word with spaces,
// commas or semicolons cannot pass for more of the line ("1, signed by ...; from ...").
inline std::string log_word(std::string_view s) {
  const auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '+' ||
           c == '~' || c == '-';
  };
  bool all_plain = !s.empty();
  for (char c : s) all_plain = all_plain && plain(c);
  if (all_plain) return std::string(s);
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + '"';
}

inline ByteView as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace xcargo
