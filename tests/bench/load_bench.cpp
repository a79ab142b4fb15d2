// xcargo-load-bench: the measuring half of scripts/bench-load. C client threads, each with
// its own connection, each doing N invocations of hello/add against one loader with inputs
// of its own, checking every reply. Odd-numbered clients also push a cargo new to the node
// every K invocations (from --extra, round robin) and invoke it once, cold.
// usage: xcargo-load-bench --to HOST:PORT --cargo hello.xcargo [--clients 8] [-n 100000]
//        [--push-every 1000] [--extra DIR] (holds extra-*.xcargo, hello built under other names)
//        [--storm memory.xcargo --crashes 100 --timeouts 20 [--pause-ms 0]]
// With --storm, one more client writes a region (memory.c's put), then crashes its kernel
// (boom) and runs it past the time limit (hang) as often as asked, then reads the region
// back (get), pausing --pause-ms between failures (0: back to back); the other clients go on until the storm is over and have done n each. Their
// requests answered `interrupted`, lost without an answer, or not loaded (the new worker
// does not have the cargo yet) are sent again (add is idempotent) and counted.
// Prints one JSON object: throughput, latency percentiles, lost and mismatched replies.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tool_args.h"
#include "xcargo/cargo.h"
#include "xcargo/client.h"
#include "xcargo/file.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

using test::arg;

[[noreturn]] void die(const std::string& what) { test::die("xcargo-load-bench", what, 1); }

struct BenchCargo {
  Bytes bytes;
  Digest digest;
};

BenchCargo load_cargo(const std::string& path) {
  auto b = read_file(path, 1u << 30);
  if (!b.ok()) die(path + ": " + b.error().message());
  auto c = parse_container(*b);
  if (!c.ok()) die(path + ": " + c.error().message());
  return {std::move(*b), c->digest};
}

struct ClientResult {
  std::vector<float> warm_us;  // every warm invocation's round trip (with its resends, in a storm)
  uint64_t lost = 0, mismatched = 0, pushes = 0, cold = 0;
  uint64_t interrupted = 0, unanswered = 0, repushed = 0;  // storm: what was sent again
  std::string first_problem, first_unanswered;
};

struct StormResult {
  uint64_t crashed = 0, timed_out = 0, other = 0;
  uint64_t region_before = 0, region_after = 0;  // the seed the region held
  uint64_t resent = 0;  // requests lost without an answer, sent again
  std::string problem, first_other, first_resent;
};
std::atomic<bool> g_storm_on{false};

// add(a, b) with a = client, b = i: the reply must be their sum.
bool add_ok(const client::InvokeReply& r, int64_t expect) {
  if (r.result.status != wire::ReplyStatus::ok || r.output.size() != 8) return false;
  int64_t got = 0;
  std::memcpy(&got, r.output.data(), 8);
  return got == expect;
}

void run_client(int id, const std::string& to, const BenchCargo& hello, const std::vector<BenchCargo>& extra, long n, long push_every,
                std::atomic<size_t>& next_extra, bool storm, ClientResult& out) {
  auto problem = [&](const std::string& what) {
    if (out.first_problem.empty()) out.first_problem = "client " + std::to_string(id) + ": " + what;
  };
  auto c = client::connect(to);
  if (!c.ok()) {
    out.lost = uint64_t(n);
    problem(c.error().message());
    return;
  }
  auto& conn = **c;
  if (auto p = conn.push(hello.bytes); !p.ok() || p->status != wire::ReplyStatus::ok) die("push of hello failed");
  out.warm_us.reserve(size_t(n));
  uint8_t in[16];
  for (long i = 0; i < n || g_storm_on; ++i) {
    const int64_t a = id, b = i;
    std::memcpy(in, &a, 8);
    std::memcpy(in + 8, &b, 8);
    const auto t0 = Clock::now();
    auto r = conn.invoke(hello.digest, "add", ByteView(in, 16));
    // In a storm: whatever the worker's end cost this request, it is sent again (bounded).
    for (int again = 0; storm && again < 20; ++again) {
      if (r.ok() && r->result.status == wire::ReplyStatus::interrupted) {
        ++out.interrupted;
      } else if (r.ok() && r->result.status == wire::ReplyStatus::not_loaded) {
        ++out.repushed;
        if (auto p = conn.push(hello.bytes); !p.ok() || p->status != wire::ReplyStatus::ok) {
          ++out.unanswered;
          if (out.first_unanswered.empty()) out.first_unanswered = "push: " + (p.ok() ? p->message : p.error().message());
        }
      } else if (!r.ok() && r.error().code() == Errc::unreachable) {
        ++out.unanswered;  // sent, and the connection dropped before an answer
        if (out.first_unanswered.empty()) out.first_unanswered = r.error().message();
      } else {
        break;
      }
      r = conn.invoke(hello.digest, "add", ByteView(in, 16));
    }
    const auto t1 = Clock::now();
    if (!r.ok()) {
      ++out.lost;
      problem(r.error().message());
      return;  // the connection is gone
    }
    if (!add_ok(*r, a + b)) {
      ++out.mismatched;
      problem("invocation " + std::to_string(i) + ": " + wire::status_name(r->result.status) + " " + r->result.message);
    }
    out.warm_us.push_back(std::chrono::duration<float, std::micro>(t1 - t0).count());
    if (id % 2 == 1 && push_every > 0 && !extra.empty() && i % push_every == push_every - 1) {
      const BenchCargo& e = extra[next_extra.fetch_add(1) % extra.size()];
      auto p = conn.push(e.bytes);
      if (!p.ok() || p->status != wire::ReplyStatus::ok) {
        ++out.lost;
        problem("push: " + (p.ok() ? p->message : p.error().message()));
        continue;
      }
      ++out.pushes;
      auto cr = conn.invoke(e.digest, "add", ByteView(in, 16));
      if (!cr.ok()) {
        ++out.lost;
        problem(cr.error().message());
        return;
      }
      if (!add_ok(*cr, a + b)) ++out.mismatched;
      ++out.cold;
    }
  }
}

// memory.c's put(4242), then boom and hang (every crashes/timeouts-th), then get.
void run_storm(const std::string& to, const BenchCargo& cargo, long crashes, long timeouts, long pause_ms, StormResult& out) {
  auto c = client::connect(to);
  if (!c.ok()) return void(out.problem = "storm: " + c.error().message());
  auto& conn = **c;
  auto call = [&](const char* entry, uint64_t arg) -> Result<client::InvokeReply> {
    for (int again = 0;; ++again) {
      auto r = conn.invoke(cargo.digest, entry, ByteView(reinterpret_cast<const uint8_t*>(&arg), 8));
      if (again < 5 && r.ok() && r->result.status == wire::ReplyStatus::not_loaded) {
        if (auto p = conn.push(cargo.bytes); !p.ok() || p->status != wire::ReplyStatus::ok) return Error(Errc::remote, "push failed");
        continue;
      }
      if (again < 5 && !r.ok() && r.error().code() == Errc::unreachable) {  // sent as the last worker ended: it did not run
        ++out.resent;
        if (out.first_resent.empty()) out.first_resent = r.error().message();
        continue;
      }
      return r;
    }
  };
  auto seed = [](const Result<client::InvokeReply>& r) -> uint64_t {
    uint64_t v = 0;
    if (r.ok() && r->result.status == wire::ReplyStatus::ok && r->output.size() == 8) std::memcpy(&v, r->output.data(), 8);
    return v;
  };
  out.region_before = seed(call("put", 4242));
  const long total = crashes + timeouts;
  for (long k = 0; k < total; ++k) {
    // Time-outs spread among the crashes.
    const bool hang = timeouts > 0 && (k + 1) % std::max(1L, total / timeouts) == 0 && long(out.timed_out) < timeouts;
    if (pause_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    auto r = call(hang ? "hang" : "boom", 0);
    if (r.ok() && r->result.status == wire::ReplyStatus::crashed) ++out.crashed;
    else if (r.ok() && r->result.status == wire::ReplyStatus::timeout) ++out.timed_out;
    else {
      ++out.other;
      if (out.first_other.empty()) out.first_other = r.ok() ? std::string(wire::status_name(r->result.status)) + ": " + r->result.message : r.error().message();
    }
  }
  while (long(out.timed_out) < timeouts) {
    auto r = call("hang", 0);
    if (r.ok() && r->result.status == wire::ReplyStatus::timeout) ++out.timed_out;
    else if (++out.other > 100) break;
  }
  out.region_after = seed(call("get", 0));
}

}  // namespace

int main(int argc, char** argv) {
  const std::string to = arg(argc, argv, "--to"), cargo = arg(argc, argv, "--cargo"), extra_dir = arg(argc, argv, "--extra");
  const int clients = std::atoi(arg(argc, argv, "--clients", "8").c_str());
  const long n = std::atol(arg(argc, argv, "-n", "100000").c_str());
  const long push_every = std::atol(arg(argc, argv, "--push-every", "1000").c_str());
  const std::string storm_cargo = arg(argc, argv, "--storm");
  const long crashes = std::atol(arg(argc, argv, "--crashes", "100").c_str());
  const long timeouts = std::atol(arg(argc, argv, "--timeouts", "20").c_str());
  const long pause_ms = std::atol(arg(argc, argv, "--pause-ms", "0").c_str());
  if (to.empty() || cargo.empty() || clients < 1 || n < 1) die("usage: xcargo-load-bench --to HOST:PORT --cargo FILE [--clients C] [-n N]");
  const BenchCargo hello = load_cargo(cargo);
  std::vector<BenchCargo> extra;
  if (!extra_dir.empty()) {
    std::vector<std::string> paths;
    for (const auto& e : std::filesystem::directory_iterator(extra_dir))
      if (e.path().extension() == ".xcargo") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    for (const auto& p : paths) extra.push_back(load_cargo(p));
  }
  std::vector<ClientResult> results(static_cast<size_t>(clients));
  std::atomic<size_t> next_extra{0};
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  StormResult storm;
  std::thread storm_thread;
  if (!storm_cargo.empty()) {
    g_storm_on = true;
    storm_thread = std::thread([&] {
      run_storm(to, load_cargo(storm_cargo), crashes, timeouts, pause_ms, storm);
      g_storm_on = false;
    });
  }
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] { run_client(i, to, hello, extra, n, push_every, next_extra, !storm_cargo.empty(), results[size_t(i)]); });
  for (auto& t : threads) t.join();
  if (storm_thread.joinable()) storm_thread.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<float> all;
  uint64_t lost = 0, mismatched = 0, pushes = 0, cold = 0, interrupted = 0, unanswered = 0, repushed = 0;
  std::string problem = storm.problem, notes = storm.first_other.empty() ? storm.first_resent : storm.first_other;
  unanswered += storm.resent;
  for (auto& r : results) {
    interrupted += r.interrupted;
    unanswered += r.unanswered;
    repushed += r.repushed;
    if (notes.empty()) notes = r.first_unanswered;
    all.insert(all.end(), r.warm_us.begin(), r.warm_us.end());
    lost += r.lost;
    mismatched += r.mismatched;
    pushes += r.pushes;
    cold += r.cold;
    if (problem.empty()) problem = r.first_problem;
  }
  for (std::string* t : {&problem, &notes})
    for (char& ch : *t)
      if (ch == '"' || ch == '\\' || ch < ' ') ch = '\'';  // stays valid JSON
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : double(all[std::min(all.size() - 1, size_t(double(all.size()) * p))]); };
  const uint64_t invocations = all.size() + cold;
  std::printf("{\"clients\": %d, \"invocations\": %llu, \"pushes\": %llu, \"seconds\": %.3f, \"per_second\": %.0f, "
              "\"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, \"max_us\": %.1f, \"lost\": %llu, \"mismatched\": %llu, "
              "\"interrupted\": %llu, \"unanswered\": %llu, \"repushed\": %llu, \"storm_crashed\": %llu, "
              "\"storm_timed_out\": %llu, \"storm_other\": %llu, \"region_before\": %llu, \"region_after\": %llu, "
              "\"first_problem\": \"%s\", \"storm_notes\": \"%s\"}\n",
              clients, (unsigned long long)invocations, (unsigned long long)pushes, secs, double(invocations) / secs, pct(0.5),
              pct(0.99), pct(0.999), all.empty() ? 0.0 : double(all.back()), (unsigned long long)lost,
              (unsigned long long)mismatched, (unsigned long long)interrupted, (unsigned long long)unanswered,
              (unsigned long long)repushed, (unsigned long long)storm.crashed, (unsigned long long)storm.timed_out,
              (unsigned long long)storm.other, (unsigned long long)storm.region_before, (unsigned long long)storm.region_after,
              problem.c_str(), notes.c_str());
  const bool storm_ok = storm_cargo.empty() || (storm.problem.empty() && storm.region_before == 4242 && storm.region_after == 4242 &&
                                                long(storm.crashed) == crashes && long(storm.timed_out) == timeouts);
  return storm_ok && lost == 0 && mismatched == 0 && invocations >= uint64_t(clients) * uint64_t(n) + cold ? 0 : 1;
}
