; Within the portable subset: an entry that sums its input's bytes into a reply.
target datalayout = "e-m:e-v128:32-v16:16-v32:32-v96:32-n8:16:32:64-S128"
target triple = "le64-unknown-unknown"
declare i32 @xc_reply(ptr, ptr, i64)
define i32 @run(ptr %c, ptr %in, i64 %n) section ".text.xc_entry" {
entry:
  %slot = alloca i64, align 8
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %body]
  %s = phi i64 [0, %entry], [%s1, %body]
  %more = icmp ult i64 %i, %n
  br i1 %more, label %body, label %done
body:
  %p = getelementptr i8, ptr %in, i64 %i
  %b = load i8, ptr %p, align 1
  %w = zext i8 %b to i64
  %s1 = add i64 %s, %w
  %i1 = add i64 %i, 1
  br label %loop
done:
  store i64 %s, ptr %slot, align 8
  %r = call i32 @xc_reply(ptr %c, ptr %slot, i64 8)
  ret i32 %r
}
