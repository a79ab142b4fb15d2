// Tests of the clock around kernels (kernel_clock.h): it agrees with steady_clock.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "engine/kernel_clock.h"

using namespace xcargo::loader;

namespace {
int64_t steady() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

TEST_CASE("the kernel clock keeps to steady_clock, calibrated or not", "[kernel_clock]") {
  const bool counter = kernel_clock::uses_counter();
  INFO("reads the CPU's counter: " << counter);
  for (bool on : {true, false}) {
    kernel_clock::use_counter(on && counter);
    // In a new thread: it calibrates from scratch (10 ms), then keeps calibrating every
    // 100 ms; 300 ms of reads cover both.
    int64_t worst = 0, back = 0;
    long reads = 0;
    std::thread([&] {
      const int64_t end = steady() + 300'000'000;
      int64_t last = kernel_clock::now_ns();
      for (int64_t s = steady(); s < end; s = steady()) {
        const int64_t k = kernel_clock::now_ns();
        const int64_t after = steady();
        // k was read between s and after: how far outside that window it lies.
        const int64_t off = k < s ? s - k : k > after ? k - after : 0;
        worst = std::max(worst, off);
        back = std::max(back, last - k);
        last = k;
        ++reads;
      }
    }).join();
    INFO("counter " << (on && counter) << ": " << reads << " reads, worst " << worst << " ns off steady_clock, " << back
                    << " ns back at most");
    CHECK(reads > 1000);
    // Ceilings for a busy machine, far above what is expected (tens of ns): a wrong scale
    // (a counter taken for a clock of another rate) is off by milliseconds.
    CHECK(worst < 50'000);
    CHECK(back < 50'000);
  }
  kernel_clock::use_counter(counter);
}

TEST_CASE("the kernel clock times a sleep as steady_clock does", "[kernel_clock]") {
  std::thread([] {
    kernel_clock::now_ns();
    std::this_thread::sleep_for(std::chrono::milliseconds(15));  // past the first calibration
    for (int i = 0; i < 5; ++i) {
      const int64_t s0 = steady(), k0 = kernel_clock::now_ns();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      const int64_t k1 = kernel_clock::now_ns(), s1 = steady();
      const int64_t ks = k1 - k0, ss = s1 - s0;
      INFO("kernel clock " << ks << " ns, steady_clock " << ss << " ns");
      CHECK(ks >= 20'000'000);
      CHECK(ks <= ss + 50'000);
    }
  }).join();
}
