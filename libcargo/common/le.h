// Little-endian loads and stores for the byte layouts of the format spec (internal).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace xcargo::le {

// One load or store on a little-endian host. GCC left byte loops as loops: a result header's
// four fields took 8 byte stores each, most of Reencoder<ResultMsg>::encode's 4 % of a
// pipelined invocation's worker time.
template <class T>
inline T load(const uint8_t* p) {
  T v;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, sizeof v);
  } else {
    v = 0;
    for (size_t i = 0; i < sizeof v; ++i) v = T(v | T(p[i]) << (8 * i));
  }
  return v;
}
template <class T>
inline void store(uint8_t* p, T v) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, sizeof v);
  } else {
    for (size_t i = 0; i < sizeof v; ++i) p[i] = uint8_t(v >> (8 * i));
  }
}

inline uint16_t load16(const uint8_t* p) { return load<uint16_t>(p); }
inline uint32_t load32(const uint8_t* p) { return load<uint32_t>(p); }
inline uint64_t load64(const uint8_t* p) { return load<uint64_t>(p); }

inline void store16(uint8_t* p, uint16_t v) { store(p, v); }
inline void store32(uint8_t* p, uint32_t v) { store(p, v); }
inline void store64(uint8_t* p, uint64_t v) { store(p, v); }

inline bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (p[i]) return false;
  return true;
}

}  // namespace xcargo::le
