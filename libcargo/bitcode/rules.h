// What LLVM bitcode a loader compiles (format-spec §5.4): checked by `xcargo build` and by
// loaders, on the parsed module, before any optimisation or code generation.
#pragma once

#include <string>

#include "xcargo/error.h"

namespace llvm {
class DataLayout;
class Module;
}

namespace xcargo::bitcode {

// Refuses (Errc::import, naming the function) inline assembly and module-level assembly,
// which bypass the allow-list and which ORC's code generator cannot assemble, ifuncs, whose
// resolvers would run at link time, reading variadic arguments, whose va_list is not
// portable, and what needs a runtime helper on some CPU (division of and conversions with
// integers wider than 64 bits, 80- and 128-bit floating point, atomics wider than 8 bytes,
// llvm.powi), naming FILE:LINE too when the module has debug locations; then
// (Errc::malformed) a module the IR verifier rejects, which LLVM's passes assume never
// happens.
[[nodiscard]] Status check_module(const llvm::Module& module, const std::string& what);

// Refuses (Errc::import, naming the type and the target) a module that uses a type laid out
// differently under `target` than under its own data layout (a struct member at another
// offset, another size): retargeted, its code would read the wrong bytes. A loader checks
// against its own; `xcargo build` against every target's (check_layouts).
[[nodiscard]] Status check_layout(const llvm::Module& module, const llvm::DataLayout& target, const std::string& target_name,
                                  const std::string& what);
// check_layout for each target a loader may retarget portable bitcode to (x86_64, aarch64,
// riscv64, with clang 16's data layouts).
[[nodiscard]] Status check_layouts(const llvm::Module& module, const std::string& what);

}  // namespace xcargo::bitcode
