// The build driver: clang-16 per source and target, one link per target, symbol checks.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "compile/process.h"
#include "compile/portable.h"
#include "compile/symbols.h"
#include "read/abi.h"
#include "xcargo/cargo.h"
#include "compile/compile.h"
#include "xcargo/format.h"
#include "xcargo/interrupt.h"
#include "xcargo/file.h"
#include "xcargo/version.h"

namespace xcargo {

namespace fs = std::filesystem;

std::string llvm_tool(const std::string& name) {
  if (const char* dir = std::getenv("XCARGO_LLVM_BIN"); dir && *dir) return std::string(dir) + "/" + name;
  return std::string(XCARGO_LLVM_BIN_DIR) + "/" + name;
}

std::string kernel_include_dir() {
  if (const char* dir = std::getenv("XCARGO_KERNEL_INCLUDE"); dir && *dir) return dir;
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return XCARGO_KERNEL_INCLUDE_FROM_BIN;  // no /proc: relative to the working directory
  return (exe.parent_path() / XCARGO_KERNEL_INCLUDE_FROM_BIN).lexically_normal().string();
}

namespace {

enum class Lang { c, cxx, ir };

Result<Lang> language_of(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  if (ext == ".c") return Lang::c;
  if (ext == ".cc" || ext == ".cpp" || ext == ".cxx" || ext == ".C") return Lang::cxx;
  if (ext == ".ll" || ext == ".bc") return Lang::ir;
  return Error(Errc::invalid_argument, path + ": unknown source type '" + ext + "'")
      .hint("sources are C (.c), C++ (.cc .cpp .cxx) or LLVM IR (.ll .bc)");
}

// A scratch directory removed with everything in it when the build ends, interrupted or not
// (hold_cleanup: a signal handler lets the build unwind to here instead of exiting).
class TempDir {
public:
  TempDir() {
    hold_cleanup();
    std::error_code ec;
    std::string tmpl = (fs::temp_directory_path(ec) / "xcargo-build-XXXXXX").string();
    if (::mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
    release_cleanup();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

std::vector<std::string> common_flags(const CompileRequest& req, Lang lang) {
  std::vector<std::string> f = {"-c", "-O" + req.opt_level, "-ffreestanding", "-nostdlibinc", "-fno-stack-protector",
                                "-fno-math-errno", "-fPIC", "-fvisibility=hidden", "-fno-common",
                                "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-fno-addrsig",
                                "-Wno-unused-command-line-argument", "-Wno-override-module"};
  // No fused multiply-add unless asked for in the source: an FMA rounds once where a
  // multiply and an add round twice, and only some targets (and CPUs) have one.
  if (req.fp_strict) f.push_back("-ffp-contract=off");
  // The same C on every variant (format-spec 5.4): `char` and `wchar_t` signed and `long
  // double` IEEE double, as in le64 bitcode; x86_64 would give long double 80 bits, aarch64
  // and riscv64 128 bits in software (helpers no loader provides), aarch64 an unsigned char.
  for (const char* x : {"-fsigned-char", "-Xclang", "-mlong-double-64", "-Xclang", "-fwchar-type=int", "-Xclang", "-fsigned-wchar"})
    f.push_back(x);
  if (lang == Lang::c) f.push_back("-std=c17");
  if (lang == Lang::cxx) {
    for (const char* x : {"-std=c++17", "-fno-exceptions", "-fno-rtti", "-nostdinc++", "-fno-threadsafe-statics"})
      f.push_back(x);
  }
  if (lang != Lang::ir) {
    f.push_back("-I" + kernel_include_dir());
    for (const auto& d : req.include_dirs) f.push_back("-I" + fs::absolute(d).string());
    for (const auto& d : req.defines) f.push_back("-D" + d);
  }
  return f;
}

// What a port from hosted C or C++ calls most, and what a kernel uses instead.
const char* alternative_to(const std::string& symbol, const std::string& demangled) {
  static const std::pair<std::vector<std::string>, const char*> kAlternatives[] = {
      {{"malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "operator new"},
       "xc_alloc(ctx, n) allocates memory that lives until the invocation ends"},
      {{"free", "operator delete"}, "memory from xc_alloc needs no free: it ends with the invocation"},
      {{"printf", "fprintf", "puts", "putchar", "fputs", "fwrite", "write", "perror"},
       "xc_log(ctx, msg) writes a line to the node's log; xc_reply(ctx, data, len) answers the caller"},
      {{"__cxa_", "_Unwind_", "__gxx_personality"},
       "C++ exceptions and thread-safe statics are not available: kernels are built -fno-exceptions"},
      {{"abort", "exit", "_exit"}, "a kernel ends by returning from its entry (nonzero: an error for the caller)"},
      // What compilers call for C that some CPU cannot do in instructions (format-spec 5.4).
      {{"__divti3", "__modti3", "__udivti3", "__umodti3", "__divmodti4", "__udivmodti4"},
       "dividing __int128 needs a helper no loader provides: divide 64-bit integers"},
      {{"__fixdfti", "__fixsfti", "__fixunsdfti", "__fixunssfti", "__floattidf", "__floattisf", "__floatuntidf", "__floatuntisf"},
       "converting between __int128 and floating point needs a helper: convert through a 64-bit integer"},
      {{"__atomic_"}, "atomics wider than 8 bytes need libatomic, which no loader provides; an invocation runs on one "
                      "thread: use plain variables, or atomics of at most 8 bytes"},
      {{"__powidf2", "__powisf2"}, "__builtin_powi needs a helper: use pow()"},
      {{"__muldc3", "__mulsc3", "__divdc3", "__divsc3"},
       "multiplying and dividing complex numbers calls helpers: write the arithmetic out with __real__ and __imag__"},
      {{"rint", "rintf", "nearbyint", "nearbyintf", "lrint", "lrintf", "llrint", "llrintf"},
       "rint and nearbyint are not on the allow-list: round(), floor(), ceil() and trunc() are"},
  };
  for (const auto& [names, hint] : kAlternatives)
    for (const auto& n : names)
      if (symbol == n || demangled.rfind(n, 0) == 0 || (n.back() == '_' && symbol.rfind(n, 0) == 0)) return hint;
  return nullptr;
}

// Every import outside the allow-list, at once, as the source names them, with what to use.
Status check_imports(const SymbolScan& scan, const Target& t) {
  std::vector<std::string> names;
  std::set<std::string> hints;
  for (const auto& sym : scan.imports) {
    if (abi::is_allowed_import(sym)) continue;
    std::string shown = demangle(sym);
    if (const char* hint = alternative_to(sym, shown)) hints.insert(hint);
    names.push_back("'" + shown + "'" + (shown != sym ? " (" + sym + ")" : ""));
  }
  if (names.empty()) return {};
  std::string list;
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  Error e(Errc::import, t.name + ": the kernel imports " + list + ", which no xcargo loader provides");
  for (const auto& h : hints) e.hint(h);
  e.hint("kernels may call only the functions declared in <xcargo/kernel.h> (and the inline ones of its <string.h>, <math.h>, ...)");
  e.hint("a kernel cannot use the system's libc; pass data in and out through the entry's input and xc_reply()");
  return e;
}

// The CPUs a loader may compile portable bitcode for, each with its baseline features: a
// node's own CPU has these or more, so what compiles here without helpers does there too.
const char* const kBitcodeHosts[] = {"x86_64", "aarch64", "riscv64"};

// Portable bitcode compiled as a loader on each architecture would (-O2, PIC): what the code
// generators call that no loader provides (rint on x86_64 without SSE4.1, a helper the rules
// of format-spec 5.4 do not name) is refused now, not on a node when the cargo is pushed.
Status check_as_compiled(const Bytes& bitcode, const std::string& name, const std::string& in, const CompileRequest& req,
                         Progress* progress) {
  XC_TRY(write_file(in, bitcode));
  std::vector<Command> cmds;
  std::vector<Target> hosts;
  for (const char* arch : kBitcodeHosts) {
    auto host = parse_target(arch);
    XC_TRY(host);
    Command c;
    c.argv = {llvm_tool("clang"), "-c", "-O2", "-fPIC", "-Wno-override-module", "-Wno-unused-command-line-argument"};
    for (const auto& f : host->clang_flags) c.argv.push_back(f);
    for (const std::string& f : {in, std::string("-o"), in + "." + arch + ".o"}) c.argv.push_back(f);
    c.description = name + " as a loader on " + arch + " compiles it";
    cmds.push_back(std::move(c));
    hosts.push_back(std::move(*host));
  }
  progress->total += cmds.size();
  XC_TRY(run_commands(cmds, req.jobs, req.verbose, progress));
  for (Target& host : hosts) {
    auto obj = read_file(in + "." + host.name + ".o", format::kMaxSectionRawSize);
    if (!obj.ok()) return Error(obj.error().code(), name + " compiled for " + host.name + ": " + obj.error().message());
    auto scan = scan_symbols(*obj, VariantKind::object, name);
    XC_TRY(scan);
    host.name = name + " (as a loader on " + host.name + " compiles it)";
    XC_TRY(check_imports(*scan, host));
  }
  return {};
}

}  // namespace

Result<CompileResult> compile_kernels(const CompileRequest& req) {
  if (req.sources.empty()) return Error(Errc::invalid_argument, "no sources given");
  static const std::set<std::string> kOpt = {"0", "1", "2", "3", "s", "z"};
  if (!kOpt.count(req.opt_level))
    return Error(Errc::invalid_argument, "optimization level '" + req.opt_level + "' is not one of 0 1 2 3 s z");
  if (std::error_code ec; !fs::exists(fs::path(kernel_include_dir()) / "xcargo" / "kernel.h", ec))
    return Error(Errc::io, kernel_include_dir() + "/xcargo/kernel.h: the kernel headers are missing")
        .hint("xcargo looks for them in share/xcargo/include beside its bin directory, as installed")
        .hint("or set XCARGO_KERNEL_INCLUDE to the directory that holds xcargo/kernel.h");

  std::vector<Target> targets;
  for (const auto& spec : req.targets.empty() ? default_targets() : req.targets) {
    auto t = parse_target(spec);
    XC_TRY(t);
    for (const auto& other : targets)
      if (other.name == t->name) return Error(Errc::invalid_argument, "target '" + t->name + "' is given twice");
    targets.push_back(std::move(*t));
  }
  // --fp strict checks the sources' bitcode for what -ffp-contract=off cannot stop (a
  // `#pragma STDC FP_CONTRACT ON`, fast-math flags): built for that alone if no variant is.
  size_t check_only = targets.size();
  if (req.fp_strict && std::none_of(targets.begin(), targets.end(), [](const Target& t) { return t.kind == VariantKind::bitcode; })) {
    auto t = parse_target("bitcode");
    XC_TRY(t);
    targets.push_back(std::move(*t));
  }

  std::vector<Lang> langs;
  std::vector<fs::path> sources;
  std::set<fs::path> seen_sources;
  for (const auto& s : req.sources) {
    auto lang = language_of(s);
    XC_TRY(lang);
    std::error_code ec;
    if (!fs::is_regular_file(s, ec)) return Error(Errc::io, s + ": no such file");
    if (::access(s.c_str(), R_OK) != 0) return Error(Errc::io, s + ": not readable");
    fs::path abs = fs::weakly_canonical(fs::absolute(s), ec);
    if (!seen_sources.insert(abs).second) return Error(Errc::invalid_argument, s + ": source given twice");
    langs.push_back(*lang);
    sources.push_back(abs);
  }

  TempDir tmp;
  if (tmp.path().empty()) return Error(Errc::io, "cannot create a temporary directory");

  // One clang per (target, source), run from the source's directory with its bare file
  // name, so outputs do not depend on where the build was started (reproducible builds).
  std::vector<Command> compiles;
  std::vector<std::vector<std::string>> outputs(targets.size());
  for (size_t ti = 0; ti < targets.size(); ++ti) {
    const Target& t = targets[ti];
    for (size_t si = 0; si < sources.size(); ++si) {
      std::string out = tmp.path() + "/t" + std::to_string(ti) + "_s" + std::to_string(si) +
                        (t.kind == VariantKind::bitcode ? ".bc" : ".o");
      Command c;
      c.argv = {llvm_tool("clang")};
      for (auto& f : common_flags(req, langs[si])) c.argv.push_back(std::move(f));
      for (const auto& f : t.clang_flags) c.argv.push_back(f);
      if (req.dependencies && langs[si] != Lang::ir)
        for (const std::string& f : {std::string("-MD"), std::string("-MT"), std::string("x"), std::string("-MF"), out + ".d"})
          c.argv.push_back(f);
      c.argv.push_back(sources[si].filename().string());
      c.argv.push_back("-o");
      c.argv.push_back(out);
      c.cwd = sources[si].parent_path().string();
      c.description = sources[si].filename().string() + " (" + t.name + ")";
      compiles.push_back(std::move(c));
      outputs[ti].push_back(out);
    }
  }
  size_t link_count = 0;
  for (const auto& outs : outputs) link_count += outs.size() > 1;
  Progress progress{req.progress, 0, compiles.size() + link_count};
  XC_TRY(run_commands(compiles, req.jobs, req.verbose, &progress));
  std::set<std::string> dependencies;
  if (req.dependencies) {
    for (size_t si = 0; si < sources.size(); ++si) {
      dependencies.insert(sources[si].string());
      if (langs[si] == Lang::ir) continue;
      for (size_t ti = 0; ti < targets.size(); ++ti) {
        auto text = read_file(tmp.path() + "/t" + std::to_string(ti) + "_s" + std::to_string(si) +
                              (targets[ti].kind == VariantKind::bitcode ? ".bc.d" : ".o.d"), 16 << 20);
        if (!text.ok()) return Error(Errc::compile, sources[si].filename().string() + ": clang wrote no dependency file");
        for (auto& d : parse_depfile(std::string_view(reinterpret_cast<const char*>(text->data()), text->size()),
                                     sources[si].parent_path().string()))
          dependencies.insert(std::move(d));
      }
    }
  }

  // Several sources become one payload per target.
  std::vector<std::string> payload_files(targets.size());
  std::vector<Command> links;
  for (size_t ti = 0; ti < targets.size(); ++ti) {
    if (outputs[ti].size() == 1) {
      payload_files[ti] = outputs[ti][0];
      continue;
    }
    const bool bc = targets[ti].kind == VariantKind::bitcode;
    std::string out = tmp.path() + "/t" + std::to_string(ti) + (bc ? "_linked.bc" : "_linked.o");
    Command c;
    c.argv = bc ? std::vector<std::string>{llvm_tool("llvm-link"), "-o", out}
                : std::vector<std::string>{llvm_tool("ld.lld"), "-r", "--build-id=none", "-o", out};
    for (const auto& o : outputs[ti]) c.argv.push_back(o);
    c.description = "linking " + targets[ti].name;
    links.push_back(std::move(c));
    payload_files[ti] = out;
  }
  XC_TRY(run_commands(links, req.jobs, req.verbose, &progress));

  CompileResult result;
  std::string producer;
  for (size_t ti = 0; ti < targets.size(); ++ti) {
    const Target& t = targets[ti];
    auto raw = read_file(payload_files[ti], format::kMaxSectionRawSize);
    if (!raw.ok()) return Error(raw.error().code(), t.name + ": compiled payload: " + raw.error().message());
    if (t.kind == VariantKind::bitcode) {  // variadic arguments in the one form every target reads alike
      auto portable = portable_varargs(*raw, t.name);
      XC_TRY(portable);
      raw = std::move(portable);
    }
    auto scan = scan_symbols(*raw, t.kind, t.name);
    XC_TRY(scan);
    if (scan->entries.empty())
      return Error(Errc::compile, t.name + ": no entry points")
          .hint("mark entry points with XC_ENTRY: XC_ENTRY int NAME(xc_ctx *ctx, const void *in, size_t in_len)")
          .hint("and #include <xcargo/kernel.h>");
    if (ti == 0) result.entries = scan->entries;
    else if (scan->entries != result.entries)
      return Error(Errc::compile, t.name + ": entry points differ from " + targets[0].name + "'s")
          .hint("an XC_ENTRY inside an #if that depends on the architecture?");
    if (req.fp_strict && !scan->fp_fusion.empty())
      return Error(Errc::compile, "--fp strict: " + scan->fp_fusion + " would let variants round differently")
          .hint("remove `#pragma STDC FP_CONTRACT ON` and fast-math options (-ffast-math, -ffp-contract=fast) from the sources")
          .hint("or build without --fp strict, accepting that x86_64, aarch64 and JIT-compiled results may differ in the last bits");
    if (ti == check_only) continue;  // built for the check above only
    if (t.kind == VariantKind::object) XC_TRY(object_loaded_size(*raw, t.name));  // what loaders refuse (spec 7)
    XC_TRY(check_imports(*scan, t));
    if (t.kind == VariantKind::bitcode) {
      auto shipped = strip_debug_info(*raw, t.name);
      XC_TRY(shipped);
      raw = std::move(shipped);
      XC_TRY(check_as_compiled(*raw, t.name, tmp.path() + "/t" + std::to_string(ti) + "_shipped.bc", req, &progress));
    }
    if (producer.empty()) producer = scan->producer;
    Payload p;
    p.variant.name = t.name;
    p.variant.kind = t.kind;
    p.variant.triple = t.triple;
    p.variant.cpu = t.cpu;
    for (const auto& e : scan->entries) p.variant.entries.push_back(EntrySymbol{e, e});
    p.variant.imports = scan->imports;
    p.raw = std::move(*raw);
    result.payloads.push_back(std::move(p));
  }
  result.dependencies.assign(dependencies.begin(), dependencies.end());
  result.toolchain = {{"xcargo", XCARGO_VERSION_STRING}, {"clang", producer.empty() ? "unknown" : producer},
                      {"opt", "O" + req.opt_level}};
  return result;
}

std::vector<std::string> parse_depfile(std::string_view text, const std::string& dir) {
  std::vector<std::string> deps;
  size_t i = text.find(": ");
  if (i == std::string_view::npos) return deps;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) deps.push_back((fs::path(dir) / cur).lexically_normal().string());
    cur.clear();
  };
  for (i += 2; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      flush();
      ++i;
    } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '#')) {
      cur += text[++i];
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      cur += text[++i];
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      flush();
    } else {
      cur += c;
    }
  }
  flush();
  return deps;
}

std::string make_depfile(const std::string& target, const std::vector<std::string>& dependencies) {
  auto escape = [](const std::string& p) {
    std::string e;
    for (char c : p) {
      if (c == ' ' || c == '#') e += '\\';
      if (c == '$') e += '$';
      e += c;
    }
    return e;
  };
  std::string out = escape(target) + ":";
  for (const auto& d : dependencies) out += " \\\n  " + escape(d);
  return out + "\n";
}

}  // namespace xcargo
