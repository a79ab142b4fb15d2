// xcargo-hostile-bitcode: writes a signed, bitcode-only cargo whose bitcode a loader must
// refuse without harm, which `xcargo build` would not make (it refuses the first two, and
// clang the third). Also leaves the LLVM IR beside it as OUT.ll.
//   inline-asm  a `syscall` instruction in inline assembly
//   module-asm  module-level assembly
//   invalid-ir  a module the IR verifier rejects (a value used before it is defined)
//   va-arg      a function reading its variadic arguments (va_start, va_arg: the le64 va_list
//               is not the CPU's), which `xcargo build` refuses for bitcode
//   layout      a struct whose vector member le64's data layout puts at offset 4 (vectors
//               aligned to 4) and every CPU at 16: retargeted, the code would move
//   fatal       valid IR that makes LLVM's code generator stop the process (an aarch64
//               intrinsic, which x86-64 instruction selection cannot select)
//   fmuladd-strict  not hostile: a manifest saying `fp: strict` over bitcode that asks for
//               fused multiply-adds (llvm.fmuladd, `contract` flags), which `xcargo build
//               --fp strict` refuses to make; loaders must still round each operation. `run`
//               is numeric.c's horner for n = 1000 and replies with the result's bits.
// usage: xcargo-hostile-bitcode OUT.xcargo KEY KIND
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "xcargo/file.h"
#include "build/keys.h"
#include "build/writer.h"

using namespace xcargo;

namespace {

const std::string kEntry = "define i32 @run(ptr %c, ptr %i, i64 %n) section \".text.xc_entry\" {\n";

const std::map<std::string, std::string> kIr = {
    {"inline-asm", kEntry + "  %r = call i64 asm sideeffect \"syscall\", \"={rax},{rax},~{rcx},~{r11},~{memory}\"(i64 39)\n"
                            "  ret i32 0\n}\n"},
    {"module-asm", "module asm \".globl xcargo_planted\"\nmodule asm \"xcargo_planted: ret\"\n" + kEntry + "  ret i32 0\n}\n"},
    {"invalid-ir", kEntry + "  %a = add i32 %b, 1\n  %b = add i32 %a, 1\n  ret i32 0\n}\n"},
    {"va-arg", "declare void @llvm.va_start(ptr)\ndeclare void @llvm.va_end(ptr)\n"
               "define internal i32 @sum(i32 %n, ...) {\n  %ap = alloca [4 x i32], align 4\n"
               "  call void @llvm.va_start(ptr %ap)\n  %v = va_arg ptr %ap, i32\n  call void @llvm.va_end(ptr %ap)\n"
               "  ret i32 %v\n}\n" + kEntry + "  %r = call i32 (i32, ...) @sum(i32 1, i32 42)\n  ret i32 %r\n}\n"},
    {"layout", "target datalayout = \"e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128\"\n"
               "%s = type { i8, <4 x float> }\n" + kEntry +
               "  %p = alloca %s, align 16\n  %f = getelementptr %s, ptr %p, i32 0, i32 1\n"
               "  store <4 x float> zeroinitializer, ptr %f, align 16\n  ret i32 0\n}\n"},
    {"fatal", "declare i32 @llvm.aarch64.sdiv.i32(i32, i32)\n" + kEntry +
                  "  %t = trunc i64 %n to i32\n  %r = call i32 @llvm.aarch64.sdiv.i32(i32 %t, i32 3)\n  ret i32 %r\n}\n"},
    {"fmuladd-strict",
     "declare double @llvm.fmuladd.f64(double, double, double)\n"
     "declare i32 @xc_reply(ptr, ptr, i64)\n" + kEntry +
         "entry:\n  %slot = alloca i64\n  br label %loop\n"
         "loop:\n  %k = phi i32 [0, %entry], [%k1, %loop]\n"
         "  %x = phi double [0x3FB999999999999A, %entry], [%x1, %loop]\n"   // 0.1
         "  %a = phi double [0x3FF000001AD7F29B, %entry], [%a1, %loop]\n"   // 1.0000001
         "  %x1 = call double @llvm.fmuladd.f64(double %x, double %a, double 0x3F50624DD2F1A9FC)\n"  // 1e-3
         "  %am = fmul contract double %a, 0x3FEFFFFFCA501ACB\n"            // 0.9999999
         "  %a1 = fadd contract double %am, 0x3E112E0BE826D695\n"           // 1e-9
         "  %k1 = add i32 %k, 1\n  %done = icmp eq i32 %k1, 1000\n  br i1 %done, label %exit, label %loop\n"
         "exit:\n  %bits = bitcast double %x1 to i64\n  store i64 %bits, ptr %slot\n"
         "  %r = call i32 @xc_reply(ptr %c, ptr %slot, i64 8)\n  ret i32 %r\n}\n"},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || !kIr.count(argv[3])) {
    std::fprintf(stderr, "usage: xcargo-hostile-bitcode OUT.xcargo KEY inline-asm|module-asm|invalid-ir|va-arg|layout|fatal|fmuladd-strict\n");
    return 2;
  }
  const std::string out = argv[1], ll = out + ".ll", bc = out + ".bc";
  std::ofstream(ll) << kIr.at(argv[3]);
  const std::string cmd = std::string(XCARGO_LLVM_BIN_DIR) + "/llvm-as -disable-verify " + ll + " -o " + bc;
  if (std::system(cmd.c_str()) != 0) return 1;
  auto bytes = read_file(bc, 1 << 20);
  auto key = SigningKey::load(argv[2]);
  if (!bytes.ok() || !key.ok()) return std::fprintf(stderr, "cannot read the bitcode or the key\n"), 1;
  Manifest m;
  m.name = std::string("hostile-") + argv[3];
  m.version = "1";
  m.entries = {"run"};
  const bool strict = std::string(argv[3]) == "fmuladd-strict";
  if (strict) m.fp = "strict";
  Payload p{{"bitcode", VariantKind::bitcode, 0, "le64-unknown-unknown", "generic", 0, {}, {{"run", "run"}},
             strict ? std::vector<std::string>{"xc_reply"} : std::vector<std::string>{}},
            *bytes};
  auto cargo = write_cargo(m, {p});
  if (!cargo.ok()) return std::fprintf(stderr, "%s\n", cargo.error().message().c_str()), 1;
  auto signed_cargo = sign_cargo(*cargo, *key);
  if (!signed_cargo.ok()) return std::fprintf(stderr, "%s\n", signed_cargo.error().message().c_str()), 1;
  return write_file(out, *signed_cargo).ok() ? 0 : 1;
}
