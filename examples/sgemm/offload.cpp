// xcargo-sgemm-offload: the DHPVM case. Sends two random n x n matrices to a node, which
// multiplies them with examples/sgemm (pushed first if needed); checks C against a local
// multiply; prints one JSON object with the times.
//   xcargo-sgemm-offload --to HOST:PORT --cargo sgemm.xcargo [--n 256] [--repeat 5]
// kernel_ms: the node's kernel run time (median); remote_ms: the client's end-to-end time
// (sending A and B, the kernel, receiving C; median); local_ms: the same multiply in this
// process (median), with this program's own build of the same loops.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "xcargo/cargo.h"
#include "xcargo/client.h"
#include "xcargo/file.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

namespace {

std::string arg(int argc, char** argv, const char* name, const char* def = "") {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return def;
}

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "xcargo-sgemm-offload: error: %s\n", what.c_str());
  std::exit(1);
}

// The loops of examples/sgemm/sgemm.c.
void sgemm(uint32_t n, const float* __restrict a, const float* __restrict b, float* __restrict c) {
  constexpr uint32_t kBlock = 64;
  std::fill(c, c + size_t(n) * n, 0.0f);
  for (uint32_t ii = 0; ii < n; ii += kBlock)
    for (uint32_t kk = 0; kk < n; kk += kBlock)
      for (uint32_t i = ii; i < ii + kBlock && i < n; ++i)
        for (uint32_t k = kk; k < kk + kBlock && k < n; ++k) {
          const float aik = a[size_t(i) * n + k];
          const float* __restrict brow = b + size_t(k) * n;
          float* __restrict crow = c + size_t(i) * n;
          for (uint32_t j = 0; j < n; ++j) crow[j] += aik * brow[j];
        }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t n = uint32_t(std::stoul(arg(argc, argv, "--n", "256")));
  const int repeat = std::max(1, std::atoi(arg(argc, argv, "--repeat", "5").c_str()));
  if (n == 0 || n > 4096) die("--n must be from 1 to 4096");
  auto cargo = read_file(arg(argc, argv, "--cargo"), 1u << 30);
  if (!cargo.ok()) die(cargo.error().message());
  auto parsed = parse_container(*cargo);
  if (!parsed.ok()) die(parsed.error().message());
  auto conn = client::connect(arg(argc, argv, "--to"));
  if (!conn.ok()) die(conn.error().message());
  if (auto has = (*conn)->has(parsed->digest); !has.ok() || !*has) {
    auto pushed = (*conn)->push(*cargo);
    if (!pushed.ok() || pushed->status != wire::ReplyStatus::ok)
      die("push failed: " + (pushed.ok() ? pushed->message : pushed.error().message()));
  }

  const size_t count = size_t(n) * n, bytes = count * sizeof(float);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Bytes input(4 + 2 * bytes);
  std::memcpy(input.data(), &n, 4);
  std::vector<float> a(count), b(count), want(count);
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  std::memcpy(input.data() + 4, a.data(), bytes);
  std::memcpy(input.data() + 4 + bytes, b.data(), bytes);

  std::vector<double> local_ms, remote_ms, kernel_ms;
  for (int i = 0; i < repeat; ++i) {
    auto t = Clock::now();
    sgemm(n, a.data(), b.data(), want.data());
    local_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
  }
  std::string variant;
  double max_err = 0;
  for (int i = 0; i < repeat + 1; ++i) {  // the first run warms the path (and may JIT)
    auto t = Clock::now();
    auto r = (*conn)->invoke(parsed->digest, "sgemm_run", input);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
    if (!r.ok()) die(r.error().message());
    if (r->result.status != wire::ReplyStatus::ok || r->output.size() != bytes)
      die(std::string("sgemm_run failed: ") + wire::status_name(r->result.status) + " " + r->result.message);
    if (i == 0) {
      const float* c = reinterpret_cast<const float*>(r->output.data());
      for (size_t j = 0; j < count; ++j) max_err = std::max(max_err, double(std::fabs(c[j] - want[j])));
      variant = r->result.variant;
      continue;
    }
    remote_ms.push_back(ms);
    kernel_ms.push_back(double(r->result.kernel_ns) / 1e6);
  }
  if (max_err > 1e-3 * n) die("C differs from the local multiply by up to " + std::to_string(max_err));
  std::printf("{\"n\": %u, \"variant\": \"%s\", \"kernel_ms\": %.3f, \"remote_ms\": %.3f, \"local_ms\": %.3f, "
              "\"max_abs_error\": %.3g, \"repeat\": %d}\n",
              n, variant.c_str(), median(kernel_ms), median(remote_ms), median(local_ms), max_err, repeat);
  return 0;
}
