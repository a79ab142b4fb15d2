// Tests of kept cargos: what one worker keeps, the next finds; the limits hold; a table a
// kernel wrote over yields no entry that is not a cargo of its size.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstring>

#include "engine/cargo_store.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

Digest digest_of(uint8_t n) {
  Digest d{};
  d[0] = n;
  return d;
}

Bytes bytes_of(size_t n, uint8_t fill) { return Bytes(n, fill); }

struct Memory {
  int fd;
  explicit Memory(uint64_t max_cargo) {
    auto m = CargoStore::create_memory(max_cargo);
    REQUIRE(m.ok());
    fd = *m;
  }
  ~Memory() { ::close(fd); }
  std::unique_ptr<CargoStore> open(uint64_t max_cargo) {
    auto s = CargoStore::open(fd, max_cargo);
    REQUIRE(s.ok());
    return std::move(*s);
  }
};

}  // namespace

TEST_CASE("a cargo one worker keeps, the next finds", "[kept]") {
  Memory m(1 << 20);
  {
    auto first = m.open(1 << 20);
    REQUIRE(first->keep(digest_of(1), bytes_of(1000, 0xa1)).ok());
    REQUIRE(first->keep(digest_of(2), bytes_of(5000, 0xb2)).ok());
    REQUIRE(first->keep(digest_of(1), bytes_of(1000, 0xa1)).ok());  // kept once
  }
  auto next = m.open(1 << 20);
  auto one = next->find(digest_of(1));
  REQUIRE(one);
  CHECK(*one == bytes_of(1000, 0xa1));
  CHECK_FALSE(next->find(digest_of(3)));
  CHECK(next->digests() == std::vector<Digest>{digest_of(2), digest_of(1)});  // the latest first
  CHECK(next->find(digest_of(2)) == bytes_of(5000, 0xb2));
}

TEST_CASE("kept cargos keep to their limits, the oldest making room", "[kept]") {
  Memory m(CargoStore::kMaxBytes);
  auto s = m.open(CargoStore::kMaxBytes);
  for (size_t i = 0; i < CargoStore::kSlots + 3; ++i) REQUIRE(s->keep(digest_of(uint8_t(i)), bytes_of(4096, uint8_t(i))).ok());
  CHECK(s->digests().size() == CargoStore::kSlots);
  CHECK_FALSE(s->find(digest_of(0)));  // the three oldest made room
  CHECK_FALSE(s->find(digest_of(2)));
  CHECK(s->find(digest_of(3)));
  CHECK(s->find(digest_of(uint8_t(CargoStore::kSlots + 2))));
  // Bytes: a cargo of the whole budget leaves room for no other.
  REQUIRE(s->keep(digest_of(200), bytes_of(CargoStore::kMaxBytes, 7)).ok());
  CHECK(s->digests() == std::vector<Digest>{digest_of(200)});
  CHECK(s->keep(digest_of(201), bytes_of(CargoStore::kMaxBytes + 1, 7)).error().code() == Errc::limit);
}

TEST_CASE("a kept-cargo table a kernel wrote over yields only entries that fit", "[kept]") {
  Memory m(1 << 16);
  auto s = m.open(1 << 16);
  REQUIRE(s->keep(digest_of(1), bytes_of(100, 1)).ok());
  REQUIRE(s->keep(digest_of(2), bytes_of(100, 2)).ok());
  // Entry layout (cargo_store.cpp): state u32, reserved u32, length u64, sequence u64, digest.
  const uint64_t huge = 1ull << 40, zero = 0;
  REQUIRE(::pwrite(m.fd, &huge, 8, 8) == 8);       // entry 0: longer than a slot
  REQUIRE(::pwrite(m.fd, &zero, 8, 56 + 8) == 8);  // entry 1: empty
  uint32_t kept = 0x4f475243;
  REQUIRE(::pwrite(m.fd, &kept, 4, 2 * 56) == 4);  // entry 2: committed, but length 0
  CHECK(s->digests().empty());
  CHECK_FALSE(s->find(digest_of(1)));
  // A store opened with another cargo limit than the object was made for is refused.
  CHECK_FALSE(CargoStore::open(m.fd, 1 << 20).ok());
  // And the writer goes on: damaged entries are free slots.
  REQUIRE(s->keep(digest_of(3), bytes_of(100, 3)).ok());
  CHECK(s->find(digest_of(3)) == bytes_of(100, 3));
}

TEST_CASE("a kept-cargo table that claims more than the limit counts only the latest within it", "[kept]") {
  Memory m(CargoStore::kMaxBytes);
  auto s = m.open(CargoStore::kMaxBytes);
  // What a kernel could write (the attack that found this had 32 entries of 256 MiB each
  // make a standby read 8 GiB): entries that fit one by one but not together.
  for (uint32_t i = 0; i < CargoStore::kSlots; ++i) {
    const uint32_t kept = 0x4f475243;
    const uint64_t length = CargoStore::kMaxBytes / 2, sequence = i + 1;
    uint8_t digest[32] = {uint8_t(i)};
    REQUIRE(::pwrite(m.fd, &kept, 4, i * 56) == 4);
    REQUIRE(::pwrite(m.fd, &length, 8, i * 56 + 8) == 8);
    REQUIRE(::pwrite(m.fd, &sequence, 8, i * 56 + 16) == 8);
    REQUIRE(::pwrite(m.fd, digest, 32, i * 56 + 24) == 32);
  }
  CHECK(s->digests() == std::vector<Digest>{digest_of(CargoStore::kSlots - 1), digest_of(CargoStore::kSlots - 2)});
  CHECK_FALSE(s->find(digest_of(0)));
}
