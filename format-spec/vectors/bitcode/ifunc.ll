; An ifunc, whose resolver would run while the cargo is linked.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
define internal ptr @resolve() {
  ret ptr @impl
}
define internal i32 @impl(ptr %c, ptr %in, i64 %n) {
  ret i32 0
}
@picked = ifunc i32 (ptr, ptr, i64), ptr @resolve
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %r = call i32 @picked(ptr %c, ptr %in, i64 %n)
  ret i32 %r
}
