// Compiling kernel sources into cargo payloads with clang-16 (build side, needs LLVM).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "xcargo/error.h"
#include "xcargo/manifest.h"
#include "build/writer.h"

namespace xcargo {

// What `--target` names: "bitcode", or ARCH[:CPU] with ARCH one of x86_64, aarch64, riscv64.
struct Target {
  std::string name;   // variant name, e.g. "x86_64" or "x86_64:x86-64-v3"
  VariantKind kind = VariantKind::object;
  std::string triple;
  std::string cpu;
  std::vector<std::string> clang_flags;  // target-specific clang arguments
};
Result<Target> parse_target(std::string_view spec);
std::vector<std::string> default_targets();  // bitcode, x86_64, aarch64

struct CompileRequest {
  std::vector<std::string> sources;  // .c, .cc/.cpp/.cxx, .ll, .bc
  std::vector<std::string> targets;  // default_targets() when empty
  std::string opt_level = "2";       // 0 1 2 3 s z
  std::vector<std::string> include_dirs;
  std::vector<std::string> defines;
  unsigned jobs = 1;                 // compiler processes run at once
  bool verbose = false;              // print each command to stderr
  bool fp_strict = false;            // -ffp-contract=off everywhere: every variant rounds alike
  bool dependencies = false;         // fill CompileResult::dependencies (clang -MD)
  bool progress = false;             // a line on stderr as each compile and link finishes
};

struct CompileResult {
  std::vector<std::string> entries;  // sorted
  std::vector<std::pair<std::string, std::string>> toolchain;
  std::vector<Payload> payloads;     // one per target, in target order
  // With CompileRequest::dependencies: every file the build read (sources, and the headers
  // any target's compile included), absolute, sorted; what a build system's depfile lists.
  std::vector<std::string> dependencies;
};

// A Makefile-style depfile ("TARGET: DEP ..." with spaces, '#' and '$' escaped), as Ninja
// and CMake's DEPFILE read it.
std::string make_depfile(const std::string& target, const std::vector<std::string>& dependencies);
// The prerequisites of a depfile that clang -MD wrote, relative paths resolved against dir.
std::vector<std::string> parse_depfile(std::string_view text, const std::string& dir);

// Compiles every source for every target, links multiple sources into one payload per
// target (ld.lld -r / llvm-link), and finds entry points (XC_ENTRY) and imports. Fails with
// Errc::compile when a tool fails (its diagnostics went to stderr) and Errc::import when a
// kernel imports a symbol outside the allow-list.
Result<CompileResult> compile_kernels(const CompileRequest& request);

// Where the tools are: $XCARGO_LLVM_BIN, else the LLVM 16 bin directory found at build time.
std::string llvm_tool(const std::string& name);
// Where <xcargo/kernel.h> is: $XCARGO_KERNEL_INCLUDE, else share/xcargo/include beside the
// running program's bin directory (an install, or the build tree, which is laid out the same).
std::string kernel_include_dir();

}  // namespace xcargo
