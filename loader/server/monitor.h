// The monitor: hands progress on from a leader stuck in one request (promotion), and ends
// kernels past the time limit (loader/README.md, "Threads"). It only decides; what a
// promotion or a time-out does is the server's (Hooks), so it is unit-tested without UCX.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "kernel_guard.h"

namespace xcargo::loader {

class Monitor {
public:
  struct Hooks {
    std::function<void(Slot&)> depose;     // s (phase now 2) was leading: let a follower lead
    std::function<void(Slot&)> time_out;   // s ran past the limit: tell its client, restart
    std::function<void()> force_exit;      // the restart did not complete within kRestartGrace
  };
  Monitor(const std::vector<std::unique_ptr<Slot>>& slots, std::chrono::nanoseconds promote_after,
          std::chrono::nanoseconds limit, Hooks hooks);

  // One look at the executors at now (steady clock, ns): a leader running one request
  // longer than promote_after is deposed (its phase 1 -> 2, once); the first request past
  // the limit is timed out, and kRestartGrace later the process is ended. Returns whether
  // any executor was running a request.
  bool tick(int64_t now);
  // The thread: ticks every kMonitorTick, and sleeps after kMonitorIdle without requests.
  void run(const std::atomic<bool>& quit);
  // A request started: wake the sleeping monitor (cheap when it is awake).
  void wake();
  // quit was set: return from run.
  void stop();

private:
  const std::vector<std::unique_ptr<Slot>>& slots_;
  const int64_t promote_ns_, limit_ns_;
  Hooks hooks_;
  int64_t hard_exit_at_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<bool> asleep_{false};
  bool stopping_ = false;
};

int64_t steady_ns();

}  // namespace xcargo::loader
