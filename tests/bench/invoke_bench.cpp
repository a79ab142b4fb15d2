// xcargo-invoke-bench: the measuring half of scripts/bench-invoke.
//   pingpong-server --listen HOST:PORT --ready-file F   raw UCX AM echo server (the baseline)
//   pingpong --to HOST:PORT [-n N]                       raw AM round trips, same sizes as an invoke
//   invoke --to HOST:PORT --cargo FILE --entry E [-n N]  push + first invoke (cold), then N warm
//   amrate --to HOST:PORT [-n N] [--inflight K]          raw AM requests per second, K in flight
//   rate --to HOST:PORT --cargo FILE --entry E [-n N] [--inflight K] [--work W]
//                                                        warm invocations per second, K in flight;
//                                                        W: a busy loop of W steps per reply in the
//                                                        client (a rate it does not lower is the
//                                                        node's, not the client's)
//   kernel --to HOST:PORT --cargo FILE --entry E --reps R --seed S [-n N] [--warmup W]
//                                                        a scale.c kernel (scripts/bench-kernels):
//                                                        W warm-up then N timed invocations
//   bw --to HOST:PORT --cargo FILE --entry E --size BYTES [-n N]
//                                                        N invocations of an echo kernel with
//                                                        BYTES of input and of reply
// Prints one JSON object. Raw UCX on both sides of the baseline: no xcargo code in its path.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "net/ucx.h"
#include "tool_args.h"
#include "xcargo/cargo.h"
#include "xcargo/client.h"
#include "xcargo/file.h"
#include "common/large_buffers.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

using test::arg;

struct Stats {
  double median, p99, mean;
  std::string percentiles;  // JSON array: the 0th to 100th percentile, then the 99.9th
};
Stats summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  std::string pct = "[";
  for (size_t p = 0; p <= 101; ++p) {
    const size_t i = p <= 100 ? std::min(v.size() - 1, v.size() * p / 100) : std::min(v.size() - 1, v.size() * 999 / 1000);
    pct += (p ? ", " : "") + std::to_string(v[i]);
  }
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 99 / 100)], sum / v.size(), pct + "]"};
}

[[noreturn]] void die(const std::string& what) { test::die("xcargo-invoke-bench", what, 1); }

// Same byte counts as an xcargo invoke of hello/add: ~56-byte header + 16-byte input out,
// ~30-byte header + 8-byte output back.
constexpr size_t kReqHeader = 56, kReqData = 16, kRepHeader = 30, kRepData = 8;

struct Echo {
  std::unique_ptr<net::UcxWorker> w;
  std::vector<ucp_ep_h> eps;
  static void on_conn(ucp_conn_request_h req, void* arg) {
    auto* e = static_cast<Echo*>(arg);
    if (auto ep = net::accept_ep(e->w->worker(), req, [](void*, ucp_ep_h, ucs_status_t) {}); ep.ok()) e->eps.push_back(*ep);
  }
  static ucs_status_t on_msg(void* arg, const void*, size_t, void*, size_t, const ucp_am_recv_param_t* param) {
    static uint8_t header[kRepHeader], data[kRepData];
    ucp_request_param_t p{};
    ucs_status_ptr_t r = ucp_am_send_nbx(param->reply_ep, 2, header, sizeof header, data, sizeof data, &p);
    if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);
    return UCS_OK;
  }
};

int pingpong_server(int argc, char** argv) {
  Echo e;
  auto w = net::UcxWorker::create(true);
  if (!w.ok()) die(w.error().message());
  e.w = std::move(*w);
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  hp.id = 1;
  hp.cb = &Echo::on_msg;
  hp.arg = &e;
  ucp_worker_set_am_recv_handler(e.w->worker(), &hp);
  std::string bound;
  auto listener = net::listen(e.w->worker(), arg(argc, argv, "--listen", "127.0.0.1:0"), &Echo::on_conn, &e, &bound);
  if (!listener.ok()) die(listener.error().message());
  const std::string where = bound + "\n";
  if (auto s = write_file(arg(argc, argv, "--ready-file"), as_bytes(where)); !s.ok()) die(s.error().message());
  // Busy-polls like ucx_perftest, but sleeps after 2 s without traffic so it can be left running.
  auto last = Clock::now();
  for (;;) {
    if (ucp_worker_progress(e.w->worker())) last = Clock::now();
    else if (Clock::now() - last > std::chrono::seconds(2)) e.w->progress_or_wait(100);
  }
}

// The raw side of pingpong and amrate: a worker connected to the echo server, counting its
// replies (message type 2).
struct RawClient {
  std::unique_ptr<net::UcxWorker> w;
  ucp_ep_h ep = nullptr;
  inline static std::atomic<long> replies{0};
  explicit RawClient(const std::string& to) {
    auto worker = net::UcxWorker::create();
    if (!worker.ok()) die(worker.error().message());
    w = std::move(*worker);
    ucp_am_handler_param_t hp{};
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB;
    hp.id = 2;
    hp.cb = [](void*, const void*, size_t, void*, size_t, const ucp_am_recv_param_t*) -> ucs_status_t {
      replies++;
      return UCS_OK;
    };
    ucp_worker_set_am_recv_handler(w->worker(), &hp);
    auto e = net::connect_ep(w->worker(), to);
    if (!e.ok()) die(e.error().message());
    ep = *e;
  }
};

int pingpong(int argc, char** argv) {
  const int n = std::atoi(arg(argc, argv, "-n", "20000").c_str());
  RawClient raw(arg(argc, argv, "--to"));
  auto& replies = RawClient::replies;
  auto* w = &raw.w;
  ucp_ep_h e = raw.ep;
  uint8_t header[kReqHeader] = {}, data[kReqData] = {};
  std::vector<double> rtt;
  for (int i = 0; i < n + 1000; ++i) {  // the first 1000 warm up the path
    const int want = replies + 1;
    auto t = Clock::now();
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_REPLY;
    ucs_status_ptr_t r = ucp_am_send_nbx(e, 1, header, sizeof header, data, sizeof data, &p);
    while (replies < want) ucp_worker_progress((*w)->worker());
    if (UCS_PTR_IS_PTR(r)) {
      while (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_worker_progress((*w)->worker());
      ucp_request_free(r);
    }
    if (i >= 1000) rtt.push_back(us(Clock::now() - t));
  }
  Stats s = summarize(rtt);
  std::printf("{\"rtt_median_us\": %.3f, \"rtt_p99_us\": %.3f, \"rtt_mean_us\": %.3f, \"n\": %d, \"percentiles_us\": %s}\n", s.median,
              s.p99, s.mean, n, s.percentiles.c_str());
  return 0;
}

int invoke(int argc, char** argv) {
  const int n = std::atoi(arg(argc, argv, "-n", "20000").c_str());
  auto bytes = read_file(arg(argc, argv, "--cargo"), 1u << 30);
  if (!bytes.ok()) die(bytes.error().message());
  auto c = parse_container(*bytes);
  if (!c.ok()) die(c.error().message());
  const std::string entry = arg(argc, argv, "--entry", "add");
  auto t0 = Clock::now();
  auto conn = client::connect(arg(argc, argv, "--to"));
  if (!conn.ok()) die(conn.error().message());
  auto t1 = Clock::now();
  int64_t in[2] = {2, 40};
  ByteView input(reinterpret_cast<const uint8_t*>(in), sizeof in);
  auto pushed = (*conn)->push(*bytes);
  if (!pushed.ok() || pushed->status != wire::ReplyStatus::ok) die("push failed: " + (pushed.ok() ? pushed->message : pushed.error().message()));
  auto t_pushed = Clock::now();
  auto first = (*conn)->invoke(c->digest, entry, input);
  auto t2 = Clock::now();
  if (!first.ok() || first->result.status != wire::ReplyStatus::ok) die("first invoke failed");
  std::vector<double> rtt;
  client::InvokeReply r;  // each reply in turn, its buffers reused (as a caller invoking in a loop would)
  for (int i = 0; i < n + 1000; ++i) {
    auto t = Clock::now();
    if (auto s = (*conn)->invoke(c->digest, entry, input, r); !s.ok() || r.result.status != wire::ReplyStatus::ok) die("invoke failed");
    if (i >= 1000) rtt.push_back(us(Clock::now() - t));
  }
  Stats s = summarize(rtt);
  std::printf("{\"connect_ms\": %.3f, \"cold_push_invoke_ms\": %.3f, \"push_ms\": %.3f, \"variant\": \"%s\", \"jit_compiled\": %s, "
              "\"disk_cache_hit\": %s, \"rtt_median_us\": %.3f, \"rtt_p99_us\": %.3f, \"rtt_mean_us\": %.3f, \"n\": %d, "
              "\"percentiles_us\": %s}\n",
              us(t1 - t0) / 1000, us(t2 - t1) / 1000, us(t_pushed - t1) / 1000, pushed->variant.c_str(), pushed->jit_compiled ? "true" : "false",
              pushed->disk_cache_hit ? "true" : "false", s.median, s.p99, s.mean, n, s.percentiles.c_str());
  return 0;
}

// Raw AM messages per second with K in flight, against the echo server: the baseline of `rate`.
int amrate(int argc, char** argv) {
  const long n = std::atol(arg(argc, argv, "-n", "200000").c_str());
  const int k = std::atoi(arg(argc, argv, "--inflight", "64").c_str());
  RawClient raw(arg(argc, argv, "--to"));
  auto& replies = RawClient::replies;
  auto* w = &raw.w;
  ucp_ep_h* ep = &raw.ep;
  static uint8_t header[kReqHeader] = {}, data[kReqData] = {};
  auto run = [&](long count) {
    const long base = replies;
    long sent = 0;
    while (replies - base < count) {
      while (sent < count && sent - (replies - base) < k) {
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        p.flags = UCP_AM_SEND_FLAG_REPLY;
        ucs_status_ptr_t r = ucp_am_send_nbx(*ep, 1, header, sizeof header, data, sizeof data, &p);
        if (UCS_PTR_IS_PTR(r)) ucp_request_free(r);  // small: eager, its buffers are static
        ++sent;
      }
      ucp_worker_progress((*w)->worker());
    }
  };
  run(n / 10);  // warm-up
  const auto t = Clock::now();
  run(n);
  const double s = us(Clock::now() - t) / 1e6;
  std::printf("{\"per_second\": %.0f, \"n\": %ld, \"inflight\": %d}\n", double(n) / s, n, k);
  return 0;
}

// A connection to --to with --cargo pushed (rate, kernel and bw modes).
struct Pushed {
  std::unique_ptr<client::Connection> conn;
  Digest digest{};
  wire::PushReply reply;
};
Pushed connect_and_push(int argc, char** argv) {
  auto bytes = read_file(arg(argc, argv, "--cargo"), 1u << 30);
  if (!bytes.ok()) die(bytes.error().message());
  auto c = parse_container(*bytes);
  if (!c.ok()) die(c.error().message());
  auto conn = client::connect(arg(argc, argv, "--to"));
  if (!conn.ok()) die(conn.error().message());
  auto pushed = (*conn)->push(*bytes);
  if (!pushed.ok() || pushed->status != wire::ReplyStatus::ok) die("push failed: " + (pushed.ok() ? pushed->message : pushed.error().message()));
  return {std::move(*conn), c->digest, std::move(*pushed)};
}

// Warm invocations per second with K in flight on one connection (Connection::invoke_pipelined).
int rate(int argc, char** argv) {
  const long n = std::atol(arg(argc, argv, "-n", "200000").c_str());
  const int k = std::atoi(arg(argc, argv, "--inflight", "64").c_str());
  auto [conn, digest, pushed] = connect_and_push(argc, argv);
  int64_t in[2] = {2, 40};
  const client::Invocation call{digest, arg(argc, argv, "--entry", "add"), ByteView(reinterpret_cast<const uint8_t*>(in), sizeof in)};
  long bad = 0;
  const long work = std::atol(arg(argc, argv, "--work", "0").c_str());
  auto run = [&](long count) {
    auto s = conn->invoke_pipelined(size_t(count), [&](size_t) { return call; }, size_t(k),
                                       [&](size_t, Result<client::InvokeReply>& r) {
                                         for (volatile long w = 0; w < work; w = w + 1) {}
                                         if (!r.ok() || r->result.status != wire::ReplyStatus::ok) ++bad;
                                       });
    if (!s.ok()) die(s.error().message());
  };
  run(n / 10);
  const auto t = Clock::now();
  run(n);
  const double s = us(Clock::now() - t) / 1e6;
  if (bad) die(std::to_string(bad) + " invocations failed");
  std::printf("{\"per_second\": %.0f, \"n\": %ld, \"inflight\": %d}\n", double(n) / s, n, k);
  return 0;
}

// The kernel's own time as the loader measured it (around the entry's call, as native_main.c
// does), and the round trip as this client saw it.
int kernel(int argc, char** argv) {
  const int n = std::atoi(arg(argc, argv, "-n", "7").c_str());
  const int warmup = std::atoi(arg(argc, argv, "--warmup", "1").c_str());
  const std::string entry = arg(argc, argv, "--entry");
  auto [conn, digest, pushed] = connect_and_push(argc, argv);
  const uint64_t in[2] = {std::strtoull(arg(argc, argv, "--reps").c_str(), nullptr, 10),
                          std::strtoull(arg(argc, argv, "--seed", "1").c_str(), nullptr, 10)};
  ByteView input(reinterpret_cast<const uint8_t*>(in), sizeof in);
  std::vector<double> kernel_us, rtt, all;
  uint64_t sum = 0;
  for (int i = 0; i < warmup + n; ++i) {
    auto t = Clock::now();
    auto r = conn->invoke(digest, entry, input);
    const double took = us(Clock::now() - t);
    if (!r.ok()) die("invoke failed: " + r.error().message());
    if (r->result.status != wire::ReplyStatus::ok || r->output.size() != 8) die("invoke failed: " + r->result.message);
    std::memcpy(&sum, r->output.data(), 8);
    all.push_back(took);
    if (i < warmup) continue;
    kernel_us.push_back(double(r->result.kernel_ns) / 1000);
    rtt.push_back(took);
  }
  Stats k = summarize(kernel_us), t = summarize(rtt);
  std::string first;  // the connection's first round trips, warm-up included, in order
  for (size_t i = 0; i < std::min<size_t>(all.size(), 40); ++i) first += (i ? ", " : "") + std::to_string(int(all[i]));
  std::printf("{\"kernel_median_us\": %.3f, \"kernel_min_us\": %.3f, \"rtt_median_us\": %.3f, \"checksum\": \"%016llx\", \"variant\": \"%s\", \"n\": %d, "
              "\"first_rtts_us\": [%s]}\n",
              k.median, *std::min_element(kernel_us.begin(), kernel_us.end()), t.median, (unsigned long long)sum, pushed.variant.c_str(), n,
              first.c_str());
  return 0;
}

// Bytes per second through an echo kernel: BYTES in and BYTES back per invocation, both counted.
int bw(int argc, char** argv) {
  const int n = std::atoi(arg(argc, argv, "-n", "5").c_str());
  const size_t size = std::strtoull(arg(argc, argv, "--size", "67108864").c_str(), nullptr, 10);
  auto [conn, digest, pushed] = connect_and_push(argc, argv);
  Bytes input(size);
  for (size_t i = 0; i < size; i += 4096) input[i] = uint8_t(i >> 12);
  const std::string entry = arg(argc, argv, "--entry", "echo");
  std::vector<double> ms, per_s;
  for (int i = 0; i < n + 1; ++i) {  // the first warms up (pages, registration caches)
    auto t = Clock::now();
    auto r = conn->invoke(digest, entry, input);
    const double took = us(Clock::now() - t) / 1000;
    if (!r.ok()) die("invoke failed: " + r.error().message());
    if (r->result.status != wire::ReplyStatus::ok) die("invoke failed: " + r->result.message);
    if (r->output.size() != size || std::memcmp(r->output.data(), input.data(), size) != 0) die("the echo differs from the input");
    release_large(std::move(r->output));  // as a client streaming large replies would
    if (i == 0) continue;
    ms.push_back(took);
    per_s.push_back(2.0 * double(size) / (took / 1000));
  }
  std::sort(ms.begin(), ms.end());
  std::sort(per_s.begin(), per_s.end());
  std::printf("{\"size\": %zu, \"rtt_median_ms\": %.3f, \"bytes_per_s\": %.0f, \"n\": %d}\n", size, ms[ms.size() / 2],
              per_s[per_s.size() / 2], n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) die("usage: xcargo-invoke-bench pingpong-server|pingpong|invoke|amrate|rate|kernel ...");
  std::string mode = argv[1];
  if (mode == "pingpong-server") return pingpong_server(argc, argv);
  if (mode == "pingpong") return pingpong(argc, argv);
  if (mode == "invoke") return invoke(argc, argv);
  if (mode == "kernel") return kernel(argc, argv);
  if (mode == "amrate") return amrate(argc, argv);
  if (mode == "rate") return rate(argc, argv);
  if (mode == "bw") return bw(argc, argv);
  die("unknown mode " + mode);
}
