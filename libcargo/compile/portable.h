// Lowering of what clang's le64 bitcode leaves to the target ABI into IR that means the same
// on every CPU a loader retargets it to (format-spec/xcargo-format.md 5.4).
#pragma once

#include <string>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo {

// Returns the module with its variadic functions made fixed: each takes its variadic
// arguments in a buffer of 8-byte slots, one per argument in order, whose address is its
// last parameter; va_start stores that address in the va_list, va_arg reads the next slot,
// va_copy copies the address, va_end does nothing; each call passes such a buffer on its
// own stack. Refused (Errc::import, naming the function): an argument a slot cannot hold
// (wider than 8 bytes, an aggregate, a vector), a variadic function whose address is taken
// (an indirect call could not be rewritten), an entry point that is variadic. The bytes
// come back unchanged if the module reads no variadic arguments.
[[nodiscard]] Result<Bytes> portable_varargs(ByteView bitcode, const std::string& what);

// Returns the module without debug information: bitcode is built with line tables so that
// what xcargo build refuses is shown at its FILE:LINE, and shipped without them (nothing a
// loader uses, and no build paths in the cargo).
[[nodiscard]] Result<Bytes> strip_debug_info(ByteView bitcode, const std::string& what);

}  // namespace xcargo
