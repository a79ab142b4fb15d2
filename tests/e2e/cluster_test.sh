#!/usr/bin/env bash
# A 3-node cluster of real loaders (scripts/cluster) on 127.0.0.1: computations that move
# between nodes with xc_forward, the cargo following itself and verified on arrival, the hop
# limit, forged forwards, and a node that disappears.
# usage: cluster_test.sh XCARGO SOURCE_DIR TLS   (TLS: tcp or shm, as scripts/cluster takes it)
X=$1
SRC=$2
TLS=$3
BIN=$(dirname "$X")
source "$(dirname "$0")/lib.sh"
cd "$TMP"
export XCARGO_CLUSTER_DIR=$TMP/cluster
trap '"$SRC/scripts/cluster" down >/dev/null 2>&1; rm -rf "$TMP"' EXIT

expect 0 '3 loaders up' -- "$SRC/scripts/cluster" up 3 --tls "$TLS" --bin "$BIN" -- --max-hops 50 --timeout 5
source "$XCARGO_CLUSTER_DIR/env"
C=$XCARGO_CLUSTER_DIR/cluster.yaml
KEY=$XCARGO_CLUSTER_DIR/signer.key
"$X" build "$SRC/tests/kernels/hops.c" -o hops.xcargo --key "$KEY" 2>/dev/null
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key "$KEY" 2>/dev/null
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key "$KEY" 2>/dev/null
"$X" keygen -o stranger.key >/dev/null
"$X" build "$SRC/examples/hello/hello.c" -o stranger.xcargo --key stranger.key --name stranger 2>/dev/null
addr() { grep address "$C" | sed -n "$(($1 + 1))p" | awk '{print $2}'; }

# A computation that visits every node: the last one answers the client directly.
expect 0 '^012$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 0
expect 0 'forwarded 2 times, ended on node 2' -- "$X" run hops.xcargo --entry tour --cluster "$C" --node 0
check "node 1 verified the cargo that came with the forward" grep -q 'accepted forwarded cargo: hops .* from node 0' "$XCARGO_CLUSTER_DIR/node-1.log"
check "node 2 verified the cargo that came with the forward" grep -q 'accepted forwarded cargo: hops .* from node 1' "$XCARGO_CLUSTER_DIR/node-2.log"
check "node 2 ran the last step" grep -q 'accepted forward: .*/tour hop 2 -> ok' "$XCARGO_CLUSTER_DIR/node-2.log"
expect 0 '^201$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 2
expect 0 '"ended_on_node": 1' -- "$X" run hops.xcargo --entry tour --json --cluster "$C" --node 2
check "a node that has the cargo is not sent it again" test "$(grep -c 'accepted forwarded cargo' "$XCARGO_CLUSTER_DIR/node-1.log")" -eq 1

# Endless forwarding is stopped by the hop limit (50 here); the cluster keeps serving.
expect 3 'hop_limit: the computation was forwarded 51 times' -- "$X" run hops.xcargo --entry forever --cluster "$C" --node 1
expect 0 '^120$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 1
# xc_forward refuses a node that does not exist, or the node itself.
expect 3 'kernel_error: the kernel returned 3' -- "$X" run hops.xcargo --entry to_node --arg u32:7 --cluster "$C" --node 0
expect 3 'kernel_error: the kernel returned 3' -- "$X" run hops.xcargo --entry to_node --arg u32:0 --cluster "$C" --node 0
expect 2 'has no node 9' -- "$X" run hops.xcargo --entry tour --cluster "$C" --node 9

# Forged forwards: a forwarded cargo is verified like a pushed one.
FORGE=$BIN/xcargo-forge-forward
expect 0 '^refused: the forwarded cargo was refused: .*digest mismatch' -- "$FORGE" --to "$(addr 1)" --cargo faults.xcargo --entry ok --flip 700
expect 0 "^refused: the forwarded cargo is not the one its digest names" -- "$FORGE" --to "$(addr 1)" --cargo faults.xcargo --digest-of hello.xcargo --entry ok
expect 0 '^refused: .*(trusted|untrusted)' -- "$FORGE" --to "$(addr 1)" --cargo stranger.xcargo --entry add
expect 0 '^hop_limit' -- "$FORGE" --to "$(addr 1)" --cargo faults.xcargo --entry ok --hop 51
expect 0 '^ok: ' -- "$FORGE" --to "$(addr 1)" --cargo faults.xcargo --entry ok

# A node that disappears mid-chain: the client hears about it, it does not hang.
kill -TERM "$(awk '{print $2}' "$XCARGO_CLUSTER_DIR/pids")"
sleep 0.5
t0=$(date +%s%N)
expect 3 'unreachable: the computation could not be forwarded to node 1' -- "$X" run hops.xcargo --entry tour --cluster "$C" --node 0
took=$(( ($(date +%s%N) - t0) / 1000000 ))
check "the client heard within 10 s ($took ms)" test "$took" -lt 10000
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --cluster "$C" --node 2

finish
