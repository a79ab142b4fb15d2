// Tenancy: which tenant's workers serve a key.
#include "tenancy.h"

#include <algorithm>
#include <utility>

namespace xcargo::loader {

namespace {

bool node_key(const auth::AuthorizedKey& k) { return k.verbs == auth::kForward; }

}  // namespace

Tenancy Tenancy::single(auth::AuthorizedKeys keys) {
  Tenancy t;
  t.keys_ = std::move(keys);
  return t;
}

Result<Tenancy> Tenancy::per_key(const auth::AuthorizedKeys& keys) {
  Tenancy t;
  t.single_ = false;
  t.names_.clear();
  t.keys_ = keys;
  for (const auth::AuthorizedKey& k : keys.keys()) {
    std::string name;
    if (!node_key(k)) {
      if (k.tenant.rfind(kKeyPrefix, 0) == 0)
        return Error(Errc::invalid_argument, "clients: key " + k.name + ": tenant=" + k.tenant + " is a name kept for keys alone")
            .hint(std::string("a key without tenant= is a tenant of its own, named ") + kKeyPrefix +
                  "KEYID; give a group another name");
      name = k.tenant.empty() ? kKeyPrefix + to_hex(k.key.id) : k.tenant;
      if (std::find(t.names_.begin(), t.names_.end(), name) == t.names_.end()) t.names_.push_back(name);
    }
    t.tenant_of_.push_back(name);
  }
  return t;
}

Result<std::string> Tenancy::route(const std::array<uint8_t, 32>& key, const std::string& tenant) const {
  if (single_) return std::string(kSingle);
  const auto& all = keys_.keys();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i].key.raw != key) continue;
    if (!tenant_of_[i].empty()) {
      if (!tenant.empty()) return Error(Errc::unauthenticated, "a client key's route names a tenant");
      return tenant_of_[i];
    }
    if (std::find(names_.begin(), names_.end(), tenant) == names_.end())
      return Error(Errc::unauthenticated, tenant.empty() ? std::string("a node's route names no tenant")
                                                         : "no tenant '" + tenant + "' here");
    return tenant;
  }
  return Error(Errc::unauthenticated, "the route's key is not among this loader's clients");
}

auth::AuthorizedKeys Tenancy::keys_of(const std::string& tenant) const {
  if (single_) return keys_;
  auth::AuthorizedKeys out;
  const auto& all = keys_.keys();
  for (size_t i = 0; i < all.size(); ++i)
    if (tenant_of_[i].empty() || tenant_of_[i] == tenant) out.add(all[i]);
  return out;
}

}  // namespace xcargo::loader
