// Tenants' supervisions: one per tenant (tenancy.h), each in a thread of the supervisor,
// started when a connection first waits for that tenant and kept until the loader stops or
// the tenant is ended (its keys removed from the clients file).
// Each runs supervise() (supervisor.h) for workers of the tenant's own: their own keys,
// memory, kept cargos, cache and log tag, behind the keepers every tenant shares.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "supervisor.h"
#include "xcargo/error.h"

namespace xcargo::loader {

// What a tenant's supervision runs: its options (tenant, shared keepers, plans) and the
// mains of its forked children.
struct TenantRun {
  SupervisorOptions options;
  WorkerMain worker;
  CompilerMain compiler;
};

class Tenants {
public:
  // prepare(tenant): a tenant's supervision, or why it cannot run now (logged; tried again
  // on a later connection).
  using Prepare = std::function<Result<TenantRun>(const std::string& tenant)>;
  // unavailable(tenant, why): a tenant's workers cannot start now (its connections waiting
  // can be told); called from run()'s thread, again for each connection that wants it
  // before its next try.
  using Unavailable = std::function<void(const std::string& tenant, const std::string& why)>;
  explicit Tenants(Prepare prepare, Unavailable unavailable = {});
  ~Tenants();  // joins every supervision (run() has returned: stop was set)

  // A connection waits for tenant: its supervision starts unless it runs. Any thread.
  void want(const std::string& tenant);
  // Ends tenant's supervision, if it runs, and its workers with it (started again only when
  // wanted again). Any thread.
  void end(const std::string& tenant);
  // Starts the wanted tenants' supervisions until stop is set, then waits for all of them
  // to end. Returns 0, or 1 if a supervision ended with an error.
  int run(const std::atomic<bool>& stop);
  // Tenants whose supervision runs now.
  size_t running() const;

  struct Impl;

private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace xcargo::loader
