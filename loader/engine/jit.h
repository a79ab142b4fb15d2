// Code generation and linking with LLVM ORC (JITLink): bitcode to a host object, and objects
// linked into memory against the runtime symbols only. The only LLVM-including unit here.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/select.h"
#include "xcargo/error.h"
#include "xcargo/types.h"

namespace llvm {
class Module;
}

namespace xcargo::loader {

class Jit {
public:
  static Result<std::unique_ptr<Jit>> create();
  ~Jit();

  const HostInfo& host() const;
  static std::string llvm_version();
  // The optimisation pipeline compile_bitcode runs, named for the disk cache's key: objects
  // made by another pipeline are not taken for its output.
  static const char* pipeline();
  // For a process that compiles and then exits (the compile service's job): an LLVM fatal
  // error calls handler with LLVM's reason, then ends the process with status 70. LLVM's
  // default prints the reason and exits, which in a worker would drop every loaded cargo.
  static void on_fatal_error(void (*handler)(const char* reason));

  // Compiles a bitcode payload for this host's CPU and features at -O2 into an ELF object.
  // Portable (le64) modules are retargeted to the host triple first. fp_strict (a cargo
  // built with --fp strict): no floating-point operation is fused or reassociated, whatever
  // the module's fast-math flags and attributes say, and llvm.fmuladd is a multiply and an
  // add, each rounded; the object then rounds like every other variant of the cargo.
  // allow_quick: a first tier instead, where it is safe to replace later: for a module that
  // defines no writable global (whose state a later object would not share), code generation
  // without optimisation (LLVM's fast instruction selection; about a quarter of -O2's time
  // for a small cargo). *quick says whether that is what was made.
  Result<Bytes> compile_bitcode(ByteView bitcode, const std::string& what, bool fp_strict = false,
                                bool allow_quick = false, bool* quick = nullptr) const;

  // Compiles a small module of this file's own, as compile_bitcode would (quick, then at -O2),
  // and returns the -O2 object. A compile job forked ahead of its request calls it while it waits: LLVM's first
  // compile in a process pays for lazy initialisation, symbol binding and page faults
  // (about 40 ms of a 50 ms first compile of a tiny cargo here), the real one then not.
  Result<Bytes> warm_up() const;
  // The entry symbols warm_up's object defines.
  static const std::vector<std::string>& warm_up_entries();

  // The object's undefined symbols, for the allow-list check before anything is linked.
  Result<std::vector<std::string>> undefined_symbols(ByteView object, const std::string& what) const;

  // Links object into a new JITDylib `name` whose only other symbols are the runtime's
  // (runtime.h), and returns the addresses of `symbols` in order. Nothing runs.
  Result<std::vector<void*>> link(ByteView object, const std::string& name, const std::vector<std::string>& symbols);

private:
  Jit();
  Result<Bytes> compile_module(llvm::Module& m, const std::string& what, bool fp_strict, bool quick) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xcargo::loader
