// RunLog: the audit trail's lines for kernels that ran, without a line formatted per run.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/types.h"

namespace xcargo::loader {

// A kernel that ran to its end (ok) or forwarded the computation on.
struct Run {
  bool forward = false;           // came as a forward from another node (else an invoke)
  const Digest* digest = nullptr;
  std::string_view entry;
  uint32_t hop = 0;               // forwards: this node's hop number
  int64_t forwarded_to = -1;      // the node the kernel forwarded the computation to; -1: it ended here
  uint64_t kernel_ns = 0;
  const std::string* signed_by = nullptr;  // "signed by KEYID (NAME)", or null
  const std::string* origin = nullptr;     // "from HOST:PORT key ...", or null
};

// The first run of each cargo entry for each connection (origin) is logged at once, in
// full, as before:
//   accepted invoke: 0ebf63e0ea55dc38/add -> ok (10.6 us), signed by ...; from ...
// The runs after it are counted, and one line sums them up once they are `every` old, when
// the worker ends, or when too many are pending:
//   accepted invoke: 0ebf63e0ea55dc38/add -> 41234 more runs in the last 1.0 s: ok 41234
//   (kernel mean 0.12 us, max 3.2 us), signed by ...; from ...
// Nothing but the per-run wording is lost: who ran what is on record before the first run's
// reply leaves, and every run is in a count. Only a worker killed outside every handler
// (SIGKILL) loses the counts of its last `every`. Thread-safe.
class RunLog {
public:
  using Sink = std::function<void(std::string_view)>;
  using Clock = std::chrono::steady_clock;
  explicit RunLog(Sink sink, std::chrono::milliseconds every = std::chrono::milliseconds(1000));

  void ran(const Run& r);
  // r's line in full, not counted (log-every-run).
  void write_full(const Run& r);
  // Writes the sums that are `every` old, or all of them. Connections unseen for a minute
  // are forgotten (their next run is logged in full again).
  void flush(bool all = false);

  size_t keys() const;
  static constexpr size_t kMaxKeys = 1024;
  static constexpr std::chrono::seconds kForgetAfter{60};

private:
  struct Tally {
    Digest digest{};
    std::string entry;
    bool forward = false;
    const std::string* origin_ptr = nullptr;  // compared first; then the text
    std::string origin, signed_by;
    bool has_origin = false, has_signer = false;
    uint64_t count = 0, ok = 0, forwarded = 0, ns_sum = 0, ns_max = 0;
    uint32_t hop_min = 0, hop_max = 0;
    Clock::time_point since{};      // the first counted run's
    Clock::time_point last_seen{};  // the last flush that found it idle, or its first run
  };
  Tally* find(const Run& r);
  void write_sum(Tally& t, Clock::time_point now);

  Sink sink_;
  std::chrono::milliseconds every_;
  mutable std::mutex mu_;
  std::vector<Tally> tallies_;
};

}  // namespace xcargo::loader
