// Line: a log line built in a fixed buffer, without allocation (the request path's lines).
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "xcargo/types.h"

namespace xcargo::loader {

// What does not fit in the buffer is cut.
class Line {
public:
  Line& add(std::string_view s) {
    const size_t k = std::min(s.size(), sizeof buf_ - n_);
    std::memcpy(buf_ + n_, s.data(), k);
    n_ += k;
    return *this;
  }
  Line& hex(ByteView b) {
    static constexpr char kDigits[] = "0123456789abcdef";
    for (uint8_t x : b)
      if (n_ + 2 <= sizeof buf_) buf_[n_++] = kDigits[x >> 4], buf_[n_++] = kDigits[x & 15];
    return *this;
  }
  Line& num(uint64_t v) {
    n_ = size_t(std::to_chars(buf_ + n_, buf_ + sizeof buf_, v).ptr - buf_);
    return *this;
  }
  // ns nanoseconds as microseconds with one decimal ("12.3"), or two ("0.04").
  Line& us(uint64_t ns) { return num(ns / 1000).add(".").num(ns / 100 % 10); }
  Line& us2(uint64_t ns) { return num(ns / 1000).add(".").num(ns / 100 % 10).num(ns / 10 % 10); }
  std::string_view view() const { return {buf_, n_}; }

private:
  char buf_[512];
  size_t n_ = 0;
};

}  // namespace xcargo::loader
