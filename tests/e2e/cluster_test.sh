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
in_cluster_dir

# Over shm the nodes' forwards take shared-memory lanes (wire-protocol.md 8); over tcp the
# loaders are started with XCARGO_LANES=0, so that forwards between them go through UCX.
if [ "$TLS" = tcp ]; then peer_lanes=0; else peer_lanes=1; fi
expect 0 '3 loaders up' -- env XCARGO_LANES=$peer_lanes "$SRC/scripts/cluster" up 3 --tls "$TLS" --bin "$BIN" -- --max-hops 5000 --timeout 5
source "$XCARGO_CLUSTER_DIR/env"
C=$XCARGO_CLUSTER_DIR/cluster.yaml
KEY=$XCARGO_CLUSTER_DIR/signer.key
"$X" build "$SRC/tests/kernels/hops.c" -o hops.xcargo --key "$KEY" 2>>"$DISCARD"
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key "$KEY" 2>>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key "$KEY" 2>>"$DISCARD"
"$X" keygen -o stranger.key >>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o stranger.xcargo --key stranger.key --name stranger 2>>"$DISCARD"
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

# Endless forwarding is stopped by the hop limit (5000 here); the cluster keeps serving.
expect 3 'hop_limit: the computation was forwarded 5001 times' -- "$X" run hops.xcargo --entry forever --cluster "$C" --node 1
expect 0 '^120$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 1
# xc_forward refuses a node that does not exist, or the node itself.
expect 3 'kernel_error: the kernel returned 3' -- "$X" run hops.xcargo --entry to_node --arg u32:7 --cluster "$C" --node 0
expect 3 'kernel_error: the kernel returned 3' -- "$X" run hops.xcargo --entry to_node --arg u32:0 --cluster "$C" --node 0
expect 2 'has no node 9' -- "$X" run hops.xcargo --entry tour --cluster "$C" --node 9

# Forged forwards. Only a peer node's key may forward: anyone else is refused, kernel unrun.
FORGE=$BIN/xcargo-forge-forward
NODEKEY=$XCARGO_CLUSTER_DIR/node-0.key
expect 0 '^unauthenticated: this node serves only authenticated clients' -- "$FORGE" --to "$(addr 1)" --cargo faults.xcargo --entry ok
expect 0 '^unauthenticated: key [0-9a-f]+ \(cluster-user\) may push,run,ls,read, not forward' -- \
  "$FORGE" --to "$(addr 1)" --cargo faults.xcargo --entry ok --key "$XCARGO_IDENTITY"
eventually 30 "the node logged the refused forwards" lines_at_least 2 'refused request type 13' "$XCARGO_CLUSTER_DIR/node-1.log"
# With a node's key, a forwarded cargo is still verified like a pushed one. The forger's own
# address gets no result: results go only to the relay address a client's node made
# (wire-protocol.md 4.13), so the node's log says what it did.
N1=$XCARGO_CLUSTER_DIR/node-1.log
forge() { expect 1 '^no result' -- "$FORGE" --to "$(addr 1)" "$@" --key "$NODEKEY"; }
forge --cargo faults.xcargo --entry ok --flip 700
forge --cargo faults.xcargo --digest-of hello.xcargo --entry ok
forge --cargo stranger.xcargo --entry add
forge --cargo faults.xcargo --entry ok --hop 5001
forge --cargo faults.xcargo --entry ok
eventually 30 "a damaged forwarded cargo is refused" lines_at_least 1 'refused forward.*digest mismatch' "$N1"
eventually 30 "a cargo that is not the one its digest names is refused" lines_at_least 1 'refused forward.*not the one its digest names' "$N1"
eventually 30 "a cargo of an untrusted signer is refused" lines_at_least 1 'refused forward.*(trusted|untrusted)' "$N1"
eventually 30 "a forward past the hop limit is refused" lines_at_least 1 'refused forward: .* hop 5001' "$N1"
eventually 30 "a good forward runs, its result dropped (no relay address)" \
  lines_at_least 1 'dropped a forwarded result: its chain names no relay address' "$N1"

# The pointer chase: the same last element and checksum whether the walk moves itself between
# nodes (xrdma), the client reads every element one-sidedly (get), or plain UCX Active Message
# servers walk it (am).
"$X" build "$SRC/examples/pointer-chase/setup.c" -o setup.xcargo --key "$KEY" 2>>"$DISCARD"
"$X" build "$SRC/examples/pointer-chase/walk.c" -o walk.xcargo --key "$KEY" 2>>"$DISCARD"
CHASE=$BIN/xcargo-chase
summary() { sed -E 's/.*"last": ([0-9]+), "elements": ([0-9]+), "checksum": ([0-9]+).*/\1 \2 \3/'; }
xrdma=$("$CHASE" run --cluster "$C" --mode xrdma --length 3000 --seed 5 --setup setup.xcargo --walk walk.xcargo --repeat 1 | summary)
# ~2000 of the walk's 3000 steps are forwards to another node; clients sent a few requests.
lane_requests=0
for i in 0 1 2; do
  n=$("$X" ls --to "$(addr $i)" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["stats"]["lane_requests"])')
  lane_requests=$((lane_requests + n))
done
echo "    requests through lanes during the walk: $lane_requests"
if [ "$TLS" = tcp ]; then
  check "XCARGO_LANES=0: forwards went through UCX ($lane_requests requests through lanes)" test "$lane_requests" -lt 100
else
  check "forwards went through the nodes' lanes ($lane_requests requests through lanes)" test "$lane_requests" -ge 1000
fi
get=$("$CHASE" run --cluster "$C" --mode get --length 3000 --seed 5 --repeat 1 | summary)
python3 -c "
import socket
s = [socket.socket() for _ in range(3)]
for x in s: x.bind(('127.0.0.1', 0))
print('nodes:'); [print(f'  - id: {i}\n    address: 127.0.0.1:{x.getsockname()[1]}') for i, x in enumerate(s)]" > am.yaml
am_pids=()
for i in 0 1 2; do
  "$CHASE" am-server --cluster am.yaml --node-id $i --length 3000 --seed 5 --spin-us 0 --ready-file am-ready-$i 2>>"$DISCARD" &
  am_pids+=($!)
done
for i in 0 1 2; do wait_file am-ready-$i || echo "FAIL: the AM baseline server $i did not start"; done
am=$(timeout 60 "$CHASE" run --cluster "$C" --am-cluster am.yaml --mode am --length 3000 --seed 5 --repeat 1 | summary)
kill "${am_pids[@]}" 2>>"$DISCARD"
check "the walk visits all 3000 elements ($xrdma)" test "$(echo "$xrdma" | awk '{print $2}')" = 3000
check "get ends where xrdma ends ($get vs $xrdma)" test "$get" = "$xrdma"
check "am ends where xrdma ends ($am vs $xrdma)" test "$am" = "$xrdma"
check "only the first node got the walk cargo pushed" test "$(grep -c 'accepted push: walk' "$XCARGO_CLUSTER_DIR"/node-*.log | awk -F: '{s+=$2} END {print s}')" -eq 1
expect 0 'chase +[0-9]+' -- "$X" ls --to "$(addr 1)"
expect 0 '"regions": \[' -- "$X" ls --to "$(addr 1)" --json

# A node that disappears mid-chain: the client hears about it, it does not hang.
gone=$(awk '{print $2}' "$XCARGO_CLUSTER_DIR/pids")
kill -TERM "$gone"
eventually 30 "node 1 stops" bash -c "! kill -0 $gone"
t0=$(date +%s%N)
expect 3 'unreachable: the computation could not be forwarded to node 1' -- "$X" run hops.xcargo --entry tour --cluster "$C" --node 0
took=$(( ($(date +%s%N) - t0) / 1000000 ))
check "the client heard ($took ms, ceiling 20 s)" test "$took" -lt 20000
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --cluster "$C" --node 2

# A client that does not read the results of its chains (they end on node 1 and come back
# through node 0, where it connected; the other address its hello names is not used): node 0
# closes its connection once they would pass its limit of unread replies (twice the largest
# request or reply: here 4 MiB each) instead of keeping them all.
expect 0 'stopped [0-9]+ loaders' -- "$SRC/scripts/cluster" down
expect 0 '2 loaders up' -- "$SRC/scripts/cluster" up 2 --tls "$TLS" --bin "$BIN" -- --max-cargo 4194304 --max-input 4194304 --max-reply 4194304
source "$XCARGO_CLUSTER_DIR/env"
expect 0 pushed -- "$X" push faults.xcargo --to "$(addr 0),$(addr 1)"
# The client holds until node 0 has logged the close, however long its kernels took.
EXPECT_TIMEOUT=120 expect 0 'closed by the node: 1 of 1 connections' -- bash -c "
  '$BIN/xcargo-in-flight' --to '$(addr 0)' --key '$XCARGO_IDENTITY' --cargo faults.xcargo --entry reply_from_node1 --u64 1048576 \
    --count 40 --hold-until results.dropped --results-to-idle &
  tool=\$!
  for _ in \$(seq 1200); do grep -q 'its client has not read' '$XCARGO_CLUSTER_DIR/node-0.log' && break; sleep 0.05; done
  touch results.dropped
  wait \$tool"
eventually 30 "node 0 closes the connection of a client that does not read its chains' results" \
  lines_at_least 1 'closing the connection from .*its client has not read' "$XCARGO_CLUSTER_DIR/node-0.log"
check "neither node restarted" bash -c "! grep -q 'worker stopped' '$XCARGO_CLUSTER_DIR/node-0.log' '$XCARGO_CLUSTER_DIR/node-1.log'"

finish
