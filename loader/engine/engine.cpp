// Engine: the load pipeline (verify, select, compile or cache, import check, link) and invoke.
#include "engine/engine.h"
#include "engine/kernel_clock.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <mutex>
#include <shared_mutex>

#include "engine/codegen.h"
#include "engine/spread_counter.h"
#include "engine/runtime.h"
#include "read/abi.h"
#include "common/large_buffers.h"

namespace xcargo::loader {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// An entry and its run-time profile: runs that returned, how many of the latest in a row
// were quick, and how often one run as quick held others up (config.misjudged_ns).
struct Entry {
  std::atomic<EntryFn> fn{nullptr};  // replaced once by a tier-up (Engine::tier_up)
  // Counted with plain loads and stores, not locked adds (spread_counter.h says why): two
  // executors ending runs of one entry at once may count one run. They only guide a guess.
  std::atomic<uint32_t> runs{0}, streak{0}, misjudged{0};
  static uint32_t bump(std::atomic<uint32_t>& c) {
    const uint32_t before = c.load(std::memory_order_relaxed);
    c.store(before + 1, std::memory_order_relaxed);
    return before;
  }
};

struct Loaded {
  LoadedSummary summary;
  std::shared_ptr<const Bytes> bytes;  // the cargo as pushed
  std::map<std::string, Entry, std::less<>> entries;
  SpreadCounter invocations;
  // The trusted keys whose signatures verified, at load and at later pushes of the same
  // cargo signed by other keys (changed only under load_mu).
  std::vector<KeyId> signers;
  // "signed by ...", the same for log lines: the latest of signed_by_texts, which keeps every
  // text it pointed to (an invocation reads it without a lock; it grows under load_mu).
  std::atomic<const std::string*> signed_by{nullptr};
  std::vector<std::unique_ptr<const std::string>> signed_by_texts;
  void set_signed_by(std::string text) {
    signed_by_texts.push_back(std::make_unique<const std::string>(std::move(text)));
    signed_by.store(signed_by_texts.back().get(), std::memory_order_release);
  }
  std::atomic<bool> revoked{false};  // it may not run any more (update_trust): see why
  mutable std::mutex why_mu;
  std::string why;                   // the refusal, for invoke's message
  // Runs its quick tier: the cargo, to ask for the -O2 object with (Engine::tier_up; under load_mu).
  std::shared_ptr<const Cargo> tier_up;
};

// Why a loaded cargo may no longer run under `trust` (its keys revoked, or a rule of the trust
// directory refuses it, as load_cargo would), or "" if it may.
std::string refusal(const TrustStore& trust, const Loaded& c) {
  std::vector<KeyId> still;
  for (const KeyId& id : c.signers)
    if (trust.find(id)) still.push_back(id);
  const std::string& name = c.summary.name;
  if (still.empty()) return "cargo " + name + " is signed only by keys this node no longer trusts (revoked); it does not run here";
  Status s = trust.rules().check_digest(c.summary.digest);
  if (s.ok()) s = trust.rules().check_version(name, c.summary.version, still);
  return s.ok() ? "" : "cargo " + name + " is refused by the trust directory: " + s.error().message() + "; it does not run here";
}

// "KEYID (FILE.pub)": a signer as log lines name it.
std::string signer_text(const Signer& s) {
  const size_t slash = s.key_source.rfind('/');
  return to_hex(s.key_id) + (s.key_source.empty() ? "" : " (" + s.key_source.substr(slash == std::string::npos ? 0 : slash + 1) + ")");
}

// "signed by KEYID (FILE.pub), ...": the trusted signers of a cargo, as log lines name them.
std::shared_ptr<const std::string> signed_by_text(const Cargo& cargo) {
  std::string t;
  for (const Signer& s : cargo.signers())
    if (s.trusted) t += (t.empty() ? "signed by " : ", ") + signer_text(s);
  return std::make_shared<const std::string>(t.empty() ? "signed by no trusted key" : t);
}

// Another copy of a loaded cargo (the same digest: the same code), verified now: the trusted
// keys that signed it count for the loaded one too, so that revoking a key that signed only
// the first copy does not refuse what another trusted key signed. Under load_mu.
void add_signers(const TrustStore& trust, Loaded& c, const Cargo& copy) {
  std::string added;
  for (const Signer& s : copy.signers())
    if (s.trusted && std::find(c.signers.begin(), c.signers.end(), s.key_id) == c.signers.end()) {
      c.signers.push_back(s.key_id);
      added += ", " + signer_text(s);
    }
  if (added.empty()) return;
  c.set_signed_by(*c.signed_by.load() + added);
  std::string why = refusal(trust, c);
  std::lock_guard<std::mutex> why_lock(c.why_mu);
  c.revoked = !why.empty();
  c.why = std::move(why);
}

// A thread's last cargo entry run on an engine (Engine::Impl::id): loaded cargos are never
// erased or replaced (cargos only grows), nor are their entries, so the pointers stay good.
struct LastRun {
  uint64_t engine = 0;
  Digest digest{};
  std::string entry;
  Loaded* cargo = nullptr;
  Entry* e = nullptr;
};

}  // namespace

struct Engine::Impl {
  EngineConfig config;
  TrustStore trust;
  DiskCache cache;
  DiskCache read_cache;  // EngineConfig::read_cache_dir
  std::unique_ptr<Jit> jit;
  std::unique_ptr<Regions> regions;
  std::unique_ptr<CargoStore> kept;
  std::atomic<bool> keeping{false};
  mutable std::mutex kept_mu;  // guards kept_refused (never held across a load)
  // Kept entries that failed verification since the trust store last changed, each with the
  // trust directory's refusal (an untrusted or revoked cargo; invoke answers it) or "".
  std::map<Digest, std::string> kept_refused;
  bool kept_was_refused(const Digest& d, std::string* why = nullptr) const {
    std::lock_guard<std::mutex> l(kept_mu);
    auto it = kept_refused.find(d);
    if (it != kept_refused.end() && why) *why = it->second;
    return it != kept_refused.end();
  }
  void kept_refuse(const Digest& d, std::string why) {
    std::lock_guard<std::mutex> l(kept_mu);
    kept_refused[d] = std::move(why);
  }
  mutable std::shared_mutex mu;  // guards cargos
  std::map<Digest, std::shared_ptr<Loaded>> cargos;
  std::mutex load_mu;            // one load (or tier-up) at a time: loads are rare, invocations are not
  std::function<void(bool)> on_load;  // Engine::on_load's
  // Engine::on_load's calls around one load.
  struct LoadTimer {
    const std::function<void(bool)>& hook;
    explicit LoadTimer(const std::function<void(bool)>& h) : hook(h) {
      if (hook) hook(true);
    }
    ~LoadTimer() {
      if (hook) hook(false);
    }
  };
  std::atomic<size_t> tier_ups{0};  // loaded cargos running their quick tier
  std::atomic<uint32_t> misjudged_runs{0};  // invoke_if_quick runs past config.misjudged_ns
  std::atomic<uint64_t> loads_refused{0}, jit_compiles{0}, cache_hits{0}, cache_misses{0}, cache_corrupt{0};
  SpreadCounter invocations, invocations_failed;

  void log(const std::string& line) const {
    if (config.log) config.log(line);
  }
  Result<LoadReport> load(Bytes bytes);
  // Loads the kept cargo of this digest, if there is one that verifies; true if it loaded.
  bool load_kept(const Digest& digest);
  void log_kept(const LoadReport& r) const;
  std::optional<InvokeResult> invoke(const Digest& digest, std::string_view entry, ByteView input, bool quick_only, bool keep_log);
  // invoke's parts below are always inlined into it: it runs for every request.
  // The context a kernel of cargo's entry runs in: limits, input, a spare reply buffer, its log (kept in *kept_log if set).
  [[gnu::always_inline]] inline void set_up_context(xc_ctx& ctx, const Loaded& cargo, std::string_view entry, ByteView input,
                                                    std::vector<std::string>* kept_log);
  // A returned run of e (ns long) in its profile: runs, quick streak; a quick_only run past misjudged_ns counted and logged.
  [[gnu::always_inline]] inline void profile_run(Entry& e, const Loaded& cargo, std::string_view entry, uint64_t ns, bool quick_only);
  // The run's result, from its context into r: reply (moved), status and message, forward; a failure counted.
  [[gnu::always_inline]] inline void take_outcome(InvokeResult& r, xc_ctx& ctx);
  // The cargo, or null if it is not loaded (nor kept by an earlier worker, loaded now unless
  // quick_only: *later then says an executor should load it).
  Loaded* find(const Digest& digest, bool quick_only, bool* later);

  // This engine, among those a process made (tests make several, one after another).
  const uint64_t id = next_id.fetch_add(1, std::memory_order_relaxed);
  static inline std::atomic<uint64_t> next_id{1};
  // A thread's last cargo entry run on an engine, found again without a lock or a lookup.
  static inline thread_local LastRun t_last;
  // The object for a bitcode variant (the compile service's, or compiled here), counted and
  // its cache events logged. tier_up: the -O2 object of a quick tier, compiled since the push
  // (counted a compile, wherever it comes from); ready: it is in the cache, read here first.
  Result<CompiledObject> bitcode_object(const Cargo& cargo, const Variant& v, bool allow_quick, bool tier_up = false,
                                        bool ready = false);
  // What linking the object would allocate, then the allow-list, before any of it is linked.
  Status check_object(ByteView object, const std::string& what) const;
  // Whether the -O2 object of a cargo's bitcode variant is in the read cache.
  bool o2_cached(const Cargo& cargo, const std::string& variant) const;
};

Engine::Engine() : impl_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::create(EngineConfig config, TrustStore trust) {
  std::unique_ptr<Engine> e(new Engine());
  auto cache = DiskCache::open(config.cache_dir);
  XC_TRY(cache);
  auto jit = Jit::create();
  XC_TRY(jit);
  e->impl_->config = std::move(config);
  e->impl_->trust = std::move(trust);
  e->impl_->cache = std::move(*cache);
  if (!e->impl_->config.read_cache_dir.empty()) e->impl_->read_cache = DiskCache::open_read_only(e->impl_->config.read_cache_dir);
  e->impl_->jit = std::move(*jit);
  if (e->impl_->config.open_regions) XC_TRY(e->open_regions());
  if (e->impl_->config.kept_cargos_fd >= 0) {
    auto kept = CargoStore::open(e->impl_->config.kept_cargos_fd, e->impl_->config.limits.max_cargo_size);
    XC_TRY(kept);
    e->impl_->kept = std::move(*kept);
  }
  return e;
}

Status Engine::open_regions() {
  const EngineConfig& c = impl_->config;
  auto regions = Regions::open(c.max_region_bytes, c.node_memory_fd, c.regions);
  XC_TRY(regions);
  for (const auto& [name, size] : c.regions)  // kept from the last worker, or made now: open left room
    if (auto r = (*regions)->create(name, size); !r.ok())
      return Error(r.error().code(), "region " + name + "=" + std::to_string(size) + ": " + r.error().message());
  impl_->regions = std::move(*regions);
  return {};
}

const HostInfo& Engine::host() const { return impl_->jit->host(); }
Regions& Engine::regions() { return *impl_->regions; }
Regions* Engine::regions_if_open() { return impl_->regions.get(); }
const EngineConfig& Engine::config() const { return impl_->config; }

Result<LoadReport> Engine::Impl::load(Bytes bytes) {
  LoadReport report;
  auto t0 = Clock::now();
  auto cargo = load_cargo(std::move(bytes), &trust, config.limits);
  XC_TRY(cargo);
  report.verify_ms = ms_since(t0);
  report.digest = cargo->digest();
  const Manifest& m = cargo->manifest();
  report.name = m.name;
  report.version = m.version;
  {
    std::shared_lock lock(mu);
    if (auto it = cargos.find(report.digest); it != cargos.end()) {
      report.already_loaded = true;
      report.variant = it->second->summary.variant;
      report.signed_by = signed_by_text(*cargo);  // who signed this copy: what the log says
      add_signers(trust, *it->second, *cargo);
      return report;
    }
  }
  auto chosen = select_variant(m, jit->host(), config.prefer);
  XC_TRY(chosen);
  const Variant& v = **chosen;
  report.variant = v.name;
  const std::string what = m.name + " " + v.name;

  Bytes object;
  const auto t1 = Clock::now();
  bool quick = false;
  if (v.kind == VariantKind::bitcode) {
    auto compiled = bitcode_object(*cargo, v, config.jit_tiers);
    XC_TRY(compiled);
    report.disk_cache_hit = compiled->cache_hit;
    report.jit_compiled = !compiled->cache_hit;
    quick = compiled->quick;
    object = std::move(compiled->object);
  } else {
    auto payload = cargo->variant_payload(v);
    XC_TRY(payload);
    object = std::move(*payload);
  }
  report.object_ms = ms_since(t1);
  Status checked = check_object(object, what);
  // LLVM lowers some operations to library calls at one level and not at another: a quick
  // object that the allow-list refuses is not the cargo's fault; -O2's decides.
  if (quick && !checked.ok()) {
    auto compiled = bitcode_object(*cargo, v, false);
    XC_TRY(compiled);
    quick = false;
    object = std::move(compiled->object);
    checked = check_object(object, what);
    report.object_ms = ms_since(t1);
  }
  XC_TRY(checked);
  report.quick_tier = quick;

  auto t2 = Clock::now();
  std::vector<std::string> symbols;
  for (const auto& e : v.entries) symbols.push_back(e.symbol);
  auto addrs = jit->link(object, to_hex(report.digest) + "/" + v.name, symbols);
  XC_TRY(addrs);
  report.link_ms = ms_since(t2);

  auto loaded = std::make_shared<Loaded>();
  loaded->summary = {report.digest, m.name, m.version, v.name, {}, m.entries, 0};
  for (const auto& x : m.variants) loaded->summary.variants.push_back(x.name);
  loaded->bytes = std::make_shared<const Bytes>(cargo->bytes().begin(), cargo->bytes().end());
  for (const Signer& s : cargo->signers())
    if (s.trusted) loaded->signers.push_back(s.key_id);
  report.signed_by = signed_by_text(*cargo);
  loaded->set_signed_by(*report.signed_by);
  for (size_t i = 0; i < v.entries.size(); ++i)
    loaded->entries[v.entries[i].entry].fn = reinterpret_cast<EntryFn>((*addrs)[i]);
  if (quick) {
    loaded->tier_up = std::make_shared<const Cargo>(std::move(*cargo));
    tier_ups++;
  }
  if (kept && keeping)
    if (auto s = kept->keep(report.digest, *loaded->bytes); !s.ok()) log("not kept for the next worker: " + s.error().message());
  std::unique_lock lock(mu);
  cargos.emplace(report.digest, std::move(loaded));  // never replaced, never erased (LastRun)
  return report;
}

Result<CompiledObject> Engine::Impl::bitcode_object(const Cargo& cargo, const Variant& v, bool allow_quick, bool tier_up,
                                                    bool ready) {
  // The service's cache read here first: the cargo was verified by this engine, and the key
  // names its digest (a damaged entry is left to the service, which removes it).
  std::optional<CompiledObject> hit;
  if (config.compile && (!tier_up || ready) && read_cache.enabled())
    if (auto object = read_cache.get(cache_key(cargo.digest(), v, jit->host(), cargo.manifest().fp == "strict")))
      hit = CompiledObject{std::move(*object), true, true};
  Result<CompiledObject> compiled = hit                ? Result<CompiledObject>(std::move(*hit))
                                    : config.compile ? config.compile(cargo, v, allow_quick)
                                                     : compile_or_fetch(*jit, cache, cargo, v, allow_quick);
  XC_TRY(compiled);
  const std::string what = cargo.manifest().name + " " + v.name;
  if (compiled->cache_damaged) {
    cache_corrupt++;
    log("disk cache: a damaged entry for " + what + " was removed; compiled again");
  }
  if (!compiled->store_error.empty()) log("disk cache: cannot store " + compiled->store_error);
  if (compiled->cache_hit && !tier_up) {
    cache_hits++;
  } else {
    if (compiled->cache_enabled && !tier_up) cache_misses++;
    jit_compiles++;
  }
  return compiled;
}

Status Engine::Impl::check_object(ByteView object, const std::string& what) const {
  XC_TRY(object_loaded_size(object, what));
  auto undefined = jit->undefined_symbols(object, what);
  XC_TRY(undefined);
  std::vector<std::string> forbidden;
  for (const auto& s : *undefined)
    if (!abi::is_allowed_import(s)) forbidden.push_back(s);
  if (forbidden.empty()) return {};
  std::string list;
  for (const auto& s : forbidden) list += (list.empty() ? "'" : ", '") + s + "'";
  return Error(Errc::import, what + ": imports " + list + ", outside the allowed kernel API")
      .hint("kernels may call only the functions declared in <xcargo/kernel.h>");
}

uint32_t Engine::misjudged_runs() const { return impl_->misjudged_runs.load(std::memory_order_relaxed); }

bool Engine::tier_up_pending() const { return impl_->tier_ups.load(std::memory_order_relaxed) > 0; }

bool Engine::tier_up_ready() const {
  const Impl& m = *impl_;
  if (!m.read_cache.enabled() || !m.config.compile) return false;
  std::shared_lock l(m.mu);
  for (const auto& [digest, c] : m.cargos)
    if (const std::shared_ptr<const Cargo> cargo = std::atomic_load(&c->tier_up); cargo && m.o2_cached(*cargo, c->summary.variant))
      return true;
  return false;
}

bool Engine::Impl::o2_cached(const Cargo& cargo, const std::string& variant) const {
  for (const Variant& v : cargo.manifest().variants)
    if (v.name == variant) return read_cache.has(cache_key(cargo.digest(), v, jit->host(), cargo.manifest().fp == "strict"));
  return false;
}

std::vector<TierUpReport> Engine::tier_up(bool ready) {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.load_mu);
  std::vector<std::shared_ptr<Loaded>> pending;
  {
    std::shared_lock l(m.mu);
    for (const auto& [digest, c] : m.cargos)
      if (const std::shared_ptr<const Cargo> cargo = std::atomic_load(&c->tier_up);
          cargo && (!ready || !m.read_cache.enabled() || m.o2_cached(*cargo, c->summary.variant)))
        pending.push_back(c);
  }
  std::vector<TierUpReport> out;
  for (const auto& c : pending) {
    std::shared_ptr<const Cargo> cargo = std::atomic_exchange(&c->tier_up, std::shared_ptr<const Cargo>());  // tier_up_ready reads it
    m.tier_ups--;
    TierUpReport r{c->summary.digest, c->summary.name, c->summary.version, c->summary.variant};
    const Variant* v = nullptr;
    for (const Variant& x : cargo->manifest().variants)
      if (x.name == c->summary.variant) v = &x;
    if (!v) continue;  // the digest names the bytes: cannot happen
    const auto t1 = Clock::now();
    auto compiled = m.bitcode_object(*cargo, *v, false, true, ready);
    r.object_ms = ms_since(t1);
    const std::string what = cargo->manifest().name + " " + v->name;
    Status ok = compiled.ok() ? m.check_object(compiled->object, what) : Status(compiled.error());
    if (ok.ok()) {
      const auto t2 = Clock::now();
      std::vector<std::string> symbols;
      for (const auto& e : v->entries) symbols.push_back(e.symbol);
      auto addrs = m.jit->link(compiled->object, to_hex(r.digest) + "/" + v->name + "/O2", symbols);
      r.link_ms = ms_since(t2);
      if (addrs.ok()) {  // the quick object stays linked: runs that started there finish there
        for (size_t i = 0; i < v->entries.size(); ++i)
          c->entries[v->entries[i].entry].fn.store(reinterpret_cast<EntryFn>((*addrs)[i]), std::memory_order_release);
        r.disk_cache_hit = compiled->cache_hit;
      } else {
        ok = addrs.error();
      }
    }
    if (!ok.ok()) r.error = ok.error().message();
    out.push_back(std::move(r));
  }
  return out;
}

void Engine::warm_up() {
  warm_up_verification();
  auto object = impl_->jit->warm_up();
  if (!object.ok()) return;  // a warm-up only: the first push pays instead
  (void)object_loaded_size(*object, "warm-up");
  (void)impl_->jit->undefined_symbols(*object, "warm-up");
  (void)impl_->jit->link(*object, "warm-up", Jit::warm_up_entries());  // no cargo's name: digest/variant
}

bool Engine::Impl::load_kept(const Digest& digest) {
  if (!kept) return false;
  LoadTimer timer(on_load);
  std::lock_guard<std::mutex> lock(load_mu);
  // Tried once per worker: a kept entry that fails verification is not verified again at
  // every request that names it.
  if (kept_was_refused(digest)) return false;
  std::optional<Bytes> bytes = kept->find(digest);
  if (!bytes) return false;
  auto r = load(std::move(*bytes));
  if (!r.ok() || r->digest != digest) {  // forged entry: loaded, but not under the digest asked for
    loads_refused++;
    std::string why;  // answered to invoke: a push would be refused as well
    if (!r.ok() && r.error().code() == Errc::revoked)
      why = "a cargo kept by an earlier worker is refused by the trust directory: " + r.error().message();
    else if (!r.ok() && r.error().code() == Errc::untrusted)
      why = "a cargo kept by an earlier worker is no longer trusted: " + r.error().message();
    kept_refuse(digest, std::move(why));
    log("refused a kept cargo " + to_hex(digest).substr(0, 16) + ": " +
        (r.ok() ? "it is " + to_hex(r->digest).substr(0, 16) : r.error().message()));
    return false;
  }
  log_kept(*r);
  return true;
}

void Engine::Impl::log_kept(const LoadReport& r) const {
  if (r.already_loaded) return;
  log("loaded kept cargo " + r.name + " " + log_word(r.version) + " digest " + to_hex(r.digest).substr(0, 16) + " variant " + r.variant +
      (r.jit_compiled ? ", jit compiled" : "") + (r.disk_cache_hit ? ", disk cache hit" : "") + " (pushed to an earlier worker)" +
      (r.signed_by ? ", " + *r.signed_by : ""));
}

const std::string* Engine::signed_by(const Digest& digest) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->cargos.find(digest);
  return it == impl_->cargos.end() ? nullptr : it->second->signed_by.load();
}

std::shared_ptr<const Bytes> Engine::cargo_bytes(const Digest& digest) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->cargos.find(digest);
  return it == impl_->cargos.end() ? nullptr : it->second->bytes;
}

Result<LoadReport> Engine::load(Bytes bytes) {
  Impl::LoadTimer timer(impl_->on_load);
  std::lock_guard<std::mutex> lock(impl_->load_mu);
  auto r = impl_->load(std::move(bytes));
  if (!r.ok()) impl_->loads_refused++;
  return r;
}

bool Engine::has(const Digest& digest) const {
  {
    std::shared_lock lock(impl_->mu);
    if (auto it = impl_->cargos.find(digest); it != impl_->cargos.end()) return !it->second->revoked;
  }
  return impl_->load_kept(digest) && has(digest);
}

size_t Engine::load_kept(size_t* refused, std::chrono::milliseconds budget) {
  size_t loaded = 0;
  *refused = 0;
  if (!impl_->kept) return 0;
  const auto deadline = Clock::now() + budget;
  for (const Digest& digest : impl_->kept->digests()) {  // one at a time: at most kMaxBytes read in all
    if (Clock::now() > deadline) break;
    {
      std::shared_lock lock(impl_->mu);
      if (impl_->cargos.count(digest)) continue;
    }
    if (impl_->load_kept(digest)) ++loaded;
    else if (impl_->kept_was_refused(digest)) ++*refused;
  }
  return loaded;
}

void Engine::keep_cargos(bool on) { impl_->keeping = on; }

void Engine::on_load(std::function<void(bool)> hook) { impl_->on_load = std::move(hook); }

size_t Engine::update_trust(TrustStore trust, size_t* ran_revoked) {
  std::lock_guard<std::mutex> load_lock(impl_->load_mu);
  impl_->trust = std::move(trust);
  {
    std::lock_guard<std::mutex> l(impl_->kept_mu);  // verified again under the new store
    impl_->kept_refused.clear();
  }
  std::shared_lock lock(impl_->mu);
  size_t revoked = 0;
  if (ran_revoked) *ran_revoked = 0;
  for (auto& [digest, c] : impl_->cargos) {
    std::string why = refusal(impl_->trust, *c);
    const bool refused = !why.empty();
    if (refused && !c->revoked) {
      impl_->log("trust: " + why);
      if (ran_revoked && c->invocations.load() > 0) ++*ran_revoked;
    }
    std::lock_guard<std::mutex> why_lock(c->why_mu);
    c->why = std::move(why);
    c->revoked = refused;
    revoked += refused;
  }
  return revoked;
}

InvokeResult Engine::invoke(const Digest& digest, std::string_view entry, ByteView input, bool keep_log) {
  return *impl_->invoke(digest, entry, input, false, keep_log);
}

std::optional<InvokeResult> Engine::invoke_if_quick(const Digest& digest, std::string_view entry, ByteView input, bool keep_log) {
  return impl_->invoke(digest, entry, input, true, keep_log);
}

Loaded* Engine::Impl::find(const Digest& digest, bool quick_only, bool* later) {
  {
    std::shared_lock lock(mu);
    if (auto it = cargos.find(digest); it != cargos.end()) return it->second.get();
  }
  if (!kept) return nullptr;
  // Kept by an earlier worker: loaded now (not inline: a load takes a while).
  if (quick_only) {
    *later = !kept_was_refused(digest) && kept->contains(digest);
    return nullptr;
  }
  if (!load_kept(digest)) return nullptr;
  std::shared_lock lock(mu);
  auto it = cargos.find(digest);
  return it == cargos.end() ? nullptr : it->second.get();
}

std::optional<InvokeResult> Engine::Impl::invoke(const Digest& digest, std::string_view entry, ByteView input,
                                                 bool quick_only, bool keep_log) {
  InvokeResult r;
  LastRun& last = t_last;
  Loaded* cargo = nullptr;
  Entry* found = nullptr;
  if (last.engine == id && last.digest == digest && last.entry == entry) {
    cargo = last.cargo;
    found = last.e;
  } else {
    bool later = false;
    cargo = find(digest, quick_only, &later);
    if (later) return std::nullopt;  // an executor loads it
    if (!cargo) {
      invocations.add();
      invocations_failed.add();
      std::string why;
      if (kept_was_refused(digest, &why) && !why.empty()) {  // a push would be refused too
        r.status = wire::ReplyStatus::refused;
        r.message = why + "; it does not run here";
        return r;
      }
      r.status = wire::ReplyStatus::not_loaded;
      r.message = "no cargo with digest " + to_hex(digest) + " is loaded";
      return r;
    }
    if (auto it = cargo->entries.find(entry); it != cargo->entries.end()) {
      found = &it->second;
      last = {id, digest, std::string(entry), cargo, found};
    }
  }
  r.variant = cargo->summary.variant;
  r.cargo_name = &cargo->summary.name;
  r.signed_by = cargo->signed_by.load(std::memory_order_acquire);
  if (cargo->revoked.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> why_lock(cargo->why_mu);
    r.message = cargo->why;  // empty: allowed again since
  }
  if (!r.message.empty()) {
    invocations.add();
    invocations_failed.add();
    r.status = wire::ReplyStatus::refused;
    return r;
  }
  if (!found) {
    invocations.add();
    invocations_failed.add();
    r.status = wire::ReplyStatus::no_entry;
    std::string names;
    for (const auto& [name, e] : cargo->entries) names += (names.empty() ? "" : ", ") + name;
    r.message = "cargo " + cargo->summary.name + " has no entry '" + std::string(entry) + "' (entries: " + names + ")";
    return r;
  }
  Entry& e = *found;
  // Quick: the latest kQuickRuns runs in a row were (4x more after each misjudged run, and
  // never after three), not counting the first, which pays for page faults. A run slowed
  // by preemption only restarts the count.
  const uint32_t misjudged = e.misjudged.load(std::memory_order_relaxed);
  if (quick_only && (misjudged >= 3 || e.streak.load(std::memory_order_relaxed) < (kQuickRuns << (2 * misjudged))))
    return std::nullopt;
  invocations.add();
  xc_ctx ctx;
  set_up_context(ctx, *cargo, entry, input, keep_log ? &r.log : nullptr);
  cargo->invocations.add();
  const int64_t t0 = kernel_clock::now_ns();
  r.kernel_return = e.fn.load(std::memory_order_acquire)(kernel_handle(&ctx), input.data(), input.size());
  const int64_t t1 = kernel_clock::now_ns();
  const uint64_t ns = t1 > t0 ? uint64_t(t1 - t0) : 0;  // a thread's new calibration may step back a little
  r.kernel_ns = ns;
  r.ended_ns = t1;
  profile_run(e, *cargo, entry, ns, quick_only);
  take_outcome(r, ctx);
  return r;
}

void Engine::Impl::set_up_context(xc_ctx& ctx, const Loaded& cargo, std::string_view entry, ByteView input,
                                  std::vector<std::string>* kept_log) {
  ctx.reply = take_spare();  // the storage of a reply sent before (large_buffers.h)
  ctx.max_reply = config.max_reply;
  ctx.input = input.data();
  ctx.input_len = input.size();
  ctx.alloc_budget = config.max_alloc;
  ctx.node_id = config.node_id;
  ctx.node_count = config.node_count;
  ctx.max_forward_input = config.node_count > 1 ? config.max_forward_input : 0;
  ctx.regions = regions.get();
  if (config.log) {
    ctx.log_fn = [](void* self, const xc_ctx* c, std::string_view line) {
      static_cast<Impl*>(self)->log(*c->cargo + "/" + std::string(c->entry) + ": " + std::string(line));
    };
    ctx.log_self = this;
    ctx.cargo = &cargo.summary.name;
    ctx.entry = entry;
  }
  if (kept_log) ctx.kept_log = kept_log;
}

void Engine::Impl::profile_run(Entry& e, const Loaded& cargo, std::string_view entry, uint64_t ns, bool quick_only) {
  if (Entry::bump(e.runs) > 0) {
    if (ns <= config.quick_ns) {
      Entry::bump(e.streak);
    } else {
      e.streak.store(0, std::memory_order_relaxed);
      if (quick_only && ns > config.misjudged_ns) {
        const uint32_t times = Entry::bump(e.misjudged) + 1;
        misjudged_runs.fetch_add(1, std::memory_order_relaxed);
        char took[32];
        std::snprintf(took, sizeof took, "%.1f ms", double(ns) / 1e6);
        log(cargo.summary.name + "/" + std::string(entry) + ", quick until now, ran " + took +
            " in the thread that takes requests, holding them up meanwhile" +
            (times >= 3 ? "; it no longer runs there" : "; it needs " + std::to_string(kQuickRuns << (2 * times)) + " quick runs before it does again"));
      }
    }
  }
}

void Engine::Impl::take_outcome(InvokeResult& r, xc_ctx& ctx) {
  r.output = std::move(ctx.reply);
  r.log_dropped = ctx.log_dropped;
  if (ctx.reply_is_input) r.reply_from_input = ctx.input_replied;
  if (ctx.reply_overflow) {
    r.status = wire::ReplyStatus::reply_too_large;
    r.message = "the kernel's reply went past the limit of " + std::to_string(ctx.max_reply) + " bytes";
  } else if (r.kernel_return != 0) {
    r.status = wire::ReplyStatus::kernel_error;
    r.message = "the kernel returned " + std::to_string(r.kernel_return);
  } else {
    r.status = wire::ReplyStatus::ok;
    if (ctx.forwarded) r.forward = ForwardRequest{ctx.forward_node, std::move(ctx.forward_entry), std::move(ctx.forward_input)};
  }
  if (r.status != wire::ReplyStatus::ok) invocations_failed.add();
}

std::vector<LoadedSummary> Engine::list() const {
  std::shared_lock lock(impl_->mu);
  std::vector<LoadedSummary> out;
  for (const auto& [d, c] : impl_->cargos) {
    out.push_back(c->summary);
    out.back().invocations = c->invocations.load();
  }
  return out;
}

EngineStats Engine::stats() const {
  EngineStats s;
  {
    std::shared_lock lock(impl_->mu);
    s.cargos_loaded = impl_->cargos.size();
  }
  s.loads_refused = impl_->loads_refused;
  s.jit_compiles = impl_->jit_compiles;
  s.disk_cache_hits = impl_->cache_hits;
  s.disk_cache_misses = impl_->cache_misses;
  s.disk_cache_corrupt = impl_->cache_corrupt;
  s.invocations = impl_->invocations.load();
  s.invocations_failed = impl_->invocations_failed.load();
  return s;
}

}  // namespace xcargo::loader
