// Tenants: a supervision per tenant, each in a thread, started on demand.
#include "tenants.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "log.h"

namespace xcargo::loader {

namespace {

using Clock = std::chrono::steady_clock;
// A tenant whose supervision could not start, or ended with an error, is not tried again for
// this long (its connections meanwhile are refused at the keepers' limit and retried by
// their clients).
constexpr auto kTenantRetry = std::chrono::seconds(5);

}  // namespace

struct Tenants::Impl {
  Prepare prepare;
  Unavailable unavailable;
  std::map<std::string, std::string> why_not;  // the last reason each tenant could not start
  int wake = -1;
  mutable std::mutex m;
  std::set<std::string> wanted;  // since the last turn, guarded by m
  std::set<std::string> ended;   // likewise

  struct Running {
    std::unique_ptr<TenantRun> run;
    std::thread thread;
    std::atomic<bool> stop{false};  // set when the loader stops or the tenant is ended
    std::atomic<bool> done{false};
    Result<int> result = 0;
  };
  std::map<std::string, std::unique_ptr<Running>> running;  // run()'s thread only, but size()
  std::map<std::string, Clock::time_point> retry_at;
  bool failed = false;

  void start(const std::string& tenant, const std::atomic<bool>& stop) {
    if (running.count(tenant)) return;
    if (auto r = retry_at.find(tenant); r != retry_at.end() && Clock::now() < r->second) {
      if (unavailable && why_not.count(tenant)) unavailable(tenant, why_not[tenant]);
      return;
    }
    auto prepared = prepare(tenant);
    if (!prepared.ok()) {
      log_line("tenant " + tenant + ": cannot start its workers: " + prepared.error().message() + "; tried again on a later connection");
      flush_log();
      retry_at[tenant] = Clock::now() + kTenantRetry;
      why_not[tenant] = prepared.error().message();
      if (unavailable) unavailable(tenant, why_not[tenant]);
      return;
    }
    why_not.erase(tenant);
    auto r = std::make_unique<Running>();
    r->run = std::make_unique<TenantRun>(std::move(*prepared));
    Running* p = r.get();
    if (stop) p->stop = true;
    p->thread = std::thread([p] {
      p->result = supervise(p->run->options, p->stop, p->run->worker, p->run->compiler);
      p->done = true;
    });
    std::lock_guard<std::mutex> g(m);
    running[tenant] = std::move(r);
  }

  // Joins the supervisions that ended; one that ended before the loader stops (its first
  // worker could not start) is tried again on a later connection.
  void reap(const std::atomic<bool>& stop) {
    for (auto it = running.begin(); it != running.end();) {
      if (!it->second->done) {
        ++it;
        continue;
      }
      if (it->second->thread.joinable()) it->second->thread.join();
      const Result<int>& r = it->second->result;
      if (it->second->stop && !stop) {
        log_line("tenant " + it->first + ": ended, with its workers");
        flush_log();
      } else if (!stop) {
        log_line("tenant " + it->first + ": its workers ended (" +
                 (r.ok() ? "exit status " + std::to_string(*r) : r.error().message()) + "); started again on a later connection");
        flush_log();
        retry_at[it->first] = Clock::now() + kTenantRetry;
      }
      if (!r.ok()) failed = true;
      std::lock_guard<std::mutex> g(m);
      it = running.erase(it);
    }
  }
};

Tenants::Tenants(Prepare prepare, Unavailable unavailable) : impl_(std::make_unique<Impl>()) {
  impl_->prepare = std::move(prepare);
  impl_->unavailable = std::move(unavailable);
  impl_->wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

Tenants::~Tenants() {
  for (auto& [tenant, r] : impl_->running)
    if (r->thread.joinable()) r->thread.join();
  if (impl_->wake >= 0) ::close(impl_->wake);
}

void Tenants::end(const std::string& tenant) {
  {
    std::lock_guard<std::mutex> g(impl_->m);
    impl_->ended.insert(tenant);
    impl_->wanted.erase(tenant);
  }
  const uint64_t one = 1;
  (void)!::write(impl_->wake, &one, sizeof one);
}

void Tenants::want(const std::string& tenant) {
  {
    std::lock_guard<std::mutex> g(impl_->m);
    if (!impl_->wanted.insert(tenant).second) return;
  }
  const uint64_t one = 1;
  (void)!::write(impl_->wake, &one, sizeof one);
}

size_t Tenants::running() const {
  std::lock_guard<std::mutex> g(impl_->m);
  return impl_->running.size();
}

int Tenants::run(const std::atomic<bool>& stop) {
  while (!stop) {
    pollfd p{impl_->wake, POLLIN, 0};
    (void)::poll(&p, 1, 200);  // a signal (stop) ends it early
    if (p.revents) {
      uint64_t v;
      (void)!::read(impl_->wake, &v, sizeof v);
    }
    std::set<std::string> now, ended;
    {
      std::lock_guard<std::mutex> g(impl_->m);
      now.swap(impl_->wanted);
      ended.swap(impl_->ended);
    }
    for (const std::string& t : ended)
      if (auto it = impl_->running.find(t); it != impl_->running.end()) it->second->stop = true;
    impl_->reap(stop);
    if (stop) break;
    for (const std::string& t : now) impl_->start(t, stop);
  }
  for (auto& [tenant, r] : impl_->running) r->stop = true;
  for (auto& [tenant, r] : impl_->running) {  // each ends its workers (supervise's shut_down)
    r->thread.join();
    r->done = true;
  }
  impl_->reap(stop);
  return impl_->failed ? 1 : 0;
}

}  // namespace xcargo::loader
