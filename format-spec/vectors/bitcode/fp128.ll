; 128-bit floating point (aarch64's long double): software arithmetic (__addtf3) everywhere.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %x = sitofp i64 %n to double
  %q = fpext double %x to fp128
  %s = fadd fp128 %q, %q
  %d = fptrunc fp128 %s to double
  %r = fptosi double %d to i32
  ret i32 %r
}
