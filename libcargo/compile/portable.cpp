// portable_varargs (portable.h): variadic functions of le64 bitcode rewritten to take their
// variadic arguments in a buffer of 8-byte slots. Like symbols.cpp and bitcode/rules.cpp, a
// translation unit that includes LLVM headers (xcargo only; loaders never rewrite bitcode).
#include "compile/portable.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/DebugInfo.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <map>
#include <vector>

#include "read/abi.h"

namespace xcargo {

namespace {

Result<std::unique_ptr<llvm::Module>> parse(ByteView bitcode, const std::string& what, llvm::LLVMContext& ctx) {
  llvm::MemoryBufferRef in(llvm::StringRef(reinterpret_cast<const char*>(bitcode.data()), bitcode.size()), what);
  auto mod = llvm::parseBitcodeFile(in, ctx);
  if (!mod) return Error(Errc::compile, what + ": cannot read the bitcode: " + llvm::toString(mod.takeError()));
  return std::move(*mod);
}

Bytes write(const llvm::Module& m) {
  llvm::SmallVector<char, 0> out;
  llvm::raw_svector_ostream bc(out);
  llvm::WriteBitcodeToFile(m, bc);
  return Bytes(out.begin(), out.end());
}

// One slot per variadic argument: C promotes what it passes through `...` to int, long,
// double or a pointer, all of which fit, at the same offset on every target.
constexpr uint64_t kSlot = 8;
// The le64 va_list is [4 x i32]: the buffer's address is kept in its first 8 bytes.
const llvm::Align kListAlign(4);

bool fits_slot(const llvm::Type* t) {
  return (t->isIntegerTy() && t->getIntegerBitWidth() <= 64) || t->isFloatTy() || t->isDoubleTy() || t->isPointerTy();
}

std::string type_name(const llvm::Type* t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t->print(os);
  return os.str();
}

Error refuse(const std::string& what, const llvm::Function& f, const std::string& why) {
  std::string at;  // FILE:LINE of the definition, from the line tables the bitcode is built with
  if (const llvm::DISubprogram* sp = f.getSubprogram()) at = sp->getFilename().str() + ":" + std::to_string(sp->getLine()) + ": ";
  return Error(Errc::import, what + ": " + at + "function '" + f.getName().str() + "' " + why)
      .hint("pass the values in an array or a struct instead of `...`")
      .hint("or ship native objects only: xcargo build -t x86_64,aarch64");
}

bool is_va_intrinsic(const llvm::Instruction& i, llvm::Intrinsic::ID id) {
  const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
  return call && call->getIntrinsicID() == id;
}

bool uses_varargs(llvm::Module& m) {
  for (llvm::Function& f : m)
    for (llvm::Instruction& i : llvm::instructions(f))
      if (llvm::isa<llvm::VAArgInst>(i) || is_va_intrinsic(i, llvm::Intrinsic::vastart) ||
          is_va_intrinsic(i, llvm::Intrinsic::vacopy) || is_va_intrinsic(i, llvm::Intrinsic::vaend))
        return true;
  return false;
}

// F without its `...`: the same body, the buffer's address as a last parameter.
llvm::Function* fixed_copy(llvm::Function& f) {
  std::vector<llvm::Type*> params(f.getFunctionType()->param_begin(), f.getFunctionType()->param_end());
  params.push_back(llvm::PointerType::get(f.getContext(), 0));
  auto* type = llvm::FunctionType::get(f.getReturnType(), params, false);
  llvm::Function* nf = llvm::Function::Create(type, f.getLinkage(), f.getAddressSpace(), "", f.getParent());
  nf->copyAttributesFrom(&f);
  nf->copyMetadata(&f, 0);
  nf->takeName(&f);
  nf->splice(nf->begin(), &f);
  auto to = nf->arg_begin();
  for (llvm::Argument& a : f.args()) {
    a.replaceAllUsesWith(&*to);
    to->takeName(&a);
    ++to;
  }
  to->setName("varargs");
  return nf;
}

// The va intrinsics and va_arg of F's body, given the buffer address of F (null if F is not variadic).
Status lower_body(const std::string& what, llvm::Function& f, llvm::Value* buffer) {
  llvm::LLVMContext& ctx = f.getContext();
  llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
  std::vector<llvm::Instruction*> gone;
  for (llvm::Instruction& i : llvm::instructions(f)) {
    llvm::IRBuilder<> b(&i);
    if (auto* va = llvm::dyn_cast<llvm::VAArgInst>(&i)) {
      llvm::Type* t = va->getType();
      if (!fits_slot(t))
        return refuse(what, f, "reads a variadic argument of type " + type_name(t) + ", which does not fit the portable 8-byte slot");
      llvm::Value* list = va->getPointerOperand();
      llvm::Value* at = b.CreateAlignedLoad(ptr, list, kListAlign);
      llvm::Value* v = b.CreateAlignedLoad(t, at, llvm::Align(kSlot));
      b.CreateAlignedStore(b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), at, kSlot), list, kListAlign);
      va->replaceAllUsesWith(v);
      gone.push_back(va);
    } else if (is_va_intrinsic(i, llvm::Intrinsic::vastart)) {
      if (!buffer) return refuse(what, f, "calls va_start but is not variadic");
      b.CreateAlignedStore(buffer, llvm::cast<llvm::CallInst>(i).getArgOperand(0), kListAlign);
      gone.push_back(&i);
    } else if (is_va_intrinsic(i, llvm::Intrinsic::vacopy)) {
      auto& call = llvm::cast<llvm::CallInst>(i);
      b.CreateAlignedStore(b.CreateAlignedLoad(ptr, call.getArgOperand(1), kListAlign), call.getArgOperand(0), kListAlign);
      gone.push_back(&i);
    } else if (is_va_intrinsic(i, llvm::Intrinsic::vaend)) {
      gone.push_back(&i);
    }
  }
  for (llvm::Instruction* i : gone) i->eraseFromParent();
  return {};
}

// A call of the variadic OLD made a call of NF: its variadic arguments stored in a buffer on
// the caller's stack (allocated once, in its entry block).
Status rewrite_call(const std::string& what, llvm::CallInst& call, llvm::Function& old, llvm::Function& nf) {
  llvm::LLVMContext& ctx = call.getContext();
  llvm::Function& caller = *call.getFunction();
  const unsigned fixed = old.getFunctionType()->getNumParams(), extra = unsigned(call.arg_size()) - fixed;
  llvm::Value* buffer = llvm::ConstantPointerNull::get(llvm::PointerType::get(ctx, 0));
  if (extra > 0) {
    llvm::IRBuilder<> entry(&*caller.getEntryBlock().getFirstInsertionPt());
    llvm::AllocaInst* a = entry.CreateAlloca(llvm::ArrayType::get(entry.getInt8Ty(), extra * kSlot), nullptr, "varargs");
    a->setAlignment(llvm::Align(kSlot));
    buffer = a;
  }
  llvm::IRBuilder<> b(&call);
  for (unsigned k = 0; k < extra; ++k) {
    llvm::Value* v = call.getArgOperand(fixed + k);
    if (!fits_slot(v->getType()) || call.paramHasAttr(fixed + k, llvm::Attribute::ByVal))
      return refuse(what, caller, "passes '" + nf.getName().str() + "' a variadic argument of type " + type_name(v->getType()) +
                                      (call.paramHasAttr(fixed + k, llvm::Attribute::ByVal) ? " by value" : "") +
                                      ", which does not fit the portable 8-byte slot");
    b.CreateAlignedStore(v, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), buffer, k * kSlot), llvm::Align(kSlot));
  }
  std::vector<llvm::Value*> args(call.arg_begin(), call.arg_begin() + fixed);
  args.push_back(buffer);
  llvm::CallInst* n = b.CreateCall(&nf, args);
  n->setCallingConv(call.getCallingConv());
  n->setTailCallKind(llvm::CallInst::TCK_None);  // the callee reads the caller's stack
  const llvm::AttributeList attrs = call.getAttributes();
  std::vector<llvm::AttributeSet> params;
  for (unsigned k = 0; k < fixed; ++k) params.push_back(attrs.getParamAttrs(k));
  params.emplace_back();
  n->setAttributes(llvm::AttributeList::get(ctx, attrs.getFnAttrs(), attrs.getRetAttrs(), params));
  n->setDebugLoc(call.getDebugLoc());
  n->takeName(&call);
  call.replaceAllUsesWith(n);
  call.eraseFromParent();
  return {};
}

}  // namespace

Result<Bytes> portable_varargs(ByteView bitcode, const std::string& what) {
  llvm::LLVMContext ctx;
  auto mod = parse(bitcode, what, ctx);
  XC_TRY(mod);
  llvm::Module& m = **mod;
  if (!uses_varargs(m)) return Bytes(bitcode.begin(), bitcode.end());

  std::vector<llvm::Function*> variadic;
  for (llvm::Function& f : m)
    if (!f.isDeclaration() && f.isVarArg()) variadic.push_back(&f);
  std::map<llvm::Function*, llvm::Function*> fixed;  // old -> new
  for (llvm::Function* f : variadic) {
    if (std::string_view(f->getSection()) == abi::kEntrySection) return refuse(what, *f, "is an entry point and variadic");
    for (const llvm::User* u : f->users()) {
      const auto* call = llvm::dyn_cast<llvm::CallInst>(u);
      if (!call || call->getCalledOperand() != f)
        return refuse(what, *f, "is variadic and its address is taken (a call through a pointer to it could not be made portable)");
    }
    fixed[f] = fixed_copy(*f);
  }
  for (llvm::Function& f : m) {
    if (f.isDeclaration() || fixed.count(&f)) continue;  // the old ones are empty now
    llvm::Value* buffer = nullptr;
    for (const auto& [old, nf] : fixed)
      if (nf == &f) buffer = nf->getArg(nf->arg_size() - 1);
    XC_TRY(lower_body(what, f, buffer));
  }
  for (const auto& [old, nf] : fixed) {
    std::vector<llvm::CallInst*> calls;
    for (llvm::User* u : old->users()) calls.push_back(llvm::cast<llvm::CallInst>(u));
    for (llvm::CallInst* call : calls) XC_TRY(rewrite_call(what, *call, *old, *nf));
    old->eraseFromParent();
  }
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(m, &os))
    return Error(Errc::compile, what + ": the module with portable variadic arguments does not verify: " + os.str())
        .hint("this is a bug in xcargo build; build object variants meanwhile: -t x86_64,aarch64");
  return write(m);
}

Result<Bytes> strip_debug_info(ByteView bitcode, const std::string& what) {
  llvm::LLVMContext ctx;
  auto mod = parse(bitcode, what, ctx);
  XC_TRY(mod);
  llvm::StripDebugInfo(**mod);
  if (llvm::NamedMDNode* flags = (*mod)->getModuleFlagsMetadata()) {  // the module flags -g adds go too
    std::vector<llvm::MDNode*> keep;
    for (llvm::MDNode* flag : flags->operands()) {
      const auto* key = flag->getNumOperands() > 1 ? llvm::dyn_cast<llvm::MDString>(flag->getOperand(1)) : nullptr;
      if (!key || (key->getString() != "Dwarf Version" && key->getString() != "Debug Info Version")) keep.push_back(flag);
    }
    flags->clearOperands();
    for (llvm::MDNode* flag : keep) flags->addOperand(flag);
  }
  return write(**mod);
}

}  // namespace xcargo
