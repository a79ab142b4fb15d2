// The one table of xcargo's exit codes (documented in README.md, "Exit codes").
#pragma once

#include <initializer_list>
#include <string>

#include "xcargo/error.h"

namespace xcargo::cli {

enum ExitCode : int {
  kExitOk = 0,              // success
  kExitVerifyFailed = 1,    // the cargo is invalid, unsigned, untrusted or tampered with
  kExitUsage = 2,           // bad arguments, unreadable or unwritable files, build failures
  kExitRemoteFailed = 3,    // the node failed the request (run, push)
  kExitUnreachable = 4,     // a node could not be reached (push, run, ls)
  kExitDenied = 5,          // the node refused this client's identity, or needs one
};

// Each code's meaning as --help words it; the README's table says the same at more length.
inline const char* exit_code_meaning(ExitCode code) {
  switch (code) {
    case kExitOk: return "ok";
    case kExitVerifyFailed: return "the cargo failed verification or trust (malformed, tampered with, unsigned, untrusted, revoked)";
    case kExitUsage: return "usage error, unreadable or unwritable file, bad key file, failed build";
    case kExitRemoteFailed: return "the run or push failed on the node (non-zero return, crash, time-out, refused import, no such entry)";
    case kExitUnreachable: return "a node could not be reached, or the connection was lost";
    case kExitDenied: return "the node did not accept this client (no identity, key not authorized, verb not allowed)";
  }
  return "";
}

// The "Exit codes:" lines of a --help footer: one line per code a verb can return, in the
// table's words, and 128+N after signal N.
inline std::string exit_codes_help(std::initializer_list<ExitCode> codes) {
  std::string s = "Exit codes:";
  for (ExitCode c : codes) s += "\n  " + std::to_string(int(c)) + "  " + exit_code_meaning(c);
  return s + "\n  128+N  stopped by signal N (130: Ctrl-C)";
}

inline int exit_code_for(Errc code) {
  if (is_verification_failure(code)) return kExitVerifyFailed;
  if (code == Errc::remote) return kExitRemoteFailed;
  if (code == Errc::unreachable) return kExitUnreachable;
  if (code == Errc::unauthenticated) return kExitDenied;
  return kExitUsage;
}

}  // namespace xcargo::cli
