; A system call in inline assembly.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
  %r = call i64 asm sideeffect "syscall", "={rax},{rax},~{rcx},~{r11},~{memory}"(i64 39)
  ret i32 0
}
