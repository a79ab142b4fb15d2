// Tests of variant selection against described hosts (no LLVM, no real host needed).
#include <catch2/catch.hpp>

#include "engine/select.h"

using namespace xcargo;
using namespace xcargo::loader;

static Manifest manifest_with(std::vector<std::tuple<std::string, VariantKind, std::string, std::string>> vs) {
  Manifest m;
  for (auto& [name, kind, triple, cpu] : vs) {
    Variant v;
    v.name = name, v.kind = kind, v.triple = triple, v.cpu = cpu;
    m.variants.push_back(v);
  }
  return m;
}

static HostInfo x86(std::set<std::string> features, std::string cpu = "znver3") {
  return {"x86_64", "x86_64-unknown-linux-gnu", cpu, std::move(features)};
}

static const std::set<std::string> kV3 = {"cx16", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3", "avx", "avx2",
                                          "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe"};

TEST_CASE("native beats bitcode unless bitcode is preferred", "[select]") {
  Manifest m = manifest_with({{"bitcode", VariantKind::bitcode, "le64-unknown-unknown", "generic"},
                              {"x86_64", VariantKind::object, "x86_64-unknown-linux-gnu", "x86-64"},
                              {"aarch64", VariantKind::object, "aarch64-unknown-linux-gnu", "generic"}});
  CHECK((*select_variant(m, x86({}), Prefer::native))->name == "x86_64");
  CHECK((*select_variant(m, x86({}), Prefer::bitcode))->name == "bitcode");
  HostInfo arm{"aarch64", "aarch64-unknown-linux-gnu", "neoverse-n1", {}};
  CHECK((*select_variant(m, arm, Prefer::native))->name == "aarch64");
  HostInfo rv{"riscv64", "riscv64-unknown-linux-gnu", "sifive-u74", {}};
  CHECK((*select_variant(m, rv, Prefer::native))->name == "bitcode");
}

TEST_CASE("the most specific CPU variant the host can run wins", "[select]") {
  Manifest m = manifest_with({{"x86_64", VariantKind::object, "x86_64-unknown-linux-gnu", "x86-64"},
                              {"x86_64:x86-64-v3", VariantKind::object, "x86_64-unknown-linux-gnu", "x86-64-v3"},
                              {"x86_64:x86-64-v4", VariantKind::object, "x86_64-unknown-linux-gnu", "x86-64-v4"},
                              {"x86_64:znver3", VariantKind::object, "x86_64-unknown-linux-gnu", "znver3"}});
  CHECK((*select_variant(m, x86(kV3, "znver3"), Prefer::native))->name == "x86_64:znver3");
  CHECK((*select_variant(m, x86(kV3, "haswell"), Prefer::native))->name == "x86_64:x86-64-v3");
  CHECK((*select_variant(m, x86({}, "core2"), Prefer::native))->name == "x86_64");
}

TEST_CASE("a cargo with nothing for this host is refused with what it offers", "[select]") {
  Manifest m = manifest_with({{"aarch64", VariantKind::object, "aarch64-unknown-linux-gnu", "generic"},
                              {"x86_64:znver4", VariantKind::object, "x86_64-unknown-linux-gnu", "znver4"}});
  auto r = select_variant(m, x86(kV3, "haswell"), Prefer::native);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::unsupported);
  CHECK(r.error().message().find("aarch64 (aarch64-unknown-linux-gnu)") != std::string::npos);
}
