// The clock read around each kernel's call: steady_clock's nanoseconds, from the CPU's counter.
#pragma once

#include <cstdint>

namespace xcargo::loader {

// steady_clock's time in nanoseconds, read from the CPU's own counter (x86-64's TSC,
// aarch64's virtual counter) and scaled by the calling thread's calibration against
// steady_clock, which it takes again every kResampleNs. A vDSO clock_gettime waits for every
// instruction before it (rdtscp) and costs 25 to 70 ns in a virtual machine: the two around a
// quick kernel take about 5 % of a pipelined invocation's worker time.
//
// The counter is used only where the kernel keeps its own clock with it (the clock source
// is the TSC or the architected timer: found invariant and synchronized across cores at
// boot); elsewhere, and while a thread has not calibrated yet (its first 10 ms), this reads
// steady_clock. Against steady_clock it is off by well under a microsecond, so ended times
// compare with the monitor's own reads (its limits are milliseconds).
namespace kernel_clock {

inline constexpr int64_t kFirstCalibrationNs = 10'000'000;  // a thread's first calibration spans this
inline constexpr int64_t kResampleNs = 100'000'000;         // then each one spans this

int64_t now_ns();
// Whether now_ns reads the CPU's counter (decided at start-up, from the clock source).
bool uses_counter();
// For tests: use the counter, or steady_clock only.
void use_counter(bool on);

}  // namespace kernel_clock
}  // namespace xcargo::loader
