// A minimal ELF64 little-endian relocatable object for tests and test vectors: a header,
// a symbol table whose symbols are the given undefined names, its string table and the
// section name table. Not linkable code: enough for the format's payload checks (5.4).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace xcargo::tiny_elf {

inline void put(std::vector<uint8_t>& b, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b[at + i] = uint8_t(v >> (8 * i));
}

// machine: e_machine (62 x86_64, 183 aarch64, 243 riscv64).
inline std::vector<uint8_t> object(uint16_t machine, const std::vector<std::string>& undefined) {
  std::string strtab(1, '\0'), shstrtab(1, '\0');
  std::vector<uint32_t> names;
  for (const auto& u : undefined) names.push_back(uint32_t(strtab.size())), strtab += u + '\0';
  const uint32_t n_symtab = uint32_t(shstrtab.size()); shstrtab += std::string(".symtab") + '\0';
  const uint32_t n_strtab = uint32_t(shstrtab.size()); shstrtab += std::string(".strtab") + '\0';
  const uint32_t n_shstrtab = uint32_t(shstrtab.size()); shstrtab += std::string(".shstrtab") + '\0';
  auto align8 = [](size_t x) { return (x + 7) & ~size_t(7); };
  const size_t str_off = 64, shstr_off = str_off + strtab.size();
  const size_t sym_off = align8(shstr_off + shstrtab.size()), sym_size = 24 * (1 + undefined.size());
  const size_t sh_off = align8(sym_off + sym_size);
  std::vector<uint8_t> b(sh_off + 4 * 64, 0);
  const uint8_t ident[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  std::memcpy(b.data(), ident, sizeof ident);
  put(b, 16, 1, 2);         // ET_REL
  put(b, 18, machine, 2);
  put(b, 20, 1, 4);         // EV_CURRENT
  put(b, 0x28, sh_off, 8);  // e_shoff
  put(b, 0x34, 64, 2);      // e_ehsize
  put(b, 0x3A, 64, 2);      // e_shentsize
  put(b, 0x3C, 4, 2);       // e_shnum
  put(b, 0x3E, 3, 2);       // e_shstrndx
  std::memcpy(b.data() + str_off, strtab.data(), strtab.size());
  std::memcpy(b.data() + shstr_off, shstrtab.data(), shstrtab.size());
  for (size_t i = 0; i < undefined.size(); ++i) {
    const size_t s = sym_off + 24 * (i + 1);
    put(b, s, names[i], 4);
    b[s + 4] = 0x10;  // STB_GLOBAL, STT_NOTYPE; st_shndx 0: undefined
  }
  auto section = [&](size_t i, uint32_t name, uint32_t type, size_t off, size_t size, uint32_t link, uint32_t info,
                     uint64_t entsize) {
    const size_t h = sh_off + 64 * i;
    put(b, h, name, 4), put(b, h + 4, type, 4), put(b, h + 0x18, off, 8), put(b, h + 0x20, size, 8);
    put(b, h + 0x28, link, 4), put(b, h + 0x2C, info, 4), put(b, h + 0x30, 1, 8), put(b, h + 0x38, entsize, 8);
  };
  section(1, n_symtab, 2, sym_off, sym_size, 2, 1, 24);  // .symtab: sh_info 1 = first global
  section(2, n_strtab, 3, str_off, strtab.size(), 0, 0, 0);
  section(3, n_shstrtab, 3, shstr_off, shstrtab.size(), 0, 0, 0);
  return b;
}

}  // namespace xcargo::tiny_elf
