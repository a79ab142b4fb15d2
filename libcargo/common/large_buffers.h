// Byte buffers kept for reuse: large ones (4 MiB and more) backed by transparent huge pages in
// a small process-wide pool, so that a large transfer's pages are already mapped; small ones
// per thread, so that the request path does not allocate.
#pragma once

#include <chrono>
#include <cstddef>

#include "xcargo/types.h"

namespace xcargo {

// Buffers below this size are ordinary vectors, never pooled.
inline constexpr size_t kLargeBuffer = size_t(4) << 20;
// The pool keeps at most this many bytes of buffers, and at most kPoolBuffers of them.
inline constexpr size_t kPoolBytes = size_t(256) << 20;
inline constexpr size_t kPoolBuffers = 4;

// Why: fresh 4 KiB pages cost a fault each, and on a paravirtualized VM 64 MiB took 210 ms to
// first touch (5 ms with 2 MiB pages), 8 ms more to zero; a pooled buffer costs neither.

// A buffer of exactly n bytes whose contents are unspecified (the bytes of an earlier use):
// for receiving into, where every byte is written before any is read.
[[nodiscard]] Bytes take_large(size_t n);
// A pooled buffer with room for n bytes (its size and contents those of its last use), or an
// empty one if the pool holds none: nothing is allocated.
[[nodiscard]] Bytes take_kept(size_t n);
// Appends len bytes at p to b; a large b grows geometrically into a pooled buffer, its old
// storage going back to the pool.
void append_large(Bytes& b, const void* p, size_t len);
// Hands b back for reuse if it is large and the pool has room; else frees it. b is left empty.
void release_large(Bytes&& b);
// Frees the pooled buffers not used for `idle`; returns the bytes freed.
size_t trim_large(std::chrono::milliseconds idle);
// Bytes held by the pool now.
size_t pooled_large();

// Small buffers a thread reuses: a reply's header and output, taken for each request and
// given back once the reply is written out, so that a warm invocation through a lane
// allocates nothing in the worker (3.4 allocations each before, counted over 100,000). Each
// thread keeps at most kSpareBuffers, of at most kSpareCapacity.
inline constexpr size_t kSpareBuffers = 4;
inline constexpr size_t kSpareCapacity = size_t(16) << 10;
// An empty buffer, with the storage of one given back on this thread if there is one.
[[nodiscard]] Bytes take_spare();
// Keeps b's storage for this thread's next take_spare if it is small and there is room;
// else frees it. b is left empty.
void give_spare(Bytes&& b);

}  // namespace xcargo
