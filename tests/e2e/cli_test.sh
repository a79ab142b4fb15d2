#!/usr/bin/env bash
# Drives the real xcargo binary: every verb's exit codes, messages and outputs.
# usage: cli_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
source "$(dirname "$0")/lib.sh"
cd "$TMP"
HELLO=$SRC/examples/hello/hello.c
VEC=$SRC/format-spec/vectors

# --- global
expect 0 '^xcargo [0-9]+\.[0-9]+\.[0-9]+' -- "$X" --version
expect 0 'keygen.*build.*sign.*verify.*inspect.*extract|Subcommands' -- "$X" --help
expect 2 '^xcargo: error: .*' -- "$X"
expect 2 'xcargo: error: .*bogus' -- "$X" bogus
for verb in keygen build sign verify inspect extract; do
  expect 0 'Usage|USAGE|Options|OPTIONS' -- "$X" "$verb" --help
done
expect 2 "hint: run 'xcargo verify --help'" -- "$X" verify

# --- keygen
expect 0 '^key id [0-9a-f]{16}' -- "$X" keygen -o k
check "private key is mode 0600" test "$(stat -c %a k)" = 600
check "public key is mode 0644" test "$(stat -c %a k.pub)" = 644
check "openssl reads the private key" openssl pkey -in k -noout
check "openssl reads the public key" openssl pkey -pubin -in k.pub -noout
cp k k.orig
expect 2 'k: already exists.*' -- "$X" keygen -o k
expect 2 'hint: pass --force' -- "$X" keygen -o k
check "a refused keygen keeps the old key" cmp k k.orig
expect 0 '' -- "$X" keygen -o k --force
"$X" keygen -o other >>"$DISCARD"
mkdir trust && cp k.pub trust/

# --- build
expect 0 'wrote hello.xcargo .*variants: bitcode, x86_64, aarch64; entries: add, greet; signed by' -- "$X" build "$HELLO" -o hello.xcargo --key k
expect 0 'signed by' -- "$X" build "$HELLO" -o again.xcargo --name hello --key k
check "the same build twice is byte-identical" cmp hello.xcargo again.xcargo
mkdir elsewhere && cp "$HELLO" elsewhere/ && (cd elsewhere && "$X" build hello.c -o ../third.xcargo --name hello --key ../k >>"$DISCARD" 2>&1)
check "building from another directory is byte-identical" cmp hello.xcargo third.xcargo
expect 0 'variants: x86_64:x86-64-v3, riscv64, bitcode' -- "$X" build "$HELLO" -o multi.xcargo -t x86_64:x86-64-v3 -t riscv64 -t bitcode -O3 -j 2
expect 0 'unsigned' -- "$X" build "$SRC/examples/cpp-reduce/reduce.cc" -o cpp.xcargo
expect 2 'xcargo: error: .*missing.c: no such file' -- "$X" build missing.c -o m.xcargo
# A repeatable option takes one value each time: what follows is the next argument.
expect 0 'variants: x86_64; entries' -- "$X" build -t x86_64 "$HELLO" -o order.xcargo -D UNUSED=1 -I "$SRC/examples"
expect 2 "unknown target 'mips'" -- "$X" build "$HELLO" -o m.xcargo -t mips
expect 2 'hint: targets are' -- "$X" build "$HELLO" -o m.xcargo -t mips
expect 2 "cannot use 'Bad Name' as the cargo name" -- "$X" build "$HELLO" -o "Bad Name.xcargo"
expect 2 "optimization level '9'" -- "$X" build "$HELLO" -o m.xcargo -O 9
cat > evil.c <<'C'
#include <xcargo/kernel.h>
int system(const char *cmd);
XC_ENTRY int run(xc_ctx *ctx, const void *in, size_t n) { return system("reboot"); }
C
expect 2 "imports 'system', which no xcargo loader provides" -- "$X" build evil.c -o evil.xcargo
expect 2 'hint: kernels may call only the functions declared in <xcargo/kernel.h>' -- "$X" build evil.c -o evil.xcargo
check "a refused build writes nothing" test ! -e evil.xcargo
cat > broken.c <<'C'
#include <xcargo/kernel.h>
XC_ENTRY int run(xc_ctx *ctx, const void *in, size_t n) { return nope; }
C
expect 2 "broken.c:2:.*error: use of undeclared identifier 'nope'" -- "$X" build broken.c -o b.xcargo
expect 2 'xcargo: error: broken.c \(bitcode\): .*clang failed' -- "$X" build broken.c -o b.xcargo
expect 2 "xcargo: error: k.pub: not a PEM private key" -- "$X" build "$HELLO" -o h.xcargo --key k.pub

# --- verify
expect 0 '^hello.xcargo: ok: hello 0.1.0, digest [0-9a-f]{64}, signed by [0-9a-f]{16} \(k.pub\)' -- "$X" verify hello.xcargo --trust k.pub
expect 0 'ok' -- "$X" verify hello.xcargo --trust trust
expect 1 '^xcargo: error: cpp.xcargo: cargo is not signed' -- "$X" verify cpp.xcargo --trust trust
expect 1 'hint: sign it with' -- "$X" verify cpp.xcargo --trust trust
expect 1 'no signature by a trusted key' -- "$X" verify hello.xcargo --trust other.pub
expect 1 'hint: add the signer' -- "$X" verify hello.xcargo --trust other.pub
expect 2 'xcargo: error: nothing.xcargo: cannot open' -- "$X" verify nothing.xcargo --trust trust
expect 2 'xcargo: error: nokeys: no such file or directory' -- "$X" verify hello.xcargo --trust nokeys
expect 2 'not a PEM public key' -- "$X" verify hello.xcargo --trust k
"$X" verify hello.xcargo --trust trust --json > v.json
check "verify --json is JSON with ok=true" python3 -c "import json; j=json.load(open('v.json')); assert j['ok'] and j['signatures'][0]['trusted']"
"$X" verify cpp.xcargo --trust trust --json > bad.json 2>>"$DISCARD"
check "a failed verify --json names the error kind" python3 -c "import json; j=json.load(open('bad.json')); assert not j['ok'] and j['error']['kind']=='not_signed'"
python3 - hello.xcargo tampered.xcargo <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[-200] ^= 1  # inside the last payload section's data
open(sys.argv[2], 'wb').write(b)
PY
expect 1 'xcargo: error: tampered.xcargo: section 3 \(aarch64 object\): digest mismatch' -- "$X" verify tampered.xcargo --trust trust

# --- sign
cp cpp.xcargo cosign.xcargo
expect 0 'cosign.xcargo: signed by' -- "$X" sign cosign.xcargo --key other
expect 0 'signed by' -- "$X" sign cosign.xcargo --key k
expect 0 'already signed by key .*unchanged' -- "$X" sign cosign.xcargo --key k
expect 0 'ok' -- "$X" verify cosign.xcargo --trust trust
check "signing keeps the digest" test "$("$X" inspect cpp.xcargo --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')" = "$("$X" inspect cosign.xcargo --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])')"
expect 0 'signed.xcargo: signed by' -- "$X" sign cpp.xcargo --key k -o signed.xcargo
expect 1 'cargo is not signed' -- "$X" verify cpp.xcargo --trust trust
expect 1 'digest mismatch' -- "$X" sign tampered.xcargo --key k

# --- inspect
expect 0 'cargo +hello 0.1.0 \(format 1.0\)' -- "$X" inspect hello.xcargo
expect 0 'aarch64 +object +aarch64-unknown-linux-gnu' -- "$X" inspect hello.xcargo
expect 0 'not checked \(pass --trust to check\)' -- "$X" inspect hello.xcargo
expect 0 'valid, trusted \(k.pub\)' -- "$X" inspect hello.xcargo --trust k.pub
expect 0 'x86_64: xc_node_id xc_reply' -- "$X" inspect hello.xcargo
expect 0 'aarch64 nodes: aarch64 object' -- "$X" inspect hello.xcargo
expect 0 'any other: bitcode, JIT-compiled there' -- "$X" inspect hello.xcargo
expect 0 '"runs_on": \{' -- "$X" inspect hello.xcargo --json
"$X" inspect multi.xcargo --json > i.json
check "inspect --json lists variants with sizes" python3 -c "
import json; j=json.load(open('i.json'))
assert [v['name'] for v in j['variants']] == ['x86_64:x86-64-v3','riscv64','bitcode']
assert all(v['stored_size'] > 0 and v['raw_size'] > 0 for v in j['variants'])
assert j['toolchain']['opt'] == 'O3' and 'clang' in j['toolchain']"
expect 1 'digest mismatch' -- "$X" inspect tampered.xcargo

# --- extract
expect 0 'wrote x.o \(x86_64 object' -- "$X" extract hello.xcargo --variant x86_64 -o x.o
check "the extracted object is an x86-64 relocatable ELF" sh -c "readelf -h x.o | grep -q 'REL (Relocatable file)' && readelf -h x.o | grep -q 'X86-64'"
expect 0 'wrote a.o \(aarch64 object' -- "$X" extract hello.xcargo --variant aarch64 -o a.o
check "the extracted aarch64 object is AArch64" sh -c "readelf -h a.o | grep -q AArch64"
expect 0 'wrote k.bc \(bitcode' -- "$X" extract hello.xcargo --variant bitcode -o k.bc
check "the extracted bitcode disassembles and defines add" sh -c "/usr/lib/llvm-16/bin/llvm-dis k.bc -o - | grep -q 'define.*@add'"
expect 2 "no variant 'mips'" -- "$X" extract hello.xcargo --variant mips -o m.o
expect 2 'hint: variants in this cargo: bitcode, x86_64, aarch64' -- "$X" extract hello.xcargo --variant mips -o m.o
expect 1 'digest mismatch' -- "$X" extract tampered.xcargo --variant aarch64 -o t.o
check "a refused extract writes nothing" test ! -e t.o

# --- the format's test vectors through the CLI
while read -r name _ want _; do
  case "$name" in ''|'#'*) continue ;; esac
  if [ "$want" = success ]; then code=0; else code=1; fi
  expect "$code" '' -- "$X" verify "$VEC/$name.xcargo" --trust "$VEC/keys/vector-signer.pub"
done < "$VEC/vectors.txt"

finish
