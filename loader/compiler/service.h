// The compile service: the only process that writes the JIT cache. The supervisor starts one
// beside each worker, before any kernel runs, so nothing a kernel does reaches it except its
// requests. Each request (a signed cargo and a variant name) runs in a child of its own, forked
// before the request arrives (its page faults and LLVM's first-compile costs paid while idle),
// which reads the request from the worker's connection itself, verifies the cargo again
// against the trust directory, checks and compiles the bitcode (or finds it in the cache) and
// answers the worker; the service watches it (time limit, crash) and answers for it if it
// ends without answering. An LLVM fatal error or crash there costs that request only. The
// worker itself cannot write the cache (loader/SECURITY.md).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

#include "engine/codegen.h"
#include "xcargo/cargo.h"

namespace xcargo::loader::compiler {

struct Options {
  std::string trust;      // the trust path, read again for every request
  std::string cache_dir;  // empty: no cache
  Limits limits;          // cargo limits, as the worker's
  std::chrono::seconds job_limit{120};  // a compile running longer is stopped and refused
  // A standby job is forked once the service has had no request for this long, and after
  // each request (0: also at start, before the first request).
  std::chrono::milliseconds standby_after{1000};
  // Also one at start: for a loader that prefers bitcode, whose every push compiles (its first
  // push in the service's first second then took 6 to 10 ms instead of 30 to 50: no job to
  // fork and warm after the request).
  bool standby_at_start = false;
  // Changes when the trust directory changes; then entries compiled from cargos that only
  // keys no longer trusted signed are removed (and at start).
  std::function<std::string()> trust_stamp;
  std::function<void(std::string_view)> log;
};

// Serves requests on fd until the worker closes its end. Returns the process's exit code.
int serve(int fd, const Options& options);

// The worker's side: a Compiler that asks the service on fd, one request at a time.
// on_lost runs (once per failed request) when the service's connection is gone: every
// later compile would fail too (a kernel that shut the worker's end down made every later
// bitcode push fail, silently, until the worker restarted for another reason).
Compiler remote(int fd, std::chrono::seconds job_limit, std::function<void()> on_lost = {});

}  // namespace xcargo::loader::compiler
