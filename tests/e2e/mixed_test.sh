#!/usr/bin/env bash
# A mixed cluster: x86-64 loaders beside an aarch64 loader (cross-built, run under
# qemu-user) over tcp. One signed cargo gives the same answers on both architectures, from
# native objects and from bitcode; computations forward themselves across architectures in
# both directions; the pointer chase ends where it ends on one architecture; a cargo without
# code for aarch64 is refused there with a message that says what it has and what is needed.
# usage: mixed_test.sh XCARGO SOURCE_DIR AARCH64_BIN TLS   (AARCH64_BIN: scripts/build-aarch64's
# DIR/bin; TLS: tcp or shm, as scripts/cluster takes it)
X=$1
SRC=$2
A64=$3
TLS=${4:-tcp}
BIN=$(dirname "$X")
source "$(dirname "$0")/lib.sh"
in_cluster_dir
if [ ! -x "$A64/xcargo-loader-qemu" ]; then
  echo "FAIL: no aarch64 loader in $A64"
  echo "hint: scripts/build-aarch64 builds it (scripts/test does)"
  exit 1
fi

expect 0 "3 loaders up over $TLS \\(node 0: x86_64, node 1: aarch64, node 2: x86_64\\)" -- \
  "$SRC/scripts/cluster" up --arch x86_64,aarch64,x86_64 --tls "$TLS" --bin "$BIN" --bin-aarch64 "$A64" -- --timeout 30
source "$XCARGO_CLUSTER_DIR/env"
C=$XCARGO_CLUSTER_DIR/cluster.yaml
KEY=$XCARGO_CLUSTER_DIR/signer.key
LOG=$XCARGO_CLUSTER_DIR
diagnose "$LOG/node-0.log" "$LOG/node-1.log" "$LOG/node-2.log"
addr() { grep address "$C" | sed -n "$(($1 + 1))p" | awk '{print $2}'; }
if [ "$TLS" = shm ]; then  # UCX between an x86-64 process and one under qemu-aarch64: shared memory works
  UCX_LOG_LEVEL=info "$X" ls --to "$(addr 1)" > ucx-info.out 2>&1
  check "a client talks to the aarch64 node through shared memory" grep -Eq 'am\((sysv|posix)/memory' ucx-info.out
fi
"$X" build "$SRC/tests/kernels/numeric.c" -o numeric.xcargo --key "$KEY" 2> build.err || cat build.err
"$X" build "$SRC/tests/kernels/numeric.c" -o numeric-bc.xcargo -t bitcode --name numeric-bc --key "$KEY" 2> build.err || cat build.err
"$X" build "$SRC/tests/kernels/numeric.c" -o numeric-x86.xcargo -t x86_64 --name numeric-x86 --key "$KEY" 2> build.err || cat build.err
"$X" build "$SRC/tests/kernels/hops.c" -o hops.xcargo --key "$KEY" 2> build.err || cat build.err

# The same answers: each node's native object, then bitcode JIT-compiled by each node.
run_on() { "$X" run "$1" --entry "$2" --arg u32:"$3" --result u64 --cluster "$C" --node "$4" 2> "run-$4.err"; }
x86=$(run_on numeric.xcargo mix 500 0)
arm=$(run_on numeric.xcargo mix 500 1)
check "the x86-64 node ran its x86_64 object" grep -q 'variant x86_64' run-0.err
check "the aarch64 node ran its aarch64 object" grep -q 'variant aarch64' run-1.err
check "x86_64 and aarch64 objects agree ($x86 / $arm)" test -n "$x86" -a "$x86" = "$arm"
x86_bc=$(run_on numeric-bc.xcargo mix 500 0)
arm_bc=$(run_on numeric-bc.xcargo mix 500 1)
check "the aarch64 node JIT-compiled bitcode for aarch64" grep -q 'accepted push: numeric-bc .* variant bitcode, jit compiled' "$LOG/node-1.log"
check "bitcode gives the same answer on both ($x86_bc / $arm_bc)" test "$x86_bc" = "$x86" -a "$arm_bc" = "$x86"
expect 0 'numeric-bc +0\.1\.0 +bitcode' -- "$X" ls --to "$(addr 1)"
expect 0 'node 127\.0\.0\.1:[0-9]+: aarch64 \(aarch64-unknown-linux-gnu\), JIT for cpu [a-z0-9_.-]+; runs native objects first' -- "$X" ls --to "$(addr 1)"
expect 0 'numeric +0\.1\.0 +aarch64 ' -- "$X" ls --to "$(addr 1)"
expect 0 'node 127\.0\.0\.1:[0-9]+: x86_64 \(x86_64-' -- "$X" ls --to "$(addr 0)"
expect 0 '"arch": "aarch64"' -- "$X" ls --to "$(addr 1)" --json

# Floating point. Built with --fp strict, every variant rounds each operation alike: the
# same bits from the x86_64 and aarch64 objects and from bitcode JIT-compiled on either node,
# even bitcode that asks for fused multiply-adds (made by a tool: xcargo build refuses it).
"$X" build "$SRC/tests/kernels/numeric.c" -o strict.xcargo --fp strict --name strict --key "$KEY" 2> build.err || cat build.err
"$X" build "$SRC/tests/kernels/numeric.c" -o strict-bc.xcargo -t bitcode --fp strict --name strict-bc --key "$KEY" 2> build.err || cat build.err
"$BIN/xcargo-hostile-bitcode" fused.xcargo "$KEY" fmuladd-strict
fp_x86=$(run_on strict.xcargo horner 1000 0)
fp_arm=$(run_on strict.xcargo horner 1000 1)
fp_bc0=$(run_on strict-bc.xcargo horner 1000 0)
fp_bc1=$(run_on strict-bc.xcargo horner 1000 1)
fp_fused0=$("$X" run fused.xcargo --entry run --result u64 --cluster "$C" --node 0 2> fused.err)
fp_fused1=$("$X" run fused.xcargo --entry run --result u64 --cluster "$C" --node 1 2>> fused.err)
check "--fp strict: bit-identical everywhere (x86_64 $fp_x86, aarch64 $fp_arm, JIT $fp_bc0 / $fp_bc1, fused bitcode $fp_fused0 / $fp_fused1)" \
  test -n "$fp_x86" -a "$fp_arm" = "$fp_x86" -a "$fp_bc0" = "$fp_x86" -a "$fp_bc1" = "$fp_x86" -a "$fp_fused0" = "$fp_x86" -a "$fp_fused1" = "$fp_x86"
expect 2 '--fp strict: horner: llvm.fmuladd .* would let variants round differently' -- \
  "$X" build "$SRC/tests/kernels/numeric.c" -o pragma.xcargo --fp strict -DNUMERIC_CONTRACT
expect 0 'fp +strict' -- "$X" inspect strict.xcargo
# Without it a compiler may fuse a*b+c where the target has an FMA (aarch64 always; JIT for an
# x86-64 CPU with FMA), so results may differ in the last bits: shown, not asserted.
echo "default floating point, horner(1000): x86_64 object $(run_on numeric.xcargo horner 1000 0)," \
  "aarch64 object $(run_on numeric.xcargo horner 1000 1), JIT here $(run_on numeric-bc.xcargo horner 1000 0)"

# Variadic functions (a printf-style formatter, va_copy, a va_list passed on): the same reply
# from the aarch64 object, the aarch64 JIT and the x86-64 JIT.
"$X" build "$SRC/tests/kernels/varargs.c" -o varargs.xcargo --key "$KEY" 2> build.err || cat build.err
"$X" build "$SRC/tests/kernels/varargs.c" -o varargs-bc.xcargo -t bitcode --name varargs-bc --key "$KEY" 2> build.err || cat build.err
VARARGS='^-42\|-1234567890123\|4000000000\|beef\|Z\|str\|3\.250\|%\|642$'
expect 0 "$VARARGS" -- "$X" run varargs.xcargo --entry run --result str --cluster "$C" --node 1
expect 0 "$VARARGS" -- "$X" run varargs-bc.xcargo --entry run --result str --cluster "$C" --node 1
expect 0 "$VARARGS" -- "$X" run varargs-bc.xcargo --entry run --result str --cluster "$C" --node 0

# C as real programs write it (structs and unions by value, bit-fields, a jump table, function
# pointers, recursion, packed data, 64-bit arithmetic): one reply from every variant.
"$X" build "$SRC/tests/kernels/portable.c" -o portable.xcargo --key "$KEY" 2> build.err || cat build.err
"$X" build "$SRC/tests/kernels/portable.c" -o portable-bc.xcargo -t bitcode --name portable-bc --key "$KEY" 2> build.err || cat build.err
for v in "portable.xcargo 0" "portable.xcargo 1" "portable-bc.xcargo 0" "portable-bc.xcargo 1"; do
  read -r cargo node <<<"$v"
  "$X" run "$cargo" --entry run --result str --cluster "$C" --node "$node" > "portable-$cargo-$node.out" 2>> portable.err
done
check "portable.c: the x86_64 object, the aarch64 object and the JIT on both give one reply" bash -c \
  "grep -q 'recursion 9 46368' portable-portable.xcargo-0.out && for f in portable-*.out; do cmp -s \"\$f\" portable-portable.xcargo-0.out || exit 1; done" ||
  { for f in portable-*.out; do  # what each run said that node 0's object did not, and which variant ran
      diff portable-portable.xcargo-0.out "$f" | sed "s/^/    $f: /"
    done
    grep 'ran on' portable.err | sed 's/^/    /'; }

# Forwarding across architectures: 0 (x86-64) -> 1 (aarch64) -> 2 (x86-64), and from 1.
expect 0 '^012$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 0
check "the cargo followed itself to the aarch64 node, verified there" \
  grep -q 'accepted forwarded cargo: hops .* variant aarch64 from node 0' "$LOG/node-1.log"
check "and on to an x86-64 node" grep -q 'accepted forwarded cargo: hops .* variant x86_64 from node 1' "$LOG/node-2.log"
expect 0 '^120$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 1
"$X" run hops.xcargo --entry tour_arch --result str --cluster "$C" --node 0 > arch.out 2> arch.err
check "each node ran its own architecture's object: $(tr '\n' ';' < arch.out)" \
  test "$(cat arch.out)" = "$(printf 'node 0: x86_64 object\nnode 1: aarch64 object\nnode 2: x86_64 object')"
expect 0 '^201$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 2

# The pointer chase over the mixed cluster ends where the client's own reads end.
"$X" build "$SRC/examples/pointer-chase/setup.c" -o setup.xcargo --key "$KEY" 2> build.err || cat build.err
"$X" build "$SRC/examples/pointer-chase/walk.c" -o walk.xcargo --key "$KEY" 2> build.err || cat build.err
summary() { sed -E 's/.*"last": ([0-9]+), "elements": ([0-9]+), "checksum": ([0-9]+).*/\1 \2 \3/'; }
xrdma=$("$BIN/xcargo-chase" run --cluster "$C" --mode xrdma --length 600 --seed 7 --setup setup.xcargo --walk walk.xcargo --repeat 1 2> chase.err | summary)
get=$("$BIN/xcargo-chase" run --cluster "$C" --mode get --length 600 --seed 7 --repeat 1 2>> chase.err | summary)
check "the walk visits all 600 elements ($xrdma)" test "$(echo "$xrdma" | awk '{print $2}')" = 600
check "the walk ends where the client's reads end ($xrdma / $get)" test "$xrdma" = "$get"
check "the walk ran on the aarch64 node too" grep -q 'accepted forward: .*/walk.* -> ' "$LOG/node-1.log"

# No variant for aarch64 and no bitcode: refused, saying what the cargo has and the node needs.
expect 1 'no variant runs on this node \(aarch64-unknown-linux-gnu.*\); the cargo has x86_64 \(x86_64-unknown-linux-gnu\)' -- \
  "$X" run numeric-x86.xcargo --entry mix --cluster "$C" --node 1
expect 0 "^$x86\$" -- "$X" run numeric-x86.xcargo --entry mix --arg u32:500 --result u64 --cluster "$C" --node 0

expect 0 'stopped 3 loaders' -- "$SRC/scripts/cluster" down
finish
