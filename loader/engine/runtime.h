// The kernel runtime: what xc_ctx holds during one invocation, and the addresses of the
// allowed imports (libcargo/read/abi.h) that the JIT links kernels against, and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "xcargo/types.h"

namespace xcargo::loader {
class Regions;
// A reply this large that is the kernel's own input, or its first bytes (an echo, a filter
// that keeps a prefix), is sent from the input's buffer instead of a copy: 64 MiB took
// 11 ms to copy, a fifth of its round trip (scripts/bench-invoke, bw).
inline constexpr size_t kReplyFromInput = size_t(64) << 10;
}

// The opaque context type of <xcargo/kernel.h>, defined here for the loader only.
struct xc_ctx {
  xcargo::Bytes reply;
  size_t max_reply = 0;
  bool reply_overflow = false;
  // The kernel's input, and whether its reply so far is its input's first input_replied
  // bytes, not copied (xc_reply of its own input, kReplyFromInput bytes or more).
  const void* input = nullptr;
  size_t input_len = 0;
  bool reply_is_input = false;
  size_t input_replied = 0;
  size_t alloc_budget = 0;  // bytes xc_alloc may still hand out
  struct AlignedDelete {
    void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(64)); }
  };
  std::vector<std::unique_ptr<uint8_t[], AlignedDelete>> allocations;  // xc_alloc's, 64-byte aligned
  uint32_t node_id = 0;
  uint32_t node_count = 1;
  // xc_forward: allowed when max_forward_input > 0; what it asked for, sent after the kernel.
  uint64_t max_forward_input = 0;
  bool forwarded = false;
  uint32_t forward_node = 0;
  std::string forward_entry;
  xcargo::Bytes forward_input;
  xcargo::loader::Regions* regions = nullptr;  // xc_region: none when null
  // xc_log lines go to log_fn(log_self, ctx, line) when set; cargo and entry name the kernel.
  void (*log_fn)(void* log_self, const xc_ctx* ctx, std::string_view line) = nullptr;
  void* log_self = nullptr;
  // And, when set, into kept_log for the invocation's reply (wire::kMaxLogLines of them, each
  // cut to wire::kMaxLogLine bytes; log_dropped counts the rest).
  std::vector<std::string>* kept_log = nullptr;
  uint32_t log_dropped = 0;
  const std::string* cargo = nullptr;
  std::string_view entry;
};

namespace xcargo::loader {

struct RuntimeSymbol {
  std::string_view name;
  void* address;
};

// What a kernel gets as its xc_ctx*: not the context, but a read-only page of this thread's,
// so that a kernel writing through it faults (and the worker restarts) instead of changing
// the loader's state. The runtime functions map it back to ctx until the next call.
xc_ctx* kernel_handle(xc_ctx* ctx);

// One entry per name of abi::allowed_imports(), in the same order.
const std::vector<RuntimeSymbol>& runtime_symbols();

using EntryFn = int (*)(xc_ctx*, const void*, size_t);

}  // namespace xcargo::loader
