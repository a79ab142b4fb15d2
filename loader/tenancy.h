// Which workers serve a key: its tenant. A tenant is a named group of client keys
// (`tenant=NAME` in the clients file), or one key alone, or, where the admin says so
// (`tenants: single`, or a loader that serves anyone), every key. A cluster's node keys
// (the `forward` verb and no other) belong to no tenant: each of their connections acts for
// the tenant its route names.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "auth/auth.h"
#include "xcargo/error.h"

namespace xcargo::loader {

class Tenancy {
public:
  // The one tenant of a loader with `tenants: single`.
  static constexpr const char* kSingle = "all";
  // A tenant of its own for each key without a tenant= (named "key-" and its key id).
  static constexpr const char* kKeyPrefix = "key-";

  static Tenancy single(auth::AuthorizedKeys keys = {});
  // Tenants from the clients file; a declared name that could be a key's own is refused.
  [[nodiscard]] static Result<Tenancy> per_key(const auth::AuthorizedKeys& keys);

  bool single_tenant() const { return single_; }
  // The tenants there are, in the order of the clients file (single: kSingle).
  const std::vector<std::string>& names() const { return names_; }
  // The tenant a connection's route goes to: a client key's own (naming none itself), or the
  // one a node key's route names; else why not (a key not listed, a tenant not here).
  [[nodiscard]] Result<std::string> route(const std::array<uint8_t, 32>& key, const std::string& tenant) const;
  // What a tenant's workers accept: its own keys and the node keys (single: every key).
  auth::AuthorizedKeys keys_of(const std::string& tenant) const;

private:
  bool single_ = true;
  std::vector<std::string> names_{kSingle};
  auth::AuthorizedKeys keys_;
  std::vector<std::string> tenant_of_;  // per key of keys_: its tenant ("" for a node key)
};

// The tenancy in force, replaced when the clients file changes; any thread.
class SharedTenancy {
public:
  explicit SharedTenancy(Tenancy t) : t_(std::make_shared<const Tenancy>(std::move(t))) {}
  std::shared_ptr<const Tenancy> get() const {
    std::lock_guard<std::mutex> g(m_);
    return t_;
  }
  void set(Tenancy t) {
    auto p = std::make_shared<const Tenancy>(std::move(t));
    std::lock_guard<std::mutex> g(m_);
    t_ = std::move(p);
  }

private:
  mutable std::mutex m_;
  std::shared_ptr<const Tenancy> t_;
};

}  // namespace xcargo::loader
