// A count that several threads add to on every invocation, without a locked instruction.
#pragma once

#include <atomic>
#include <cstdint>

namespace xcargo::loader {

// Each thread adds to a shard of its own with a plain load and store; a reader sums the
// shards. A locked add is a full barrier on x86: it waits until every store before it has
// reached the cache, and a worker's stores into a lane that its client polls miss there
// (about 200 of the 1180 cycles a pipelined invocation takes go to such waits, counted with
// rdtsc). Threads past the first kOwned share the last shard, with locked adds.
class SpreadCounter {
public:
  SpreadCounter() = default;
  SpreadCounter(const SpreadCounter&) = delete;
  SpreadCounter& operator=(const SpreadCounter&) = delete;

  void add(uint64_t n = 1) {
    const unsigned i = thread_shard();
    if (i < kOwned) {
      std::atomic<uint64_t>& c = shards_[i].n;  // written by this thread alone
      c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      shards_[kOwned].n.fetch_add(n, std::memory_order_relaxed);
    }
  }
  uint64_t load() const {
    uint64_t sum = 0;
    for (const Shard& s : shards_) sum += s.n.load(std::memory_order_relaxed);
    return sum;
  }

  static constexpr unsigned kOwned = 15;

private:
  // This thread's shard in every counter: threads are numbered as they first add, and a
  // number is never given to another thread (the shared shard takes threads past kOwned).
  static unsigned thread_shard() {
    static std::atomic<unsigned> next{0};
    thread_local const unsigned mine = next.fetch_add(1, std::memory_order_relaxed);
    return mine;
  }
  struct alignas(64) Shard {
    std::atomic<uint64_t> n{0};
  };
  Shard shards_[kOwned + 1];
};

}  // namespace xcargo::loader
