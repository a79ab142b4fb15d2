// Who the worker runs as: another user's uid, or root without capabilities.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "xcargo/error.h"

namespace xcargo::loader::sandbox {

struct User {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
};

// Looks NAME up (before the sandbox: it may read /etc/passwd or ask NSS).
[[nodiscard]] Result<User> find_user(const std::string& name);

// The calling process becomes `user` (groups, gid, uid; every thread, for good). Call it
// while the process has one thread: capabilities go with uid 0.
[[nodiscard]] Status become(const User& user);

// Root only (else nothing to do): the calling thread gives up every capability, from the
// bounding set too, but CAP_NET_BIND_SERVICE when keep_bind_service (a port below 1024).
// Capabilities belong to threads: call it while the process has one thread.
[[nodiscard]] Status drop_capabilities(bool keep_bind_service);

// This thread's effective capabilities, as the kernel's bit mask (tests and the log).
uint64_t effective_capabilities();

}  // namespace xcargo::loader::sandbox
