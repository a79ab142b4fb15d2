#!/usr/bin/env bash
# The CLI's conventions, as scripts rely on them: --json prints one JSON object for every
# outcome, with the text mode's exit code; '-' is standard input or output; --output FILE
# keeps stdout empty; --help, --version and `xcargo help VERB` on every verb; HOST alone
# means port 7400; the loader's ready file goes when the loader stops.
# usage: conventions_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
LOADER=$(dirname "$X")/xcargo-loader
source "$(dirname "$0")/lib.sh"
cd "$TMP"
"$X" keygen -o k > keygen.out 2>&1
"$X" keygen -o other > keygen.out 2>&1
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k > build.out 2>&1
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key k -t x86_64 > build.out 2>&1

# json_outcome CODE KIND CMD...: CMD exits CODE and prints exactly one JSON object on stdout,
# with ok false, error.kind KIND and exit_code CODE (KIND '-': any).
json_outcome() {
  local code=$1 kind=$2
  shift 2
  timeout 60 "$@" > out.json 2> err.txt
  local rc=$?
  checks=$((checks + 1))
  if [ "$rc" -ne "$code" ] || ! python3 - "$code" "$kind" > why.txt 2>&1 <<'PY'
import json, sys
code, kind = int(sys.argv[1]), sys.argv[2]
text = open("out.json").read()
j = json.loads(text)  # exactly one object: json.loads refuses trailing data
assert isinstance(j, dict), "not an object"
assert j["ok"] is False, "ok is not false"
assert j["exit_code"] == code, f"exit_code {j['exit_code']}"
assert kind == "-" or j["error"]["kind"] == kind, f"kind {j['error']['kind']}"
assert j["error"]["message"], "no message"
PY
  then
    echo "FAIL: exit $rc (expected $code), JSON with kind $kind: $*"
    sed 's/^/    | /' out.json err.txt why.txt | head -20
    failures=$((failures + 1))
  fi
}
json_outcome 4 unreachable "$X" run hello.xcargo --entry add --to 127.0.0.1:1 --json
json_outcome 4 unreachable "$X" ls --to 127.0.0.1:1 --json
json_outcome 1 untrusted "$X" run hello.xcargo --entry add --trust other.pub --json
json_outcome 3 remote "$X" run faults.xcargo --entry spin --trust k.pub --timeout 1 --json
json_outcome 3 remote "$X" run faults.xcargo --entry segfault --trust k.pub --json
json_outcome 3 remote "$X" run hello.xcargo --entry greet --result f64 --trust k.pub --json   # 17 bytes are no f64
json_outcome 3 remote "$X" run hello.xcargo --entry nope --trust k.pub --json
json_outcome 2 io "$X" verify missing.xcargo --trust k.pub --json
json_outcome 1 untrusted "$X" verify hello.xcargo --trust other.pub --json
json_outcome 2 io "$X" inspect missing.xcargo --json
json_outcome 2 invalid_argument "$X" run --json
json_outcome 2 invalid_argument "$X" run hello.xcargo --entry add --arg i64:x --trust k.pub --json
"$X" run faults.xcargo --entry spin --trust k.pub --timeout 1 --json > spin.json 2> spin.err
check "a time-out says so in the JSON" grep -q 'ran past the time limit' spin.json
"$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --trust k.pub --json > ok.json 2> ok.err
check "a good run: ok true and the value" python3 -c "
import json; j = json.load(open('ok.json')); assert j['ok'] is True and j['value'] == 42, j"

# '-': standard input and output.
printf '\x05\x00\x00\x00\x00\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00' > in.bin
expect 0 '^12$' -- bash -c "'$X' run hello.xcargo --entry add --input - --result i64 --trust k.pub < in.bin 2> run.err"
expect 0 'ok: hello 0.1.0' -- bash -c "'$X' verify - --trust k.pub < hello.xcargo"
expect 0 'ok: hello 0.1.0' -- bash -c "'$X' verify <(cat hello.xcargo) --trust k.pub"
expect 0 'ELF' -- bash -c "'$X' extract hello.xcargo --variant x86_64 -o - 2> extract.err | head -c 4"
expect 0 '^cargo +hello' -- bash -c "cat hello.xcargo | '$X' inspect -"
# --output FILE: the reply goes there, and nothing to stdout.
"$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --output out.bin --trust k.pub > stdout.txt 2> stderr.txt
check "run --output FILE prints nothing on stdout" test ! -s stdout.txt
check "run --output FILE writes the reply" test "$(od -An -tx1 out.bin | tr -d ' \n')" = 0300000000000000

# --help, --version and `help VERB` on every verb.
for verb in keygen build sign verify inspect extract push run ls; do
  expect 0 "^Usage: xcargo $verb" -- "$X" help "$verb"
  check "xcargo help $verb is xcargo $verb --help" test "$("$X" help "$verb")" = "$("$X" "$verb" --help)"
  expect 0 '^xcargo [0-9]+\.[0-9]+\.[0-9]+$' -- "$X" "$verb" --version
done
expect 0 '^Usage: xcargo \[OPTIONS\] SUBCOMMAND' -- "$X" help
# Each verb's help lists the exit codes it can return, in the words of the one table
# (cli/exit_codes.h); the network verbs include 5, a client the node did not accept.
for verb in keygen build sign verify inspect extract push run ls known-nodes; do
  expect 0 '^  0  ok$' -- "$X" help "$verb"
  expect 0 '^  2  usage error' -- "$X" help "$verb"
done
for verb in push run ls; do
  expect 0 '^  4  a node could not be reached' -- "$X" help "$verb"
  expect 0 '^  5  the node did not accept this client' -- "$X" help "$verb"
done
expect 0 '^  3  the run or push failed on the node' -- "$X" help run
for code in 0 1 2 3 4 5; do
  check "xcargo --help and README's table both list exit code $code" \
    bash -c "'$X' --help | grep -q '^  $code  ' && grep -q '^| $code ' '$SRC/README.md'"
done

# README names every runtime function of the kernel ABI's allow-list (format-spec 5.5).
for f in $(grep -o '^| `xc_[a-z_]*` | runtime' "$SRC/format-spec/xcargo-format.md" | grep -o 'xc_[a-z_]*'); do
  check "README's list of kernel functions names $f" bash -c "sed -n '/^Kernels are freestanding/,/^\$/p' '$SRC/README.md' | grep -q '\`$f\`'"
done
expect 2 "unknown verb 'bogus'" -- "$X" help bogus

# UCX settings that leave it nothing: one line saying what was asked, exit 2 (usage).
expect 2 "UCX_TLS=foo: UCX finds no usable transport \('foo' is no UCX transport\)" -- env -u UCX_NET_DEVICES UCX_TLS=foo "$X" ls --to 127.0.0.1:1
check "a bad UCX_TLS gives one error line and a hint" test "$(env -u UCX_NET_DEVICES UCX_TLS=foo "$X" ls --to 127.0.0.1:1 2>&1 | wc -l)" -eq 2
expect 4 'UCX_NET_DEVICES=nope is set: .ucx_info -d' -- env UCX_NET_DEVICES=nope "$X" ls --to ucx://127.0.0.1:1

# Addresses: HOST alone is port 7400; IPv6 is refused with its reason.
expect 4 '127.0.0.1:7400: connection refused' -- "$X" ls --to 127.0.0.1
expect 2 'IPv6 addresses do not work with this UCX' -- "$X" ls --to '[::1]:7400'

# README's kernel and commands, as printed: the kernel under "Writing a kernel", built, signed,
# verified and run locally the way "Using it" shows.
python3 - "$SRC/README.md" > kernel.c <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text[text.index("### Writing a kernel"):]
print(re.search(r"```c\n(.*?)```", section, re.S).group(1))
PY
cp k ci.key && cp k.pub ci.key.pub
expect 0 'wrote kernel.xcargo' -- "$X" build kernel.c -o kernel.xcargo --key ci.key
expect 0 'ok: kernel 0.1.0' -- "$X" verify kernel.xcargo --trust ci.key.pub
readme_run=$(grep -m1 -o 'xcargo run kernel.xcargo --entry add [^#]*--trust ci.key.pub' "$SRC/README.md")
readme_run=${readme_run/#xcargo/$X}
expect 0 '^42$' -- bash -c "$readme_run 2> readme_run.err"

# Progress: on a terminal a line per finished compile and link, nothing extra otherwise.
script -qec "'$X' build '$SRC/examples/hello/hello.c' '$SRC/tests/kernels/port/port.c' -o tty.xcargo -t x86_64 -t bitcode" tty.typescript > tty.out 2>&1
check "a build on a terminal shows its progress" grep -q 'xcargo: \[5/6\]' tty.typescript
check "a build on a terminal ends with its last step" grep -q 'xcargo: \[6/6\] linking' tty.typescript
"$X" build "$SRC/examples/hello/hello.c" "$SRC/tests/kernels/port/port.c" -o notty.xcargo -t x86_64 -t bitcode > notty.out 2>&1
check "a build that is not on a terminal prints one line" test "$(wc -l < notty.out)" -eq 1

# Interrupting: nothing keeps running, nothing is left behind, exit 128 + the signal.
children_of() { pgrep -P "$1" | tr '\n' ' '; }
gone() { for p in $1; do kill -0 "$p" 2>>"$DISCARD" && return 1; done; return 0; }
"$X" run faults.xcargo --entry spin --trust k.pub --timeout 60 > spin.out 2>&1 &
xpid=$!
eventually 30 "a local run starts its loader" pgrep -P $xpid
local_loader=$(children_of $xpid)
kill -INT $xpid
wait $xpid
rc=$?
check "Ctrl-C ends xcargo run with 130 (it was $rc)" test "$rc" -eq 130
eventually 10 "Ctrl-C ends the local loader and its spinning kernel" gone "$local_loader"
"$X" run faults.xcargo --entry spin --trust k.pub --timeout 60 > spin.out 2>&1 &
xpid=$!
eventually 30 "a local run starts its loader" pgrep -P $xpid
local_loader=$(children_of $xpid)
kill -KILL $xpid
wait $xpid 2>>"$DISCARD"
eventually 10 "a killed xcargo run leaves no local loader behind" gone "$local_loader"
mkdir scratch many
for i in $(seq 1 12); do
  sed "s/ int mix/ int mix$i/; s/ int geometry/ int geometry$i/; s/is_prime/is_prime$i/g" "$SRC/tests/kernels/port/port.c" > many/k$i.c
done
TMPDIR=$TMP/scratch "$X" build many/*.c -o many.xcargo -j 1 > many.out 2>&1 &
xpid=$!
eventually 30 "the build starts compiling" bash -c "ls scratch | grep -q xcargo-build"
kill -INT $xpid
wait $xpid
rc=$?
check "Ctrl-C ends xcargo build with 130 (it was $rc)" test "$rc" -eq 130
check "an interrupted build leaves no scratch directory" test -z "$(ls scratch)"
check "an interrupted build writes no cargo" test ! -e many.xcargo
check "an interrupted build says so" grep -q 'interrupted' many.out

# The ready file: written once listening, gone once the loader stopped. Its limits: inputs
# and cargos over them are refused before they are sent, naming both sizes.
mkdir trust clients && cp k.pub trust/ && cp k.pub clients/
# Settings: one table for flags and loader.yaml, the same units and checks, errors naming
# where the value came from.
printf 'listen: localhost:0\nmax-input: 4K\nmax_cargo: 8K\n' > node.yaml
expect 2 "--max-input 400Q: must be a size in bytes or with K, M, G" -- "$LOADER" --config node.yaml --max-input 400Q
printf 'max-input: 4K\nspin-us: lots\n' > bad.yaml
expect 2 "bad.yaml: line 2: 'spin-us' must be from 0 to 1000000" -- "$LOADER" --config bad.yaml
expect 2 "missing.yaml: " -- "$LOADER" --config missing.yaml
expect 0 'max-memory SIZE .*with K, M, G' -- "$LOADER" --help
"$LOADER" --config node.yaml --ready-file ready.addr --trust trust --clients clients --cache cache \
  --max-cargo 1000 2> loader.log &
loader=$!
pids+=($loader)
diagnose loader.log
check "the loader writes its ready file" wait_file ready.addr
export XCARGO_IDENTITY=$TMP/k
head -c 10000 /dev/zero > big.bin
expect 3 "big.bin: limit: the input is 10000 bytes, over 127.0.0.1:[0-9]+'s limit of 4096 bytes" -- \
  "$X" run hello.xcargo --entry add --input big.bin --to "$(cat ready.addr)"
json_outcome 3 remote "$X" run hello.xcargo --entry add --input big.bin --to "$(cat ready.addr)" --json
expect 3 "limit: the cargo is [0-9]+ bytes, over 127.0.0.1:[0-9]+'s limit of 1000 bytes" -- \
  "$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --to "$(cat ready.addr)"
expect 3 "limit: the cargo is [0-9]+ bytes" -- "$X" push hello.xcargo --to "$(cat ready.addr)"
kill -TERM "$loader"
eventually 30 "the loader stops on SIGTERM" bash -c "! kill -0 $loader"
check "a stopped loader leaves no ready file" test ! -e ready.addr
finish
