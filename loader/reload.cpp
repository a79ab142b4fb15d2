// WorkerReload: the trust directory and the clients, reloaded while a worker runs.
#include "reload.h"

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <utility>

#include "engine/engine.h"
#include "server/auth_gate.h"
#include "tenancy.h"
#include "xcargo/rules.h"
#include "xcargo/trust.h"

namespace xcargo::loader {

namespace {

// The keys of `before` that `after` no longer has, or has with fewer verbs: "NAME, NAME".
std::string revoked_keys(const auth::AuthorizedKeys& before, const auth::AuthorizedKeys& after) {
  std::string out;
  for (const auth::AuthorizedKey& k : before.keys()) {
    const auth::AuthorizedKey* now = after.find(k.key.raw);
    if (now && (now->verbs & k.verbs) == k.verbs) continue;
    out += (out.empty() ? "" : ", ") + (k.name.empty() ? to_hex(k.key.id) : k.name);
  }
  return out;
}

}  // namespace

std::string files_stamp(const std::string& path) {
  std::string s;
  auto add = [&](const std::string& p) {
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0)
      s += p + ":" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" + std::to_string(st.st_size) + ";";
  };
  add(path);
  add(path + "/" + kRevocationList);
  add(path + "/" + kRevokedCargos);
  add(path + "/" + kMinimumVersions);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    for (const auto& e : std::filesystem::directory_iterator(path, ec))
      add(e.path().string());
  return s;
}

Result<auth::AuthorizedKeys> load_clients(const std::string& path, const std::string& tenant) {
  auto c = auth::AuthorizedKeys::load(path);
  if (!c.ok() || tenant.empty()) return c;
  auto t = Tenancy::per_key(*c);
  XC_TRY(t);
  return t->keys_of(tenant);
}

WorkerReload::WorkerReload(Options o, AuthGate& gate, Engine& engine, std::optional<auth::AuthorizedKeys> clients,
                           std::string clients_stamp, std::string trust_stamp)
    : o_(std::move(o)),
      gate_(gate),
      engine_(engine),
      clients_(std::move(clients)),
      clients_stamp_(std::move(clients_stamp)),
      trust_stamp_(std::move(trust_stamp)) {}

void WorkerReload::check() {
  std::lock_guard<std::mutex> g(m_);
  check_clients();
  check_trust();
}

void WorkerReload::run(const std::atomic<bool>& stop) {
  while (!stop) {
    for (int i = 0; i < 20 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (!stop) check();
  }
}

void WorkerReload::check_clients() {
  if (!clients_ || o_.clients.empty()) return;  // allow-anyone
  std::string now = files_stamp(o_.clients);
  if (now == clients_stamp_) return;
  clients_stamp_ = std::move(now);
  auto c = load_clients(o_.clients, o_.tenant);
  if (!c.ok()) {
    o_.note("clients: not reloaded (the old keys stay): " + c.error().message());
    return;
  }
  o_.note("clients: reloaded " + std::to_string(c->size()) + " authorized keys");
  for (const std::string& why : c->ignored()) o_.note("clients: " + why);
  const std::string gone = revoked_keys(*clients_, *c);
  clients_ = *c;
  gate_.set_keys(std::move(*c));
  // Their connections, and whatever their kernels left in this process, end with it.
  if (!gone.empty())
    o_.end("clients: " + gone + " removed or given fewer verbs; ending this worker in order, with its connections and "
           "anything their kernels left in it: its standby, which ran no kernel, serves the others");
}

void WorkerReload::check_trust() {
  std::string now = files_stamp(o_.trust);
  if (now == trust_stamp_) return;
  trust_stamp_ = std::move(now);
  auto t = TrustStore::load(o_.trust);
  if (!t.ok()) {
    o_.note("trust: not reloaded (the old keys and rules stay): " + t.error().message());
    return;
  }
  const size_t keys = t->size(), rules = t->rules().size();
  size_t ran = 0;
  const size_t revoked = engine_.update_trust(std::move(*t), &ran);
  o_.note("trust: reloaded " + std::to_string(keys) + " keys; " + std::to_string(revoked) + " loaded cargos no longer trusted; " +
          std::to_string(rules) + " cargo rules");
  if (ran)
    o_.end("trust: " + std::to_string(ran) + " cargos that ran here are no longer trusted; ending this worker in order, with "
           "anything their code left in it: its standby, which ran no kernel, serves");
}

}  // namespace xcargo::loader
