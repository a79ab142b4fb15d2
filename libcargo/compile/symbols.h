// Entry points, imports and producer of a compiled payload (the one LLVM-using unit).
#pragma once

#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/manifest.h"
#include "xcargo/types.h"

namespace xcargo {

struct SymbolScan {
  std::vector<std::string> entries;  // global functions in the XC_ENTRY section, sorted
  std::vector<std::string> imports;  // undefined symbols, sorted, LLVM intrinsics left out
  std::string producer;              // compiler identification (.comment / llvm.ident)
  // Bitcode only: where the module lets a code generator fuse or reorder floating-point
  // operations (llvm.fmuladd, fast-math flags), e.g. "horner: llvm.fmuladd"; empty if nowhere.
  std::string fp_fusion;
};

// A symbol as its source wrote it: C++ names demangled ("operator delete[](void*)"), C
// names as they are.
std::string demangle(const std::string& symbol);

Result<SymbolScan> scan_symbols(ByteView payload, VariantKind kind, const std::string& what);

}  // namespace xcargo
