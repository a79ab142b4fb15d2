// Runs external tools (clang, ld.lld, llvm-link) without a shell, several at a time.
#pragma once

#include <string>
#include <vector>

#include "xcargo/error.h"

namespace xcargo {

struct Command {
  std::vector<std::string> argv;
  std::string cwd;          // empty: inherit
  std::string description;  // "compiling k.c for x86_64", for messages
};

// How far a build is: commands finished so far, of how many in all (across calls).
struct Progress {
  bool show = false;  // print "xcargo: [done/total] description" as each command finishes
  size_t done = 0, total = 0;
};

// Runs the commands with at most `jobs` at once; their stderr goes to ours. Returns the
// first failure (in command order) once all started commands have finished.
Status run_commands(const std::vector<Command>& commands, unsigned jobs, bool verbose, Progress* progress = nullptr);

}  // namespace xcargo
