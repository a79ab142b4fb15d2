// The undefined symbols of an ELF64 little-endian relocatable object, read from untrusted
// bytes without LLVM (spec section 5.4): what an object variant's `imports` must equal.
#pragma once

#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::elf {

// The names of the symbols of the object's SHT_SYMTAB section (index 1 on) whose st_shndx is
// SHN_UNDEF, except the empty name and _GLOBAL_OFFSET_TABLE_ (which the linker defines), in
// ascending byte order without duplicates. Every offset and size is checked against the
// bytes before it is used. On failure: `malformed` (the object's structure), or `manifest`
// when the object imports more than `max` symbols (the manifest's limit on imports).
Result<std::vector<std::string>> undefined_symbols(ByteView object, const std::string& what, size_t max);

// The bytes the object occupies once loaded: the sum of its SHF_ALLOC sections' sizes,
// SHT_NOBITS (.bss) included, which the file does not hold. `limit` (format spec section 7)
// when over max; `malformed` when the section headers are not inside the object.
Result<uint64_t> loaded_size(ByteView object, const std::string& what, uint64_t max);

}  // namespace xcargo::elf
