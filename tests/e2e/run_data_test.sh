#!/usr/bin/env bash
# Real data in and out of `xcargo run` (issue 48): two float arrays from files
# (--arg f32[]:FILE), a scalar before them, several --input files, read by a kernel with
# <xcargo/input.h>; --json values as JSON numbers and arrays, checked with Python's json.
# Embedded (no --to), through a loader's same-host door, and over its TLS front door.
# usage: run_data_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
BIN=$(dirname "$X")
LOADER=$BIN/xcargo-loader
source "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
PY=/usr/bin/python3

mkdir trust clients
"$X" keygen -o k >>"$DISCARD" && cp k.pub trust/
"$X" keygen -o me >>"$DISCARD" && cp me.pub clients/
"$X" keygen -o node >>"$DISCARD"
export XCARGO_IDENTITY=$TMP/me XCARGO_KNOWN_NODES=$TMP/known_nodes
"$X" build "$SRC/tests/kernels/dot.c" -o dot.xcargo --key k 2>>"$DISCARD"
"$X" build "$SRC/tests/kernels/numeric.c" -o numeric.xcargo --key k 2>>"$DISCARD"

# a = 1..1000, b = 0.5 each: a.b = 250250; values a float holds exactly, on every variant.
"$PY" - <<'PY'
import struct
n = 1000
open("a.f32", "wb").write(struct.pack(f"<{n}f", *range(1, n + 1)))
open("b.f32", "wb").write(struct.pack(f"<{n}f", *[0.5] * n))
open("short.f32", "wb").write(struct.pack("<3f", 1, 2, 3))
open("odd.f32", "wb").write(b"\0" * 4001)
PY

"$LOADER" --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --ready-file node.addr --trust trust --clients clients \
  --node-key node 2> node.log &
pids+=($!)
disown $!
wait_file node.addr || echo "FAIL: the loader did not start: $(tail -3 node.log)"
diagnose node.log
DOOR=$(sed -n 1p node.addr)
TLS=$(sed -n 2p node.addr)
"$X" known-nodes add "${TLS#tls://}" node.pub >>"$DISCARD" 2>&1

# Each way to run: its options.
ways=("--trust k.pub" "--to $DOOR" "--to $TLS")
for way in "${ways[@]}"; do
  # shellcheck disable=SC2086  # $way is two words on purpose
  {
    expect 0 '^250250$' -- "$X" run dot.xcargo --entry dot --arg 'f32[]:a.f32' --arg 'f32[]:b.f32' --result f64 $way
    "$X" run dot.xcargo --entry dot --arg 'f32[]:a.f32' --arg 'f32[]:b.f32' --result f64 --json $way > dot.json 2>>"$DISCARD"
    check "dot --json ($way): value is a JSON number" "$PY" -c "
import json; j = json.load(open('dot.json')); assert j['ok'] is True and j['value'] == 250250 and type(j['value']) is float, j"
    # A scalar first: the arrays start after its 4 bytes and 4 of padding.
    "$X" run dot.xcargo --entry axpy --arg f32:2 --arg 'f32[]:short.f32' --arg 'f32[]:short.f32' --result 'f32[]' --json \
      $way > axpy.json 2>>"$DISCARD"
    check "axpy --json ($way): value is a JSON array" "$PY" -c "
import json; j = json.load(open('axpy.json')); assert j['ok'] is True and j['value'] == [3, 6, 9], j"
    "$X" run dot.xcargo --entry products --arg 'f32[]:a.f32' --arg 'f32[]:b.f32' --result 'f32[]' --json $way \
      > products.json 2>>"$DISCARD"
    check "products --json ($way): 1000 numbers" "$PY" -c "
import json; j = json.load(open('products.json')); assert j['value'] == [i / 2 for i in range(1, 1001)], j['value'][:5]"
    expect 3 'dot on .* failed: .*2' -- "$X" run dot.xcargo --entry dot --arg 'f32[]:a.f32' --arg 'f32[]:short.f32' $way
    # Several --input files, after the --arg values, bytes as they are: numeric's mix hashes
    # them whole, so the same bytes in one file give the same reply.
    printf 'abc' > in1 && printf 'defgh' > in2 && printf '\x01\x00\x00\x00abcdefgh' > joined
    want=$("$X" run numeric.xcargo --entry mix --input joined --result u64 $way 2>>"$DISCARD")
    expect 0 "^$want\$" -- "$X" run numeric.xcargo --entry mix --arg u32:1 --input in1 --input in2 --result u64 $way
  }
done

# README's kernel and run, as printed ("A kernel's input"), on the loader.
"$PY" - "$SRC/README.md" > readme_dot.c <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text[text.index("### A kernel's input"):]
print(re.search(r"```c\n(.*?)```", section, re.S).group(1))
PY
expect 0 'wrote readme.xcargo' -- "$X" build readme_dot.c -o readme.xcargo --key k
readme_run=$(grep -m1 -o "xcargo run dot.xcargo --entry dot [^#]*--result f64" "$SRC/README.md")
readme_run=${readme_run/#xcargo/$X}
expect 0 '^250250$' -- bash -c "${readme_run/dot.xcargo/readme.xcargo} --to $DOOR"

# Refused before anything runs: a file that is not whole f32 values (named, with a hint), a
# type that is not one, standard input named twice.
expect 2 'error: odd.f32: 4001 bytes, not a whole number of f32 elements \(4 bytes each\)' -- \
  "$X" run dot.xcargo --entry dot --arg 'f32[]:a.f32' --arg 'f32[]:odd.f32' --to "$DOOR"
expect 2 'hint: --arg f32\[\]:FILE takes a file of little-endian f32 values' -- \
  "$X" run dot.xcargo --entry dot --arg 'f32[]:odd.f32' --trust k.pub
expect 2 "unknown type 'f16'" -- "$X" run dot.xcargo --entry dot --arg 'f16:1' --trust k.pub
expect 2 "standard input \('-'\) is named 2 times" -- "$X" run dot.xcargo --entry dot --arg 'f32[]:-' --input - --trust k.pub
expect 0 'A C kernel reads them in the same order with xc_in_' -- "$X" help run

finish
