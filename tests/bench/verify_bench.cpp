// xcargo-verify-bench: times full verification of one cargo in process (what a loader pays),
// cold (first call) and warm (median of N). Links only xcargo_read, which also proves that
// the read-and-verify layer builds without the build-and-sign layer.
//
// usage: xcargo-verify-bench CARGO TRUST [N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "xcargo/cargo.h"

using namespace xcargo;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: xcargo-verify-bench CARGO TRUST [N]\n");
    return 2;
  }
  const int n = argc > 3 ? std::atoi(argv[3]) : 50;
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    auto t0 = Clock::now();
    auto trust = TrustStore::load(argv[2]);
    auto bytes = read_cargo_file(argv[1]);
    if (!trust.ok() || !bytes.ok()) {
      std::fprintf(stderr, "xcargo-verify-bench: cannot read the cargo or the trust store\n");
      return 2;
    }
    auto cargo = load_cargo(std::move(*bytes), &*trust);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!cargo.ok()) {
      std::fprintf(stderr, "xcargo-verify-bench: %s\n", cargo.error().message().c_str());
      return 1;
    }
  }
  const double cold = ms.front();
  std::sort(ms.begin() + 1, ms.end());
  const double warm = n > 1 ? ms[1 + (n - 1) / 2] : cold;
  std::printf("{\"cold_ms\": %.3f, \"warm_ms\": %.3f, \"runs\": %d}\n", cold, warm, n);
  return 0;
}
