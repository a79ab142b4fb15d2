// TenantUsers: a uid and gid of its own for each tenant.
#include "tenant_users.h"

#include <grp.h>
#include <pwd.h>

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace xcargo::loader {

namespace {

// Whether the user or group database names id (as a user or as a group).
bool named(uid_t id) {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* p = nullptr;
  if (::getpwuid_r(id, &pw, buf.data(), buf.size(), &p) == 0 && p) return true;
  group gr{};
  group* g = nullptr;
  return ::getgrgid_r(gid_t(id), &gr, buf.data(), buf.size(), &g) == 0 && g;
}

}  // namespace

TenantUsers::TenantUsers(const std::string& tenants_dir) {
  std::error_code ec;
  if (tenants_dir.empty() || !std::filesystem::is_directory(tenants_dir, ec)) return;
  for (const auto& e : std::filesystem::directory_iterator(tenants_dir, ec)) {
    struct stat st {};
    if (::lstat(e.path().c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (st.st_uid < kFirst || st.st_uid > kLast || taken_.count(st.st_uid)) continue;
    const std::string name = e.path().filename().string();
    taken_.insert(st.st_uid);
    given_[name] = sandbox::User{"xcargo-" + name, st.st_uid, gid_t(st.st_uid)};
  }
}

Result<sandbox::User> TenantUsers::of(const std::string& tenant) {
  std::lock_guard<std::mutex> g(m_);
  if (auto it = given_.find(tenant); it != given_.end()) return it->second;
  uint32_t h = 2166136261u;  // FNV-1a: the same tenant, the same first choice
  for (unsigned char c : tenant) h = (h ^ c) * 16777619u;
  const uint32_t span = kLast - kFirst + 1;
  for (uint32_t i = 0; i < span; ++i) {
    const uid_t id = kFirst + (h + i) % span;
    if (taken_.count(id) || named(id)) continue;
    taken_.insert(id);
    sandbox::User u{"xcargo-" + tenant, id, gid_t(id)};
    given_[tenant] = u;
    return u;
  }
  return Error(Errc::limit, "tenant " + tenant + ": no free uid left in " + std::to_string(kFirst) + "-" + std::to_string(kLast));
}

}  // namespace xcargo::loader
