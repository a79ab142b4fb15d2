// The supervisor: starts the worker process, restarts it when it dies, stops it on a signal.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>

#include "xcargo/error.h"

namespace xcargo::loader {

struct SupervisorOptions {
  std::string listen;       // the first worker's HOST:PORT; restarts keep the port it bound
  std::string ready_file;   // receives HOST:PORT once the first worker listens ("" for none)
  std::string started;      // what the first "listening on" line adds (node key, clients)
  double kernel_timeout_s = 10;  // a stopping worker gets this long (plus 2 s) before SIGKILL
};

// The worker's main: listens on `listen`, writes "HOST:PORT\n" to addr_fd once it serves,
// and may leave a line in `incident` (a shared page) saying why it is about to stop.
using WorkerMain = std::function<int(const std::string& listen, int addr_fd, char* incident, size_t incident_size)>;

// Runs workers until `stop` is set (by SIGTERM/SIGINT, which must interrupt waitpid: no
// SA_RESTART). Returns the exit code: 0 on a clean stop, the worker's own code when the
// first worker never started (a configuration problem); an error when a restart cannot be made.
[[nodiscard]] Result<int> supervise(const SupervisorOptions& options, const std::atomic<bool>& stop, const WorkerMain& worker);

}  // namespace xcargo::loader
