// Who the worker runs as: another user's uid, or root without capabilities.
#include "sandbox/privileges.h"
#include "sandbox/sys_error.h"

#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace xcargo::loader::sandbox {

namespace {


int last_capability() {
  int last = CAP_LAST_CAP;
  std::ifstream f("/proc/sys/kernel/cap_last_cap");
  f >> last;
  return last;
}

}  // namespace

Result<User> find_user(const std::string& name) {
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  const int rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || !found)
    return Error(Errc::invalid_argument, "user '" + name + "': " + (rc ? std::strerror(rc) : "no such user"))
        .hint("create one for the loader, e.g. 'useradd --system --no-create-home xcargo'");
  if (found->pw_uid == 0) return Error(Errc::invalid_argument, "user '" + name + "' is root").hint("choose an unprivileged user");
  return User{name, found->pw_uid, found->pw_gid};
}

Status become(const User& user) {
  if (::setgroups(1, &user.gid) != 0) return sys_error("setgroups");
  if (::setresgid(user.gid, user.gid, user.gid) != 0) return sys_error("setresgid " + std::to_string(user.gid));
  if (::setresuid(user.uid, user.uid, user.uid) != 0) return sys_error("setresuid " + std::to_string(user.uid));
  if (::setuid(0) == 0) return Error(Errc::io, "sandbox: still able to become root after switching to " + user.name);
  return {};
}

Status drop_capabilities(bool keep_bind_service) {
  if (::geteuid() != 0) return {};
  const int last = last_capability();
  for (int cap = 0; cap <= last; ++cap) {
    if (keep_bind_service && cap == CAP_NET_BIND_SERVICE) continue;
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL) return sys_error("dropping capability " + std::to_string(cap));
  }
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (keep_bind_service) {
    data[0].effective = data[0].permitted = 1u << CAP_NET_BIND_SERVICE;
  }
  if (::syscall(SYS_capset, &head, data) != 0) return sys_error("capset");
  return {};
}

uint64_t effective_capabilities() {
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &head, data) != 0) return ~0ull;
  return uint64_t(data[0].effective) | uint64_t(data[1].effective) << 32;
}

}  // namespace xcargo::loader::sandbox
