// RunLog: the audit trail's lines for kernels that ran, without a line formatted per run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
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
  // Between begin_batch() and end_batch() on one thread (a worker's leader taking requests
  // from its lanes; one batch at a time per log), the runs of the key of that thread's last
  // run are summed apart and added to their tally under the lock once, at end_batch: a lock
  // taken per run is a barrier per run, which waited for the reply before it to reach the
  // client's cache (spread_counter.h). The first run of a key is logged in full at once, as
  // outside one, and flush(true) adds the open batch's sums too: a worker ends while its
  // leader is stuck in a kernel, and the runs that answered must still be in the log
  // (guarded by run_log_test.cpp, "flush(true) from another thread takes an open batch's
  // sums ...", and tests/e2e/adversary_test.sh, the hang_blocked kernel's runs counted).
  void begin_batch();
  void end_batch();
  // r's line in full, not counted (log-every-run).
  void write_full(const Run& r);
  // Writes the sums that are `every` old, or all of them. Connections unseen for a minute
  // are forgotten (their next run is logged in full again).
  void flush(bool all = false);

  size_t keys() const;
  static constexpr size_t kMaxKeys = 1024;
  static constexpr std::chrono::seconds kForgetAfter{60};

  // What a tally is kept for: a cargo entry, invoked or forwarded, from one connection.
  struct Key {
    Digest digest{};
    std::string entry;
    bool forward = false;
    const std::string* origin_ptr = nullptr;  // compared first; then the text
    std::string origin;
    bool has_origin = false;
    void set(const Run& r);
    bool matches(const Run& r) const;
    bool matches(const Key& k) const;
  };
  // Runs counted and summed.
  struct Sums {
    uint64_t count = 0, ok = 0, forwarded = 0, ns_sum = 0, ns_max = 0;
    uint32_t hop_min = 0, hop_max = 0;
    void add(const Run& r);
    void add(const Sums& s);
  };

private:
  struct Tally {
    Key key;
    std::string signed_by;
    bool has_signer = false;
    Sums sums;
    Clock::time_point since{};      // the first counted run's
    Clock::time_point last_seen{};  // the last flush that found it idle, or its first run
  };
  template <class K>
  Tally* find(const K& k) {
    for (Tally& t : tallies_)
      if (t.key.matches(k)) return &t;
    return nullptr;
  }
  // Under mu_: counts r in its tally (a new key's run: its line in full, and a tally from the
  // next run on). False: no tally holds r's key (too many keys; every run is logged in full).
  bool tally(const Run& r);
  // Under mu_: a batch's sums of key k into its tally.
  void fold(const Key& k, const Sums& s);
  // The open batch (begin_batch). Its key and arming change under mu_, by the batching
  // thread; its sums are atomics that thread alone adds to, so that flush(true) from another
  // thread can take them.
  struct Batch {
    std::atomic<std::thread::id> thread{};  // the batching thread; none between batches
    std::atomic<std::thread::id> last{};    // the last batching thread (its key stays armed)
    bool armed = false;                     // key is a tallied key: its runs are summed here
    uint64_t forgets = 0;                   // the log's forgets_ when it was armed
    Key key;
    std::atomic<uint64_t> count{0}, ok{0}, forwarded{0}, ns_sum{0}, ns_max{0};
    std::atomic<uint32_t> hop_min{0}, hop_max{0};
    void add(const Run& r);  // the batching thread
    Sums take();             // under mu_: the sums, zeroed
  };
  void fold_batch();  // under mu_: the open batch's sums into their tally
  void write_sum(Tally& t, Clock::time_point now);

  Sink sink_;
  std::chrono::milliseconds every_;
  mutable std::mutex mu_;
  std::vector<Tally> tallies_;
  std::atomic<uint64_t> forgets_{0};  // flushes that forgot tallies: a batch's armed key may be gone
  Batch batch_;
};

}  // namespace xcargo::loader
