// Reads an ELF64 relocatable object's undefined symbols from untrusted bytes; see elf.h.
#include "read/elf.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "common/le.h"

namespace xcargo::elf {

namespace {

// ELF64 constants and field offsets (System V gABI).
constexpr size_t kEhdrSize = 64, kShdrSize = 64, kSymSize = 24;
constexpr size_t kEShoff = 0x28, kEShentsize = 0x3A, kEShnum = 0x3C;
constexpr size_t kShType = 0x04, kShFlags = 0x08, kShOffset = 0x18, kShSize = 0x20, kShLink = 0x28, kShEntsize = 0x38;
constexpr uint64_t kShfAlloc = 0x2;
constexpr uint32_t kShtSymtab = 2, kShtStrtab = 3;
constexpr size_t kStName = 0, kStShndx = 6;

// True if [offset, offset + size) lies within `total`, without overflow.
bool within(uint64_t offset, uint64_t size, size_t total) { return offset <= total && size <= total - offset; }

// The section header table, checked to lie inside the object: shnum 0 if it has none.
struct Sections {
  const uint8_t* table = nullptr;
  size_t shnum = 0;
  const uint8_t* operator[](size_t i) const { return table + i * kShdrSize; }
};
Result<Sections> section_headers(ByteView b, const std::string& what) {
  auto bad = [&](const std::string& msg) { return Error(Errc::malformed, what + ": " + msg); };
  if (b.size() < kEhdrSize || std::memcmp(b.data(), "\x7f" "ELF", 4) != 0 || b[4] != 2 || b[5] != 1)
    return bad("not an ELF64 little-endian file");
  const uint64_t shoff = le::load64(b.data() + kEShoff);
  const uint16_t shentsize = le::load16(b.data() + kEShentsize), shnum = le::load16(b.data() + kEShnum);
  if (shnum == 0) {
    if (shoff != 0) return bad("extended section numbering (e_shnum 0) is not supported");
    return Sections{};  // no sections
  }
  if (shentsize != kShdrSize) return bad("e_shentsize is " + std::to_string(shentsize) + ", not 64");
  if (!within(shoff, uint64_t(shnum) * kShdrSize, b.size())) return bad("the section header table is outside the object");
  return Sections{b.data() + shoff, shnum};
}

}  // namespace

Result<std::vector<std::string>> undefined_symbols(ByteView b, const std::string& what, size_t max) {
  auto bad = [&](const std::string& msg) { return Error(Errc::malformed, what + ": " + msg); };
  auto sections = section_headers(b, what);
  XC_TRY(sections);
  const size_t shnum = sections->shnum;
  auto shdr = [&](size_t i) { return (*sections)[i]; };

  size_t symtab = 0;
  for (size_t i = 1; i < shnum; ++i)
    if (le::load32(shdr(i) + kShType) == kShtSymtab) {
      if (symtab) return bad("more than one symbol table (SHT_SYMTAB)");
      symtab = i;
    }
  if (!symtab) return std::vector<std::string>{};

  const uint8_t* sh = shdr(symtab);
  const uint64_t sym_off = le::load64(sh + kShOffset), sym_size = le::load64(sh + kShSize);
  const uint32_t link = le::load32(sh + kShLink);
  if (le::load64(sh + kShEntsize) != kSymSize) return bad("the symbol table's entry size is not 24");
  if (sym_size % kSymSize != 0 || !within(sym_off, sym_size, b.size()))
    return bad("the symbol table is outside the object or not a whole number of entries");
  if (link == 0 || link >= shnum || le::load32(shdr(link) + kShType) != kShtStrtab)
    return bad("the symbol table's string table (sh_link " + std::to_string(link) + ") is not a string table");
  const uint64_t str_off = le::load64(shdr(link) + kShOffset), str_size = le::load64(shdr(link) + kShSize);
  if (!within(str_off, str_size, b.size())) return bad("the symbol string table is outside the object");
  const char* strtab = reinterpret_cast<const char*>(b.data() + str_off);

  std::set<std::string> names;
  for (uint64_t i = 1; i < sym_size / kSymSize; ++i) {
    const uint8_t* sym = b.data() + sym_off + i * kSymSize;
    if (le::load16(sym + kStShndx) != 0) continue;  // defined (or absolute, common)
    const uint32_t name = le::load32(sym + kStName);
    if (name >= str_size) return bad("symbol " + std::to_string(i) + "'s name is outside the string table");
    const void* end = std::memchr(strtab + name, '\0', size_t(str_size - name));
    if (!end) return bad("symbol " + std::to_string(i) + "'s name is not terminated in the string table");
    std::string s(strtab + name, static_cast<const char*>(end));
    if (s.empty() || s == "_GLOBAL_OFFSET_TABLE_") continue;
    names.insert(std::move(s));
    if (names.size() > max)
      return Error(Errc::manifest, what + ": imports more than " + std::to_string(max) + " symbols, over the limit");
  }
  return std::vector<std::string>(names.begin(), names.end());
}

Result<uint64_t> loaded_size(ByteView b, const std::string& what, uint64_t max) {
  auto sections = section_headers(b, what);
  XC_TRY(sections);
  uint64_t total = 0;
  for (size_t i = 1; i < sections->shnum; ++i) {
    const uint8_t* sh = (*sections)[i];
    if (!(le::load64(sh + kShFlags) & kShfAlloc)) continue;
    const uint64_t size = le::load64(sh + kShSize);
    if (size > max || total > max - size)  // no overflow: both at most max
      return Error(Errc::limit, what + ": needs more than " + std::to_string(max >> 20) +
                                    " MiB of memory once loaded (its sections, .bss included), over the limit")
          .hint("keep large data in node memory (xc_region_create), not in static arrays");
    total += size;
  }
  return total;
}

}  // namespace xcargo::elf
