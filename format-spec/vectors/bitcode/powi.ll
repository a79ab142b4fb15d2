; llvm.powi (__builtin_powi): __powidf2 on every CPU, which no loader provides.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
declare double @llvm.powi.f64.i32(double, i32)
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %e = trunc i64 %n to i32
  %p = call double @llvm.powi.f64.i32(double 1.5, i32 %e)
  %r = fptosi double %p to i32
  ret i32 %r
}
