// resize_large: big byte buffers backed by transparent huge pages.
#include <sys/mman.h>

#include <algorithm>

#include "xcargo/types.h"

namespace xcargo {

void resize_large(Bytes& b, size_t n) {
  constexpr size_t kLarge = size_t(4) << 20, kHuge = size_t(2) << 20;
  if (n >= kLarge && n > b.capacity()) {
    Bytes bigger;
    bigger.reserve(std::max(n, 2 * b.capacity()));  // grown geometrically, as by insert; glibc
                                                    // maps blocks this large fresh, untouched
    const auto start = reinterpret_cast<uintptr_t>(bigger.data());
    const uintptr_t first = (start + kHuge - 1) & ~(kHuge - 1), end = (start + bigger.capacity()) & ~(kHuge - 1);
    if (end > first) (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);  // advice only
    bigger.assign(b.begin(), b.end());
    b.swap(bigger);
  }
  b.resize(n);
}

}  // namespace xcargo
