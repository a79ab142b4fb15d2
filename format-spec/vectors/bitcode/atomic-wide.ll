; A 16-byte atomic load: __atomic_load_16 (libatomic) on x86_64 without cmpxchg16b and on riscv64.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
@pair = internal global i128 0, align 16
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %v = load atomic i128, ptr @pair seq_cst, align 16
  %r = trunc i128 %v to i32
  ret i32 %r
}
