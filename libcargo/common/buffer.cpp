// Byte buffers kept for reuse (large_buffers.h): large ones huge-page backed and pooled, small
// ones per thread.
#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "common/large_buffers.h"

namespace xcargo {
namespace {

using Clock = std::chrono::steady_clock;

struct Kept {
  Bytes bytes;
  Clock::time_point since;
};

struct Pool {
  std::mutex mu;
  std::vector<Kept> kept;
  size_t bytes = 0;
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: buffers may be released during exit
  return *p;
}

// An empty vector with room for at least n bytes, its pages advised huge before any touch.
Bytes fresh(size_t n) {
  constexpr size_t kHuge = size_t(2) << 20;
  Bytes b;
  b.reserve((n + kHuge - 1) & ~(kHuge - 1));  // glibc maps blocks this large fresh, untouched
  const auto start = reinterpret_cast<uintptr_t>(b.data());
  const uintptr_t first = (start + kHuge - 1) & ~(kHuge - 1), end = (start + b.capacity()) & ~(kHuge - 1);
  if (end > first) (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);  // advice only
  return b;
}

// The smallest pooled buffer with room for n bytes (its old bytes still in it), or an empty one.
Bytes kept_room(size_t n) {
  Pool& p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  auto best = p.kept.end();
  for (auto it = p.kept.begin(); it != p.kept.end(); ++it)
    if (it->bytes.capacity() >= n && (best == p.kept.end() || it->bytes.capacity() < best->bytes.capacity())) best = it;
  if (best == p.kept.end()) return {};
  Bytes b = std::move(best->bytes);
  p.bytes -= b.capacity();
  p.kept.erase(best);
  return b;
}

// The smallest pooled buffer with room for n bytes (its old bytes still in it), or a fresh one.
Bytes take_room(size_t n) {
  Bytes b = kept_room(n);
  return b.capacity() >= n ? std::move(b) : fresh(n);
}

}  // namespace

Bytes take_kept(size_t n) { return n < kLargeBuffer ? Bytes() : kept_room(n); }

Bytes take_large(size_t n) {
  if (n < kLargeBuffer) return Bytes(n);
  Bytes b = take_room(n);
  b.resize(n);  // zero fills only past the size of its last use
  return b;
}

void append_large(Bytes& b, const void* p, size_t len) {
  const size_t need = b.size() + len;
  if (need > b.capacity() && need >= kLargeBuffer) {
    Bytes bigger = take_room(std::max(need, 2 * b.capacity()));
    bigger.assign(b.begin(), b.end());
    release_large(std::move(b));
    b.swap(bigger);
  }
  const auto* s = static_cast<const uint8_t*>(p);
  b.insert(b.end(), s, s + len);
}

void release_large(Bytes&& b) {
  Bytes gone = std::move(b);
  b.clear();
  if (gone.capacity() < kLargeBuffer || gone.capacity() > kPoolBytes) return;
  Pool& p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  p.kept.push_back({std::move(gone), Clock::now()});
  p.bytes += p.kept.back().bytes.capacity();
  while (p.kept.size() > kPoolBuffers || p.bytes > kPoolBytes) {  // the least recently kept goes
    p.bytes -= p.kept.front().bytes.capacity();
    p.kept.erase(p.kept.begin());
  }
}

size_t trim_large(std::chrono::milliseconds idle) {
  Pool& p = pool();
  std::vector<Kept> freed;  // freed outside the lock
  {
    std::lock_guard<std::mutex> l(p.mu);
    const auto now = Clock::now();
    for (auto it = p.kept.begin(); it != p.kept.end();)
      if (now - it->since >= idle) {
        p.bytes -= it->bytes.capacity();
        freed.push_back(std::move(*it));
        it = p.kept.erase(it);
      } else {
        ++it;
      }
  }
  size_t n = 0;
  for (const Kept& k : freed) n += k.bytes.capacity();
  return n;
}

size_t pooled_large() {
  Pool& p = pool();
  std::lock_guard<std::mutex> l(p.mu);
  return p.bytes;
}

namespace {
thread_local std::vector<Bytes> t_spare;
}  // namespace

Bytes take_spare() {
  if (t_spare.empty()) return {};
  Bytes b = std::move(t_spare.back());
  t_spare.pop_back();
  return b;
}

void give_spare(Bytes&& b) {
  Bytes gone = std::move(b);
  b.clear();
  if (gone.capacity() == 0 || gone.capacity() > kSpareCapacity || t_spare.size() >= kSpareBuffers) return;
  gone.clear();
  t_spare.push_back(std::move(gone));
}

}  // namespace xcargo
