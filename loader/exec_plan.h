// Starting a loader process by exec from a forked child of the supervisor, which has threads:
// everything the new program needs is made before the fork, so the child calls nothing that
// takes a lock (another thread may hold it at the fork, and the child would wait for good).
#pragma once

#include <string>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/types.h"

namespace xcargo::loader {

struct ExecPlan {
  int exe = -1;             // the program (fexecve): the loader's own file, opened at start
  int start = -1;           // a memory file holding the start record, named in the environment
  std::vector<int> keep;    // descriptors the program keeps (close-on-exec cleared in the child)
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;  // into args and env, null-terminated: what the child execs

  ExecPlan() = default;
  ExecPlan(const ExecPlan&) = delete;
  ExecPlan& operator=(const ExecPlan&) = delete;
  ExecPlan(ExecPlan&& o) noexcept;
  ExecPlan& operator=(ExecPlan&& o) noexcept;
  ~ExecPlan();  // closes `start`
};

// A plan to run the program `exe` as NAME with this process's environment plus
// VARIABLE=<descriptor of a memory file holding record>, keeping `keep` (and that file).
[[nodiscard]] Result<ExecPlan> plan_exec(int exe, const std::string& name, const std::string& variable, ByteView record,
                                         std::vector<int> keep);

// In the forked child: clears close-on-exec on the plan's descriptors and execs. Returns only
// if exec failed (errno says why). Calls only system calls: safe between fork and exec.
void exec_planned(const ExecPlan& plan) noexcept;

}  // namespace xcargo::loader
