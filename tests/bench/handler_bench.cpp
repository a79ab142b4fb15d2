// xcargo-handler-bench: what a warm invocation costs inside the loader, without the network:
// Handler (decode, engine lookup, kernel, encode, log line) on a loaded cargo, in process.
//   xcargo-handler-bench --cargo FILE --trust DIR [--entry add] [-n N]
// Prints one JSON object: median and p99 nanoseconds per call, quick (inline) path and queued path.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "server/handler.h"
#include "tool_args.h"
#include "log.h"
#include "xcargo/cargo.h"
#include "xcargo/file.h"
#include "xcargo/trust.h"

using namespace xcargo;
using namespace xcargo::loader;
using Clock = std::chrono::steady_clock;

namespace {

using test::arg;

[[noreturn]] void die(const std::string& what) { test::die("xcargo-handler-bench", what, 1); }

template <class F>
std::pair<double, double> measure(int n, F&& f) {
  std::vector<double> ns;
  ns.reserve(n);
  for (int i = 0; i < n; ++i) {
    auto t = Clock::now();
    f();
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t).count());
  }
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns[ns.size() * 99 / 100]};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = std::atoi(arg(argc, argv, "-n", "200000").c_str());
  auto bytes = read_file(arg(argc, argv, "--cargo"), 1u << 30);
  if (!bytes.ok()) die(bytes.error().message());
  auto c = parse_container(*bytes);
  if (!c.ok()) die(c.error().message());
  auto trust = TrustStore::load(arg(argc, argv, "--trust"));
  if (!trust.ok()) die(trust.error().message());
  EngineConfig ec;
  ec.log = [](std::string_view line) { log_line(line); };
  auto engine = Engine::create(ec, std::move(*trust));
  if (!engine.ok()) die(engine.error().message());
  Handler handler(**engine, 1 << 20, [](std::string_view line) { log_line(line); });
  (void)handler.handle(wire::MsgType::push, wire::encode(wire::Push{1, bytes->size()}), *bytes);
  wire::Invoke inv;
  inv.request_id = 2;
  inv.digest = c->digest;
  inv.entry = arg(argc, argv, "--entry", "add");
  int64_t in[2] = {2, 40};
  inv.input_size = sizeof in;
  const Bytes header = wire::encode(inv);
  const ByteView input(reinterpret_cast<const uint8_t*>(in), sizeof in);
  for (int i = 0; i < 100; ++i) (void)handler.handle(wire::MsgType::invoke, header, input);
  int declined = 0;  // a run slowed by preemption makes the next few go the queued way
  auto quick = measure(n, [&] {
    if (!handler.invoke(header, input, {}, true)) declined++, (void)handler.handle(wire::MsgType::invoke, header, input);
  });
  auto queued = measure(n, [&] { (void)handler.handle(wire::MsgType::invoke, header, input); });
  if (declined > n / 100) die("the quick path declined " + std::to_string(declined) + " of " + std::to_string(n) + " calls");
  std::printf("{\"quick_median_ns\": %.0f, \"quick_p99_ns\": %.0f, \"handle_median_ns\": %.0f, \"handle_p99_ns\": %.0f, \"declined\": %d, \"n\": %d}\n",
              quick.first, quick.second, queued.first, queued.second, declined, n);
  flush_log();
  return 0;
}
