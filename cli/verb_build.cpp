// xcargo build: compiles kernel sources for several targets into one (optionally signed) cargo.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>
#include <optional>

#include "exit_codes.h"
#include "key_files.h"
#include "report.h"
#include "verbs.h"
#include "compile/compile.h"
#include "xcargo/file.h"
#include "xcargo/interrupt.h"
#include "build/keys.h"

namespace xcargo::cli {

Runner add_build(CLI::App& app) {
  struct Opts {
    std::vector<std::string> sources, targets, includes, defines;
    std::string out, name, version = "0.1.0", opt = "2", key, depfile;
    std::string fp = "contract";
    unsigned jobs = std::clamp(std::thread::hardware_concurrency(), 1u, 64u);
    int level = 19;
    bool verbose = false;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("build", "Compile C/C++ kernels (or LLVM IR) into a cargo");
  cmd->add_option("sources", o->sources, "Kernel sources: .c, .cc/.cpp/.cxx, .ll, .bc")->required()->type_name("SRC");
  cmd->add_option("-o,--output", o->out, "The cargo to write (OUT.xcargo; '-': standard output, with --name)")->required()->type_name("FILE");
  cmd->add_option("--name", o->name, "Cargo name (default: the output file's name without .xcargo)")->type_name("NAME");
  cmd->add_option("--cargo-version", o->version, "Version recorded in the manifest")->capture_default_str()->type_name("VERSION");
  cmd->add_option("-t,--target", o->targets,
                  "Variant to build, repeatable or comma-separated: bitcode, x86_64[:CPU], aarch64[:CPU],\n"
                  "riscv64[:CPU] (default: bitcode,x86_64,aarch64)")->type_name("TARGET")->delimiter(',')->allow_extra_args(false);
  cmd->add_option("-O", o->opt, "Optimization level: 0 1 2 3 s z")->capture_default_str()->type_name("LEVEL");
  cmd->add_option("--fp", o->fp,
                  "Floating point: contract (a*b+c may become one fused multiply-add where a target has one,\n"
                  "so variants may round differently) or strict (never: every variant, native or JIT-compiled\n"
                  "on any node, gives bit-identical results; recorded in the manifest)")
      ->capture_default_str()
      ->check(CLI::IsMember({"contract", "strict"}))
      ->type_name("MODE");
  cmd->add_option("-I", o->includes, "Add an include directory")->type_name("DIR")->allow_extra_args(false);
  cmd->add_option("-D", o->defines, "Define a macro (NAME or NAME=VALUE)")->type_name("MACRO")->allow_extra_args(false);
  cmd->add_option("--key", o->key, "Sign the cargo with this private key as it is written")->type_name("KEY");
  cmd->add_option("-j,--jobs", o->jobs, "Compiler processes to run at once (default: this machine's cores)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--depfile", o->depfile,
                  "Also write the files the build read (sources and every header included) as a Makefile-style\n"
                  "dependency file for OUT, as CMake's DEPFILE and Ninja's depfile read it")
      ->type_name("FILE");
  cmd->add_option("--zstd-level", o->level, "Compression level, 1-19; 0 stores sections uncompressed")
      ->capture_default_str()
      ->check(CLI::Range(0, 19));
  cmd->add_flag("-v,--verbose", o->verbose, "Print each compiler command");
  cmd->footer("Kernels #include <xcargo/kernel.h> and mark entry points with XC_ENTRY:\n"
              "  XC_ENTRY int add(xc_ctx *ctx, const void *in, size_t in_len) { ... }\n"
              "The same sources and options always give a byte-identical cargo.\n" +
              std::string(kKeyFileHelp) + "\n\n" + exit_codes_help({kExitOk, kExitUsage}));
  return [o] {
    std::string name = o->name;
    if (name.empty()) {
      name = std::filesystem::path(o->out).filename().string();
      if (name.ends_with(".xcargo")) name.resize(name.size() - 7);
      if (!is_cargo_name(name))
        return report(Error(Errc::invalid_argument, "cannot use '" + name + "' as the cargo name")
                          .hint("pass --name NAME, with NAME matching [a-z0-9][a-z0-9._-]*"),
                      o->out);
    } else if (!is_cargo_name(name)) {
      return report(Error(Errc::invalid_argument, "--name '" + name + "' must match [a-z0-9][a-z0-9._-]*"));
    }
    std::optional<SigningKey> key;
    if (!o->key.empty()) {
      auto k = load_key(o->key);
      if (!k.ok()) return report(k.error());
      key = std::move(*k);
    }
    CompileRequest req{o->sources, o->targets, o->opt,       o->includes,
                       o->defines, o->jobs,    o->verbose, o->fp == "strict", !o->depfile.empty(),
                       ::isatty(STDERR_FILENO) == 1 && !o->verbose};
    auto compiled = compile_kernels(req);
    if (!compiled.ok()) return report(compiled.error());
    if (interrupted()) return report(Error(Errc::io, "interrupted"));  // said once; no cargo is written
    Manifest m;
    m.name = name;
    m.version = o->version;
    m.entries = compiled->entries;
    m.toolchain = compiled->toolchain;
    if (o->fp == "strict") m.fp = "strict";
    std::vector<std::string> variant_names;
    for (const auto& p : compiled->payloads) variant_names.push_back(p.variant.name);
    auto bytes = write_cargo(std::move(m), std::move(compiled->payloads), WriteOptions{o->level});
    if (!bytes.ok()) return report(bytes.error(), o->out);
    if (key) {
      auto signed_bytes = sign_cargo(*bytes, *key);
      if (!signed_bytes.ok()) return report(signed_bytes.error(), o->out);
      bytes = std::move(*signed_bytes);
    }
    if (auto s = write_file(o->out, *bytes); !s.ok()) return report(s.error(), o->out);
    if (!o->depfile.empty()) {
      std::string text = make_depfile(o->out, compiled->dependencies);
      if (auto s = write_file(o->depfile, ByteView(reinterpret_cast<const uint8_t*>(text.data()), text.size())); !s.ok())
        return report(s.error(), o->depfile);
    }
    std::string variants, entries;
    for (const auto& v : variant_names) variants += (variants.empty() ? "" : ", ") + v;
    for (const auto& e : compiled->entries) entries += (entries.empty() ? "" : ", ") + e;
    note("wrote " + o->out + " (" + std::to_string(bytes->size()) + " bytes; variants: " + variants +
         "; entries: " + entries + (key ? "; signed by " + to_hex(key->public_key().id) : "; unsigned") + ")");
    return 0;
  };
}

}  // namespace xcargo::cli
