// SpreadCounter: adds from many threads at once, none lost, its own shards or the shared one.
#include "engine/spread_counter.h"

#include <catch2/catch.hpp>

#include <thread>
#include <vector>

using xcargo::loader::SpreadCounter;

TEST_CASE("a spread counter sums every thread's adds, past the threads that own a shard", "[engine]") {
  SpreadCounter c, other;
  const unsigned threads = SpreadCounter::kOwned + 9;  // some share the last shard
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; ++t)
    ts.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) c.add();
      other.add(3);
    });
  for (auto& t : ts) t.join();
  CHECK(c.load() == uint64_t(threads) * 20000);
  CHECK(other.load() == uint64_t(threads) * 3);
  c.add(5);  // this thread's shard
  CHECK(c.load() == uint64_t(threads) * 20000 + 5);
}
