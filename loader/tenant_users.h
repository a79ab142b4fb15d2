// Uids of their own for tenants' workers (tenant-users: dynamic), allocated as systemd's
// DynamicUser does: from 61184-65519, none that the user or group database names. A tenant
// keeps the uid that owns its cache directory (CACHE/tenants/NAME) from an earlier run;
// a new tenant gets the first free uid from a hash of its name.
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
  // tenants_dir: where the tenants' cache directories are ("" for none): the uids in the
  // range that own them are theirs, whichever tenant starts first.
  explicit TenantUsers(const std::string& tenants_dir = {});
  // The user (uid = gid, named "xcargo-TENANT" in log lines) whose workers run tenant's
  // kernels; the same for the same tenant while the loader runs. Any thread.
  [[nodiscard]] Result<sandbox::User> of(const std::string& tenant);

private:
  std::mutex m_;
  std::map<std::string, sandbox::User> given_;
  std::set<uid_t> taken_;
};

}  // namespace xcargo::loader
