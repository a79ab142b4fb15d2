// Node memory: regions survive the process that created them, and a damaged table is not trusted.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "engine/regions.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {
constexpr uint64_t kLimit = 64 << 20;

// Runs f in a child process (a worker) that then dies by SIGKILL, as after a kernel's crash.
template <class F>
void in_worker_that_dies(F f) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    f();
    ::kill(::getpid(), SIGKILL);
    _exit(1);
  }
  int ws = 0;
  REQUIRE(::waitpid(pid, &ws, 0) == pid);
  REQUIRE(WIFSIGNALED(ws));
}
}  // namespace

TEST_CASE("regions outlive the worker that wrote them", "[regions]") {
  auto fd = Regions::create_memory(kLimit);
  REQUIRE(fd.ok());
  in_worker_that_dies([&] {
    auto r = Regions::open(kLimit, *fd);
    if (!r.ok()) _exit(2);
    auto a = (*r)->create("data", 10000);
    auto b = (*r)->create("other", 4096);
    if (!a.ok() || !b.ok()) _exit(3);
    std::memset((*a)->base, 0x42, 10000);
    std::memset((*b)->base, 0x17, 4096);
  });
  auto r = Regions::open(kLimit, *fd);
  REQUIRE(r.ok());
  CHECK((*r)->adopted() == 2);
  CHECK((*r)->dropped() == 0);
  Region* a = (*r)->find("data");
  REQUIRE(a);
  CHECK(a->length == 10000);
  CHECK(std::all_of(a->base, a->base + 10000, [](uint8_t c) { return c == 0x42; }));
  Region* b = (*r)->find("other");
  REQUIRE(b);
  CHECK(std::all_of(b->base, b->base + 4096, [](uint8_t c) { return c == 0x17; }));
  // Asking again for the same region gives the same bytes; another length is refused.
  auto again = (*r)->create("data", 10000);
  REQUIRE(again.ok());
  CHECK(*again == a);
  CHECK(!(*r)->create("data", 20000).ok());
  // A new region does not overlap, and is zeroed even where a kernel wrote past its regions.
  auto c = (*r)->create("new", 8192);
  REQUIRE(c.ok());
  CHECK(std::all_of((*c)->base, (*c)->base + 8192, [](uint8_t x) { return x == 0; }));
  CHECK(((*c)->offset >= a->offset + 10000 || (*c)->offset + 8192 <= a->offset));
  ::close(*fd);
}

TEST_CASE("node memory keeps to its limit across workers", "[regions]") {
  auto fd = Regions::create_memory(kLimit);
  REQUIRE(fd.ok());
  {
    auto r = Regions::open(kLimit, *fd);
    REQUIRE(r.ok());
    REQUIRE((*r)->create("big", kLimit - 4096).ok());
    CHECK(!(*r)->create("more", 8192).ok());
  }
  auto r = Regions::open(kLimit, *fd);
  REQUIRE(r.ok());
  CHECK((*r)->adopted() == 1);
  auto more = (*r)->create("more", 8192);
  REQUIRE(!more.ok());
  CHECK(more.error().code() == Errc::limit);
  CHECK((*r)->create("fits", 4096).ok());
  // The object's size is sealed: a kernel cannot shrink it under the next worker.
  CHECK(::ftruncate(*fd, 4096) != 0);
  ::close(*fd);
}

TEST_CASE("a region table a kernel wrote over is checked entry by entry", "[regions]") {
  auto fd = Regions::create_memory(kLimit);
  REQUIRE(fd.ok());
  {
    auto r = Regions::open(kLimit, *fd);
    REQUIRE(r.ok());
    REQUIRE((*r)->create("good", 4096).ok());
    REQUIRE((*r)->create("victim", 4096).ok());
  }
  // The table is the first page of the object: entries of 88 bytes after 16 bytes of header.
  auto* table = static_cast<uint8_t*>(::mmap(nullptr, 65536, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0));
  REQUIRE(table != MAP_FAILED);
  SECTION("an offset outside the object") {
    uint64_t far = uint64_t(1) << 50;
    std::memcpy(table + 16 + 88 + 72, &far, 8);
  }
  SECTION("a region that overlaps another") {
    uint64_t first = 0;
    std::memcpy(&first, table + 16 + 72, 8);
    std::memcpy(table + 16 + 88 + 72, &first, 8);
  }
  SECTION("a name that is not one") {
    table[16 + 88 + 8] = '/';
  }
  SECTION("a length past the limit") {
    uint64_t huge = kLimit * 2;
    std::memcpy(table + 16 + 88 + 80, &huge, 8);
  }
  ::munmap(table, 65536);
  auto r = Regions::open(kLimit, *fd);
  REQUIRE(r.ok());
  CHECK((*r)->adopted() == 1);
  CHECK((*r)->dropped() == 1);
  CHECK((*r)->find("good"));
  CHECK(!(*r)->find("victim"));
  // Its place can be taken again.
  CHECK((*r)->create("victim", 4096).ok());
  ::close(*fd);
}

TEST_CASE("regions without a supervisor's memory have an object of their own", "[regions]") {
  auto r = Regions::open(kLimit);
  REQUIRE(r.ok());
  auto a = (*r)->create("x", 100);
  REQUIRE(a.ok());
  (*a)->base[99] = 1;
  CHECK((*r)->list().size() == 1);
  CHECK(!(*r)->create("bad/name", 1).ok());
  CHECK(!(*r)->create("zero", 0).ok());
}

TEST_CASE("the admin's regions come first: a table a kernel filled cannot keep them out", "[regions]") {
  const std::vector<std::pair<std::string, uint64_t>> configured = {{"counter", 4096}};
  auto fd = Regions::create_memory(kLimit);
  REQUIRE(fd.ok());
  SECTION("an entry of the configured name with another size") {
    {
      auto r = Regions::open(kLimit, *fd);
      REQUIRE(r.ok());
      REQUIRE((*r)->create("counter", 8192).ok());  // as a kernel could have made it
    }
    auto r = Regions::open(kLimit, *fd, configured);
    REQUIRE(r.ok());
    CHECK((*r)->dropped() == 1);
    auto c = (*r)->create("counter", 4096);
    REQUIRE(c.ok());
    CHECK((*c)->length == 4096);
  }
  SECTION("every place in the table taken") {
    {
      auto r = Regions::open(kLimit, *fd);
      REQUIRE(r.ok());
      for (size_t i = 0; i < kMaxRegions; ++i) REQUIRE((*r)->create("junk" + std::to_string(i), 1).ok());
    }
    auto r = Regions::open(kLimit, *fd, configured);
    REQUIRE(r.ok());
    CHECK((*r)->adopted() == kMaxRegions - 1);
    CHECK((*r)->create("counter", 4096).ok());
  }
  SECTION("all the bytes taken") {
    {
      auto r = Regions::open(kLimit, *fd);
      REQUIRE(r.ok());
      REQUIRE((*r)->create("hog", kLimit).ok());
    }
    auto r = Regions::open(kLimit, *fd, configured);
    REQUIRE(r.ok());
    CHECK((*r)->dropped() == 1);
    CHECK((*r)->create("counter", 4096).ok());
  }
  SECTION("the configured region itself is kept with its bytes") {
    {
      auto r = Regions::open(kLimit, *fd, configured);
      REQUIRE(r.ok());
      auto c = (*r)->create("counter", 4096);
      REQUIRE(c.ok());
      (*c)->base[0] = 7;
      REQUIRE((*r)->create("other", 4096).ok());
    }
    auto r = Regions::open(kLimit, *fd, configured);
    REQUIRE(r.ok());
    CHECK((*r)->adopted() == 2);
    auto c = (*r)->create("counter", 4096);
    REQUIRE(c.ok());
    CHECK((*c)->base[0] == 7);
  }
  ::close(*fd);
}
