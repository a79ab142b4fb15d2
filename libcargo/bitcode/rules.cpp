// The bitcode rules (libcargo/bitcode/rules.h); compiled into xcargo (static LLVM) and the loader (libLLVM).
#include "bitcode/rules.h"

#include <llvm/IR/DataLayout.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/InstrTypes.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Operator.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include <set>

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

// What an instruction needs from a runtime library on some CPU (compiler-rt's or libatomic's
// helpers, none of them on the allow-list), or nullptr: the same on every target, so it is
// refused before code generation rather than as a missing import after it.
const char* needs_helper(const llvm::Instruction& i) {
  auto wide_int = [](const llvm::Type* t) { return t->getScalarType()->isIntegerTy() && t->getScalarSizeInBits() > 64; };
  auto other_float = [](const llvm::Type* t) {
    const llvm::Type* s = t->getScalarType();
    return s->isX86_FP80Ty() || s->isFP128Ty() || s->isPPC_FP128Ty();
  };
  if (other_float(i.getType())) return "computes with an 80- or 128-bit floating-point type";
  for (const llvm::Use& u : i.operands())
    if (other_float(u->getType())) return "computes with an 80- or 128-bit floating-point type";
  switch (i.getOpcode()) {
    case llvm::Instruction::SDiv:
    case llvm::Instruction::UDiv:
    case llvm::Instruction::SRem:
    case llvm::Instruction::URem:
      if (wide_int(i.getType())) return "divides integers wider than 64 bits (__int128 / or %)";
      break;
    case llvm::Instruction::FPToSI:
    case llvm::Instruction::FPToUI:
      if (wide_int(i.getType())) return "converts floating point to an integer wider than 64 bits";
      break;
    case llvm::Instruction::SIToFP:
    case llvm::Instruction::UIToFP:
      if (wide_int(i.getOperand(0)->getType())) return "converts an integer wider than 64 bits to floating point";
      break;
    default:
      break;
  }
  const llvm::DataLayout& dl = i.getModule()->getDataLayout();
  const llvm::Type* atomic = nullptr;
  if (const auto* l = llvm::dyn_cast<llvm::LoadInst>(&i); l && l->isAtomic()) atomic = l->getType();
  else if (const auto* st = llvm::dyn_cast<llvm::StoreInst>(&i); st && st->isAtomic()) atomic = st->getValueOperand()->getType();
  else if (const auto* rmw = llvm::dyn_cast<llvm::AtomicRMWInst>(&i)) atomic = rmw->getValOperand()->getType();
  else if (const auto* cx = llvm::dyn_cast<llvm::AtomicCmpXchgInst>(&i)) atomic = cx->getNewValOperand()->getType();
  if (atomic && atomic->isSized() && dl.getTypeStoreSize(const_cast<llvm::Type*>(atomic)) > 8)
    return "makes an atomic access wider than 8 bytes";
  if (const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i); call && call->getIntrinsicID() == llvm::Intrinsic::powi)
    return "raises to an integer power with __builtin_powi (llvm.powi)";
  return nullptr;
}

Error helper(const std::string& what, const std::string& where, const char* why) {
  return Error(Errc::import, what + ": " + where + " " + why + ", which needs a runtime helper no loader provides")
      .hint("use 64-bit integers, double, 8-byte atomics (or none: an invocation runs on one thread) and pow()")
      .hint("format-spec 5.4 lists what portable bitcode may contain");
}

std::string type_name(const llvm::Type* t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t->print(os);
  return os.str();
}

// Every type the module's code and data lay out in memory, with the types inside them.
void collect(llvm::Type* t, std::set<llvm::Type*>& seen) {
  if (!t || !seen.insert(t).second) return;
  for (llvm::Type* inner : t->subtypes()) collect(inner, seen);
}

std::set<llvm::Type*> laid_out_types(const llvm::Module& m) {
  std::set<llvm::Type*> seen;
  for (const llvm::GlobalVariable& g : m.globals()) collect(g.getValueType(), seen);
  for (const llvm::Function& f : m)
    for (const llvm::Instruction& i : llvm::instructions(f)) {
      if (const auto* a = llvm::dyn_cast<llvm::AllocaInst>(&i)) collect(a->getAllocatedType(), seen);
      else if (const auto* g = llvm::dyn_cast<llvm::GetElementPtrInst>(&i)) collect(g->getSourceElementType(), seen);
      else if (const auto* l = llvm::dyn_cast<llvm::LoadInst>(&i)) collect(l->getType(), seen);
      else if (const auto* s = llvm::dyn_cast<llvm::StoreInst>(&i)) collect(s->getValueOperand()->getType(), seen);
    }
  for (const llvm::Function& f : m)  // constant expressions in initializers and operands
    for (const llvm::Instruction& i : llvm::instructions(f))
      for (const llvm::Use& u : i.operands())
        if (const auto* ce = llvm::dyn_cast<llvm::GEPOperator>(u.get())) collect(ce->getSourceElementType(), seen);
  return seen;
}

}  // namespace

Status check_layout(const llvm::Module& m, const llvm::DataLayout& target, const std::string& target_name,
                    const std::string& what) {
  const llvm::DataLayout& own = m.getDataLayout();
  for (llvm::Type* t : laid_out_types(m)) {
    if (!t->isSized()) continue;
    std::string why;
    if (auto* st = llvm::dyn_cast<llvm::StructType>(t)) {
      const llvm::StructLayout *a = own.getStructLayout(st), *b = target.getStructLayout(st);
      for (unsigned k = 0; k < st->getNumElements() && why.empty(); ++k)
        if (a->getElementOffset(k) != b->getElementOffset(k))
          why = "member " + std::to_string(k) + " at offset " + std::to_string(a->getElementOffset(k)) + " where " + target_name +
                " puts it at " + std::to_string(b->getElementOffset(k));
    }
    if (why.empty() && own.getTypeAllocSize(t) != target.getTypeAllocSize(t))
      why = std::to_string(own.getTypeAllocSize(t).getFixedValue()) + " bytes where " + target_name + " gives it " +
            std::to_string(target.getTypeAllocSize(t).getFixedValue());
    if (!why.empty())
      return Error(Errc::import, what + ": the type " + type_name(t) + " is laid out differently once the bitcode is retargeted: " +
                                     why)
          .hint("a vector type or __int128 inside a struct can do this; use plain integer and floating-point members")
          .hint("or ship native objects only: xcargo build -t x86_64,aarch64");
  }
  return {};
}

Status check_layouts(const llvm::Module& m, const std::string& what) {
  // clang 16's data layouts for the targets xcargo builds objects for (what a loader on each
  // retargets portable bitcode to).
  static const std::pair<const char*, const char*> kTargets[] = {
      {"x86_64", "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-f80:128-n8:16:32:64-S128"},
      {"aarch64", "e-m:e-i8:8:32-i16:16:32-i64:64-i128:128-n32:64-S128"},
      {"riscv64", "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"},
  };
  for (const auto& [name, layout] : kTargets) XC_TRY(check_layout(m, llvm::DataLayout(layout), name, what));
  return {};
}

Status check_module(const llvm::Module& m, const std::string& what) {
  if (!m.getModuleInlineAsm().empty()) return assembly(what, "the module (module-level asm)");
  for (const llvm::Function& f : m)
    for (const llvm::BasicBlock& bb : f)
      for (const llvm::Instruction& i : bb)
        if (const auto* call = llvm::dyn_cast<llvm::CallBase>(&i); call && call->isInlineAsm())
          return assembly(what, "function '" + f.getName().str() + "'");
        else if (reads_variadic_arguments(i))
          return variadic(what, place(f, i));
        else if (const char* why = needs_helper(i))
          return helper(what, place(f, i), why);
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
