// Large buffers: contents kept on growth, growth geometric (a kernel replying in 4 KiB
// pieces), released buffers reused without a fresh mapping, and the pool bounded and trimmed.
#include <catch2/catch.hpp>

#include <thread>

#include "common/large_buffers.h"

using namespace xcargo;

TEST_CASE("append_large keeps the bytes and grows like a vector", "[buffer]") {
  (void)trim_large(std::chrono::milliseconds(0));
  Bytes b = {1, 2, 3};
  const Bytes big(size_t(8) << 20, 7);
  append_large(b, big.data(), big.size());
  REQUIRE(b.size() == 3 + big.size());
  CHECK(b[0] == 1);
  CHECK(b[2] == 3);
  CHECK(b[3] == 7);
  CHECK(b.back() == 7);

  // 4 KiB at a time up to 64 MiB: a few reallocations, not one per piece.
  Bytes r;
  size_t moves = 0;
  const uint8_t* at = nullptr;
  uint8_t piece[4096];
  for (size_t n = 4096; n <= (size_t(64) << 20); n += 4096) {
    std::fill(std::begin(piece), std::end(piece), uint8_t(n >> 12));
    append_large(r, piece, sizeof piece);
    if (r.data() != at) ++moves, at = r.data();
  }
  CHECK(moves < 40);
  CHECK(r[4095] == 1);
  CHECK(r[(size_t(64) << 20) - 1] == uint8_t((size_t(64) << 20) >> 12));
  release_large(std::move(r));
  CHECK(r.empty());
  CHECK(pooled_large() <= kPoolBytes);
  (void)trim_large(std::chrono::milliseconds(0));
  CHECK(pooled_large() == 0);
}

TEST_CASE("a released large buffer is taken again, bounded and trimmed", "[buffer]") {
  (void)trim_large(std::chrono::milliseconds(0));
  Bytes a = take_large(size_t(16) << 20);
  REQUIRE(a.size() == size_t(16) << 20);
  a[12345] = 42;
  const uint8_t* storage = a.data();
  release_large(std::move(a));
  CHECK(pooled_large() >= size_t(16) << 20);

  // A smaller request reuses it: same storage, exact size, no fresh pages.
  Bytes b = take_large(size_t(10) << 20);
  CHECK(b.data() == storage);
  CHECK(b.size() == size_t(10) << 20);
  CHECK(pooled_large() == 0);
  // A larger one than anything kept gets a new buffer.
  release_large(std::move(b));
  Bytes c = take_large(size_t(40) << 20);
  CHECK(c.data() != storage);
  CHECK(pooled_large() >= size_t(16) << 20);

  // Small buffers are never kept.
  Bytes small = take_large(1000);
  CHECK(small.size() == 1000);
  const size_t before = pooled_large();
  release_large(std::move(small));
  CHECK(pooled_large() == before);

  // At most kPoolBuffers buffers and kPoolBytes bytes.
  release_large(std::move(c));
  for (int i = 0; i < 8; ++i) release_large(take_large(size_t(100) << 20));
  CHECK(pooled_large() <= kPoolBytes);

  // Unused for `idle`: freed.
  CHECK(trim_large(std::chrono::hours(1)) == 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(trim_large(std::chrono::milliseconds(10)) > 0);
  CHECK(pooled_large() == 0);
}

TEST_CASE("a thread reuses the small buffers it gave back, a bounded number, and no large ones", "[buffer]") {
  std::thread([] {  // a thread of its own: no other test's spares
    CHECK(take_spare().capacity() == 0);  // none given back yet
    Bytes b(100, 1);
    const uint8_t* storage = b.data();
    give_spare(std::move(b));
    CHECK(b.empty());
    Bytes again = take_spare();
    CHECK(again.empty());
    CHECK(again.data() == storage);  // the same storage, no allocation
    CHECK(again.capacity() >= 100);
    again.assign(50, 2);
    give_spare(std::move(again));
    give_spare(Bytes(kSpareCapacity + 1, 3));  // too large to keep
    for (size_t i = 0; i < 2 * kSpareBuffers; ++i) give_spare(Bytes(64, 4));
    size_t kept = 0;
    for (Bytes s = take_spare(); s.capacity() != 0; s = take_spare()) {
      CHECK(s.empty());
      CHECK(s.capacity() <= kSpareCapacity);
      ++kept;
    }
    CHECK(kept == kSpareBuffers);
  }).join();
  std::thread([] { CHECK(take_spare().capacity() == 0); }).join();  // per thread
}

TEST_CASE("take_kept gives a pooled buffer or nothing, never new memory", "[buffer]") {
  (void)trim_large(std::chrono::milliseconds(0));
  CHECK(take_kept(size_t(8) << 20).capacity() == 0);  // an empty pool: nothing allocated
  CHECK(pooled_large() == 0);
  Bytes a = take_large(size_t(16) << 20);
  const uint8_t* storage = a.data();
  release_large(std::move(a));
  CHECK(take_kept(size_t(32) << 20).capacity() == 0);  // none large enough
  CHECK(take_kept(1000).capacity() == 0);              // small ones are never pooled
  Bytes b = take_kept(size_t(8) << 20);
  CHECK(b.data() == storage);
  CHECK(b.size() == size_t(16) << 20);  // as last used: the caller sizes it
  CHECK(pooled_large() == 0);
  release_large(std::move(b));
  (void)trim_large(std::chrono::milliseconds(0));
}
