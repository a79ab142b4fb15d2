#!/usr/bin/env bash
# Porting existing C and C++: the standard headers kernels may include work and give the right
# answers on every variant; what kernels lack is refused at build time, every symbol at once,
# demangled, with what to use instead.
# usage: port_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
K=$SRC/tests/kernels/port
source "$(dirname "$0")/lib.sh"
cd "$TMP"
"$X" keygen -o k > keygen.out 2>&1

expect 0 'wrote port.xcargo' -- "$X" build "$K/port.c" -o port.xcargo --key k
expect 0 'wrote cxx.xcargo' -- "$X" build "$K/port.cc" -o cxx.xcargo --key k
for prefer in native bitcode; do
  expect 0 '^5125$' -- "$X" run port.xcargo --entry mix --arg str:zebra --result i64 --trust k.pub --prefer $prefer
  expect 0 '^4925$' -- "$X" run port.xcargo --entry mix --arg str:apple --result i64 --trust k.pub --prefer $prefer
  expect 0 '^16$' -- "$X" run port.xcargo --entry geometry --result f64 --trust k.pub --prefer $prefer
  expect 0 '^9.5$' -- "$X" run cxx.xcargo --entry cxx --result f64 --trust k.pub --prefer $prefer
done

# What kernels lack: the compiler stops at the line, saying what to use.
expect 2 "malloc.c:5:.*'malloc' is unavailable: kernels allocate with xc_alloc" -- "$X" build "$K/malloc.c" -o m.xcargo
expect 2 "printf.c:5:.*'printf' is unavailable: .*xc_log" -- "$X" build "$K/printf.c" -o p.xcargo
# Imports outside the API: all of them in one message, as the source names them.
expect 2 "imports 'operator delete\[\]\(void\*\)' \(_ZdaPv\), 'operator new\[\]\(unsigned long\)' \(_Znam\) and 'puts', which no xcargo loader provides" \
  -- "$X" build "$K/hosted.cc" -o h.xcargo -t x86_64
expect 2 'hint: xc_alloc\(ctx, n\) allocates memory' -- "$X" build "$K/hosted.cc" -o h.xcargo -t x86_64
expect 2 'hint: xc_log\(ctx, msg\)' -- "$X" build "$K/hosted.cc" -o h.xcargo -t x86_64
check "a refused build leaves no cargo" test ! -e h.xcargo
finish
