// `xcargo --version [-v]`: the release, and with -v where this install finds what it runs.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "node_target.h"
#include "verbs.h"
#include "compile/compile.h"
#include "xcargo/format.h"
#include "xcargo/version.h"
#include "wire/wire.h"

namespace xcargo::cli {

namespace fs = std::filesystem;

namespace {

std::string first_line_of(const std::string& command) {
  std::string line;
  if (FILE* p = ::popen(command.c_str(), "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof buf, p)) line = buf;
    ::pclose(p);
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

std::string where(const std::string& path, bool from_env, const char* env) {
  std::error_code ec;
  std::string s = path;
  if (from_env) s += std::string(" (from $") + env + ")";
  if (!fs::exists(path, ec)) s += " (missing)";
  return s;
}

}  // namespace

int print_version(bool verbose) {
  std::printf("xcargo %s\n", XCARGO_VERSION_STRING);
  if (!verbose) return 0;
  std::printf("container format %u.%u, wire protocol %u\n", unsigned(format::kVersionMajor), unsigned(format::kVersionMinor),
              unsigned(wire::kVersion));
  std::error_code ec;
  std::printf("program:        %s\n", fs::read_symlink("/proc/self/exe", ec).c_str());
  const char* inc_env = std::getenv("XCARGO_KERNEL_INCLUDE");
  std::printf("kernel headers: %s\n",
              where(kernel_include_dir(), inc_env && *inc_env, "XCARGO_KERNEL_INCLUDE").c_str());
  const char* bin_env = std::getenv("XCARGO_LLVM_BIN");
  std::string clang = llvm_tool("clang");
  std::string clang_line = where(clang, bin_env && *bin_env, "XCARGO_LLVM_BIN");
  if (fs::exists(clang, ec)) clang_line += ": " + first_line_of("'" + clang + "' --version 2>&1");
  std::printf("clang:          %s\n", clang_line.c_str());
  for (const char* tool : {"ld.lld", "llvm-link"})
    std::printf("%-15s %s\n", (std::string(tool) + ":").c_str(), where(llvm_tool(tool), bin_env && *bin_env, "XCARGO_LLVM_BIN").c_str());
  const char* loader_env = std::getenv("XCARGO_LOADER");
  std::printf("local loader:   %s\n", where(local_loader_path(), loader_env && *loader_env, "XCARGO_LOADER").c_str());
  return 0;
}

}  // namespace xcargo::cli
