// Tests of the build driver with the real clang-16: entries, imports, refusals, reproducibility.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <set>

#include "support.h"
#include "read/abi.h"
#include "compile/compile.h"

using namespace xcargo;

static std::string write(const test::ScratchDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir / name) << text;
  return dir / name;
}

static std::string example(const std::string& path) { return test::source_dir() + "/examples/" + path; }

TEST_CASE("targets parse into triples and CPUs", "[compile]") {
  auto t = parse_target("x86_64:x86-64-v3");
  REQUIRE(t.ok());
  CHECK(t->triple == "x86_64-unknown-linux-gnu");
  CHECK(t->cpu == "x86-64-v3");
  CHECK(parse_target("bitcode")->kind == VariantKind::bitcode);
  CHECK(parse_target("aarch64")->cpu == "generic");
  CHECK(parse_target("riscv64")->triple == "riscv64-unknown-linux-gnu");
  CHECK(parse_target("sparc").error().code() == Errc::invalid_argument);
  CHECK(parse_target("bitcode:znver4").error().code() == Errc::invalid_argument);
  CHECK(parse_target("x86_64:-fplugin=x").error().code() == Errc::invalid_argument);
}

TEST_CASE("hello builds for the default targets with its two entries", "[compile]") {
  auto r = compile_kernels({{example("hello/hello.c")}});
  REQUIRE(r.ok());
  CHECK(r->entries == std::vector<std::string>{"add", "greet"});
  REQUIRE(r->payloads.size() == 3);
  CHECK(r->payloads[0].variant.kind == VariantKind::bitcode);
  CHECK(r->payloads[1].variant.triple == "x86_64-unknown-linux-gnu");
  CHECK(r->payloads[2].variant.triple == "aarch64-unknown-linux-gnu");
  for (const auto& p : r->payloads) {
    for (const auto& i : p.variant.imports) CHECK(abi::is_allowed_import(i));
    CHECK(std::count(p.variant.imports.begin(), p.variant.imports.end(), "xc_reply") == 1);
  }
}

TEST_CASE("the C++ example and riscv64 build too", "[compile]") {
  CompileRequest req{{example("cpp-reduce/reduce.cc")}, {"x86_64", "riscv64"}};
  auto r = compile_kernels(req);
  REQUIRE(r.ok());
  CHECK(r->entries == std::vector<std::string>{"stats_f64", "stats_i32"});
}

TEST_CASE("a kernel importing a forbidden symbol is refused, naming it", "[compile]") {
  test::ScratchDir dir;
  auto src = write(dir, "bad.c",
                   "#include <xcargo/kernel.h>\n"
                   "int system(const char *);\n"
                   "XC_ENTRY int run(xc_ctx *c, const void *in, size_t n) { return system(\"id\"); }\n");
  auto r = compile_kernels({{src}, {"x86_64"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::import);
  CHECK(r.error().message().find("'system'") != std::string::npos);
}

TEST_CASE("every forbidden import is named at once, C++ ones demangled, with what to use", "[compile]") {
  test::ScratchDir dir;
  auto src = write(dir, "bad.cc",
                   "#include <xcargo/kernel.h>\nextern \"C\" void *malloc(size_t);\n"
                   "XC_ENTRY int run(xc_ctx *c, const void *in, size_t n) { int *p = new int[n]; p[0] = malloc(4) != 0; "
                   "int r = p[0]; delete[] p; return r; }\n");
  auto r = compile_kernels({{src}, {"x86_64"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::import);
  const std::string& m = r.error().message();
  CHECK(m.find("'operator delete[](void*)' (_ZdaPv), 'operator new[](unsigned long)' (_Znam) and 'malloc',") != std::string::npos);
  std::string hints;
  for (const auto& h : r.error().hints()) hints += h + "\n";
  CHECK(hints.find("xc_alloc(ctx, n)") != std::string::npos);
  CHECK(hints.find("needs no free") != std::string::npos);
}

TEST_CASE("no entry points, static entries and compile errors are refused", "[compile]") {
  test::ScratchDir dir;
  auto none = write(dir, "none.c", "#include <xcargo/kernel.h>\nint f(void) { return 1; }\n");
  auto r = compile_kernels({{none}, {"x86_64"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("no entry points") != std::string::npos);

  auto st = write(dir, "st.c", "#include <xcargo/kernel.h>\nXC_ENTRY static int f(xc_ctx *c, const void *i, size_t n) { return 0; }\n");
  r = compile_kernels({{st}, {"bitcode"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("static") != std::string::npos);

  auto broken = write(dir, "broken.c", "this is not C\n");
  r = compile_kernels({{broken}, {"x86_64"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::compile);

  r = compile_kernels({{dir / "missing.c"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::io);
  r = compile_kernels({{dir / "notes.txt"}});
  CHECK(r.error().code() == Errc::invalid_argument);
}

TEST_CASE("several sources link into one payload per target", "[compile]") {
  test::ScratchDir dir;
  auto a = write(dir, "a.c", "#include <xcargo/kernel.h>\nint twice(int);\n"
                             "XC_ENTRY int run(xc_ctx *c, const void *i, size_t n) { int v = twice((int)n); return xc_reply(c, &v, 4); }\n");
  auto b = write(dir, "b.c", "int twice(int x) { return 2 * x; }\n");
  auto r = compile_kernels({{a, b}, {"bitcode", "x86_64", "aarch64"}});
  REQUIRE(r.ok());
  for (const auto& p : r->payloads) CHECK(p.variant.imports == std::vector<std::string>{"xc_reply"});
}

TEST_CASE("LLVM IR sources are accepted", "[compile]") {
  test::ScratchDir dir;
  auto ll = write(dir, "k.ll",
                  "define i32 @run(ptr %c, ptr %i, i64 %n) section \".text.xc_entry\" {\n  ret i32 0\n}\n");
  auto r = compile_kernels({{ll}, {"bitcode", "x86_64"}});
  REQUIRE(r.ok());
  CHECK(r->entries == std::vector<std::string>{"run"});
}

TEST_CASE("compiling twice gives identical payloads", "[compile]") {
  auto a = compile_kernels({{example("sgemm/sgemm.c")}});
  auto b = compile_kernels({{example("sgemm/sgemm.c")}});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  for (size_t i = 0; i < a->payloads.size(); ++i) CHECK(a->payloads[i].raw == b->payloads[i].raw);
}

// kernel.h and the allow-list describe the same API: a kernel that calls every function
// kernel.h declares imports exactly the allow-list.
TEST_CASE("kernel.h declares exactly the allow-list", "[compile][abi]") {
  std::ifstream in(test::source_dir() + "/libcargo/kernel-include/xcargo/kernel.h");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::set<std::string> allowed(abi::allowed_imports().begin(), abi::allowed_imports().end());
  // Call each allowed function through a pointer so no builtin lowering removes the import.
  std::string body = "#include <xcargo/kernel.h>\n#undef memcpy\n#undef memmove\n#undef memset\n#undef memcmp\n"
                     "#undef strlen\n#undef sqrt\n#undef sqrtf\n#undef fabs\n#undef fabsf\n#undef fma\n#undef fmaf\n"
                     "XC_ENTRY int run(xc_ctx *c, const void *i, size_t n) {\n  void *volatile sink;\n";
  for (const auto& s : allowed) body += "  sink = (void *)&" + s + ";\n";
  body += "  (void)sink; return 0;\n}\n";
  test::ScratchDir dir;
  auto r = compile_kernels({{write(dir, "all.c", body)}, {"x86_64"}});
  REQUIRE(r.ok());
  const auto& imports = r->payloads[0].variant.imports;
  CHECK(std::set<std::string>(imports.begin(), imports.end()) == allowed);
}

TEST_CASE("the dependencies are every source and every header any target included", "[compile]") {
  test::ScratchDir dir;
  write(dir, "my header.h", "#define K 3\n");
  write(dir, "only_x86.h", "#define X 1\n");
  std::string a = write(dir, "a.c",
                        "#include <xcargo/kernel.h>\n#include \"my header.h\"\n#ifdef __x86_64__\n#include \"only_x86.h\"\n#endif\n"
                        "XC_ENTRY int k(xc_ctx *c, const void *in, size_t n) { return K - 3; }\n");
  CompileRequest req{{a}, {"x86_64", "bitcode"}};
  req.dependencies = true;
  auto r = compile_kernels(req);
  REQUIRE(r.ok());
  std::set<std::string> deps(r->dependencies.begin(), r->dependencies.end());
  CHECK(deps.count(a));
  CHECK(deps.count(std::string(dir / "my header.h")));
  CHECK(deps.count(std::string(dir / "only_x86.h")));  // only the x86_64 compile read it
  CHECK(deps.count(kernel_include_dir() + "/xcargo/kernel.h"));

  // The depfile escapes what Make and Ninja would split, and reads back as written.
  std::string text = make_depfile("out dir/c.xcargo", {"/s/my header.h", "/s/$x#.h"});
  CHECK(text == "out\\ dir/c.xcargo: \\\n  /s/my\\ header.h \\\n  /s/$$x\\#.h\n");
  CHECK(parse_depfile(text, "/") == std::vector<std::string>{"/s/my header.h", "/s/$x#.h"});
  CHECK(parse_depfile("x: a.c \\\n  ../inc/b.h\n", "/src/k") == std::vector<std::string>{"/src/k/a.c", "/src/inc/b.h"});
}

TEST_CASE("variadic functions build for every target; what a slot cannot carry is refused, naming the function", "[compile]") {
  auto r = compile_kernels({{test::source_dir() + "/tests/kernels/varargs.c"}});
  REQUIRE(r.ok());  // the bitcode passed the rules, which refuse va_start and va_arg
  REQUIRE(r->payloads.size() == 3);
  test::ScratchDir dir;
  auto refused = [&](const std::string& body, const std::string& message) {
    auto src = write(dir, "v.c", "#include <xcargo/kernel.h>\n#include <stdarg.h>\n" + body);
    auto b = compile_kernels({{src}, {"bitcode"}});
    REQUIRE_FALSE(b.ok());
    CHECK(b.error().code() == Errc::import);
    INFO(b.error().message());
    CHECK(b.error().message().find(message) != std::string::npos);
    const auto& hints = b.error().hints();
    CHECK(std::any_of(hints.begin(), hints.end(), [](const std::string& h) { return h.find("-t x86_64,aarch64") != std::string::npos; }));
    CHECK(compile_kernels({{src}, {"x86_64"}}).ok());  // objects read them with their own ABI
  };
  refused("struct big { long a, b, c; };\n"
          "static long f(int n, ...) { va_list ap; va_start(ap, n); struct big s = va_arg(ap, struct big); va_end(ap); return s.c; }\n"
          "XC_ENTRY int run(xc_ctx *c, const void *in, size_t n) { struct big s = {1, 2, (long)n}; long r = f(1, s);"
          " return xc_reply(c, &r, sizeof r); }\n",
          "function 'run' passes 'f' a variadic argument of type ptr by value");
  refused("static long f(int n, ...) { va_list ap; va_start(ap, n); long r = va_arg(ap, long); va_end(ap); return r; }\n"
          "long (*volatile fp)(int, ...) = f;\n"
          "XC_ENTRY int run(xc_ctx *c, const void *in, size_t n) { long r = fp(1, (long)n); return xc_reply(c, &r, sizeof r); }\n",
          "function 'f' is variadic and its address is taken");
}

TEST_CASE("bitcode whose types a CPU lays out differently is refused, naming the type and the CPU", "[compile]") {
  test::ScratchDir dir;
  // le64 aligns vectors to 4: the member sits at offset 4, where every CPU puts it at 16.
  auto src = write(dir, "layout.ll",
                   "target datalayout = \"e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128\"\n"
                   "%s = type { i8, <4 x float> }\n"
                   "@g = global %s zeroinitializer, align 16\n"
                   "define i32 @run(ptr %c, ptr %i, i64 %n) section \".text.xc_entry\" {\n"
                   "  store <4 x float> zeroinitializer, ptr getelementptr (%s, ptr @g, i32 0, i32 1), align 16\n"
                   "  ret i32 0\n}\n");
  auto r = compile_kernels({{src}, {"bitcode"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code() == Errc::import);
  CHECK(r.error().message().find("the type %s = type { i8, <4 x float> } is laid out differently once the bitcode is retargeted: "
                                 "member 1 at offset 4 where x86_64 puts it at 16") != std::string::npos);
}

TEST_CASE("bitcode that needs a helper no loader provides is refused at its line, and shipped without line tables", "[compile]") {
  test::ScratchDir dir;
  auto refused = [&](const std::string& name, const std::string& body, const std::string& message, const std::string& hint) {
    auto src = write(dir, name, "#include <xcargo/kernel.h>\n#include <math.h>\nXC_ENTRY int run(xc_ctx *c, const void *in, size_t n) {\n" +
                                    body + "\n  return 0;\n}\n");
    auto r = compile_kernels({{src}});
    REQUIRE_FALSE(r.ok());
    INFO(r.error().message());
    CHECK(r.error().code() == Errc::import);
    CHECK(r.error().message().find(message) != std::string::npos);
    const auto& hints = r.error().hints();
    CHECK(std::any_of(hints.begin(), hints.end(), [&](const std::string& h) { return h.find(hint) != std::string::npos; }));
  };
  refused("div.c", "  __int128 a = (__int128)n << 70;\n  volatile long q = (long)(a / (long)(n + 3));",
          "bitcode: div.c:5: function 'run' divides integers wider than 64 bits", "use 64-bit integers");
  refused("powi.c", "  volatile double p = __builtin_powi(1.5, (int)n);", "bitcode: powi.c:4: function 'run' raises to an integer power",
          "pow()");
  // rint is an instruction on aarch64 and with SSE4.1, a call on baseline x86_64.
  refused("rint.c", "  volatile double r = __builtin_rint(n * 0.5);",
          "bitcode (as a loader on x86_64 compiles it): the kernel imports 'rint'", "round(), floor(), ceil() and trunc() are");
  // An object variant names the helper it would import.
  auto src = write(dir, "obj.c", "#include <xcargo/kernel.h>\nXC_ENTRY int run(xc_ctx *c, const void *in, size_t n) {\n"
                                 "  __int128 a = (__int128)n << 70;\n  volatile long q = (long)(a % 7);\n  return 0;\n}\n");
  auto r = compile_kernels({{src}, {"x86_64"}});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message().find("'__modti3'") != std::string::npos);

  // What builds ships no debug information: no directory of the build in the bitcode.
  auto ok = write(dir, "fine.c", "#include <xcargo/kernel.h>\nXC_ENTRY int run(xc_ctx *c, const void *in, size_t n) {\n"
                                 "  long double x = n / 3.0L;\n  unsigned __int128 w = (unsigned __int128)n * n;\n"
                                 "  long r = (long)(x * 1e6) + (long)(w >> 3);\n  return xc_reply(c, &r, sizeof r);\n}\n");
  auto built = compile_kernels({{ok}});
  REQUIRE(built.ok());
  const Bytes& bc = built->payloads[0].raw;
  const std::string text(bc.begin(), bc.end());
  CHECK(text.find(dir.path()) == std::string::npos);
  CHECK(text.find("Debug Info Version") == std::string::npos);
}
