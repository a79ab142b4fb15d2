// The monitor: a leader busy past promote_after is deposed once; a request past the limit is
// timed out once, and the worker ended if its restart does not complete; between deadlines
// the monitor sleeps.
#include <catch2/catch.hpp>

#include <thread>

#include "server/monitor.h"
#include "timing.h"

using namespace xcargo::loader;
using namespace std::chrono_literals;

namespace {
struct Recorder {
  std::vector<Slot*> deposed, timed_out;
  int exits = 0;
  Monitor::Hooks hooks() {
    return {[this](Slot& s) { deposed.push_back(&s); }, [this](Slot& s) { timed_out.push_back(&s); }, [this] { ++exits; }};
  }
};
std::vector<std::unique_ptr<Slot>> slots(int n) {
  std::vector<std::unique_ptr<Slot>> v;
  for (int i = 0; i < n; ++i) v.push_back(std::make_unique<Slot>());
  return v;
}
constexpr int64_t ms = 1000000;
}  // namespace

TEST_CASE("idle executors: nothing to do", "[monitor]") {
  auto s = slots(2);
  Recorder r;
  Monitor m(s, 1ms, 10s, r.hooks());
  CHECK(m.tick(steady_ns()) == Monitor::kNever);
  CHECK(r.deposed.empty());
  CHECK(r.timed_out.empty());
}

TEST_CASE("a leader busy past promote_after is deposed once", "[monitor]") {
  auto s = slots(2);
  Recorder r;
  Monitor m(s, 1ms, 10s, r.hooks());
  const int64_t t0 = 1000 * ms;
  s[1]->kernel = true;
  s[1]->since = t0;
  s[1]->phase = Phase::leading;
  CHECK(m.tick(t0 + ms / 2) == t0 + ms + 1);  // busy, not yet long: the next look is at its promotion
  CHECK(r.deposed.empty());
  CHECK(m.tick(t0 + 2 * ms) == t0 + 10000 * ms + 1);  // deposed: the next look is at its limit, not sooner
  CHECK(r.deposed == std::vector<Slot*>{s[1].get()});
  CHECK(s[1]->phase == Phase::deposed);
  CHECK(m.tick(t0 + 3 * ms) == t0 + 10000 * ms + 1);
  CHECK(r.deposed.size() == 1);
}

TEST_CASE("an inline kernel is never deposed; past the limit it is timed out, once, then the worker ended", "[monitor]") {
  auto s = slots(3);
  Recorder r;
  Monitor m(s, 1ms, 2s, r.hooks());
  const int64_t t0 = 1000 * ms;
  s[0]->kernel = true;
  s[0]->since = t0;
  s[0]->phase = Phase::inline_;
  s[2]->kernel = true;
  s[2]->since = t0 + 500 * ms;
  s[2]->phase = Phase::deposed;  // deposed already, still running
  CHECK(m.tick(t0 + 1500 * ms) == t0 + 2000 * ms + 1);  // the inline one's limit comes first
  CHECK(r.deposed.empty());
  CHECK(r.timed_out.empty());
  const int64_t grace = std::chrono::nanoseconds(timing::kRestartGrace).count();
  CHECK(m.tick(t0 + 2001 * ms) == t0 + 2001 * ms + grace + 1);  // next: the forced exit
  CHECK(r.timed_out == std::vector<Slot*>{s[0].get()});
  m.tick(t0 + 2600 * ms);  // the other one is past the limit too: the restart ends it anyway
  CHECK(r.timed_out.size() == 1);
  CHECK(r.exits == 0);
  s[0]->since = 0;  // the worker did not restart within the grace
  s[2]->since = 0;
  CHECK(m.tick(t0 + 2001 * ms + grace + 1) == Monitor::kNever);
  CHECK(r.exits == 1);
  m.tick(t0 + 2001 * ms + grace + 2);
  CHECK(r.exits == 1);
}

TEST_CASE("a request that runs no kernel (a push waiting for its compile) has the longer request limit", "[monitor]") {
  auto s = slots(2);
  Recorder r;
  Monitor m(s, 1ms, 2s, r.hooks(), 130s);
  const int64_t t0 = 1000 * ms;
  s[0]->kernel = false;
  s[0]->since = t0;
  s[0]->phase = Phase::leading;
  CHECK(m.tick(t0 + 2 * ms) == t0 + 130000 * ms + 1);  // deposed; next: its own limit
  CHECK(r.deposed == std::vector<Slot*>{s[0].get()});
  CHECK(m.tick(t0 + 10000 * ms) == t0 + 130000 * ms + 1);  // past a kernel's limit: not timed out
  CHECK(r.timed_out.empty());
  s[1]->kernel = true;  // a kernel beside it is timed out at its own
  s[1]->since = t0 + 9000 * ms;
  s[1]->phase = Phase::deposed;
  CHECK(m.tick(t0 + 10000 * ms) == t0 + 11000 * ms + 1);
  m.tick(t0 + 11001 * ms);
  CHECK(r.timed_out == std::vector<Slot*>{s[1].get()});
  Recorder r2;  // and the push, alone, at its own
  Monitor m2(s, 1ms, 2s, r2.hooks(), 130s);
  s[1]->since = 0;
  m2.tick(t0 + 130001 * ms);
  CHECK(r2.timed_out == std::vector<Slot*>{s[0].get()});
}

TEST_CASE("the monitor thread sleeps while idle and wakes for a request", "[monitor]") {
  auto s = slots(1);
  std::atomic<int> deposed{0};
  Monitor m(s, 1ms, 10s, {[&](Slot&) { ++deposed; }, [](Slot&) {}, [] {}});
  std::atomic<bool> quit{false};
  std::thread t([&] { m.run(quit); });
  std::this_thread::sleep_for(timing::kMonitorIdle * 3);  // asleep by now
  s[0]->kernel = true;
  s[0]->since = steady_ns();
  s[0]->phase = Phase::leading;
  m.started(*s[0]);
  for (int i = 0; i < 2000 && !deposed; ++i) std::this_thread::sleep_for(5ms);  // a generous ceiling: 10 s
  CHECK(deposed == 1);
  s[0]->since = 0;
  quit = true;
  m.stop();
  t.join();
}

TEST_CASE("a request that runs long among many quick ones is deposed: the monitor misses none it did not look at", "[monitor]") {
  // Quick requests start and end without waking the monitor (it looks within promote_after
  // anyway); the long one must be seen all the same, whenever it starts.
  auto s = slots(1);
  std::atomic<int> deposed{0};
  Monitor m(s, 1ms, 10s, {[&](Slot&) { ++deposed; }, [](Slot&) {}, [] {}});
  std::atomic<bool> quit{false};
  std::thread t([&] { m.run(quit); });
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 20000; ++i) {  // quick requests, back to back
      s[0]->since = steady_ns();
      s[0]->phase = Phase::leading;
      m.started(*s[0]);
      s[0]->phase = Phase::idle;
      s[0]->since = 0;
    }
    if (round == 1) std::this_thread::sleep_for(timing::kMonitorIdle * 2);  // and once after the monitor went to sleep
    const int before = deposed;
    s[0]->since = steady_ns();
    s[0]->phase = Phase::leading;
    m.started(*s[0]);
    for (int i = 0; i < 2000 && deposed == before; ++i) std::this_thread::sleep_for(5ms);  // a generous ceiling: 10 s
    CHECK(deposed == before + 1);
    s[0]->phase = Phase::idle;
    s[0]->since = 0;
  }
  quit = true;
  m.stop();
  t.join();
}
