; A struct whose vector member le64 puts at offset 4 (vectors aligned to 4) and every CPU at 16.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
%s = type { i8, <4 x float> }
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %p = alloca %s, align 16
  %f = getelementptr %s, ptr %p, i32 0, i32 1
  store <4 x float> zeroinitializer, ptr %f, align 16
  ret i32 0
}
