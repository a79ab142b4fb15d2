// NodeStats: the loader's counters, in memory the supervisor owns and every worker maps, so
// that they outlive a worker that a kernel's failure ends (loader/README.md, "Metrics").
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "wire/wire.h"

namespace xcargo::loader {

// The statuses a result can have (wire-protocol.md section 5: values 0 to kMaxStatus).
inline constexpr size_t kStatusKinds = wire::kMaxStatus + 1;
// Distinct values of one label (cargos, client keys) counted apart: values past these are
// counted under kOtherLabel, so that no client can grow the table.
inline constexpr size_t kMaxLabelValues = 64;
inline constexpr size_t kLabelBytes = 64;  // a value's longest text (longer ones are cut)
inline constexpr uint16_t kOtherLabel = kMaxLabelValues;
inline constexpr const char* kOtherLabelText = "other";

enum class LabelKind : uint8_t { cargo = 0, client = 1 };

// The sums of one label value (or of all).
struct Counts {
  uint64_t invocations = 0;              // invocations and forwards answered, whatever their status
  uint64_t by_status[kStatusKinds] = {};  // the same by the status of their answer
  uint64_t bytes_in = 0, bytes_out = 0;   // their inputs and their replies' outputs
  uint64_t failed() const { return invocations - by_status[0]; }
  Counts& operator+=(const Counts& o);
};

struct LabelCounts {
  std::string value;  // as given to label(), at most kLabelBytes - 1 bytes; kOtherLabelText for the rest
  Counts counts;
};

struct StatsSnapshot {
  double started_unix_s = 0;     // when the supervisor made the memory
  uint64_t worker_restarts = 0;  // workers that took over from one that ended
  uint64_t running = 0;          // kernels running now, in workers not yet reaped
  Counts total;
  std::vector<LabelCounts> cargos, clients;  // values with counts, in the order first seen; merged by value
};

class NodeStats {
public:
  // A new memory object (sealed at its size, closed on exec), for open() in every process.
  [[nodiscard]] static Result<int> create_memory();
  // Maps it: writable for a worker and the supervisor, read-only for the metrics server.
  // Checks the size and the stamp; the counts are the workers' word (a kernel could have
  // written anything there): readers bound every value they read.
  [[nodiscard]] static Result<std::unique_ptr<NodeStats>> open(int fd, bool writable);
  ~NodeStats();
  NodeStats(const NodeStats&) = delete;
  NodeStats& operator=(const NodeStats&) = delete;

  // A worker that starts serving: from now on its counts go to a bank of shards of its own,
  // which the worker it replaces (still ending) does not use. Call once, before counting.
  void begin_serving();
  // The slot of a label value, claimed the first time it is seen; kOtherLabel once
  // kMaxLabelValues values are taken. Scans the table: callers cache it.
  uint16_t label(LabelKind kind, std::string_view value);
  // Hot path: plain loads and stores in this thread's shard (the first kOwnedShards threads
  // of a worker; the rest share one, with locked adds), no lock, no system call. Around a
  // kernel's run (or the engine's answer without one): kernel_started, kernel_ended. Each
  // invocation or forward answered, whatever answered it: answered, once.
  void kernel_started();
  void kernel_ended();
  void answered(uint16_t cargo, uint16_t client, wire::ReplyStatus status, uint64_t bytes_in, uint64_t bytes_out);
  // The supervisor: a worker took over from one that ended; a worker was reaped (the
  // kernels it ran count as running no more).
  void worker_restarted();
  void worker_ended(pid_t pid);

  StatsSnapshot snapshot() const;

  static constexpr unsigned kBanks = 2;        // serving workers in turn: the ending one and its successor
  static constexpr unsigned kOwnedShards = 7;  // threads per worker with a shard of their own; the rest share one
  struct Layout;

private:
  NodeStats() = default;
  Layout* m_ = nullptr;
  bool writable_ = false;
  unsigned bank_ = 0;
};

}  // namespace xcargo::loader
