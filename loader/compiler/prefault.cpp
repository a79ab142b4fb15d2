// prefault (prefault.h): walk /proc/self/maps, populate and touch the private writable mappings.
#include "compiler/prefault.h"

#include <fcntl.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xcargo::loader::compiler {

namespace {

#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14
#endif

// Not instrumented: under AddressSanitizer, a checked load of the sanitizer's own mappings
// reads their shadow, which is not mapped, and faults.
__attribute__((no_sanitize_address)) void touch(uintptr_t start, uintptr_t end, bool write) {
  const long page = ::sysconf(_SC_PAGESIZE);
  for (uintptr_t a = start; a < end; a += uintptr_t(page)) {
    volatile uint8_t* p = reinterpret_cast<volatile uint8_t*>(a);
    const uint8_t v = *p;
    if (write) *p = v;
  }
}

}  // namespace

PrefaultStats prefault(size_t spare, size_t max_mapping, size_t max_total, bool (*stop)(void*), void* arg) {
  PrefaultStats st;
  if (spare) {
    // From the brk heap, not a mapping of its own, and kept there once freed.
    ::mallopt(M_MMAP_THRESHOLD, int(spare + (1 << 20)));
    ::mallopt(M_TRIM_THRESHOLD, int(2 * spare + (64 << 20)));
    void* volatile grown = ::malloc(spare);  // volatile: a malloc-free pair may be elided
    ::free(grown);
  }
  // Read the whole list first: faulting pages in changes nothing in it, but reading it
  // while the heap grows would.
  char list[1 << 16];
  size_t n = 0;
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return st;
  for (ssize_t r; n < sizeof list - 1 && (r = ::read(fd, list + n, sizeof list - 1 - n)) > 0;) n += size_t(r);
  ::close(fd);
  if (n == sizeof list - 1)  // a long list: its last line may be cut
    while (n > 0 && list[n - 1] != '\n') --n;
  list[n] = '\0';
  for (char* line = list; line && *line;) {
    char* next = std::strchr(line, '\n');
    if (next) *next++ = '\0';
    unsigned long start = 0, end = 0;
    char perms[5] = {};
    int name_at = 0;
    if (std::sscanf(line, "%lx-%lx %4s %*s %*s %*s %n", &start, &end, perms, &name_at) == 3 && std::strcmp(perms, "rw-p") == 0 &&
        std::strncmp(line + name_at, "[v", 2) != 0 && end - start <= max_mapping && st.bytes + (end - start) <= max_total) {
      if (stop && stop(arg)) {
        st.stopped = true;
        return st;
      }
      // Populated for writing (copy-on-write after a fork), then read: a paravirtualized
      // VM's shadow page tables fill at the first access, not at the populate.
      const bool populated = ::madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0;
      touch(start, end, !populated);
      st.bytes += end - start;
    }
    line = next;
  }
  return st;
}

}  // namespace xcargo::loader::compiler
