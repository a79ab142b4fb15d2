#!/usr/bin/env bash
# `xcargo run` without --to: a private local loader verifies, selects, links and runs.
# usage: run_local_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
source "$(dirname "$0")/lib.sh"
cd "$TMP"
"$X" keygen -o k >>"$DISCARD"
"$X" keygen -o other >>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k 2>>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o unsigned.xcargo 2>>"$DISCARD"
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key k -t x86_64 -t bitcode 2>>"$DISCARD"

expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --trust k.pub
expect 0 '^42$' -- "$X" run --entry add --arg i64:2 --arg i64:40 hello.xcargo --result i64 --trust k.pub  # the cargo after --arg
expect 0 'variant x86_64, pushed first' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --trust k.pub
expect 0 '^hello from node 0$' -- "$X" run hello.xcargo --entry greet --result str --trust k.pub --prefer bitcode
expect 0 'variant bitcode' -- "$X" run hello.xcargo --entry greet --trust k.pub --prefer bitcode
printf '\x05\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00' > in.bin
expect 0 '^12$' -- "$X" run hello.xcargo --entry add --input in.bin --result i64 --trust k.pub
expect 0 '' -- "$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --output out.bin --trust k.pub
check "--output writes the raw reply" test "$(od -An -tx1 out.bin | tr -d ' \n')" = 0300000000000000
"$X" run hello.xcargo --entry add --arg i64:20 --arg i64:22 --json --trust k.pub --result i64 > r.json 2>>"$DISCARD"
check "run --json says which variant ran" python3 -c "
import json; j=json.load(open('r.json')); assert j['ok'] and j['variant']=='x86_64' and j['value']==42, j"

# Refusals: verification and trust give exit 1, usage exit 2, failed runs exit 3.
expect 1 'refused the cargo: .*no signature by a trusted key' -- "$X" run hello.xcargo --entry add --trust other.pub
expect 1 'refused the cargo: .*not signed' -- "$X" run unsigned.xcargo --entry add --trust k.pub
python3 -c "
import sys; b=bytearray(open('hello.xcargo','rb').read()); b[-300]^=1; open('tampered.xcargo','wb').write(b)"
expect 1 'digest mismatch' -- "$X" run tampered.xcargo --entry add --trust k.pub
expect 2 'a local run needs --trust' -- "$X" run hello.xcargo --entry add
expect 2 'nokeys: no such file' -- "$X" run hello.xcargo --entry add --trust nokeys
expect 2 "--arg 'i64:x': 'x' is not a 64-bit integer" -- "$X" run hello.xcargo --entry add --arg i64:x --trust k.pub
expect 3 "no_entry: cargo hello has no entry 'nope'" -- "$X" run hello.xcargo --entry nope --trust k.pub
expect 3 'kernel_error: the kernel returned 1' -- "$X" run hello.xcargo --entry add --arg i64:1 --trust k.pub

# Kernels that crash or hang: a clear error soon after the limit (ceilings for a busy machine).
expect 3 'the kernel crashed: .*signal 11' -- "$X" run faults.xcargo --entry segfault --trust k.pub
expect 3 'the kernel crashed: .*signal 4' -- "$X" run faults.xcargo --entry trap --trust k.pub --prefer bitcode
"$X" build "$SRC/tests/kernels/adversary.c" -o adv.xcargo --key k -t x86_64 2>>"$DISCARD"
expect 3 'the sandbox stopped the kernel: it made a system call itself' -- "$X" run adv.xcargo --entry sys_execve --trust k.pub
expect 3 'the kernel crashed: .*signal 11' -- "$X" run adv.xcargo --entry wild_ctx --trust k.pub
start=$(date +%s%N)
expect 3 'ran past the time limit of 1 s' -- "$X" run faults.xcargo --entry spin --trust k.pub --timeout 1
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
check "a hanging kernel is stopped (took ${elapsed_ms} ms; ceiling: the limit plus 10 s)" test "$elapsed_ms" -lt 11000
expect 3 'reply_too_large' -- "$X" run faults.xcargo --entry huge_reply --trust k.pub
expect 0 '^fine$' -- "$X" run faults.xcargo --entry ok --result str --trust k.pub

finish
