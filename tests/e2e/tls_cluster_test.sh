#!/usr/bin/env bash
# A cluster whose nodes are reached only through their TLS front doors (scripts/cluster up
# --front-door; wire-protocol.md 2.3 and 4.13): clients and the nodes' forwards to each other
# go over TLS, and a chain's result comes back to a front-door client through the node it
# connected to (a relay), whichever node the chain ends on, that one included.
# usage: tls_cluster_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
BIN=$(dirname "$X")
source "$(dirname "$0")/lib.sh"
in_cluster_dir

expect 0 '3 loaders up over TLS front doors' -- "$SRC/scripts/cluster" up 3 --front-door --bin "$BIN" -- --max-hops 500 --timeout 5
source "$XCARGO_CLUSTER_DIR/env"
C=$XCARGO_CLUSTER_DIR/cluster.yaml
KEY=$XCARGO_CLUSTER_DIR/signer.key
for i in 0 1 2; do diagnose "$XCARGO_CLUSTER_DIR/node-$i.log"; done
"$X" build "$SRC/tests/kernels/hops.c" -o hops.xcargo --key "$KEY" 2>>"$DISCARD"
check "every node's cluster address is its front door" test "$(grep -c 'address: tls://127\.0\.0\.1:' "$C")" -eq 3
check "the cluster's node keys are pinned" test "$(grep -vc '^#' "$XCARGO_KNOWN_NODES")" -eq 3

# Chains that end on another node than the client's: the result is relayed to the client's.
expect 0 '^012$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 0
expect 0 'forwarded 2 times, ended on node 2' -- "$X" run hops.xcargo --entry tour --cluster "$C" --node 0
expect 0 '^120$' -- "$X" run hops.xcargo --entry tour --result str --cluster "$C" --node 1
# One that comes back to the client's own node: 1 -> 2 -> 0 -> 1.
expect 0 '^201$' -- "$X" run hops.xcargo --entry to_node --arg u32:2 --result str --cluster "$C" --node 1
expect 0 'ended on node 1' -- "$X" run hops.xcargo --entry to_node --arg u32:2 --cluster "$C" --node 1
# A failure on the way is relayed like a result.
expect 3 'hop_limit: the computation was forwarded 501 times' -- "$X" run hops.xcargo --entry forever --cluster "$C" --node 2
eventually 30 "node 1 took node 0's forward through its front door, node 0 proving its node key" \
  lines_at_least 1 'accepted client from 127\.0\.0\.1:[0-9]+: key [0-9a-f]{16} \(node-0\): may forward' "$XCARGO_CLUSTER_DIR/node-1.log"
eventually 30 "node 2 verified the cargo that came with the forward" \
  lines_at_least 1 'accepted forwarded cargo: hops .* from node 1' "$XCARGO_CLUSTER_DIR/node-2.log"

# A node that is gone: the chain's result says so, from the client's own node.
read -r -a all_pids < "$XCARGO_CLUSTER_DIR/pids"
kill "${all_pids[1]}"
eventually 30 "node 1 stopped" bash -c "! kill -0 ${all_pids[1]} 2>/dev/null"
expect 3 'unreachable: the computation could not be forwarded to node 1' -- \
  "$X" run hops.xcargo --entry tour --cluster "$C" --node 0
expect 3 'unreachable: the computation could not be forwarded to node 1' -- \
  "$X" run hops.xcargo --entry tour --cluster "$C" --node 2
for i in 0 2; do
  check "node $i's worker never restarted" test "$(grep -c 'worker stopped' "$XCARGO_CLUSTER_DIR/node-$i.log")" -eq 0
done
finish
