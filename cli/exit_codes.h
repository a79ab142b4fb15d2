// The one table of xcargo's exit codes (documented in README.md, "Exit codes").
#pragma once

#include "xcargo/error.h"

namespace xcargo::cli {

enum ExitCode : int {
  kExitOk = 0,              // success
  kExitVerifyFailed = 1,    // the cargo is invalid, unsigned, untrusted or tampered with
  kExitUsage = 2,           // bad arguments, unreadable or unwritable files, build failures
  kExitRemoteFailed = 3,    // the remote execution failed (later verbs: run)
  kExitUnreachable = 4,     // a node could not be reached (later verbs: push, run, ls)
  kExitDenied = 5,          // the node refused this client's identity, or needs one
};

inline int exit_code_for(Errc code) {
  if (is_verification_failure(code)) return kExitVerifyFailed;
  if (code == Errc::remote) return kExitRemoteFailed;
  if (code == Errc::unreachable) return kExitUnreachable;
  if (code == Errc::unauthenticated) return kExitDenied;
  return kExitUsage;
}

}  // namespace xcargo::cli
