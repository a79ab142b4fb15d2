// Tests of the execution engine with real cargos built by the xcargo binary: selection,
// JIT and disk cache, linking against the allow-list only, invocation results.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/codegen.h"
#include "engine/engine.h"
#include "engine/jit.h"
#include "engine/runtime.h"
#include "built_cargo.h"
#include "support.h"
#include "read/abi.h"
#include "xcargo/file.h"

using namespace xcargo;
using namespace xcargo::loader;

namespace {

using test::build_cargo;
using test::build_example;

std::unique_ptr<Engine> engine(Prefer prefer = Prefer::native, const std::string& cache = "") {
  EngineConfig c;
  c.prefer = prefer;
  c.cache_dir = cache;
  auto e = Engine::create(c, test::vector_trust());
  REQUIRE(e.ok());
  return std::move(*e);
}

Bytes i64s(int64_t a, int64_t b) {
  Bytes in(16);
  std::memcpy(in.data(), &a, 8);
  std::memcpy(in.data() + 8, &b, 8);
  return in;
}

int64_t as_i64(const Bytes& b) {
  REQUIRE(b.size() == 8);
  int64_t v;
  std::memcpy(&v, b.data(), 8);
  return v;
}

}  // namespace

TEST_CASE("the runtime table covers exactly the allow-list", "[engine]") {
  const auto& table = runtime_symbols();
  REQUIRE(table.size() == abi::allowed_imports().size());
  for (size_t i = 0; i < table.size(); ++i) {
    CHECK(table[i].name == abi::allowed_imports()[i]);
    CHECK(table[i].address != nullptr);
  }
}

TEST_CASE("hello runs natively and from JIT-compiled bitcode", "[engine]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c");
  for (Prefer prefer : {Prefer::native, Prefer::bitcode}) {
    auto e = engine(prefer);
    auto r = e->load(cargo);
    REQUIRE(r.ok());
    CHECK(r->variant == (prefer == Prefer::native ? e->host().arch : std::string("bitcode")));
    CHECK(r->jit_compiled == (prefer == Prefer::bitcode));
    auto sum = e->invoke(r->digest, "add", i64s(2, 40));
    CHECK(sum.status == wire::ReplyStatus::ok);
    CHECK(as_i64(sum.output) == 42);
    CHECK(sum.variant == r->variant);
    auto greet = e->invoke(r->digest, "greet", {});
    REQUIRE(greet.status == wire::ReplyStatus::ok);
    CHECK(std::string(greet.output.begin(), greet.output.end()) == "hello from node 0");
    auto bad = e->invoke(r->digest, "add", Bytes(3));
    CHECK(bad.status == wire::ReplyStatus::kernel_error);
    CHECK(bad.kernel_return == 1);
    auto again = e->load(cargo);
    REQUIRE(again.ok());
    CHECK(again->already_loaded);
  }
}

TEST_CASE("a thread invoking one cargo on two engines runs each engine's own copy", "[engine]") {
  // Engine::invoke remembers a thread's last cargo entry (no lock, no lookup when it runs it
  // again): per engine, also when an engine is replaced by one made where it was.
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c");
  auto native = engine(Prefer::native);
  auto jit = engine(Prefer::bitcode);
  auto a = native->load(cargo);
  auto b = jit->load(cargo);
  REQUIRE((a.ok() && b.ok()));
  REQUIRE(a->digest == b->digest);
  for (int i = 0; i < 3; ++i) {
    CHECK(native->invoke(a->digest, "add", i64s(i, 1)).variant == native->host().arch);
    CHECK(jit->invoke(a->digest, "add", i64s(i, 1)).variant == "bitcode");
  }
  CHECK(native->invoke(a->digest, "add", i64s(1, 1)).variant == native->host().arch);
  native.reset();
  auto fresh = engine(Prefer::native);
  CHECK(fresh->invoke(a->digest, "add", i64s(1, 1)).status == wire::ReplyStatus::not_loaded);
  CHECK(jit->invoke(a->digest, "greet", {}).status == wire::ReplyStatus::ok);
  CHECK(jit->invoke(a->digest, "mul", {}).status == wire::ReplyStatus::no_entry);
}

TEST_CASE("unknown digests and entries are reported, not crashes", "[engine]") {
  test::ScratchDir dir;
  auto e = engine();
  auto r = e->load(build_example(dir, "hello/hello.c"));
  REQUIRE(r.ok());
  auto no_entry = e->invoke(r->digest, "mul", {});
  CHECK(no_entry.status == wire::ReplyStatus::no_entry);
  CHECK(no_entry.message.find("add, greet") != std::string::npos);
  Digest other{};
  CHECK(e->invoke(other, "add", {}).status == wire::ReplyStatus::not_loaded);
  CHECK_FALSE(e->has(other));
  CHECK(e->has(r->digest));
}

TEST_CASE("only a kernel whose latest runs were quick runs by invoke_if_quick", "[engine]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c");
  // What is tested is the counting, not the speed: a budget no run of add exceeds, even one
  // preempted on a busy machine (the default 20 us failed once under ASan in CI).
  EngineConfig generous;
  generous.quick_ns = 1000000000;
  auto created = Engine::create(generous, test::vector_trust());
  REQUIRE(created.ok());
  auto e = std::move(*created);
  auto r = e->load(cargo);
  REQUIRE(r.ok());
  Digest other{};
  auto missing = e->invoke_if_quick(other, "add", {});  // lookups fail fast: answered, not declined
  REQUIRE(missing);
  CHECK(missing->status == wire::ReplyStatus::not_loaded);
  // The first run is not counted (page faults), then Engine::kQuickRuns in a row are needed.
  for (uint32_t i = 0; i < Engine::kQuickRuns; ++i) {
    CHECK_FALSE(e->invoke_if_quick(r->digest, "add", i64s(1, 2)));
    CHECK(as_i64(e->invoke(r->digest, "add", i64s(1, 2)).output) == 3);
  }
  CHECK_FALSE(e->invoke_if_quick(r->digest, "add", i64s(1, 2)));
  CHECK(e->invoke(r->digest, "add", i64s(1, 2)).status == wire::ReplyStatus::ok);
  auto quick = e->invoke_if_quick(r->digest, "add", i64s(40, 2));
  REQUIRE(quick);
  CHECK(as_i64(quick->output) == 42);
  CHECK(e->stats().invocations == Engine::kQuickRuns + 3);  // declined calls ran and counted nothing

  // With a zero budget nothing is ever quick.
  EngineConfig c;
  c.quick_ns = 0;
  auto never = Engine::create(c, test::vector_trust());
  REQUIRE(never.ok());
  REQUIRE((*never)->load(cargo).ok());
  for (int i = 0; i < 20; ++i) CHECK((*never)->invoke(r->digest, "add", i64s(1, 2)).status == wire::ReplyStatus::ok);
  CHECK_FALSE((*never)->invoke_if_quick(r->digest, "add", i64s(1, 2)));
}

TEST_CASE("the disk cache spares a restarted engine the JIT, and survives damage", "[engine]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c");
  const std::string cache = dir / "cache";
  {
    auto e = engine(Prefer::bitcode, cache);
    auto r = e->load(cargo);
    REQUIRE(r.ok());
    CHECK(r->jit_compiled);
    CHECK(e->stats().jit_compiles == 1);
  }
  {
    auto e = engine(Prefer::bitcode, cache);
    auto r = e->load(cargo);
    REQUIRE(r.ok());
    CHECK(r->disk_cache_hit);
    CHECK_FALSE(r->jit_compiled);
    CHECK(e->stats().jit_compiles == 0);
    CHECK(e->stats().disk_cache_hits == 1);
    CHECK(as_i64(e->invoke(r->digest, "add", i64s(1, 2)).output) == 3);
  }
  // Damage every cache entry: the next engine notices, compiles again and still works.
  for (const auto& f : std::filesystem::directory_iterator(cache + "/jit")) {
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(100);
    io.put('\x55');
  }
  auto e = engine(Prefer::bitcode, cache);
  auto r = e->load(cargo);
  REQUIRE(r.ok());
  CHECK(r->jit_compiled);
  CHECK(e->stats().disk_cache_corrupt == 1);
  CHECK(as_i64(e->invoke(r->digest, "add", i64s(5, 6)).output) == 11);
}

TEST_CASE("an engine whose objects come from a compile service reads that service's cache first", "[engine]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c");
  const std::string cache = dir / "cache";
  {
    auto e = engine(Prefer::bitcode, cache);  // writes the -O2 object into the cache
    REQUIRE(e->load(cargo).ok());
  }
  int asked = 0;
  auto service = [&] {
    EngineConfig c;
    c.prefer = Prefer::bitcode;
    c.read_cache_dir = cache;
    c.compile = [&](const Cargo&, const Variant&, bool) -> Result<CompiledObject> {
      ++asked;
      return Error(Errc::compile, "the service was asked");
    };
    auto e = Engine::create(c, test::vector_trust());
    REQUIRE(e.ok());
    return std::move(*e);
  };
  {
    auto e = service();
    auto r = e->load(cargo);
    REQUIRE(r.ok());
    CHECK(r->disk_cache_hit);
    CHECK_FALSE(r->jit_compiled);
    CHECK(asked == 0);
    CHECK(e->stats().disk_cache_hits == 1);
    CHECK(as_i64(e->invoke(r->digest, "add", i64s(1, 2)).output) == 3);
  }
  // A damaged entry is left for the service (which removes it and compiles again): asked.
  std::string entry;
  for (const auto& f : std::filesystem::directory_iterator(cache + "/jit")) {
    entry = f.path();
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(100);
    io.put('\x55');
  }
  auto e = service();
  auto r = e->load(cargo);
  CHECK_FALSE(r.ok());
  CHECK(asked == 1);
  CHECK(std::filesystem::exists(entry));
}

TEST_CASE("a quick tier runs until tier_up replaces it with -O2's code; writable globals get -O2 at once", "[engine][tiers]") {
  test::ScratchDir dir;
  EngineConfig c;
  c.prefer = Prefer::bitcode;
  c.cache_dir = dir / "cache";
  c.jit_tiers = true;
  auto e = Engine::create(c, test::vector_trust());
  REQUIRE(e.ok());
  const Bytes hello = build_example(dir, "hello/hello.c");
  auto r = (*e)->load(hello);
  REQUIRE(r.ok());
  CHECK(r->jit_compiled);
  CHECK(r->quick_tier);
  CHECK((*e)->tier_up_pending());
  CHECK(as_i64((*e)->invoke(r->digest, "add", i64s(2, 40)).output) == 42);
  auto ups = (*e)->tier_up();
  REQUIRE(ups.size() == 1);
  CHECK(ups[0].error.empty());
  CHECK(ups[0].digest == r->digest);
  CHECK_FALSE((*e)->tier_up_pending());
  CHECK((*e)->tier_up().empty());
  CHECK(as_i64((*e)->invoke(r->digest, "add", i64s(1, 2)).output) == 3);
  CHECK((*e)->stats().jit_compiles == 2);
  {  // only -O2's object was kept: a restarted engine runs it at once
    auto again = Engine::create(c, test::vector_trust());
    REQUIRE(again.ok());
    auto r2 = (*again)->load(hello);
    REQUIRE(r2.ok());
    CHECK(r2->disk_cache_hit);
    CHECK_FALSE(r2->quick_tier);
    CHECK_FALSE((*again)->tier_up_pending());
    CHECK(as_i64((*again)->invoke(r2->digest, "add", i64s(3, 4)).output) == 7);
  }
  // A counter kept in a global would restart from 0 in a new object: no quick tier for it.
  const std::string src = dir / "counter.c";
  std::ofstream(src) << "#include <xcargo/kernel.h>\nstatic int64_t count;\n"
                        "XC_ENTRY int tick(xc_ctx *ctx, const void *in, size_t n) {\n"
                        "  (void)in; (void)n; ++count; return xc_reply(ctx, &count, sizeof count);\n}\n";
  const Bytes counter = build_cargo(dir, src, "-t bitcode");
  auto rc = (*e)->load(counter);
  REQUIRE(rc.ok());
  CHECK(rc->jit_compiled);
  CHECK_FALSE(rc->quick_tier);
  CHECK_FALSE((*e)->tier_up_pending());
  CHECK(as_i64((*e)->invoke(rc->digest, "tick", {}).output) == 1);
  CHECK(as_i64((*e)->invoke(rc->digest, "tick", {}).output) == 2);
}

TEST_CASE("a quick tier from a compile service is replaced from its cache once -O2's object is there, without asking it", "[engine][tiers]") {
  // The service: a JIT and a cache of its own (the compile job answers the quick tier, then
  // stores -O2's object, which the test does below when it chooses).
  test::ScratchDir dir;
  const std::string cache_dir = dir / "cache";
  auto jit = Jit::create();
  REQUIRE(jit.ok());
  auto cache = DiskCache::open(cache_dir);
  REQUIRE(cache.ok());
  int asked = 0;
  EngineConfig c;
  c.prefer = Prefer::bitcode;
  c.jit_tiers = true;
  c.read_cache_dir = cache_dir;
  c.compile = [&](const Cargo& cargo, const Variant& v, bool allow_quick) {
    ++asked;
    return compile_or_fetch(**jit, *cache, cargo, v, allow_quick);
  };
  auto e = Engine::create(c, test::vector_trust());
  REQUIRE(e.ok());
  const Bytes hello = build_example(dir, "hello/hello.c");
  auto r = (*e)->load(hello);
  REQUIRE(r.ok());
  REQUIRE(r->quick_tier);
  CHECK(asked == 1);
  CHECK_FALSE((*e)->tier_up_ready());  // -O2's object is not in the cache yet
  const TrustStore trust = test::vector_trust();
  auto loaded = load_cargo(hello, &trust);  // the job's own verification: the entry records the trusted signer
  REQUIRE(loaded.ok());
  for (const Variant& v : loaded->manifest().variants)
    if (v.kind == VariantKind::bitcode) {
      auto o2 = compile_or_fetch(**jit, *cache, *loaded, v, false);
      REQUIRE(o2.ok());
      CHECK(o2->store_error.empty());
    }
  CHECK((*e)->tier_up_ready());
  auto ups = (*e)->tier_up(true);
  REQUIRE(ups.size() == 1);
  CHECK(ups[0].error.empty());
  CHECK(ups[0].disk_cache_hit);
  CHECK(asked == 1);  // read from the cache by the engine itself
  CHECK_FALSE((*e)->tier_up_pending());
  CHECK_FALSE((*e)->tier_up_ready());  // nothing left to tier up
  CHECK(as_i64((*e)->invoke(r->digest, "add", i64s(20, 22)).output) == 42);
}

TEST_CASE("untrusted and tampered cargos are refused at load", "[engine]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c");
  EngineConfig c;
  TrustStore other;
  other.add(test::other_signer().public_key());
  auto e = Engine::create(c, other);
  REQUIRE(e.ok());
  auto r = (*e)->load(cargo);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::untrusted);
  auto trusted = engine();
  Bytes tampered = cargo;
  tampered[tampered.size() - 200] ^= 1;
  auto t = trusted->load(tampered);
  REQUIRE_FALSE(t.ok());
  CHECK(t.error().code() == Errc::digest_mismatch);
  CHECK(trusted->stats().loads_refused == 1);
}

TEST_CASE("a payload importing a forbidden symbol is refused before linking, naming it", "[engine]") {
  test::ScratchDir dir;
  std::ofstream(dir / "evil.c") << "int system(const char *);\n"
                                   "__attribute__((section(\".text.xc_entry\"))) int run(void *c, const void *i, unsigned long n)"
                                   " { return system(\"id\"); }\n";
  // Bitcode whose manifest hides the import: verification cannot see it (an object's would be
  // refused there, spec 5.4), so the check on the compiled object must.
  std::string cmd = "/usr/lib/llvm-16/bin/clang -c -O2 -fPIC -emit-llvm --target=le64-unknown-unknown " + dir / "evil.c" +
                    " -o " + dir / "evil.o";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto obj = read_file(dir / "evil.o", 1 << 20);
  REQUIRE(obj.ok());
  Manifest m;
  m.name = "evil";
  m.version = "1";
  m.entries = {"run"};
  Payload p{{"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"run", "run"}}, {}}, *obj};
  auto bytes = write_cargo(m, {p});
  REQUIRE(bytes.ok());
  auto signed_bytes = sign_cargo(*bytes, test::vector_signer());
  REQUIRE(signed_bytes.ok());
  auto e = engine();
  auto r = e->load(*signed_bytes);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::import);
  CHECK(r.error().message().find("'system'") != std::string::npos);
}

TEST_CASE("sgemm gives the same matrix natively and from bitcode", "[engine]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "sgemm/sgemm.c");
  const uint32_t n = 37;  // not a multiple of the block size
  Bytes in(4 + 2 * n * n * 4);
  std::memcpy(in.data(), &n, 4);
  std::vector<float> a(n * n), b(n * n), want(n * n, 0.f);
  for (uint32_t i = 0; i < n * n; ++i) a[i] = float(i % 7) - 3.f, b[i] = float(i % 5) * 0.5f;
  std::memcpy(in.data() + 4, a.data(), n * n * 4);
  std::memcpy(in.data() + 4 + n * n * 4, b.data(), n * n * 4);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t k = 0; k < n; ++k)
      for (uint32_t j = 0; j < n; ++j) want[i * n + j] += a[i * n + k] * b[k * n + j];
  for (Prefer prefer : {Prefer::native, Prefer::bitcode}) {
    auto e = engine(prefer);
    auto r = e->load(cargo);
    REQUIRE(r.ok());
    auto out = e->invoke(r->digest, "sgemm_run", in);
    REQUIRE(out.status == wire::ReplyStatus::ok);
    REQUIRE(out.output.size() == n * n * 4);
    std::vector<float> got(n * n);
    std::memcpy(got.data(), out.output.data(), n * n * 4);
    for (uint32_t i = 0; i < n * n; ++i) REQUIRE(std::fabs(got[i] - want[i]) < 1e-3f);
  }
}

TEST_CASE("the C++ example runs", "[engine]") {
  test::ScratchDir dir;
  auto e = engine(Prefer::bitcode);
  auto r = e->load(build_example(dir, "cpp-reduce/reduce.cc"));
  REQUIRE(r.ok());
  const int32_t values[] = {4, -2, 9, 1};
  auto out = e->invoke(r->digest, "stats_i32", ByteView(reinterpret_cast<const uint8_t*>(values), sizeof values));
  REQUIRE(out.status == wire::ReplyStatus::ok);
  double s[4];
  REQUIRE(out.output.size() == sizeof s);
  std::memcpy(s, out.output.data(), sizeof s);
  CHECK(s[0] == 4);
  CHECK(s[1] == 12);
  CHECK(s[2] == -2);
  CHECK(s[3] == 9);
}

TEST_CASE("a rule of the trust directory stops a loaded cargo, naming the rule, until lifted", "[engine][rules]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c", "--cargo-version 1.0");
  auto e = engine();
  auto r = e->load(cargo);
  REQUIRE(r.ok());
  const std::string id = to_hex(test::vector_signer().public_key().id);
  auto with_rules = [&](const std::string& minimums, const std::string& revoked) {
    TrustStore t = test::vector_trust();
    CargoRules rules;
    REQUIRE(rules.parse_minimum_versions(minimums, "trust/minimum-versions.txt").ok());
    REQUIRE(rules.parse_revoked_cargos(revoked, "trust/revoked-cargos.txt").ok());
    t.set_rules(std::move(rules));
    return t;
  };

  CHECK(e->update_trust(with_rules("hello " + id + " 1.0.1\n", "")) == 1);
  CHECK_FALSE(e->has(r->digest));
  InvokeResult low = e->invoke(r->digest, "add", i64s(1, 2));
  CHECK(low.status == wire::ReplyStatus::refused);
  CHECK(low.message == "cargo hello is refused by the trust directory: hello 1.0 is below the minimum version 1.0.1 that "
                       "trust/minimum-versions.txt:1 sets for hello signed by " + id + "; it does not run here");
  auto again = e->load(cargo);  // a push of it is refused too
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code() == Errc::revoked);

  CHECK(e->update_trust(with_rules("hello 0123456789abcdef 9\nhello * 1.0\n", "")) == 0);  // another signer; met
  CHECK(as_i64(e->invoke(r->digest, "add", i64s(1, 2)).output) == 3);

  CHECK(e->update_trust(with_rules("", to_hex(r->digest) + " # bad build\n")) == 1);
  InvokeResult revoked = e->invoke(r->digest, "add", i64s(1, 2));
  CHECK(revoked.status == wire::ReplyStatus::refused);
  CHECK(revoked.message.find("cargo " + to_hex(r->digest) + " is revoked by trust/revoked-cargos.txt:1 (bad build)") != std::string::npos);

  CHECK(e->update_trust(test::vector_trust()) == 0);
  CHECK(e->has(r->digest));
  CHECK(as_i64(e->invoke(r->digest, "add", i64s(1, 2)).output) == 3);
}

TEST_CASE("a cargo loaded by one engine is loaded from the kept cargos by the next, verified", "[engine][kept]") {
  test::ScratchDir dir;
  Bytes cargo = build_example(dir, "hello/hello.c");
  auto memory = CargoStore::create_memory(1 << 20);
  REQUIRE(memory.ok());
  EngineConfig c;
  c.kept_cargos_fd = *memory;
  c.limits.max_cargo_size = 1 << 20;  // what the store was made for
  Digest digest{};
  {
    auto first = Engine::create(c, test::vector_trust());
    REQUIRE(first.ok());
    auto r = (*first)->load(cargo);  // not kept: the worker does not serve yet
    REQUIRE(r.ok());
    (*first)->keep_cargos(true);
    auto again = (*first)->load(cargo);  // already loaded: still not kept
    REQUIRE(again.ok());
    digest = r->digest;
  }
  {
    auto second = Engine::create(c, test::vector_trust());
    REQUIRE(second.ok());
    CHECK_FALSE((*second)->has(digest));
  }
  {
    auto keeper = Engine::create(c, test::vector_trust());
    REQUIRE(keeper.ok());
    (*keeper)->keep_cargos(true);
    REQUIRE((*keeper)->load(cargo).ok());
  }
  // Lazily, on first use, between the load hook's calls (the worker's time limit for the
  // kernel starts after them); the loaded cargo's next runs call it no more.
  auto next = Engine::create(c, test::vector_trust());
  REQUIRE(next.ok());
  std::vector<bool> hook_calls;
  (*next)->on_load([&](bool loading) { hook_calls.push_back(loading); });
  auto sum = (*next)->invoke(digest, "add", i64s(2, 40));
  REQUIRE(sum.status == wire::ReplyStatus::ok);
  CHECK(as_i64(sum.output) == 42);
  CHECK(hook_calls == std::vector<bool>{true, false});
  CHECK((*next)->invoke(digest, "add", i64s(1, 2)).status == wire::ReplyStatus::ok);
  CHECK(hook_calls.size() == 2);
  // ... or all at once, before serving.
  auto standby = Engine::create(c, test::vector_trust());
  REQUIRE(standby.ok());
  size_t refused = 9;
  CHECK((*standby)->load_kept(&refused, std::chrono::seconds(10)) == 1);
  CHECK(refused == 0);
  CHECK((*standby)->has(digest));
  // Kept bytes are verified again: under a trust that no longer holds the signer, refused.
  EngineConfig untrusting = c;
  auto stranger = Engine::create(untrusting, TrustStore());
  REQUIRE(stranger.ok());
  // ... and answered as a push would be: refused, saying why (not "not loaded": a push would not help).
  auto refused_run = (*stranger)->invoke(digest, "add", i64s(2, 40));
  CHECK(refused_run.status == wire::ReplyStatus::refused);
  CHECK(refused_run.message.find("it does not run here") != std::string::npos);
  CHECK((*stranger)->load_kept(&refused, std::chrono::seconds(10)) == 0);
  CHECK(refused == 1);
  // Bytes damaged in the store (a kernel wrote over them) fail verification.
  const uint8_t junk[64] = {1, 2, 3};
  REQUIRE(::pwrite(*memory, junk, sizeof junk, (64 << 10) + 200) == sizeof junk);
  // Refused once per engine: requests naming it again do not verify it again.
  std::vector<std::string> lines;
  EngineConfig logging = c;
  logging.log = [&lines](std::string_view l) { lines.emplace_back(l); };
  auto after = Engine::create(logging, test::vector_trust());
  REQUIRE(after.ok());
  for (int i = 0; i < 3; ++i) {
    CHECK((*after)->invoke(digest, "add", i64s(2, 40)).status == wire::ReplyStatus::not_loaded);
    CHECK_FALSE((*after)->has(digest));
    CHECK((*after)->invoke_if_quick(digest, "add", i64s(2, 40))->status == wire::ReplyStatus::not_loaded);
  }
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("refused a kept cargo " + to_hex(digest).substr(0, 16)) == 0);
  ::close(*memory);
}

TEST_CASE("xc_alloc hands out cache-line aligned blocks within the budget", "[engine]") {
  void* (*xc_alloc)(xc_ctx*, size_t) = nullptr;
  for (const RuntimeSymbol& s : runtime_symbols())
    if (s.name == "xc_alloc") xc_alloc = reinterpret_cast<void* (*)(xc_ctx*, size_t)>(s.address);
  REQUIRE(xc_alloc);
  xc_ctx ctx;
  ctx.alloc_budget = 1 << 20;
  xc_ctx* h = kernel_handle(&ctx);
  for (size_t len : {1, 3, 16, 100, 4096, 65537}) {
    void* p = xc_alloc(h, len);
    REQUIRE(p);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    std::memset(p, 0xab, len);
  }
  CHECK(xc_alloc(h, 2 << 20) == nullptr);  // past the budget
  CHECK(ctx.allocations.size() == 6);
}

TEST_CASE("remove_partial takes the temporary files of one writer, by the pid in their names", "[engine][cache]") {
  test::ScratchDir dir;
  auto cache = DiskCache::open(dir / "cache");
  REQUIRE(cache.ok());
  const std::string jit = dir / "cache/jit";
  for (const char* name : {"a.o.tmp-4242-x1y2z3", "b.o.tmp-4242-q1w2e3", "c.o.tmp-42424-r1t2y3", "d.o"})
    std::ofstream(jit + "/" + name) << "x";
  CHECK(cache->remove_partial(4242) == 2);
  CHECK_FALSE(std::filesystem::exists(jit + "/a.o.tmp-4242-x1y2z3"));
  CHECK(std::filesystem::exists(jit + "/c.o.tmp-42424-r1t2y3"));  // another writer's
  CHECK(std::filesystem::exists(jit + "/d.o"));                  // an entry
}

// The replies of ENTRY (no input) from each way a loader runs CARGO: its native object, its
// bitcode JIT-compiled at -O2, and at the quick tier (compiled without optimisation, where a
// wrong va_list shows), each named.
std::vector<std::pair<std::string, std::string>> replies_of(const test::ScratchDir& dir, const Bytes& cargo,
                                                            const std::string& entry) {
  std::vector<std::pair<std::string, std::string>> out;
  auto text = [](const Bytes& b) { return std::string(b.begin(), b.end()); };
  for (Prefer prefer : {Prefer::native, Prefer::bitcode}) {
    auto e = engine(prefer);
    auto r = e->load(cargo);
    REQUIRE(r.ok());
    REQUIRE(r->jit_compiled == (prefer == Prefer::bitcode));
    auto reply = e->invoke(r->digest, entry, {});
    REQUIRE(reply.status == wire::ReplyStatus::ok);
    out.emplace_back(prefer == Prefer::native ? "native object" : "JIT -O2", text(reply.output));
  }
  EngineConfig c;
  c.prefer = Prefer::bitcode;
  c.cache_dir = dir / "cache-quick";
  c.jit_tiers = true;
  auto e = Engine::create(c, test::vector_trust());
  REQUIRE(e.ok());
  auto r = (*e)->load(cargo);
  REQUIRE(r.ok());
  REQUIRE(r->quick_tier);
  out.emplace_back("JIT quick tier", text((*e)->invoke(r->digest, entry, {}).output));
  return out;
}

TEST_CASE("variadic functions give the same reply natively, JIT-compiled, and at the quick tier", "[engine][varargs]") {
  test::ScratchDir dir;
  const Bytes cargo = test::build_cargo(dir, test::source_dir() + "/tests/kernels/varargs.c");
  for (const auto& [how, reply] : replies_of(dir, cargo, "run")) {
    INFO(how);
    CHECK(reply == "-42|-1234567890123|4000000000|beef|Z|str|3.250|%|642");
  }
}

TEST_CASE("C as real programs write it gives one reply from every variant", "[engine][varargs]") {
  test::ScratchDir dir;
  const Bytes cargo = test::build_cargo(dir, test::source_dir() + "/tests/kernels/portable.c");
  const auto replies = replies_of(dir, cargo, "run");
  INFO(replies[0].second);
  CHECK(replies[0].second.find("recursion 9 46368\n") != std::string::npos);
  CHECK(replies[0].second.find("packed 7 12345678 abcd 9 deadbeef 7\n") != std::string::npos);
  for (const auto& [how, reply] : replies) {
    INFO(how);
    CHECK(reply == replies[0].second);
  }
}

// snprintf cases: the kernel's (<stdio.h> of kernel-include) against this host's C library.
#define XC_PRINTF_CASES(X)                                                                            \
  X("%d|%5d|%-5d|%05d|%+d|% d|%.3d|%i", 42, -42, 42, -42, 42, 42, 7, 0)                                \
  X("%ld|%lld|%hd|%hhd|%zu|%lu", -1234567890123l, 9223372036854775807ll, (short)-3, (signed char)-7,   \
    (size_t)77, 18446744073709551615ul)                                                               \
  X("%u|%x|%X|%#x|%o|%#o|%08x|%.0u|%.0x", 4000000000u, 0xbeefu, 0xbeefu, 255u, 8u, 8u, 0xabcu, 0u, 0u) \
  X("%c|%-3c|%3c|%s|%.2s|%-6s|%6s|%%", 'A', 'b', 'c', "str", "cut", "left", "right")                   \
  X("%f|%.2f|%.0f|%#.0f|%10.3f|%-10.1f|%+.1f|%010.2f", 3.14159, 2.675, 2.5, 3.0, -1.5, 0.25, 7.75, -3.5) \
  X("%f|%.3f|%.1f|%f|%.0f|%.2f", 0.0, 1e-7, 123456789.125, -0.0, 1e15, 0.125)                          \
  X("%e|%.2e|%E|%.0e|%e|%e", 1234.5678, 0.000123456, 1e100, 5e-5, 0.0, -2.5e-300)                      \
  X("%g|%g|%g|%g|%g|%.3g|%#g|%G|%g", 100000.0, 1000000.0, 0.0001, 0.00001, 3.14159, 2.71828, 1.0,    \
    1e-10, 0.0)                                                                                       \
  X("%*d|%-*d|%.*f|%5.1s|%f|%F", 6, 1, 6, 2, 2, 1.005, "xyz", 1.0 / 0.0, -1.0 / 0.0)                   \
  X("%.20f|%.19e|%.30f", 0.5, 0.25, 0.125)                                                            \
  X("%.17g|%.17g|%.20f|%.0f|%.0f|%.0f|%.2f|%.1f", 1.0 / 3, 0.1, 0.1, 0.5, 1.5, 2.5, 2.675, 0.25)       \
  X("%f|%.3e|%g|%.17e|%.25g|%.0e|%g", 1e308, 4.9e-324, 5e-324, 2.2250738585072014e-308, 1e23, 9.5,   \
    999999.5)

TEST_CASE("snprintf in a kernel formats as the C library does, natively, JIT-compiled and at the quick tier", "[engine][varargs]") {
  std::string expected, calls;
  char tmp[512];
#define XC_HOST(fmt, ...)                                \
  std::snprintf(tmp, sizeof tmp, fmt, __VA_ARGS__);      \
  expected += std::string(tmp) + "\n";                   \
  calls += "  n += snprintf(buf + n, sizeof buf - n, " #fmt ", " #__VA_ARGS__ ");\n  buf[n++] = '\\n';\n";
  XC_PRINTF_CASES(XC_HOST)
#undef XC_HOST
  {  // truncation: what fits, and the length it would have had
    char small[5];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation"  // the truncation is the case
    const int would = std::snprintf(small, sizeof small, "%s-%d", "abcdef", 12);
#pragma GCC diagnostic pop
    std::snprintf(tmp, sizeof tmp, "%s %d", small, would);
    expected += std::string(tmp) + "\n";
    calls += "  { char small[5]; int would = snprintf(small, sizeof small, \"%s-%d\", \"abcdef\", 12);\n"
             "    n += snprintf(buf + n, sizeof buf - n, \"%s %d\", small, would); buf[n++] = '\\n'; }\n";
  }
  test::ScratchDir dir;
  const std::string src = dir / "printf.c";
  std::ofstream(src) << "#include <stdio.h>\n#include <xcargo/kernel.h>\n"
                        "XC_ENTRY int run(xc_ctx *ctx, const void *in, size_t in_len) {\n"
                        "  (void)in; (void)in_len;\n  char buf[4096];\n  int n = 0;\n"
                     << calls << "  return xc_reply(ctx, buf, (size_t)n);\n}\n";
  const Bytes cargo = test::build_cargo(dir, src);
  for (const auto& [how, reply] : replies_of(dir, cargo, "run")) {
    INFO(how);
    CHECK(reply == expected);
  }
}

TEST_CASE("stdlib.h in a kernel: qsort, bsearch and the strto* parse and sort as the C library does", "[engine][stdlib]") {
  // Each line: a number parsed by the kernel, printed back; the host does the same.
  const char* ints[] = {"42", "  -17xyz", "0x1F", "0777", "+9223372036854775807", "9223372036854775808", "-9223372036854775809",
                        "18446744073709551615", "abc", "", "  0x", "z", "1e5"};
  const char* doubles[] = {"3.25", "-0.5e-3", "1e300", "2.5E+10", "  .125", "inf", "-Infinity", "12abc", "0.1", "123456.789", "x"};
  std::string expected, calls;
  char tmp[256];
  for (const char* s : ints) {
    char* end = nullptr;
    const long long v = std::strtoll(s, &end, 0);
    const unsigned long long u = std::strtoull(s, nullptr, 0);
    std::snprintf(tmp, sizeof tmp, "%lld %llu %ld %d\n", v, u, long(end - s), std::atoi(s));
    expected += tmp;
    calls += std::string("  { const char *s = \"") + s + "\"; char *end = 0; long long v = strtoll(s, &end, 0);\n"
             "    n += snprintf(buf + n, sizeof buf - n, \"%lld %llu %ld %d\\n\", v, strtoull(s, 0, 0), (long)(end - s), atoi(s)); }\n";
  }
  for (const char* s : doubles) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    std::snprintf(tmp, sizeof tmp, "%.12g %ld\n", v, long(end - s));
    expected += tmp;
    calls += std::string("  { const char *s = \"") + s + "\"; char *end = 0; double v = strtod(s, &end);\n"
             "    n += snprintf(buf + n, sizeof buf - n, \"%.12g %ld\\n\", v, (long)(end - s)); }\n";
  }
  // qsort and bsearch: 200 pseudo-random values, with repeats.
  std::vector<int> v(200);
  for (int i = 0; i < 200; ++i) v[i] = int((i * 7919u) % 97) - 40;
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int x : sorted) expected += std::to_string(x) + ",";
  expected += "\n";
  for (int key : {-40, 0, 56, 57, 1000}) expected += std::binary_search(sorted.begin(), sorted.end(), key) ? "y" : "n";
  expected += "\n";
  test::ScratchDir dir;
  const std::string src = dir / "parse.c";
  std::ofstream(src) << "#include <stdio.h>\n#include <stdlib.h>\n#include <xcargo/kernel.h>\n"
                        "static int cmp(const void *a, const void *b) { int x = *(const int *)a, y = *(const int *)b; return (x > y) - (x < y); }\n"
                        "XC_ENTRY int run(xc_ctx *ctx, const void *in, size_t in_len) {\n"
                        "  (void)in; (void)in_len;\n  char buf[8192];\n  int n = 0;\n"
                     << calls
                     << "  int v[200];\n  for (int i = 0; i < 200; ++i) v[i] = (int)((i * 7919u) % 97) - 40;\n"
                        "  qsort(v, 200, sizeof v[0], cmp);\n"
                        "  for (int i = 0; i < 200; ++i) n += snprintf(buf + n, sizeof buf - n, \"%d,\", v[i]);\n"
                        "  buf[n++] = '\\n';\n"
                        "  int keys[] = {-40, 0, 56, 57, 1000};\n"
                        "  for (int i = 0; i < 5; ++i) buf[n++] = bsearch(&keys[i], v, 200, sizeof v[0], cmp) ? 'y' : 'n';\n"
                        "  buf[n++] = '\\n';\n"
                        "  return xc_reply(ctx, buf, (size_t)n);\n}\n";
  const Bytes cargo = test::build_cargo(dir, src);
  for (const auto& [how, reply] : replies_of(dir, cargo, "run")) {
    INFO(how);
    CHECK(reply == expected);
  }
}
