// The clock read around each kernel's call (kernel_clock.h).
#include "engine/kernel_clock.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <string>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace xcargo::loader::kernel_clock {
namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t counter() {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

// The kernel's clock source is the counter this reads: read once, at start-up (before the
// worker's sandbox, which leaves /sys closed).
bool counter_is_the_clock_source() {
#if defined(__x86_64__) || defined(__aarch64__)
  std::ifstream f("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string source;
  f >> source;
#if defined(__x86_64__)
  return source == "tsc";
#else
  return source == "arch_sys_counter";
#endif
#else
  return false;
#endif
}

std::atomic<bool> g_counter{counter_is_the_clock_source()};

// A clock read between two counter reads this close (2 us at 10 GHz, 200 us at 100 MHz).
constexpr uint64_t kTightTicks = 20'000;

// A thread's calibration: steady_clock's time at counter value c0, and the counter's period.
struct Calibration {
  uint64_t c0 = 0;
  int64_t ns0 = 0;
  double ns_per_tick = 0;  // 0: not calibrated yet
  uint64_t span = 0;       // ticks after c0 before the next sample
};

// A counter value and steady_clock's time at the same moment: the counter read on both
// sides of the clock, close together (a thread preempted between them would skew the
// calibration by as long as it waited). False: no such pair in three tries.
bool pair(uint64_t* t, int64_t* ns) {
  for (int i = 0; i < 3; ++i) {
    const uint64_t before = counter();
    *ns = steady_ns();
    const uint64_t after = counter();
    if (after >= before && after - before < kTightTicks) {
      *t = before + (after - before) / 2;
      return true;
    }
  }
  return false;
}

int64_t sample(Calibration& c) {
  uint64_t t;
  int64_t ns;
  if (!pair(&t, &ns)) return steady_ns();  // try again at the next read
  if (c.c0 == 0 || t < c.c0) {  // the first sample (or a counter that went back: start over)
    c = Calibration{t, ns, 0, 0};
    return ns;
  }
  const int64_t elapsed = ns - c.ns0;
  if (c.ns_per_tick == 0 && elapsed < kFirstCalibrationNs) return ns;  // still calibrating
  const double rate = double(elapsed) / double(t - c.c0);
  if (!(rate > 0.01 && rate < 100)) {  // 10 MHz to 100 GHz, else not a clock: start over
    c = Calibration{t, ns, 0, 0};
    return ns;
  }
  c = Calibration{t, ns, rate, uint64_t(double(kResampleNs) / rate)};
  return ns;
}

}  // namespace

int64_t now_ns() {
  if (!g_counter.load(std::memory_order_relaxed)) return steady_ns();
  thread_local Calibration c;
  const uint64_t t = counter();
  if (c.ns_per_tick != 0 && t >= c.c0 && t - c.c0 < c.span) return c.ns0 + int64_t(double(t - c.c0) * c.ns_per_tick);
  return sample(c);
}

bool uses_counter() { return g_counter.load(std::memory_order_relaxed); }

void use_counter(bool on) { g_counter.store(on, std::memory_order_relaxed); }

}  // namespace xcargo::loader::kernel_clock
