// Interruption state shared by a signal handler and the library's waits (xcargo/interrupt.h).
#include "xcargo/interrupt.h"

#include <signal.h>

#include <atomic>

namespace xcargo {

namespace {
std::atomic<int> g_signal{0};
std::atomic<int> g_cleanups{0};
std::atomic<pid_t> g_children[64];
}  // namespace

void interrupt_now(int signal) noexcept {
  g_signal.store(signal);
  for (auto& c : g_children)
    if (pid_t pid = c.load(); pid > 0) ::kill(pid, SIGKILL);
}

int interrupted() noexcept { return g_signal.load(); }

void track_child(pid_t pid) noexcept {
  for (auto& c : g_children) {
    pid_t none = 0;
    if (c.compare_exchange_strong(none, pid)) break;
  }
  if (g_signal.load() != 0) ::kill(pid, SIGKILL);  // interrupted while it was starting
}

void untrack_child(pid_t pid) noexcept {
  for (auto& c : g_children) {
    pid_t p = pid;
    if (c.compare_exchange_strong(p, 0)) break;
  }
}

void hold_cleanup() noexcept { g_cleanups.fetch_add(1); }
void release_cleanup() noexcept { g_cleanups.fetch_sub(1); }
bool cleanup_held() noexcept { return g_cleanups.load() > 0; }

}  // namespace xcargo
