// The exit codes of the loader's processes: the one table (the loader's own, which the
// service manager sees, and its children's, which the supervisor logs).
#pragma once

namespace xcargo::loader::exit_code {

// xcargo-loader itself:
inline constexpr int kOk = 0;           // stopped (SIGTERM, SIGINT), or --exec's client ended its stream
inline constexpr int kStream = 1;       // --exec: the client's stream broke mid-frame, or replies could not be written
inline constexpr int kCannotStart = 2;  // a configuration or start-up error, said on stderr (a worker's: in the log)
// Its children (never the loader's own code):
inline constexpr int kLlvmFatal = 70;      // EX_SOFTWARE: LLVM's fatal error handler ended the process
inline constexpr int kCompileJob = 71;     // a compile job's child whose compile failed (the service reads it)
inline constexpr int kKernelFailure = 75;  // EX_TEMPFAIL: a worker ended after a kernel crashed or ran past its limit; its standby serves

}  // namespace xcargo::loader::exit_code
