; Dividing __int128: x86_64, aarch64 and riscv64 call __divti3, which no loader provides.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %w = zext i64 %n to i128
  %big = shl i128 %w, 70
  %q = sdiv i128 %big, 3
  %r = trunc i128 %q to i32
  ret i32 %r
}
