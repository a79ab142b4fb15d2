#!/usr/bin/env bash
# Loaders killed with SIGKILL in the middle of a push (verifying, JIT-compiling, writing the
# disk cache) and of an invocation, then started again on the same cache directory: the
# client gets an error rather than a hang, the cache stays intact and the next run succeeds.
# usage: fault_test.sh XCARGO SOURCE_DIR TLS   (TLS: the UCX_TLS value, e.g. tcp or shm,tcp)
X=$1
SRC=$2
export UCX_TLS=$3
export UCX_NET_DEVICES=lo
LOADER=$(dirname "$X")/xcargo-loader
source "$(dirname "$0")/lib.sh"
cd "$TMP"
sup=
trap '[ -n "$sup" ] && { pkill -9 -P "$sup"; kill -9 "$sup"; } 2>>"$DISCARD"; rm -rf "$TMP"' EXIT

# start: a loader on the shared cache, JIT first (so that pushes write the disk cache).
start() {
  rm -f node.addr
  "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --ready-file node.addr --trust trust --clients clients --cache cache --prefer bitcode 2>> node.log &
  sup=$!
  disown "$sup"
  wait_file node.addr || echo "FAIL: the loader did not start: $(tail -3 node.log)"
  node=$(cat node.addr)
}
# wait_bounded PID: waits up to 30 s for a child; its exit code, or 124 if it hangs (killed).
wait_bounded() {
  for _ in $(seq 300); do kill -0 "$1" 2>>"$DISCARD" || break; sleep 0.1; done
  kill -0 "$1" 2>>"$DISCARD" && { kill -9 "$1"; wait "$1" 2>>"$DISCARD"; return 124; }
  wait "$1"
}
# kill9: the supervisor and its worker, at once, as a power cut or the OOM killer would.
kill9() {
  pkill -9 -P "$sup" 2>>"$DISCARD"
  kill -9 "$sup" 2>>"$DISCARD"
  while kill -0 "$sup" 2>>"$DISCARD"; do sleep 0.01; done
  sup=
}

mkdir trust clients
"$X" keygen -o me >>"$DISCARD" && cp me.pub clients/
export XCARGO_IDENTITY=$TMP/me
"$X" keygen -o k >>"$DISCARD" && cp k.pub trust/
"$X" build "$SRC/examples/sgemm/sgemm.c" -o sgemm.xcargo --key k 2>>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k 2>>"$DISCARD"
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key k 2>>"$DISCARD"

# Killed at 12 moments of a push that JIT-compiles two cargos and writes their cache entries.
for delay in 0 0.002 0.005 0.01 0.015 0.02 0.03 0.04 0.06 0.08 0.12 0.2; do
  start
  ( "$X" push sgemm.xcargo --to "$node"; "$X" push hello.xcargo --to "$node" ) >>"$DISCARD" 2>&1 &
  client=$!
  sleep "$delay"
  kill9
  wait_bounded "$client"
  rc=$?
  checks=$((checks + 1))
  if [ "$rc" -eq 124 ]; then
    echo "FAIL: a push hangs after its loader was killed ($delay s)"
    failures=$((failures + 1))
  fi
done
start
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$node"
expect 0 '' -- "$X" push sgemm.xcargo --to "$node"
# Quick tiers first: the -O2 objects reach the cache after the pushes.
eventually 60 "both cargos' -O2 objects are in the cache" python3 -c "import glob; assert len(glob.glob('cache/jit/*.o')) >= 2"
"$X" ls --to "$node" --json > ls.json
check "no cache entry is damaged after 12 kills (disk_cache_corrupt 0)" python3 -c "
import json; s=json.load(open('ls.json'))['stats']; assert s['disk_cache_corrupt']==0, s"
check "each cache entry is whole: size and SHA-256 as their headers say" python3 -c "
import glob, hashlib, struct
es = glob.glob('cache/jit/*.o')
assert es, 'no entries'
for e in es:
    b = open(e, 'rb').read()
    version, size, count = struct.unpack('<I', b[4:8])[0], struct.unpack('<Q', b[8:16])[0], struct.unpack('<I', b[48:52])[0]
    head = 56 + 8 * count  # version 2: the signers' key ids before the object
    assert b[:4] == b'XCJC' and version == 2 and count >= 1 and size == len(b) - head and hashlib.sha256(b[head:]).digest() == b[16:48], e"
check "nothing but entries and cut-short temporary files in the cache" python3 -c "
import os; names = os.listdir('cache/jit'); assert all(n.endswith('.o') or '.o.tmp-' in n for n in names), names"

# Killed in the middle of an invocation: the client is told, the next loader serves.
for i in 1 2 3; do
  "$X" push faults.xcargo --to "$node" >>"$DISCARD" 2>&1
  token=$((1000 + i))
  "$X" run faults.xcargo --entry marked_gated --arg "u64:$token" --to "$node" > burn.out 2>&1 &
  client=$!
  # Killed once the kernel runs: it has written its token into region "mark" (and waits for
  # a gate that never opens).
  eventually 60 "the invocation runs" bash -c "'$X' run faults.xcargo --entry mark --result u64 --to '$node' | grep -qx $token"
  kill9
  wait_bounded "$client"
  rc=$?
  checks=$((checks + 1))
  if [ "$rc" -ne 4 ] || ! grep -q 'lost the connection' burn.out; then
    echo "FAIL: a client whose loader was killed mid-invocation exits $rc: $(cat burn.out)"
    failures=$((failures + 1))
  fi
  start
  expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$node"
done
finish
