// The monitor: promotion and time-outs.
#include "monitor.h"

#include <thread>

#include "timing.h"

namespace xcargo::loader {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Monitor::Monitor(const std::vector<std::unique_ptr<Slot>>& slots, std::chrono::nanoseconds promote_after,
                 std::chrono::nanoseconds limit, Hooks hooks)
    : slots_(slots), promote_ns_(promote_after.count()), limit_ns_(limit.count()), hooks_(std::move(hooks)) {}

bool Monitor::tick(int64_t now) {
  if (hard_exit_at_ && now > hard_exit_at_) {
    hooks_.force_exit();
    return true;
  }
  bool busy = false;
  for (const auto& sp : slots_) {
    Slot& s = *sp;
    const int64_t since = s.since.load();
    if (!since) continue;
    busy = true;
    int expected = 1;
    if (now - since > promote_ns_ && s.phase.load() == 1 && s.phase.compare_exchange_strong(expected, 2)) hooks_.depose(s);
    if (now - since > limit_ns_ && !hard_exit_at_) {
      hooks_.time_out(s);
      hard_exit_at_ = now + std::chrono::nanoseconds(timing::kRestartGrace).count();
    }
  }
  return busy || hard_exit_at_;
}

void Monitor::run(const std::atomic<bool>& quit) {
  const int64_t idle_ns = std::chrono::nanoseconds(timing::kMonitorIdle).count();
  int64_t last_busy = steady_ns();
  while (!quit) {
    std::this_thread::sleep_for(timing::kMonitorTick);
    const int64_t now = steady_ns();
    if (tick(now)) last_busy = now;
    else if (now - last_busy > idle_ns) {
      std::unique_lock<std::mutex> l(mu_);
      asleep_ = true;
      cv_.wait(l, [&] { return !asleep_ || stopping_; });
      last_busy = steady_ns();
    }
  }
}

void Monitor::wake() {
  if (asleep_.load(std::memory_order_relaxed)) {
    std::lock_guard<std::mutex> l(mu_);
    asleep_ = false;
    cv_.notify_one();
  }
}

void Monitor::stop() {
  std::lock_guard<std::mutex> l(mu_);
  stopping_ = true;
  asleep_ = false;
  cv_.notify_all();
}

}  // namespace xcargo::loader
