// What LLVM bitcode a loader compiles (format-spec §5.4): checked by `xcargo build` and by
// loaders, on the parsed module, before any optimisation or code generation.
#pragma once

#include <string>

#include "xcargo/error.h"

namespace llvm {
class Module;
}

namespace xcargo::bitcode {

// Refuses (Errc::import, naming the function) inline assembly and module-level assembly,
// which bypass the allow-list and which ORC's code generator cannot assemble, ifuncs, whose
// resolvers would run at link time, and reading variadic arguments, whose va_list is not
// portable (naming FILE:LINE too when the module has debug locations); then
// (Errc::malformed) a module the IR verifier rejects, which LLVM's passes assume never
// happens.
[[nodiscard]] Status check_module(const llvm::Module& module, const std::string& what);

}  // namespace xcargo::bitcode
