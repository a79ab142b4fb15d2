// The monitor: hands progress on from a leader stuck in one request (promotion), and ends
// kernels past the time limit (loader/README.md, "Threads"). It only decides; what a
// promotion or a time-out does is the server's (Hooks), so it is unit-tested without UCX.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "server/kernel_guard.h"

namespace xcargo::loader {

class Monitor {
public:
  struct Hooks {
    std::function<void(Slot&)> depose;     // s (now Phase::deposed) was leading: let a follower lead
    std::function<void(Slot&)> time_out;   // s ran past the limit: tell its client, restart
    std::function<void()> force_exit;      // the restart did not complete within kRestartGrace
  };
  // limit: a kernel's; other requests (a push waiting for its compile) get request_limit,
  // at least limit.
  Monitor(const std::vector<std::unique_ptr<Slot>>& slots, std::chrono::nanoseconds promote_after,
          std::chrono::nanoseconds limit, Hooks hooks, std::chrono::nanoseconds request_limit = {});

  static constexpr int64_t kNever = INT64_MAX;

  // One look at the executors at now (steady clock, ns): a leader running one request
  // longer than promote_after is deposed (Phase::leading -> deposed, once); the first request past
  // its limit (Slot::kernel: a kernel's, else request_limit) is timed out, and
  // kRestartGrace later the process is ended. Returns when the
  // next look is due for the requests running now (their promotion or limit, the forced
  // exit), or kNever if none runs.
  int64_t tick(int64_t now);
  // The thread: looks when a deadline is due and sleeps in between (no periodic tick: each
  // wake-up takes a core from a kernel: 20% of a 1 ms one at 2 wake-ups per ms). While
  // requests come and none runs, a look is due within promote_after, so that started()
  // needs no system call; after kMonitorIdle without any it sleeps until started() wakes it.
  void run(const std::atomic<bool>& quit);
  // A request started on slot s (its since and phase stored first): wakes the monitor if it
  // would look too late for it (a futex call, at most about once per promote_after).
  void started(const Slot& s);
  // quit was set: return from run.
  void stop();

private:
  const std::vector<std::unique_ptr<Slot>>& slots_;
  const int64_t promote_ns_, limit_ns_, request_limit_ns_;
  // A kernel's limit is the node's, or its request's own if shorter (never longer).
  int64_t limit_of(const Slot& s) const {
    if (!s.kernel.load()) return request_limit_ns_;
    const int64_t own = s.limit_ns.load(std::memory_order_relaxed);
    return own > 0 && own < limit_ns_ ? own : limit_ns_;
  }
  Hooks hooks_;
  int64_t hard_exit_at_ = 0;
  bool exit_forced_ = false;
  std::mutex mu_;
  // The earliest deadline of the running requests (their promotion or limit), the forced exit's, or kNever.
  int64_t due() const;
  std::condition_variable cv_;
  static constexpr int64_t kAwake = INT64_MIN;
  std::atomic<int64_t> sleeping_until_{kAwake};  // when the sleeping monitor looks next; kAwake while it looks
  bool woken_ = false, stopping_ = false;
};

int64_t steady_ns();
// A steady clock reading in the same unit (one read serving both).
inline int64_t ns_of(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace xcargo::loader
