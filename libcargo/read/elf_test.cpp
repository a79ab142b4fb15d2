// Tests of the ELF symbol-table reader of verification: real objects from clang for each
// object triple, and one test per malformed structure.
#include <catch2/catch.hpp>

#include "../../format-spec/vectors/tiny_elf.h"
#include "common/le.h"
#include "read/elf.h"
#include "support.h"
#include "xcargo/file.h"

using namespace xcargo;

namespace {

using Names = std::vector<std::string>;

Bytes corpus(const std::string& name) {
  auto b = read_file(test::source_dir() + "/fuzz/corpus/elf/" + name, 1 << 20);
  REQUIRE(b.ok());
  return *b;
}

Errc error_of(const Bytes& b) {
  auto r = elf::undefined_symbols(b, "obj", 1024);
  REQUIRE_FALSE(r.ok());
  return r.error().code();
}

// The section header of section i of a tiny_elf object.
uint8_t* shdr(Bytes& b, size_t i) { return b.data() + le::load64(b.data() + 0x28) + 64 * i; }

}  // namespace

TEST_CASE("the undefined symbols of clang's objects, for each object triple", "[elf]") {
  for (const char* arch : {"x86_64", "aarch64", "riscv64"}) {
    INFO(arch);
    auto names = elf::undefined_symbols(corpus(std::string("hello-") + arch + ".o"), arch, 1024);
    REQUIRE(names.ok());
    CHECK(*names == Names{"xc_node_id", "xc_reply"});
  }
}

TEST_CASE("undefined symbols come sorted and unique, without the GOT symbol", "[elf]") {
  auto names = elf::undefined_symbols(tiny_elf::object(62, {"xc_reply", "memcpy", "_GLOBAL_OFFSET_TABLE_", "memcpy"}), "obj", 1024);
  REQUIRE(names.ok());
  CHECK(*names == Names{"memcpy", "xc_reply"});
  auto none = elf::undefined_symbols(tiny_elf::object(62, {}), "obj", 1024);
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE("malformed symbol tables are refused, truncations never read past the end", "[elf]") {
  const Bytes good = tiny_elf::object(62, {"memcpy", "xc_reply"});
  {
    Bytes b = good;
    le::store16(b.data() + 0x3A, 40);  // e_shentsize
    CHECK(error_of(b) == Errc::malformed);
  }
  {
    Bytes b = good;
    le::store64(b.data() + 0x28, b.size() - 64);  // the section table runs past the end
    CHECK(error_of(b) == Errc::malformed);
  }
  {
    Bytes b = good;
    le::store64(shdr(b, 1) + 0x20, ~uint64_t(0) - 7);  // symbol table size wraps
    CHECK(error_of(b) == Errc::malformed);
  }
  {
    Bytes b = good;
    le::store32(shdr(b, 1) + 0x28, 9);  // sh_link past the sections
    CHECK(error_of(b) == Errc::malformed);
  }
  {
    Bytes b = good;
    le::store32(shdr(b, 2) + 0x04, 2);  // a second SHT_SYMTAB
    CHECK(error_of(b) == Errc::malformed);
  }
  {
    Bytes b = good;
    le::store64(shdr(b, 2) + 0x20, 3);  // the string table ends inside "memcpy"
    CHECK(error_of(b) == Errc::malformed);
  }
  {
    Bytes b = good;
    le::store16(b.data() + 0x3C, 0);  // extended section numbering
    CHECK(error_of(b) == Errc::malformed);
  }
  CHECK(elf::undefined_symbols(tiny_elf::object(62, {"a", "b", "c"}), "obj", 2).error().code() == Errc::manifest);
  const Bytes real = corpus("hello-x86_64.o");
  for (size_t n = 0; n < real.size(); ++n) {
    auto r = elf::undefined_symbols(ByteView(real).first(n), "obj", 1024);
    CHECK((r.ok() || r.error().code() == Errc::malformed));
  }
}

TEST_CASE("the memory an object occupies once loaded, .bss included, is held to the limit", "[elf]") {
  auto ok = elf::loaded_size(corpus("hello-x86_64.o"), "obj", 64 << 20);
  REQUIRE(ok.ok());
  CHECK(*ok > 0);
  CHECK(*ok < 4096);
  Bytes b = tiny_elf::object(62, {"xc_reply"});
  CHECK(*elf::loaded_size(b, "obj", 64 << 20) == 0);  // no SHF_ALLOC section
  // A 7 GiB .bss: SHT_NOBITS, SHF_ALLOC, none of it in the file.
  le::store32(shdr(b, 3) + 0x04, 8);
  le::store64(shdr(b, 3) + 0x08, 0x2 | 0x1);
  le::store64(shdr(b, 3) + 0x20, 7ull << 30);
  auto big = elf::loaded_size(b, "obj", 64 << 20);
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().code() == Errc::limit);
  // Two sections that fit alone but not together; a size that would overflow the sum.
  le::store64(shdr(b, 3) + 0x20, 40 << 20);
  le::store64(shdr(b, 2) + 0x08, 0x2);
  le::store64(shdr(b, 2) + 0x20, 40 << 20);
  CHECK(elf::loaded_size(b, "obj", 64 << 20).error().code() == Errc::limit);
  le::store64(shdr(b, 2) + 0x20, ~0ull);
  CHECK(elf::loaded_size(b, "obj", 64 << 20).error().code() == Errc::limit);
  le::store64(shdr(b, 3) + 0x20, ~0ull >> 1);
  le::store64(shdr(b, 2) + 0x20, ~0ull >> 1);
  CHECK_FALSE(elf::loaded_size(b, "obj", ~0ull >> 1).ok());  // the sum would pass the limit: caught without overflow
}
