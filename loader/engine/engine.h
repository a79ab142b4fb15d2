// The execution engine shared by xcargo-loader and `xcargo run`: verifies a cargo, selects
// its variant, JIT-compiles or links it against the allowed runtime only, keeps it loaded by
// digest, and invokes its entries.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/cargo_store.h"
#include "engine/codegen.h"
#include "engine/regions.h"
#include "engine/select.h"
#include "xcargo/cargo.h"
#include "xcargo/error.h"
#include "xcargo/trust.h"
#include "wire/wire.h"

namespace xcargo::loader {

struct EngineConfig {
  std::string cache_dir;  // JIT output cache; empty disables it
  Prefer prefer = Prefer::native;
  Limits limits;          // cargo size limits, at most the format's
  uint64_t max_reply = 64ull << 20;
  uint64_t max_alloc = 1ull << 30;  // xc_alloc budget per invocation
  uint32_t node_id = 0;
  uint32_t node_count = 1;
  uint64_t max_forward_input = 0;   // xc_forward's input limit; 0: it fails (not in a cluster)
  uint64_t max_region_bytes = 4ull << 30;  // all of the node's memory regions together
  int node_memory_fd = -1;  // Regions::create_memory's, shared by every worker; -1: the engine's own
  std::vector<std::pair<std::string, uint64_t>> regions;  // the admin's (--region): first in node memory
  // CargoStore::create_memory's (with limits.max_cargo_size), shared by every worker: cargos
  // loaded by an earlier worker are loaded from it on first use. -1: none.
  int kept_cargos_fd = -1;
  // false: create() leaves node memory alone until open_regions() (a standby worker, which must
  // not touch the table while the worker it will replace still serves).
  bool open_regions = true;
  uint64_t quick_ns = 20000;        // a run this short counts towards invoke_if_quick
  uint64_t misjudged_ns = 1000000;  // an invoke_if_quick run this long held up others
  std::function<void(std::string_view)> log;  // one line per event and per xc_log
  // Where objects for bitcode variants come from: empty, this engine compiles them and keeps
  // them in cache_dir; the loader's worker sets its compile service (and no cache_dir).
  Compiler compile;
  // With `compile` set: the cache it writes, which this engine reads first for a bitcode
  // variant's -O2 object (a hit then costs no round trip to the service: after a restart,
  // 2 to 10 ms while the service was still starting). Empty: every object from `compile`.
  std::string read_cache_dir;
  // A bitcode variant missing from the cache is loaded in its quick tier (Jit::compile_bitcode)
  // and runs that until tier_up() replaces it with -O2's object.
  bool jit_tiers = false;
};

// What a kernel asked for with xc_forward: this entry, on that node, with this input.
struct ForwardRequest {
  uint32_t node = 0;
  std::string entry;
  Bytes input;
};

struct InvokeResult {
  wire::ReplyStatus status = wire::ReplyStatus::internal;
  int32_t kernel_return = 0;
  uint64_t kernel_ns = 0;  // how long the kernel ran
  int64_t ended_ns = 0;    // when it returned (steady clock, ns since its epoch; 0: none ran)
  std::string variant;
  Bytes output;
  // Nonzero: the reply is the input's first reply_from_input bytes, output stays empty, and
  // whoever holds the input's buffer sends it or a copy (Handler::run).
  size_t reply_from_input = 0;
  std::string message;  // for failures: what went wrong, in a message for people
  std::vector<std::string> log;  // the kernel's xc_log lines, when asked for (keep_log)
  uint32_t log_dropped = 0;      // lines past the first wire::kMaxLogLines
  std::optional<ForwardRequest> forward;  // status ok and forwarded: no reply from here
  const std::string* signed_by = nullptr;  // the cargo's trusted signers, for log lines (LoadReport); kept for the engine's life
  const std::string* cargo_name = nullptr; // the cargo's name, once it was found; kept for the engine's life
};

struct LoadReport {
  Digest digest{};
  std::string name, version, variant;
  std::shared_ptr<const std::string> signed_by;  // "signed by KEYID (FILE.pub)[, ...]": its trusted signers
  bool already_loaded = false;
  bool jit_compiled = false;
  bool disk_cache_hit = false;
  bool quick_tier = false;  // it runs its quick tier until Engine::tier_up
  double verify_ms = 0, object_ms = 0, link_ms = 0;  // object: the payload, or the compile service's answer
};

// One cargo's tier-up: its entries now run -O2's object, or error says why they still run
// the quick tier's (which stays: nothing is lost).
struct TierUpReport {
  Digest digest{};
  std::string name, version, variant;
  bool disk_cache_hit = false;  // the compile service had it ready
  double object_ms = 0, link_ms = 0;
  std::string error;
};

struct LoadedSummary {
  Digest digest{};
  std::string name, version, variant;
  std::vector<std::string> variants, entries;
  uint64_t invocations = 0;
};

struct EngineStats {
  uint64_t cargos_loaded = 0, loads_refused = 0, jit_compiles = 0, disk_cache_hits = 0, disk_cache_misses = 0,
           disk_cache_corrupt = 0, invocations = 0, invocations_failed = 0;
};

class Engine {
public:
  static Result<std::unique_ptr<Engine>> create(EngineConfig config, TrustStore trust);
  ~Engine();

  // Verifies and loads a cargo; loading one that is already loaded does nothing. Once
  // keep_cargos(true), a cargo loaded is also kept (EngineConfig::kept_cargos_fd).
  Result<LoadReport> load(Bytes cargo);
  // Takes a push's first-use costs now (verification's libraries, ORC's first link of an
  // object compiled from the JIT's own warm-up module, their page faults): a worker does
  // this before it is ready, so that the first push it serves does not pay them.
  void warm_up();
  // Whether the digest is loaded, or kept by an earlier worker and loads now.
  bool has(const Digest& digest) const;
  // Loads the cargos an earlier worker kept (verified like a push) until `budget` has passed
  // (the rest load on first use); returns how many loaded, and how many were refused.
  size_t load_kept(size_t* refused, std::chrono::milliseconds budget);
  // Whether loads are kept: only by the worker that serves (a standby only reads).
  void keep_cargos(bool on);
  // Called on the loading thread around each load (a push, a kept or a forwarded cargo):
  // true before it waits for the load lock, false once it is done. The loader's worker times
  // a load by its request limit, and a kernel's time limit starts after it. Set before any
  // thread loads.
  void on_load(std::function<void(bool loading)> hook);
  // The loaded cargo's LoadReport::signed_by (good for the engine's life), or null if it is not loaded.
  const std::string* signed_by(const Digest& digest) const;
  // Replaces the trust store (a reloaded trust directory): loaded cargos none of whose
  // signers is trusted any more, or that a rule of the directory refuses (a revoked digest, a
  // version below a minimum), stop running (refused, with the reason) until allowed again.
  // Returns how many are refused; *ran_revoked (if given) receives how many of those refused
  // now, not before, ran in this process (their code may have left something behind).
  size_t update_trust(TrustStore trust, size_t* ran_revoked = nullptr);
  // The signed cargo as it was loaded (a forward to a node that lacks it carries it), or
  // nullptr when the digest is not loaded.
  std::shared_ptr<const Bytes> cargo_bytes(const Digest& digest) const;
  // Runs one entry in the calling thread. Thread-safe.
  // keep_log: the result carries the kernel's xc_log lines too (wire::kInvokeLog).
  InvokeResult invoke(const Digest& digest, std::string_view entry, ByteView input, bool keep_log = false);
  // The same, for a caller that must not be held up by a slow kernel: runs the entry only if
  // its latest kQuickRuns runs or more each took at most config().quick_ns; otherwise runs
  // nothing and returns nullopt. Lookup failures are returned as results.
  std::optional<InvokeResult> invoke_if_quick(const Digest& digest, std::string_view entry, ByteView input, bool keep_log = false);
  static constexpr uint32_t kQuickRuns = 4;
  // invoke_if_quick runs that took longer than config().misjudged_ns (each held its caller
  // up), over every entry, since this engine was made.
  uint32_t misjudged_runs() const;
  // Whether a loaded cargo runs its quick tier (EngineConfig::jit_tiers).
  bool tier_up_pending() const;
  // Whether a cargo running its quick tier has its -O2 object in the compile service's cache
  // already (EngineConfig::read_cache_dir): tier_up(true) then takes a millisecond or so and
  // waits for nothing. A look costs a system call per such cargo.
  bool tier_up_ready() const;
  // Replaces each quick tier with -O2's object (asked of the compiler without allow_quick:
  // waits for it; ready: only those whose object is in the cache, read from there, the others
  // left for later). Runs already under way finish in the quick tier's code, which stays linked.
  std::vector<TierUpReport> tier_up(bool ready = false);
  std::vector<LoadedSummary> list() const;
  EngineStats stats() const;
  const HostInfo& host() const;
  // Opens node memory (Regions::open) and creates the configured regions there. create() calls
  // it unless config.open_regions is false; then call it once, before the first invocation.
  [[nodiscard]] Status open_regions();
  // The node's memory regions (xc_region), shared by all invocations; open_regions() ran.
  Regions& regions();
  Regions* regions_if_open();  // nullptr before open_regions()
  const EngineConfig& config() const;

private:
  Engine();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xcargo::loader
