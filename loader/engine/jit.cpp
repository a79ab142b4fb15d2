// LLVM ORC LLJIT with a JITLink object layer; per-cargo bare JITDylibs that see only the
// runtime's absolute symbols, so an import outside the allow-list cannot resolve.
#include "engine/jit.h"

#include <llvm/AsmParser/Parser.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/ExecutionEngine/JITLink/JITLinkMemoryManager.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ObjectLinkingLayer.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Operator.h>
#include <llvm/IR/Module.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include <unistd.h>

#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>

#include "exit_codes.h"
#include "engine/runtime.h"
#include "bitcode/rules.h"

namespace xcargo::loader {

namespace orc = llvm::orc;

namespace {

std::string message(llvm::Error e) { return llvm::toString(std::move(e)); }

llvm::StringRef as_ref(ByteView b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

}  // namespace

struct Jit::Impl {
  std::unique_ptr<orc::LLJIT> jit;
  orc::JITTargetMachineBuilder jtmb{llvm::Triple()};
  std::optional<llvm::DataLayout> layout;  // this host's: portable bitcode must lay out alike under it
  HostInfo host;
  std::mutex mu;  // LLJIT is thread-safe, but JITDylib creation by name must not race
  // The names linked, under mu: ExecutionSession::getJITDylibByName compares every dylib's
  // name: a fifth of a link's time with 190 cargos loaded, in a profile.
  std::unordered_set<std::string> names;
  // Target machines kept between compiles, by configuration (quick, fp_strict): a new one
  // builds its subtarget and lowering tables again on first use, 0.3 to 0.8 ms of a tiny
  // cargo's quick compile here. One compile uses one at a time (they are not thread-safe).
  std::mutex tm_mu;
  std::vector<std::unique_ptr<llvm::TargetMachine>> idle_tms[4];
};

Jit::Jit() : impl_(std::make_unique<Impl>()) {}
Jit::~Jit() {
  if (impl_ && impl_->jit) {
    if (auto err = impl_->jit->getExecutionSession().endSession()) llvm::consumeError(std::move(err));
  }
}

std::string Jit::llvm_version() { return LLVM_VERSION_STRING; }
const char* Jit::pipeline() { return "O2 loop+slp vectorize"; }

namespace {
void (*g_fatal)(const char*) = nullptr;
}  // namespace

void Jit::on_fatal_error(void (*handler)(const char* reason)) {
  g_fatal = handler;
  llvm::install_fatal_error_handler([](void*, const char* reason, bool) {
    g_fatal(reason);
    _exit(loader::exit_code::kLlvmFatal);
  });
}

const HostInfo& Jit::host() const { return impl_->host; }

Result<std::unique_ptr<Jit>> Jit::create() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::unique_ptr<Jit> j(new Jit());
  auto jtmb = orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return Error(Errc::unsupported, "cannot describe this host to LLVM: " + message(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Default);  // -O2
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  j->impl_->jtmb = *jtmb;
  auto layout = jtmb->getDefaultDataLayoutForTarget();
  if (!layout) return Error(Errc::unsupported, "cannot describe this host's data layout: " + message(layout.takeError()));
  j->impl_->layout = *layout;
  HostInfo& h = j->impl_->host;
  h.triple = jtmb->getTargetTriple().str();
  h.arch = jtmb->getTargetTriple().getArchName().str();
  h.cpu = jtmb->getCPU();
  for (const auto& f : jtmb->getFeatures().getFeatures())
    if (!f.empty() && f[0] == '+') h.features.insert(f.substr(1));

  auto jit = orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(*jtmb)
                 .setObjectLinkingLayerCreator([](orc::ExecutionSession& es, const llvm::Triple&) -> llvm::Expected<std::unique_ptr<orc::ObjectLayer>> {
                   auto mm = llvm::jitlink::InProcessMemoryManager::Create();
                   if (!mm) return mm.takeError();
                   return std::make_unique<orc::ObjectLinkingLayer>(es, std::move(*mm));
                 })
                 .create();
  if (!jit) return Error(Errc::unsupported, "cannot start the LLVM JIT: " + message(jit.takeError()));
  j->impl_->jit = std::move(*jit);
  return j;
}

namespace {

// --fp strict: what lets a compiler round differently from the source's operations goes.
void make_fp_strict(llvm::Module& m) {
  for (llvm::Function& f : m) {
    for (const char* a : {"unsafe-fp-math", "no-infs-fp-math", "no-nans-fp-math", "approx-func-fp-math",
                          "no-signed-zeros-fp-math"})
      f.removeFnAttr(a);
    for (llvm::Instruction& i : llvm::instructions(f))
      if (llvm::isa<llvm::FPMathOperator>(i)) i.copyFastMathFlags(llvm::FastMathFlags());
  }
}

// Whether the module defines a global a kernel can write: its quick tier's state would not
// carry over to the object that replaces it.
bool has_writable_global(const llvm::Module& m) {
  for (const llvm::GlobalVariable& g : m.globals())
    if (!g.isDeclaration() && !g.isConstant() && !g.getName().startswith("llvm."))  // llvm.used and the like: no data
      return true;
  return false;
}

// The passes and code generation of compile_module, on a target machine configured for them.
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> compile_with(llvm::Module& m, llvm::TargetMachine& tm, bool fp_strict, bool quick) {
  if (fp_strict) make_fp_strict(m);
  m.setTargetTriple(tm.getTargetTriple().str());
  m.setDataLayout(tm.createDataLayout());

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // clang's -O2 (Jit::pipeline). LLVM's PassBuilder leaves the SLP vectorizer out unless told;
  // without it the stencil of tests/bench/kernels kept its per-row overlap checks scalar where
  // clang -O2 -march=native compares four pointers at once.
  llvm::PipelineTuningOptions tuning;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  if (quick)  // the cargo's bitcode was optimised when it was built; only what code generation needs
    pb.buildO0DefaultPipeline(llvm::OptimizationLevel::O0).run(m, mam);
  else
    pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(m, mam);

  orc::SimpleCompiler compile(tm);
  return compile(m);
}

}  // namespace

Result<Bytes> Jit::compile_bitcode(ByteView bitcode, const std::string& what, bool fp_strict, bool allow_quick, bool* quick) const {
  llvm::LLVMContext ctx;
  auto mod = llvm::parseBitcodeFile(llvm::MemoryBufferRef(as_ref(bitcode), what), ctx);
  if (!mod) return Error(Errc::malformed, what + ": not readable LLVM bitcode: " + message(mod.takeError()));
  XC_TRY(bitcode::check_module(**mod, what));  // before any pass sees it
  XC_TRY(bitcode::check_layout(**mod, *impl_->layout, impl_->host.arch, what));
  const bool q = allow_quick && !has_writable_global(**mod);
  if (quick) *quick = q;
  return compile_module(**mod, what, fp_strict, q);
}

Result<Bytes> Jit::compile_module(llvm::Module& m, const std::string& what, bool fp_strict, bool quick) const {
  std::vector<std::unique_ptr<llvm::TargetMachine>>& idle = impl_->idle_tms[(quick ? 2 : 0) + (fp_strict ? 1 : 0)];
  std::unique_ptr<llvm::TargetMachine> tm;
  {
    std::lock_guard<std::mutex> lock(impl_->tm_mu);
    if (!idle.empty()) {
      tm = std::move(idle.back());
      idle.pop_back();
    }
  }
  if (!tm) {
    orc::JITTargetMachineBuilder jtmb = impl_->jtmb;
    if (quick) jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::None);
    if (fp_strict) jtmb.getOptions().AllowFPOpFusion = llvm::FPOpFusion::Strict;  // llvm.fmuladd: fmul, then fadd
    auto made = jtmb.createTargetMachine();
    if (!made) return Error(Errc::unsupported, what + ": no code generator for this host: " + message(made.takeError()));
    tm = std::move(*made);
  }
  auto obj = compile_with(m, *tm, fp_strict, quick);
  {
    std::lock_guard<std::mutex> lock(impl_->tm_mu);
    idle.push_back(std::move(tm));
  }
  if (!obj) return Error(Errc::compile, what + ": code generation failed: " + message(obj.takeError()));
  llvm::StringRef b = (*obj)->getBuffer();
  return Bytes(b.begin(), b.end());
}

namespace {

// The warm-up module: what a small cargo's bitcode holds (as `xcargo build` makes it from
// examples/hello/hello.c, and a float loop): integer and float arithmetic, a division, loops,
// a string constant copied with llvm.memcpy, lifetime markers and runtime calls. Its first
// compile pays for the instruction selection and emission paths such code takes.
constexpr const char* kWarmUpIR = R"(
target triple = "le64-unknown-unknown"
@prefix = internal unnamed_addr constant [17 x i8] c"hello from node \00", align 1
@llvm.compiler.used = appending global [3 x ptr] [ptr @sum, ptr @add, ptr @greet], section "llvm.metadata"
declare i32 @xc_reply(ptr, ptr, i64)
declare i32 @xc_node_id(ptr)
declare void @llvm.memcpy.p0.p0.i64(ptr noalias nocapture writeonly, ptr noalias nocapture readonly, i64, i1 immarg)
declare void @llvm.lifetime.start.p0(i64 immarg, ptr nocapture)
declare void @llvm.lifetime.end.p0(i64 immarg, ptr nocapture)
define i32 @sum(ptr %ctx, ptr %in, i64 %n) #0 section ".text.xc_entry" {
entry:
  %a = alloca double
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %s = phi double [0.0, %entry], [%s1, %loop]
  %p = getelementptr double, ptr %in, i64 %i
  %v = load double, ptr %p
  %m = fmul double %v, 3.0
  %s1 = fadd double %s, %m
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %done
done:
  store double %s1, ptr %a
  %r = call i32 @xc_reply(ptr %ctx, ptr %a, i64 8)
  ret i32 %r
}
define i32 @add(ptr noundef %ctx, ptr nocapture noundef readonly %in, i64 noundef %n) #0 section ".text.xc_entry" {
entry:
  %out = alloca i64, align 8
  %ok = icmp eq i64 %n, 16
  br i1 %ok, label %run, label %done
run:
  %x = load i64, ptr %in, align 1
  %py = getelementptr inbounds i8, ptr %in, i64 8
  %y = load i64, ptr %py, align 1
  call void @llvm.lifetime.start.p0(i64 8, ptr nonnull %out)
  %z = add nsw i64 %y, %x
  store i64 %z, ptr %out, align 8
  %r = call i32 @xc_reply(ptr noundef %ctx, ptr noundef nonnull %out, i64 noundef 8)
  call void @llvm.lifetime.end.p0(i64 8, ptr nonnull %out)
  br label %done
done:
  %ret = phi i32 [ %r, %run ], [ 1, %entry ]
  ret i32 %ret
}
define i32 @greet(ptr noundef %ctx, ptr nocapture readnone %in, i64 %n) #0 section ".text.xc_entry" {
entry:
  %buf = alloca [64 x i8], align 1
  %digits = alloca [10 x i8], align 1
  call void @llvm.lifetime.start.p0(i64 64, ptr nonnull %buf)
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 1 dereferenceable(16) %buf, ptr noundef nonnull align 1 dereferenceable(16) @prefix, i64 16, i1 false)
  %id = tail call i32 @xc_node_id(ptr noundef %ctx)
  call void @llvm.lifetime.start.p0(i64 10, ptr nonnull %digits)
  br label %split
split:
  %k = phi i64 [ %k1, %split ], [ 1, %entry ]
  %j = phi i64 [ %j1, %split ], [ 0, %entry ]
  %v = phi i32 [ %q, %split ], [ %id, %entry ]
  %f = freeze i32 %v
  %q = udiv i32 %f, 10
  %t = mul i32 %q, 10
  %d = sub i32 %f, %t
  %c8 = trunc i32 %d to i8
  %ch = or i8 %c8, 48
  %j1 = add nuw nsw i64 %j, 1
  %pd = getelementptr inbounds [10 x i8], ptr %digits, i64 0, i64 %j
  store i8 %ch, ptr %pd, align 1
  %more = icmp ugt i32 %v, 9
  %room = icmp ult i64 %j, 9
  %go = select i1 %more, i1 %room, i1 false
  %k1 = add nuw nsw i64 %k, 1
  br i1 %go, label %split, label %copy
copy:
  %w = phi i64 [ %w1, %copy ], [ %k1, %split ]
  %at = phi i64 [ %at1, %copy ], [ 16, %split ]
  %w1 = add nsw i64 %w, -1
  %ps = getelementptr inbounds [10 x i8], ptr %digits, i64 0, i64 %w1
  %b = load i8, ptr %ps, align 1
  %at1 = add nuw nsw i64 %at, 1
  %pb = getelementptr inbounds [64 x i8], ptr %buf, i64 0, i64 %at
  store i8 %b, ptr %pb, align 1
  %last = icmp eq i64 %w1, 0
  br i1 %last, label %reply, label %copy
reply:
  %r = call i32 @xc_reply(ptr noundef %ctx, ptr noundef nonnull %buf, i64 noundef %at1)
  call void @llvm.lifetime.end.p0(i64 10, ptr nonnull %digits)
  call void @llvm.lifetime.end.p0(i64 64, ptr nonnull %buf)
  ret i32 %r
}
attributes #0 = { nounwind "frame-pointer"="all" "no-builtins" "no-trapping-math"="true" }
)";

}  // namespace

const std::vector<std::string>& Jit::warm_up_entries() {
  static const std::vector<std::string> entries = {"sum", "add", "greet"};
  return entries;
}

Result<Bytes> Jit::warm_up() const {
  // Through bitcode, as a cargo's variant comes: the reader's first use is paid too.
  std::string bitcode;
  {
    llvm::LLVMContext ctx;
    llvm::SMDiagnostic diag;
    auto m = llvm::parseAssemblyString(kWarmUpIR, diag, ctx);
    if (!m) return Error(Errc::compile, "the JIT's warm-up module does not parse: " + diag.getMessage().str());
    llvm::raw_string_ostream os(bitcode);
    llvm::WriteBitcodeToFile(*m, os);
  }
  const ByteView b(reinterpret_cast<const uint8_t*>(bitcode.data()), bitcode.size());
  if (auto quick = compile_bitcode(b, "warm-up", false, true); !quick.ok()) return quick;  // both tiers' first-use costs
  return compile_bitcode(b, "warm-up", false, false);
}

Result<std::vector<std::string>> Jit::undefined_symbols(ByteView object, const std::string& what) const {
  auto obj = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(as_ref(object), what));
  if (!obj) return Error(Errc::malformed, what + ": not a readable object: " + message(obj.takeError()));
  std::vector<std::string> out;
  for (const auto& sym : (*obj)->symbols()) {
    auto flags = sym.getFlags();
    if (!flags) return Error(Errc::malformed, what + ": unreadable symbol table: " + message(flags.takeError()));
    if (!(*flags & llvm::object::SymbolRef::SF_Undefined)) continue;
    auto name = sym.getName();
    if (!name) return Error(Errc::malformed, what + ": unreadable symbol name: " + message(name.takeError()));
    if (!name->empty() && *name != "_GLOBAL_OFFSET_TABLE_") out.push_back(name->str());
  }
  return out;
}

Result<std::vector<void*>> Jit::link(ByteView object, const std::string& name, const std::vector<std::string>& symbols) {
  orc::LLJIT& jit = *impl_->jit;
  orc::ExecutionSession& es = jit.getExecutionSession();
  orc::JITDylib* jd = nullptr;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (!impl_->names.insert(name).second) return Error(Errc::invalid_argument, name + ": already linked");
    jd = &es.createBareJITDylib(name);
  }
  orc::SymbolMap runtime;
  for (const auto& s : runtime_symbols())
    runtime[es.intern(s.name)] = llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(s.address),
                                                          llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  auto fail = [&](Errc code, std::string msg) -> Error {
    if (auto err = es.removeJITDylib(*jd)) llvm::consumeError(std::move(err));
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->names.erase(name);
    return Error(code, std::move(msg));
  };
  if (auto err = jd->define(orc::absoluteSymbols(std::move(runtime))))
    return fail(Errc::compile, name + ": " + message(std::move(err)));
  if (auto err = jit.addObjectFile(*jd, llvm::MemoryBuffer::getMemBufferCopy(as_ref(object), name)))
    return fail(Errc::malformed, name + ": cannot add the object: " + message(std::move(err)));
  // One lookup for every entry: each lookup is a session query of its own.
  orc::SymbolLookupSet wanted;
  for (const auto& s : symbols) wanted.add(jit.mangleAndIntern(s));
  auto found = es.lookup(orc::makeJITDylibSearchOrder(jd, orc::JITDylibLookupFlags::MatchAllSymbols), std::move(wanted));
  if (!found) return fail(Errc::import, name + ": cannot link: " + message(found.takeError()));
  std::vector<void*> addrs;
  for (const auto& s : symbols) {
    auto it = found->find(jit.mangleAndIntern(s));
    if (it == found->end()) return fail(Errc::import, name + ": cannot link '" + s + "': not defined");
    addrs.push_back(llvm::jitTargetAddressToPointer<void*>(it->second.getAddress()));
  }
  return addrs;
}

}  // namespace xcargo::loader
