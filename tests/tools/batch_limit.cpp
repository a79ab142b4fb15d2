// xcargo-batch-limit: two kernels run inline in one lane batch, each for 0.6 of the node's
// time limit, must each run within its own limit: the second is neither timed out nor its
// client blamed for the first one's time. Warms faults.c's `ticks` and `ticks_too` so that the node runs them inline,
// then sends the two long ones back to back through one connection (its lane, same host).
// usage: xcargo-batch-limit --to HOST:PORT --cargo faults.xcargo --limit-s SECONDS
// Prints the two statuses in order ("ok ok"); exits 0 if both are ok, 1 otherwise.
//        xcargo-batch-limit --to HOST:PORT --cargo adv.xcargo --hang N --syscall SLOT [--after M]
// adversary.c's hang_blocked, warmed 12 times, then N in one batch, the last of which blocks
// the time-out signal and spins (the worker is ended after its grace): prints the runs
// that answered ok, warm-ups included ("ok runs: M"), for the test to find in the log: a
// batch's runs stay in it when its worker is ended so.
// --after M: M more quick ones behind the stuck one, waiting in the lane when the worker is
// ended: the node answers them `restarting` and the client library sends them again to the
// next worker; prints "after it: K ok, O otherwise" (none fails with the lost connection,
// since none ran).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "tool_args.h"
#include "xcargo/cargo.h"
#include "xcargo/client.h"
#include "xcargo/file.h"

using namespace xcargo;

namespace {

[[noreturn]] void die(const std::string& what) { test::die("xcargo-batch-limit", what, 2); }

// The cycle counter the kernels read (__builtin_readcyclecounter).
uint64_t ticks_now() {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
#error "no cycle counter for this architecture"
#endif
}

// Counter ticks per second, over 100 ms of the steady clock.
double ticks_per_second() {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const uint64_t c0 = ticks_now();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const uint64_t c1 = ticks_now();
  return double(c1 - c0) / std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

// --hang N --syscall SLOT [--after M] (above).
int hang(client::Connection& conn, const Digest& digest, size_t n, size_t after, uint64_t syscall) {
  const uint64_t quick[2] = {syscall, 0}, hung[2] = {syscall, 1};
  const ByteView q(reinterpret_cast<const uint8_t*>(quick), 16), h(reinterpret_cast<const uint8_t*>(hung), 16);
  int ok = 0, ok_after = 0, other = 0;
  for (int i = 0; i < 12; ++i)
    if (auto r = conn.invoke(digest, "hang_blocked", q); r.ok() && r->result.status == wire::ReplyStatus::ok) ++ok;
  (void)conn.invoke_pipelined(
      n + after, [&](size_t i) { return client::Invocation{digest, "hang_blocked", i + 1 == n ? h : q}; }, 64,
      [&](size_t i, Result<client::InvokeReply>& r) {
        const bool good = r.ok() && r->result.status == wire::ReplyStatus::ok;
        if (i < n) ok += good;
        else if (good) ++ok_after;
        else if (++other == 1) std::fprintf(stderr, "first otherwise: %s\n", r.ok() ? wire::status_name(r->result.status) : r.error().message().c_str());
      });
  std::printf("ok runs: %d\n", ok);
  if (after) std::printf("after it: %d ok, %d otherwise\n", ok_after, other);
  return 0;
}

int main(int argc, char** argv) {
  auto bytes = read_file(test::arg(argc, argv, "--cargo"), 1u << 30);
  if (!bytes.ok()) die(bytes.error().message());
  client::ConnectOptions o;
  o.reply_timeout_ms = 20000;  // the hung run's reply never comes
  auto conn = client::connect(test::arg(argc, argv, "--to"), o);
  if (!conn.ok()) die(conn.error().message());
  auto pushed = (*conn)->push(*bytes);
  if (!pushed.ok() || pushed->status != wire::ReplyStatus::ok) die("push failed");
  const Digest digest = pushed->digest;
  if (const size_t n = std::strtoull(test::arg(argc, argv, "--hang", "0").c_str(), nullptr, 10))
    return hang(**conn, digest, n, std::strtoull(test::arg(argc, argv, "--after", "0").c_str(), nullptr, 10),
                std::strtoull(test::arg(argc, argv, "--syscall", "0").c_str(), nullptr, 0));
  const double limit = std::atof(test::arg(argc, argv, "--limit-s", "0").c_str());
  if (limit <= 0) die("--limit-s SECONDS: the node's time limit");
  uint64_t zero = 0;
  const ByteView none(reinterpret_cast<const uint8_t*>(&zero), 8);
  for (const char* entry : {"ticks", "ticks_too"})  // quick many times in a row: run inline
    for (int i = 0; i < 40; ++i)
      if (auto r = (*conn)->invoke(digest, entry, none); !r.ok() || r->result.status != wire::ReplyStatus::ok)
        die(std::string("warming ") + entry + " failed");
  const uint64_t n = uint64_t(0.6 * limit * ticks_per_second());
  const ByteView input(reinterpret_cast<const uint8_t*>(&n), 8);
  std::string told[2] = {"none", "none"};
  Status s = (*conn)->invoke_pipelined(
      2, [&](size_t i) { return client::Invocation{digest, i == 0 ? "ticks" : "ticks_too", input}; }, 2,
      [&](size_t i, Result<client::InvokeReply>& r) {
        told[i] = r.ok() ? wire::status_name(r->result.status) : "error: " + r.error().message();
      });
  std::printf("%s %s\n", told[0].c_str(), told[1].c_str());
  if (!s.ok()) std::fprintf(stderr, "xcargo-batch-limit: %s\n", s.error().message().c_str());
  return told[0] == "ok" && told[1] == "ok" ? 0 : 1;
}
