// Finding the loader binary for local runs.
#include "node_target.h"

#include <cstdlib>
#include <filesystem>

namespace xcargo::cli {

std::string local_loader_path() {
  if (const char* p = std::getenv("XCARGO_LOADER"); p && *p) return p;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (exe.parent_path() / "xcargo-loader").string();
}

}  // namespace xcargo::cli
