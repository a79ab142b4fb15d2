// The monitor: promotion and time-outs.
#include "server/monitor.h"

#include <algorithm>

#include "timing.h"

namespace xcargo::loader {

int64_t steady_ns() { return ns_of(std::chrono::steady_clock::now()); }

Monitor::Monitor(const std::vector<std::unique_ptr<Slot>>& slots, std::chrono::nanoseconds promote_after,
                 std::chrono::nanoseconds limit, Hooks hooks, std::chrono::nanoseconds request_limit)
    : slots_(slots), promote_ns_(promote_after.count()), limit_ns_(limit.count()),
      request_limit_ns_(std::max(limit.count(), request_limit.count())), hooks_(std::move(hooks)) {}

int64_t Monitor::tick(int64_t now) {
  if (hard_exit_at_ && now > hard_exit_at_) {
    if (!exit_forced_) hooks_.force_exit();  // ends the process (tests count it)
    exit_forced_ = true;
    return kNever;
  }
  for (const auto& sp : slots_) {
    Slot& s = *sp;
    const int64_t since = s.since.load();
    if (!since) continue;
    Phase expected = Phase::leading;
    if (now - since > promote_ns_ && s.phase.load() == Phase::leading && s.phase.compare_exchange_strong(expected, Phase::deposed))
      hooks_.depose(s);
    if (now - since > limit_of(s) && !hard_exit_at_) {
      hooks_.time_out(s);
      hard_exit_at_ = now + std::chrono::nanoseconds(timing::kRestartGrace).count();
    }
  }
  return due();
}

int64_t Monitor::due() const {
  int64_t next = hard_exit_at_ && !exit_forced_ ? hard_exit_at_ + 1 : kNever;
  for (const auto& sp : slots_) {
    const Slot& s = *sp;
    const int64_t since = s.since.load();
    if (!since) continue;
    if (s.phase.load() == Phase::leading) next = std::min(next, since + promote_ns_ + 1);  // the first ns tick() deposes at
    if (!hard_exit_at_) next = std::min(next, since + limit_of(s) + 1);
  }
  return next;
}

void Monitor::run(const std::atomic<bool>& quit) {
  const int64_t idle_ns = std::chrono::nanoseconds(timing::kMonitorIdle).count();
  int64_t last_busy = steady_ns();
  while (!quit) {
    const int64_t now = steady_ns();
    int64_t next = tick(now);
    if (next != kNever) last_busy = now;
    else if (now - last_busy < idle_ns) next = now + std::min(promote_ns_, limit_ns_);  // requests may follow: see started()
    std::unique_lock<std::mutex> l(mu_);
    // Published before the second look: a request that starts meanwhile either is seen by
    // it or sees this deadline in started() (both sequentially consistent).
    sleeping_until_.store(next);
    if (stopping_ || due() < next) {
      sleeping_until_.store(kAwake);
      continue;
    }
    if (next == kNever) cv_.wait(l, [&] { return woken_ || stopping_; });
    else cv_.wait_until(l, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(next)), [&] { return woken_ || stopping_; });
    if (woken_) last_busy = steady_ns();
    woken_ = false;
    sleeping_until_.store(kAwake);
  }
}

void Monitor::started(const Slot& s) {
  const int64_t since = s.since.load();
  const int64_t first = since + (s.phase.load() == Phase::leading ? promote_ns_ : limit_of(s));
  if (sleeping_until_.load() <= first) return;  // looking now (kAwake), or due before it matters
  std::lock_guard<std::mutex> l(mu_);
  woken_ = true;
  cv_.notify_one();
}

void Monitor::stop() {
  std::lock_guard<std::mutex> l(mu_);
  stopping_ = true;
  cv_.notify_all();
}

}  // namespace xcargo::loader
