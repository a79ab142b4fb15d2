// The supervisor: starts the worker process and its compile service, restarts them when the
// worker dies, stops them on a signal.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "exec_plan.h"
#include "xcargo/error.h"

namespace xcargo::loader {

class DoorKeeper;
class TlsKeeper;


// Where a worker listens: UCX's HOST:PORT, and the TLS front door's (empty: none).
struct Listen {
  std::string ucx, tls;
  // What the ready file holds: "HOST:PORT\n", then "tls://HOST:PORT\n" with a front door.
  std::string ready_text() const { return ucx + "\n" + (tls.empty() ? "" : "tls://" + tls + "\n"); }
  std::string text() const { return ucx + (tls.empty() ? "" : " and tls://" + tls); }
  // The first log line's: which transport listens where, and for whom (ucx_what: UCX's).
  std::string described(const std::string& ucx_what) const {
    return ucx + " (" + ucx_what + ")" + (tls.empty() ? "" : " and tls://" + tls + " (TLS 1.3 front door: authorized keys only)");
  }
};

// The descriptors a worker starts with (its ends), as WorkerMain takes them.
struct WorkerFds {
  int addr = -1, go = -1, incident = -1, compiler = -1, key = -1, door = -1, tls = -1;
};
// How a worker (PlanWorker) or a compile service (PlanCompiler, given its end of the worker's
// connection) starts by exec, made in the supervisor before the fork: the forked child only
// execs it, so each such process has an address layout of its own.
using PlanWorker = std::function<Result<ExecPlan>(const Listen& listen, const WorkerFds& fds)>;
using PlanCompiler = std::function<Result<ExecPlan>(int fd)>;

struct SupervisorOptions {
  Listen listen;            // the first worker's addresses; restarts keep the ports it bound
  std::string ready_file;   // receives Listen::ready_text once the first worker listens ("" for none)
  std::string started;      // what the first "listening on" line adds (node key, clients)
  std::vector<std::string> started_notes;  // lines logged right after it (entries the clients directory ignores)
  std::string ucx_what;     // what it says of listen.ucx: who reaches this loader's UCX there, and how
  double kernel_timeout_s = 10;  // a stopping worker gets this long (plus 2 s) before SIGKILL
  // Keep a standby worker ready (prepared, sandboxed, waiting for its go) to take over the
  // moment the serving one ends: a restart then costs milliseconds instead of a start.
  bool standby = true;
  // Open the same-host door (door_keeper.h) once the first worker has bound its address, or
  // serve the one given (door_keeper: the loader's, shared by its tenants' supervisions).
  bool door = true;
  DoorKeeper* door_keeper = nullptr;
  // The tenant whose workers this runs (tenancy.h), as the keepers know it ("": the only one).
  std::string tenant;
  std::array<uint8_t, 32> node_key{};  // this node's public key: the route of peers' doors the keeper opens
  // The TLS front door's keeper (tls_keeper.h), listening at listen.tls: each serving worker
  // gets its connections over a channel of its own. Null: workers listen themselves.
  TlsKeeper* tls_keeper = nullptr;
  // The node key's service (loader/keys/key_service.h): a connection for each worker, made
  // before its fork (none: the worker gets -1), and whether the service still runs. Without
  // it no worker can prove the node's key: the loader stops, saying why.
  // A connection is the worker's descriptor and an id, given back to disconnect_key once
  // that worker has ended.
  std::function<Result<std::pair<int, uint64_t>>()> connect_key;
  std::function<void(uint64_t id)> disconnect_key;
  std::function<bool(std::string* why)> key_alive;
  // Told when a worker took over from one that ended, and when a worker was reaped (the
  // node's counters: loader/stats/node_stats.h). Either may be empty.
  std::function<void()> on_restart;
  std::function<void(pid_t)> on_worker_ended;
  // Where set, workers and their compile services start by exec (above); unset, the forked
  // child runs WorkerMain or CompilerMain itself.
  PlanWorker plan_worker;
  PlanCompiler plan_compiler;
};

// The worker's main. Prepares everything but its listener, writes "standby\n" to addr_fd,
// waits for a byte on go_fd (its end: stop), then listens on `listen` (retrying while the
// worker it replaces frees the port) and writes "HOST:PORT\tTLS-HOST:PORT\tHOW-CONFINED\n"
// (the second field empty without a front door). Once its
// listener is closed for good (it is about to end) it writes another line. It may leave a line
// in `incident` (a shared page, its own, also incident_fd: a memory file that a worker started
// by exec maps again) saying why it is about to stop. compiler_fd is its
// connection to its compile service, key_fd its connection to the key service (or -1).
// door_fd is its end of the channel to the same-host door's keeper (door_keeper.h), tls_fd its
// end of the channel from the TLS front door's keeper (tls_keeper.h); -1 for none.
// The incident page's size (WorkerMain's incident, incident_fd).
inline constexpr size_t kIncidentSize = 4096;
using WorkerMain = std::function<int(const Listen& listen, int addr_fd, int go_fd, char* incident, size_t incident_size, int incident_fd,
                                     int compiler_fd, int key_fd, int door_fd, int tls_fd)>;
// The compile service's main (loader/compiler/service.h), serving the worker on fd. The
// supervisor starts one before each worker, so that no kernel has run in it.
using CompilerMain = std::function<int(int fd)>;

// Forks a compile service running `compiler` (named xcargo-compiler, killed when this process
// dies); *worker_end receives the other end of their connection. supervise() calls it before
// each worker; --exec's engine uses it too.
[[nodiscard]] Result<pid_t> start_compile_service(const CompilerMain& compiler, int* worker_end, const PlanCompiler& plan = {});
// Runs workers, each replaced by a standby when it ends, until `stop` is set (by SIGTERM/SIGINT, which must interrupt waitpid: no
// SA_RESTART). Returns the exit code: 0 on a clean stop, the worker's own code when the
// first worker never started (a configuration problem); an error when a restart cannot be made.
[[nodiscard]] Result<int> supervise(const SupervisorOptions& options, const std::atomic<bool>& stop, const WorkerMain& worker,
                                    const CompilerMain& compiler);

}  // namespace xcargo::loader
