// Uids of their own for tenants' workers (tenant-users: dynamic), allocated as systemd's
// DynamicUser does: from 61184-65519, none that the user or group database names, each
// tenant's the same across the loader's restarts unless another has it (then the next free).
#pragma once

#include <sys/types.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "sandbox/privileges.h"
#include "xcargo/error.h"

namespace xcargo::loader {

class TenantUsers {
public:
  static constexpr uid_t kFirst = 61184, kLast = 65519;
  // The user (uid = gid, named "xcargo-TENANT" in log lines) whose workers run tenant's
  // kernels; the same for the same tenant while the loader runs. Any thread.
  [[nodiscard]] Result<sandbox::User> of(const std::string& tenant);

private:
  std::mutex m_;
  std::map<std::string, sandbox::User> given_;
  std::set<uid_t> taken_;
};

}  // namespace xcargo::loader
