; Module-level assembly defining a symbol.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
module asm ".globl planted"
module asm "planted: ret"
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  ret i32 0
}
