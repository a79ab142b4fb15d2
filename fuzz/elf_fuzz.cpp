// Fuzz target: the ELF symbol-table reader of verification (libcargo/read/elf.cpp) on
// untrusted objects: never reads outside the input, and its result is sorted, unique,
// without empty names and within the limit.
#include <cstdint>
#include <cstdlib>

#include "read/elf.h"

using namespace xcargo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto names = elf::undefined_symbols(ByteView(data, size), "fuzz", 1024);
  if (!names.ok()) return 0;
  if (names->size() > 1024) std::abort();
  for (size_t i = 0; i < names->size(); ++i)
    if ((*names)[i].empty() || (i > 0 && !((*names)[i - 1] < (*names)[i]))) std::abort();
  return 0;
}
