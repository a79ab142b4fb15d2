// The worker's view of the file system: Landlock rules (Linux 5.13+), applied by lock_down.
#include "sandbox/files.h"
#include "sandbox/sys_error.h"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace xcargo::loader::sandbox {

namespace {

// Newer than this system's <linux/landlock.h>: the rights and the attribute's later fields,
// as the kernel's ABI versions define them (a kernel ignores nothing it was not told).
constexpr uint64_t kTruncate = 1ull << 14;     // ABI 3
constexpr uint64_t kIoctlDev = 1ull << 15;     // ABI 5
constexpr uint64_t kScopeSignal = 1ull << 1;  // ABI 6 (not abstract Unix sockets: UCX's shared-memory
                                              // transports wake their peers through them)

constexpr uint64_t kNetBindTcp = 1ull << 0;  // ABI 4: handled_access_net's bind right
constexpr int kRuleNetPort = 2;              // ABI 4: LANDLOCK_RULE_NET_PORT
struct NetPortAttr {                         // ABI 4: struct landlock_net_port_attr
  uint64_t allowed_access;
  uint64_t port;
};

struct RulesetAttr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;  // ABI 4
  uint64_t scoped;              // ABI 6
};

constexpr uint64_t kRead = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR;
constexpr uint64_t kWrite = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_REG |
                             LANDLOCK_ACCESS_FS_MAKE_DIR;
// What may be granted on a file rather than a directory.
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                                 kTruncate | kIoctlDev;

uint64_t handled_for(int abi) {
  uint64_t fs = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: execute .. make_sym
  if (abi >= 2) fs |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) fs |= kTruncate;
  if (abi >= 5) fs |= kIoctlDev;
  return fs;
}


}  // namespace

int landlock_abi() {
  const long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : int(v);
}

Result<int> restrict_files(const FileRules& rules) {
  const int abi = landlock_abi();
  if (abi == 0) return 0;
  const uint64_t handled = handled_for(abi);
  const bool net = rules.tcp_bind && abi >= 4;
  RulesetAttr attr{handled, net ? kNetBindTcp : 0, abi >= 6 ? kScopeSignal : 0};
  const size_t size = abi >= 6 ? sizeof attr : net ? offsetof(RulesetAttr, scoped) : sizeof attr.handled_access_fs;
  const int ruleset = int(::syscall(SYS_landlock_create_ruleset, &attr, size, 0));
  if (ruleset < 0) return sys_error("creating the Landlock ruleset");
  auto grant = [&](const std::string& path, uint64_t access) -> Status {
    const int fd = ::open(path.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return {};  // nothing there to grant (an optional /dev/shm, say)
      if (errno == EACCES)
        return Error(Errc::io, "sandbox: the worker (uid " + std::to_string(::geteuid()) + ") cannot reach " + path + ": " + std::strerror(errno))
            .hint("the worker must be able to read it (and every directory above it); with --user, check that user's rights");
      return sys_error("Landlock: " + path);
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) access &= kFileRights;
    landlock_path_beneath_attr pb{access & handled, fd};
    const long r = ::syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0);
    const int err = errno;
    ::close(fd);
    errno = err;
    if (r != 0) return sys_error("Landlock rule for " + path);
    return {};
  };
  Status s;
  for (const std::string& p : rules.read) {
    if (!s.ok()) break;
    s = grant(p, kRead);
  }
  for (const std::string& p : rules.write) {
    if (!s.ok()) break;
    s = grant(p, kRead | kWrite | (abi >= 3 ? kTruncate : 0));
  }
  if (net)
    for (uint16_t port : *rules.tcp_bind) {
      if (!s.ok()) break;
      NetPortAttr np{kNetBindTcp, port};
      if (::syscall(SYS_landlock_add_rule, ruleset, kRuleNetPort, &np, 0) != 0)
        s = sys_error("Landlock rule for TCP port " + std::to_string(port));
    }
  if (s.ok() && ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) s = sys_error("no_new_privs");
  if (s.ok() && ::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) s = sys_error("applying the Landlock ruleset");
  ::close(ruleset);
  if (!s.ok()) return s.error();
  return abi;
}

}  // namespace xcargo::loader::sandbox
