; A value used before it is defined: the IR verifier rejects it.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %a = add i32 %b, 1
  %b = add i32 %a, 1
  ret i32 0
}
