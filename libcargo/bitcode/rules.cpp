// The bitcode rules (xcargo/bitcode_rules.h); compiled into xcargo (static LLVM) and the loader (libLLVM).
#include "xcargo/bitcode_rules.h"

#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/InstrTypes.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

namespace xcargo::bitcode {

namespace {

Error assembly(const std::string& what, const std::string& where) {
  return Error(Errc::import, what + ": " + where + " contains inline assembly, which loaders refuse in bitcode")
      .hint("kernels may compute and call <xcargo/kernel.h> only; assembly can make system calls and "
            "crash the JIT")
      .hint("a kernel that needs assembly can ship native objects only: xcargo build -t x86_64,aarch64");
}

// Where an instruction came from: FILE:LINE when the module has debug locations, else its function.
std::string place(const llvm::Function& f, const llvm::Instruction& i) {
  std::string at;
  if (const llvm::DebugLoc& dl = i.getDebugLoc()) at = dl->getFilename().str() + ":" + std::to_string(dl.getLine()) + ": ";
  return at + "function '" + f.getName().str() + "'";
}

// Reading variadic arguments: the le64 va_list (16 bytes, 4-aligned) is not x86_64's (24,
// 16-aligned) nor aarch64's (32): retargeted, va_start writes past it and va_arg reads
// the wrong slots.
bool reads_variadic_arguments(const llvm::Instruction& i) {
  if (llvm::isa<llvm::VAArgInst>(i)) return true;
  const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
  if (!call) return false;
  const llvm::Intrinsic::ID id = call->getIntrinsicID();
  return id == llvm::Intrinsic::vastart || id == llvm::Intrinsic::vacopy || id == llvm::Intrinsic::vaend;
}

Error variadic(const std::string& what, const std::string& where) {
  return Error(Errc::import, what + ": " + where + " reads variadic arguments (va_start, va_arg), whose va_list differs "
                                                   "between the portable bitcode and each CPU; loaders refuse it in bitcode")
      .hint("xcargo build makes a kernel's variadic functions portable (format-spec 5.4): build the cargo with it")
      .hint("or ship native objects only: xcargo build -t x86_64,aarch64");
}

}  // namespace

Status check_module(const llvm::Module& m, const std::string& what) {
  if (!m.getModuleInlineAsm().empty()) return assembly(what, "the module (module-level asm)");
  for (const llvm::Function& f : m)
    for (const llvm::BasicBlock& bb : f)
      for (const llvm::Instruction& i : bb)
        if (const auto* call = llvm::dyn_cast<llvm::CallBase>(&i); call && call->isInlineAsm())
          return assembly(what, "function '" + f.getName().str() + "'");
        else if (reads_variadic_arguments(i))
          return variadic(what, place(f, i));
  if (!m.ifunc_empty())
    return Error(Errc::import, what + ": defines the ifunc '" + m.ifunc_begin()->getName().str() +
                                   "', whose resolver would run while the cargo is linked")
        .hint("call one function, or ship a variant per CPU");
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(m, &os)) {
    os.flush();
    if (problems.size() > 400) problems = problems.substr(0, 400) + "...";
    while (!problems.empty() && problems.back() == '\n') problems.pop_back();
    for (char& c : problems)
      if (c == '\n') c = ' ';
    return Error(Errc::malformed, what + ": the LLVM IR verifier rejects the module: " + problems)
        .hint("build the bitcode with xcargo build (clang-16); hand-written IR must be valid LLVM 16 IR");
  }
  return {};
}

}  // namespace xcargo::bitcode
