// xcargo-load-bench: the measuring half of scripts/bench-load. C client threads, each with
// its own connection, each doing N invocations of hello/add against one loader with inputs
// of its own, checking every reply. Odd-numbered clients also push a cargo new to the node
// every K invocations (from --extra, round robin) and invoke it once, cold.
// usage: xcargo-load-bench --to HOST:PORT --cargo hello.xcargo [--clients 8] [-n 100000]
//        [--push-every 1000] [--extra DIR] (holds extra-*.xcargo, hello built under other names)
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
  std::vector<float> warm_us;  // every warm invocation's round trip
  uint64_t lost = 0, mismatched = 0, pushes = 0, cold = 0;
  std::string first_problem;
};

// add(a, b) with a = client, b = i: the reply must be their sum.
bool add_ok(const client::InvokeReply& r, int64_t expect) {
  if (r.result.status != wire::ReplyStatus::ok || r.output.size() != 8) return false;
  int64_t got = 0;
  std::memcpy(&got, r.output.data(), 8);
  return got == expect;
}

void run_client(int id, const std::string& to, const BenchCargo& hello, const std::vector<BenchCargo>& extra, long n, long push_every,
                std::atomic<size_t>& next_extra, ClientResult& out) {
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
  for (long i = 0; i < n; ++i) {
    const int64_t a = id, b = i;
    std::memcpy(in, &a, 8);
    std::memcpy(in + 8, &b, 8);
    const auto t0 = Clock::now();
    auto r = conn.invoke(hello.digest, "add", ByteView(in, 16));
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

}  // namespace

int main(int argc, char** argv) {
  const std::string to = arg(argc, argv, "--to"), cargo = arg(argc, argv, "--cargo"), extra_dir = arg(argc, argv, "--extra");
  const int clients = std::atoi(arg(argc, argv, "--clients", "8").c_str());
  const long n = std::atol(arg(argc, argv, "-n", "100000").c_str());
  const long push_every = std::atol(arg(argc, argv, "--push-every", "1000").c_str());
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
  for (int i = 0; i < clients; ++i)
    threads.emplace_back([&, i] { run_client(i, to, hello, extra, n, push_every, next_extra, results[size_t(i)]); });
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<float> all;
  uint64_t lost = 0, mismatched = 0, pushes = 0, cold = 0;
  std::string problem;
  for (auto& r : results) {
    all.insert(all.end(), r.warm_us.begin(), r.warm_us.end());
    lost += r.lost;
    mismatched += r.mismatched;
    pushes += r.pushes;
    cold += r.cold;
    if (problem.empty()) problem = r.first_problem;
  }
  for (char& ch : problem)
    if (ch == '"' || ch == '\\' || ch < ' ') ch = '\'';  // stays valid JSON
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : double(all[std::min(all.size() - 1, size_t(double(all.size()) * p))]); };
  const uint64_t invocations = all.size() + cold;
  std::printf("{\"clients\": %d, \"invocations\": %llu, \"pushes\": %llu, \"seconds\": %.3f, \"per_second\": %.0f, "
              "\"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, \"max_us\": %.1f, \"lost\": %llu, \"mismatched\": %llu, "
              "\"first_problem\": \"%s\"}\n",
              clients, (unsigned long long)invocations, (unsigned long long)pushes, secs, double(invocations) / secs, pct(0.5),
              pct(0.99), pct(0.999), all.empty() ? 0.0 : double(all.back()), (unsigned long long)lost,
              (unsigned long long)mismatched, problem.c_str());
  return lost == 0 && mismatched == 0 && invocations == uint64_t(clients) * uint64_t(n) + cold ? 0 : 1;
}
