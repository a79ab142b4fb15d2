// The import allow-list of the kernel ABI: the table of format-spec/xcargo-format.md section
// 5.5, in its order (abi_test.cpp compares them), declared by xcargo/kernel.h.
#include "read/abi.h"

#include <algorithm>
#include <iterator>

namespace xcargo::abi {

namespace {
constexpr std::string_view kAllowed[] = {
    // runtime API
    "xc_alloc", "xc_forward", "xc_log", "xc_node_count", "xc_node_id", "xc_region", "xc_region_create", "xc_reply",
    // libc subset
    "memcmp", "memcpy", "memmove", "memset", "strlen",
    // libm subset, double and float
    "acos", "acosf", "asin", "asinf", "atan", "atan2", "atan2f", "atanf", "ceil", "ceilf",
    "cos", "cosf", "cosh", "coshf", "exp", "exp2", "exp2f", "expf", "fabs", "fabsf",
    "floor", "floorf", "fma", "fmaf", "fmax", "fmaxf", "fmin", "fminf", "fmod", "fmodf",
    "log", "log10", "log10f", "log2", "log2f", "logf", "pow", "powf", "round", "roundf",
    "sin", "sinf", "sinh", "sinhf", "sqrt", "sqrtf", "tan", "tanf", "tanh", "tanhf",
    "trunc", "truncf", "hypot", "hypotf", "cbrt", "cbrtf", "lround",
};
}  // namespace

std::span<const std::string_view> allowed_imports() { return kAllowed; }

bool is_allowed_import(std::string_view symbol) {
  return std::find(std::begin(kAllowed), std::end(kAllowed), symbol) != std::end(kAllowed);
}

}  // namespace xcargo::abi
