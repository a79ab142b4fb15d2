// Engine: the load pipeline (verify, select, compile or cache, import check, link) and invoke.
#include "engine.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "disk_cache.h"
#include "jit.h"
#include "runtime.h"
#include "xcargo/abi.h"

namespace xcargo::loader {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// An entry and its run-time profile: runs that returned, how many of the latest in a row
// were quick, and how often one run as quick held others up (config.misjudged_ns).
struct Entry {
  EntryFn fn = nullptr;
  std::atomic<uint32_t> runs{0}, streak{0}, misjudged{0};
};

struct Loaded {
  LoadedSummary summary;
  std::shared_ptr<const Bytes> bytes;  // the cargo as pushed
  std::map<std::string, Entry, std::less<>> entries;
  std::atomic<uint64_t> invocations{0};
  std::vector<KeyId> signers;      // the trusted keys whose signatures verified at load
  std::atomic<bool> revoked{false};  // none of them is trusted any more (update_trust)
};

}  // namespace

struct Engine::Impl {
  EngineConfig config;
  TrustStore trust;
  DiskCache cache;
  std::unique_ptr<Jit> jit;
  std::unique_ptr<Regions> regions;
  mutable std::shared_mutex mu;  // guards cargos
  std::map<Digest, std::shared_ptr<Loaded>> cargos;
  std::mutex load_mu;            // one load at a time: loads are rare, invocations are not
  std::atomic<uint64_t> loads_refused{0}, jit_compiles{0}, cache_hits{0}, cache_misses{0}, cache_corrupt{0},
      invocations{0}, invocations_failed{0};

  void log(const std::string& line) const {
    if (config.log) config.log(line);
  }
  std::string cache_key(const Digest& digest, const Variant& v) const;
  Result<LoadReport> load(Bytes bytes);
  std::optional<InvokeResult> invoke(const Digest& digest, std::string_view entry, ByteView input, bool quick_only);
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
  e->impl_->jit = std::move(*jit);
  e->impl_->regions = std::make_unique<Regions>(e->impl_->config.max_region_bytes);
  return e;
}

const HostInfo& Engine::host() const { return impl_->jit->host(); }
Regions& Engine::regions() { return *impl_->regions; }
const EngineConfig& Engine::config() const { return impl_->config; }

std::string Engine::Impl::cache_key(const Digest& digest, const Variant& v) const {
  const HostInfo& h = jit->host();
  std::string features;
  for (const auto& f : h.features) features += f + ",";
  std::string key = "xcargo-jit-v1\n" + to_hex(digest) + "\n" + v.name + "\n" + to_hex(v.sha256) + "\n" + h.triple +
                    "\n" + h.cpu + "\n" + features + "\nllvm " + Jit::llvm_version() + "\nO2\n";
  return to_hex(sha256(as_bytes(key)));
}

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
      return report;
    }
  }
  auto chosen = select_variant(m, jit->host(), config.prefer);
  XC_TRY(chosen);
  const Variant& v = **chosen;
  report.variant = v.name;
  const std::string what = m.name + " " + v.name;
  auto payload = cargo->variant_payload(v);
  XC_TRY(payload);

  Bytes object;
  if (v.kind == VariantKind::bitcode) {
    auto t1 = Clock::now();
    const std::string key = cache_key(report.digest, v);
    bool corrupt = false;
    if (auto hit = cache.get(key, &corrupt)) {
      object = std::move(*hit);
      report.disk_cache_hit = true;
      cache_hits++;
    } else {
      if (corrupt) {
        cache_corrupt++;
        log("disk cache: damaged entry " + key + " removed; compiling again");
      }
      if (cache.enabled()) cache_misses++;
      auto compiled = jit->compile_bitcode(*payload, what);
      XC_TRY(compiled);
      object = std::move(*compiled);
      report.jit_compiled = true;
      jit_compiles++;
      if (auto s = cache.put(key, object); !s.ok()) log("disk cache: cannot store " + key + ": " + s.error().message());
    }
    report.codegen_ms = ms_since(t1);
  } else {
    object = std::move(*payload);
  }

  // The allow-list, checked on what will actually be linked, before any of it is linked.
  auto undefined = jit->undefined_symbols(object, what);
  XC_TRY(undefined);
  std::vector<std::string> forbidden;
  for (const auto& s : *undefined)
    if (!abi::is_allowed_import(s)) forbidden.push_back(s);
  if (!forbidden.empty()) {
    std::string list;
    for (const auto& s : forbidden) list += (list.empty() ? "'" : ", '") + s + "'";
    return Error(Errc::import, what + ": imports " + list + ", outside the allowed kernel API")
        .hint("kernels may call only the functions declared in <xcargo/kernel.h>");
  }

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
  for (size_t i = 0; i < v.entries.size(); ++i)
    loaded->entries[v.entries[i].entry].fn = reinterpret_cast<EntryFn>((*addrs)[i]);
  std::unique_lock lock(mu);
  cargos[report.digest] = std::move(loaded);
  return report;
}

std::shared_ptr<const Bytes> Engine::cargo_bytes(const Digest& digest) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->cargos.find(digest);
  return it == impl_->cargos.end() ? nullptr : it->second->bytes;
}

Result<LoadReport> Engine::load(Bytes bytes) {
  std::lock_guard<std::mutex> lock(impl_->load_mu);
  auto r = impl_->load(std::move(bytes));
  if (!r.ok()) impl_->loads_refused++;
  return r;
}

bool Engine::has(const Digest& digest) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->cargos.find(digest);
  return it != impl_->cargos.end() && !it->second->revoked;
}

size_t Engine::update_trust(TrustStore trust) {
  std::lock_guard<std::mutex> load_lock(impl_->load_mu);
  impl_->trust = std::move(trust);
  std::shared_lock lock(impl_->mu);
  size_t revoked = 0;
  for (auto& [digest, c] : impl_->cargos) {
    const bool still = std::any_of(c->signers.begin(), c->signers.end(), [&](const KeyId& id) { return impl_->trust.find(id); });
    c->revoked = !still;
    revoked += !still;
  }
  return revoked;
}

InvokeResult Engine::invoke(const Digest& digest, std::string_view entry, ByteView input) {
  return *impl_->invoke(digest, entry, input, false);
}

std::optional<InvokeResult> Engine::invoke_if_quick(const Digest& digest, std::string_view entry, ByteView input) {
  return impl_->invoke(digest, entry, input, true);
}

std::optional<InvokeResult> Engine::Impl::invoke(const Digest& digest, std::string_view entry, ByteView input,
                                                 bool quick_only) {
  InvokeResult r;
  std::shared_ptr<Loaded> cargo;
  {
    std::shared_lock lock(mu);
    if (auto it = cargos.find(digest); it != cargos.end()) cargo = it->second;
  }
  if (!cargo) {
    invocations++;
    invocations_failed++;
    r.status = wire::ReplyStatus::not_loaded;
    r.message = "no cargo with digest " + to_hex(digest) + " is loaded";
    return r;
  }
  r.variant = cargo->summary.variant;
  if (cargo->revoked) {
    invocations++;
    invocations_failed++;
    r.status = wire::ReplyStatus::refused;
    r.message = "cargo " + cargo->summary.name + " is signed only by keys this node no longer trusts (revoked); it does not run here";
    return r;
  }
  auto it = cargo->entries.find(entry);
  if (it == cargo->entries.end()) {
    invocations++;
    invocations_failed++;
    r.status = wire::ReplyStatus::no_entry;
    std::string names;
    for (const auto& [name, e] : cargo->entries) names += (names.empty() ? "" : ", ") + name;
    r.message = "cargo " + cargo->summary.name + " has no entry '" + std::string(entry) + "' (entries: " + names + ")";
    return r;
  }
  Entry& e = it->second;
  // Quick: the latest kQuickRuns runs in a row were (4x more after each misjudged run, and
  // never after three), not counting the first, which pays for page faults. A run slowed
  // by preemption only restarts the count.
  const uint32_t misjudged = e.misjudged.load(std::memory_order_relaxed);
  if (quick_only && (misjudged >= 3 || e.streak.load(std::memory_order_relaxed) < (kQuickRuns << (2 * misjudged))))
    return std::nullopt;
  invocations++;
  xc_ctx ctx;
  ctx.max_reply = config.max_reply;
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
    ctx.cargo = &cargo->summary.name;
    ctx.entry = entry;
  }
  cargo->invocations++;
  const auto t0 = Clock::now();
  r.kernel_return = e.fn(kernel_handle(&ctx), input.data(), input.size());
  const uint64_t ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
  r.kernel_ns = ns;
  if (e.runs.fetch_add(1, std::memory_order_relaxed) > 0) {
    if (ns <= config.quick_ns) {
      e.streak.fetch_add(1, std::memory_order_relaxed);
    } else {
      e.streak.store(0, std::memory_order_relaxed);
      if (quick_only && ns > config.misjudged_ns) e.misjudged.fetch_add(1, std::memory_order_relaxed);
    }
  }
  r.output = std::move(ctx.reply);
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
  if (r.status != wire::ReplyStatus::ok) invocations_failed++;
  return r;
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
  s.invocations = impl_->invocations;
  s.invocations_failed = impl_->invocations_failed;
  return s;
}

}  // namespace xcargo::loader
