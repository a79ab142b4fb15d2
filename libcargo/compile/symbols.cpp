// Reads symbols from ELF objects and LLVM bitcode with LLVM's Object and Bitcode readers.
// With portable.cpp and bitcode/rules.cpp, the only translation units of xcargo that include LLVM headers.
#include "compile/symbols.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Demangle/Demangle.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Operator.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ELFObjectFile.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>

#include <algorithm>
#include <set>

#include "read/abi.h"
#include "bitcode/rules.h"

namespace xcargo {

namespace {

std::string take_message(llvm::Error e) { return llvm::toString(std::move(e)); }

Error static_entry(const std::string& what, const std::string& name) {
  return Error(Errc::compile, what + ": entry point '" + name + "' is static")
      .hint("XC_ENTRY functions must have external linkage: remove 'static'");
}

Result<SymbolScan> scan_object(llvm::MemoryBufferRef buf, const std::string& what) {
  auto obj = llvm::object::ObjectFile::createObjectFile(buf);
  if (!obj) return Error(Errc::compile, what + ": cannot read the object: " + take_message(obj.takeError()));
  SymbolScan scan;
  std::set<std::string> entries, imports;
  for (const auto& sym : (*obj)->symbols()) {
    auto flags = sym.getFlags();
    auto name = sym.getName();
    if (!flags || !name) {
      if (!flags) llvm::consumeError(flags.takeError());
      if (!name) llvm::consumeError(name.takeError());
      return Error(Errc::compile, what + ": unreadable symbol table");
    }
    if (name->empty()) continue;
    if (*flags & llvm::object::SymbolRef::SF_Undefined) {
      imports.insert(name->str());
      continue;
    }
    auto sec = sym.getSection();
    if (!sec) {
      llvm::consumeError(sec.takeError());
      continue;
    }
    if (*sec == (*obj)->section_end()) continue;
    auto sec_name = (*sec)->getName();
    if (!sec_name) {
      llvm::consumeError(sec_name.takeError());
      continue;
    }
    auto type = sym.getType();
    bool is_func = type && *type == llvm::object::SymbolRef::ST_Function;
    if (!type) llvm::consumeError(type.takeError());
    if (std::string_view(*sec_name) != abi::kEntrySection || !is_func) continue;
    if (!(*flags & llvm::object::SymbolRef::SF_Global)) return static_entry(what, name->str());
    entries.insert(name->str());
  }
  for (const auto& sec : (*obj)->sections()) {
    auto n = sec.getName();
    if (!n) {
      llvm::consumeError(n.takeError());
      continue;
    }
    if (*n != ".comment") continue;
    if (auto contents = sec.getContents()) {
      llvm::StringRef s = *contents;
      s = s.ltrim('\0');
      scan.producer = s.substr(0, s.find('\0')).str();
    } else {
      llvm::consumeError(contents.takeError());
    }
  }
  scan.entries.assign(entries.begin(), entries.end());
  scan.imports.assign(imports.begin(), imports.end());
  return scan;
}

Result<SymbolScan> scan_bitcode(llvm::MemoryBufferRef buf, const std::string& what) {
  llvm::LLVMContext ctx;
  auto mod = llvm::parseBitcodeFile(buf, ctx);
  if (!mod) return Error(Errc::compile, what + ": cannot read the bitcode: " + take_message(mod.takeError()));
  XC_TRY(bitcode::check_module(**mod, what));  // what loaders would refuse, refused here first
  XC_TRY(bitcode::check_layouts(**mod, what));
  SymbolScan scan;
  std::set<std::string> entries, imports;
  for (const llvm::Function& f : **mod) {
    if (f.isIntrinsic()) continue;
    if (f.isDeclaration()) {
      imports.insert(f.getName().str());
      continue;
    }
    for (const llvm::Instruction& i : llvm::instructions(f)) {
      if (!scan.fp_fusion.empty()) break;
      if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i); call && call->getIntrinsicID() == llvm::Intrinsic::fmuladd)
        scan.fp_fusion = f.getName().str() + ": llvm.fmuladd (a multiply and an add the compiler may fuse)";
      else if (llvm::isa<llvm::FPMathOperator>(i) && (i.hasAllowContract() || i.hasAllowReassoc() || i.hasApproxFunc()))
        scan.fp_fusion = f.getName().str() + ": fast-math flags (operations the compiler may fuse or reorder)";
    }
    if (std::string_view(f.getSection()) != abi::kEntrySection) continue;
    if (f.hasLocalLinkage()) return static_entry(what, f.getName().str());
    entries.insert(f.getName().str());
  }
  for (const llvm::GlobalVariable& g : (*mod)->globals())
    if (g.isDeclaration()) imports.insert(g.getName().str());
  if (const llvm::NamedMDNode* ident = (*mod)->getNamedMetadata("llvm.ident"))
    if (ident->getNumOperands() > 0 && ident->getOperand(0)->getNumOperands() > 0)
      if (auto* s = llvm::dyn_cast<llvm::MDString>(ident->getOperand(0)->getOperand(0))) scan.producer = s->getString().str();
  scan.entries.assign(entries.begin(), entries.end());
  scan.imports.assign(imports.begin(), imports.end());
  return scan;
}

}  // namespace

std::string demangle(const std::string& symbol) { return llvm::demangle(symbol); }

Result<SymbolScan> scan_symbols(ByteView payload, VariantKind kind, const std::string& what) {
  llvm::MemoryBufferRef buf(llvm::StringRef(reinterpret_cast<const char*>(payload.data()), payload.size()), what);
  return kind == VariantKind::object ? scan_object(buf, what) : scan_bitcode(buf, what);
}

}  // namespace xcargo
