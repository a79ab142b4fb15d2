// resize_large: contents kept, sizes exact, growth geometric (a kernel replying in 4 KiB pieces).
#include <catch2/catch.hpp>

#include "xcargo/types.h"

using namespace xcargo;

TEST_CASE("resize_large keeps the bytes and grows like a vector", "[buffer]") {
  Bytes b = {1, 2, 3};
  resize_large(b, 8 << 20);
  REQUIRE(b.size() == size_t(8) << 20);
  CHECK(b[0] == 1);
  CHECK(b[2] == 3);
  CHECK(b[3] == 0);
  CHECK(b.back() == 0);
  b.back() = 9;
  resize_large(b, 16);  // shrinking is resize
  CHECK(b.size() == 16);
  CHECK(b[1] == 2);

  // 4 KiB at a time up to 64 MiB: a few reallocations, not one per piece.
  Bytes r;
  size_t moves = 0;
  const uint8_t* at = nullptr;
  for (size_t n = 4096; n <= (size_t(64) << 20); n += 4096) {
    resize_large(r, n);
    r[n - 1] = uint8_t(n >> 12);
    if (r.data() != at) ++moves, at = r.data();
  }
  CHECK(moves < 40);
  CHECK(r[4095] == 1);
  CHECK(r[(size_t(64) << 20) - 1] == uint8_t((size_t(64) << 20) >> 12));
}
