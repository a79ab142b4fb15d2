// The worker's view of the file system: Landlock rules (Linux 5.13+), applied by lock_down.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "xcargo/error.h"

namespace xcargo::loader::sandbox {

struct FileRules {
  std::vector<std::string> read;   // files or directories (and what is beneath) to read
  std::vector<std::string> write;  // directories to read, create, write and remove files in
  // From Landlock ABI 4: binding a TCP port is refused (EACCES) but for these ports; nullopt:
  // not restricted.
  std::optional<std::vector<uint16_t>> tcp_bind;
};

// The Landlock ABI this kernel offers; 0 if none.
int landlock_abi();

// From now on this process and its threads reach only what `rules` names (a missing path is
// skipped), bind TCP ports only as rules.tcp_bind says (from ABI 4), and, from ABI 6, send
// signals only inside this process. Returns the ABI used, or 0 when the kernel has no Landlock (nothing done).
// Landlock restricts every thread (it applies at once to this one and is inherited by those
// started later; call it before starting threads that must be covered).
[[nodiscard]] Result<int> restrict_files(const FileRules& rules);

}  // namespace xcargo::loader::sandbox
