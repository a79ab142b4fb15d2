// The kernel ABI's import allow-list (format-spec/xcargo-format.md, section 5.5, is the
// normative table): the only symbols a kernel may import. The loader
// links against exactly these; `xcargo build` refuses kernels that import anything else.
// Every function here is declared in kernel-include/xcargo/kernel.h, and nothing else is.
#pragma once

#include <span>
#include <string_view>

namespace xcargo::abi {

// The runtime API the loader implements (xc_*), then the libc and libm subset.
std::span<const std::string_view> allowed_imports();
bool is_allowed_import(std::string_view symbol);

// The section that XC_ENTRY places entry points in; the build finds entries by it.
inline constexpr std::string_view kEntrySection = ".text.xc_entry";

}  // namespace xcargo::abi
