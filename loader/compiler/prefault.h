// Faulting a forked process's memory in ahead of its work (a standby compile job).
#pragma once

#include <cstddef>

namespace xcargo::loader::compiler {

struct PrefaultStats {
  size_t bytes = 0;     // faulted in
  bool stopped = false; // `stop` said so before the end
};

// Takes, now, the page faults a forked child would otherwise take while it works: grows the
// heap by `spare` bytes kept for later allocations, then writes (MADV_POPULATE_WRITE, else
// a same-value store per page) and reads every page of each private writable mapping, at
// most `max_mapping` bytes each and `max_total` in all (a sanitizer's reserved shadow is
// never touched). Copy-on-write and fresh-page faults cost 12 to 17 us each on a
// paravirtualized VM: a compile job that took them while compiling lost about 25 ms.
// `stop` is called between mappings; when it returns true, prefault returns early.
// Single-threaded processes only (the store reads and writes the same value back).
PrefaultStats prefault(size_t spare, size_t max_mapping, size_t max_total, bool (*stop)(void*), void* arg);

}  // namespace xcargo::loader::compiler
