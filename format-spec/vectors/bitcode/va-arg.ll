; A function reading its variadic arguments through le64's 16-byte va_list: retargeted,
; va_start writes x86_64's 24 bytes (aarch64's 32) into it.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
declare void @llvm.va_start(ptr)
declare void @llvm.va_end(ptr)
define internal i32 @sum(i32 %n, ...) {
  %ap = alloca [4 x i32], align 4
  call void @llvm.va_start(ptr %ap)
  %v = va_arg ptr %ap, i32
  call void @llvm.va_end(ptr %ap)
  ret i32 %v
}
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %r = call i32 (i32, ...) @sum(i32 1, i32 42)
  ret i32 %r
}
