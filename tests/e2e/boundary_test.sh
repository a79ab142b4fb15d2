#!/usr/bin/env bash
# The network boundary (loader/SECURITY.md, "Memory access by peers"): a peer with a stock
# UCX client and no key reaches no memory outside what the loader exports, region reads are
# bounds-checked, and one-sided access is refused unless the admin says the network is trusted.
# usage: boundary_test.sh XCARGO SOURCE_DIR TLS   (TLS: tcp or shm)
X=$1
SRC=$2
TLS=$3
BIN=$(dirname "$X")
source "$(dirname "$0")/lib.sh"
in_cluster_dir

# up [LOADER-ARGS...]: one loader with a 1 MiB region; NODE, SUPERVISOR, WORKER.
up() {
  expect 0 '1 loaders up' -- "$SRC/scripts/cluster" up 1 --tls "$TLS" --bin "$BIN" -- --spin-us 0 --region chase=1M "$@"
  NODE=$(awk '/address/ {print $2; exit}' "$XCARGO_CLUSTER_DIR/cluster.yaml")
  SUPERVISOR=$(awk '{print $1}' "$XCARGO_CLUSTER_DIR/pids")
  measure WORKER "the worker's pid" pgrep -x xcargo-loader -P "$SUPERVISOR"
}
down() { "$SRC/scripts/cluster" down >>"$DISCARD" 2>&1; }
LOG=$XCARGO_CLUSTER_DIR/node-0.log
diagnose "$LOG"  # a failure shows the node's last lines (why a worker stopped, say)

# Default: no one-sided access. Writes and reads at addresses the attacker names, with a
# remote key it packed itself, reach nothing; region reads outside the region are refused.
up
source "$XCARGO_CLUSTER_DIR/env"
expect 0 '' -- bash -c "'$BIN/xcargo-memory-attack' --to '$NODE' --region chase --key '$XCARGO_IDENTITY' > attack.out 2>&1"
cat attack.out | sed 's/^/    /'
# (Through the same-host door, over sysv, a key this client packed for its own memory does not
# even unpack for the endpoint; over tcp UCX sends the put and the node, without RMA, refuses it.)
for line in 'put-anywhere: refused.*(still answers|does not unpack)' 'get-anywhere: refused' 'region-key: refused: address 0, 0-byte key' \
            'read-past-end: refused: out_of_range' 'read-overflow: refused: out_of_range' 'read-unknown: refused: no_region' \
            'read-inside \(control\): ok'; do
  check "attack report: $line" grep -Eq "$line" attack.out
done
# The shared-memory lane (wire-protocol.md section 8): what a client on this host writes into
# it is checked like a request from UCX, and a slot that lies about its length ends the lane.
# Its flood and unread cases each stop after 60 s at most: the check's ceiling is above their sum
# (60 s in all was hit on a machine with both cores kept busy).
# Its unread case goes to a loader of requests and replies of 4 MiB at most, whose unread
# replies' limit (twice that) a client that reads none meets after about 2000 replies,
# whatever the machine's speed (the default's 131072 took most of 60 s on a busy machine).
"$BIN/xcargo-loader" --listen 127.0.0.1:0 $(ucx_net) --trust "$XCARGO_CLUSTER_DIR/trust" --clients "$XCARGO_CLUSTER_DIR/clients/clients.txt" \
  --ready-file small.addr --spin-us 0 --max-cargo 4194304 --max-input 4194304 --max-reply 4194304 2> small.log &
pids+=($!)
disown $!
wait_file small.addr || echo "FAIL: the small loader did not start: $(tail -3 small.log)"
EXPECT_TIMEOUT=300 expect 0 '' -- bash -c "'$BIN/xcargo-lane-attack' --to '$NODE' --unread-to '$(cat small.addr)' --key '$XCARGO_IDENTITY' > lane.out 2>&1"
cat lane.out | sed 's/^/    /'
for line in 'before-auth: refused: unauthenticated' 'control: refused: a sealed list in the lane was answered' \
            'unsealed: refused' 'lying-taken: refused: the replies past the ring came through UCX' \
            'overlong: refused: the connection is still answered through UCX' 'flood: refused: .*the node still answers' \
            'unread: refused: .*the worker closed the connection; a new client is answered' \
            'forward: refused: a forward in the lane was answered unauthenticated'; do
  check "lane attack report: $line" grep -Eq "$line" lane.out
done
check "lane attack report: each of 6 frames only UCX may carry stopped its lane" \
  test "$(grep -c 'handshake: refused: .* stopped the lane; the connection is answered through UCX' lane.out)" -eq 6
eventually 30 "the worker logged the lane it stopped reading" lines_at_least 1 'stopped reading the shared-memory lane of .*claims' "$LOG"
# The flood's failed invocations (up to 100,000, as many as the tool sent in its 60 s): a
# bounded number of lines each, then lines that count the rest, every one of them counted.
flood_sent=$(sed -n 's/^flood: refused: \([0-9]*\) failing invocations.*/\1/p' lane.out)
flood_counted() {  # the log's lines about the flood: at most 1000, counting at least $flood_sent
  local lines sum
  lines=$(grep -c '/lane_flood -> not_loaded' "$LOG")
  sum=$(grep '/lane_flood -> not_loaded' "$LOG" | sed -n 's/.*(\([0-9]*\) more such lines.*/\1/p' | awk '{s += $1} END {print s + 0}')
  echo "$lines lines, $sum summed"
  [ "$lines" -le 1000 ] && [ $((lines + sum)) -ge "${flood_sent:-1}" ]
}
eventually 30 "the log counts all ${flood_sent:-?} failed invocations of the flood in at most 1000 lines" flood_counted ||
  echo "    | $(flood_counted)"
eventually 30 "the worker logged the connection that did not read its replies" grep -q 'closing the connection from .*replies its client has not read' small.log
eventually 30 "the worker logged the frames only UCX may carry" lines_at_least 6 'stopped reading the shared-memory lane of .*which only UCX may carry' "$LOG"
check "the worker that was attacked is still the one serving" test "$(pgrep -x xcargo-loader -P "$SUPERVISOR")" = "$WORKER"
expect 0 'chase +1048576' -- "$X" ls --to "$NODE"
lanes=$("$X" ls --to "$NODE" --json | python3 -c 'import json, sys; s = json.load(sys.stdin)["stats"]; print(s["lanes_opened"], s["lane_requests"])')
check "a client on this host used a lane ($lanes: lanes opened, requests through lanes)" test "${lanes%% *}" -ge 3 -a "${lanes##* }" -ge 2
check "XCARGO_LANES=0: no lane" bash -c "XCARGO_LANES=0 '$X' ls --to '$NODE' --json | python3 -c 'import json, sys; s = json.load(sys.stdin)[\"stats\"]; sys.exit(s[\"lanes_opened\"] != ${lanes%% *})'"
eventually 30 "the loader logged the refused region reads" lines_at_least 1 'refused region read' "$LOG"
check "no worker restarted" bash -c "! grep -q 'worker stopped' '$LOG'"
down

# Over shared memory, a local peer that takes a slot in the worker's receive queue and never
# fills it (what a client killed in the middle of a send does) stops delivery to the worker
# for everyone: the worker's probe notices and the worker is replaced.
if [ "$TLS" = shm ]; then
  up
  expect 0 'wedged the receive FIFO' -- "$BIN/xcargo-shm-wedge" --to "$NODE" --pid "$WORKER"
  eventually 120 "the worker noticed that its receive queue is wedged" lines_at_least 1 "no new connection to the worker was answered" "$LOG"
  eventually 120 "a new worker serves over shared memory" bash -c "[ \"\$(pgrep -x xcargo-loader -P $SUPERVISOR)\" != $WORKER ] && '$X' ls --to '$NODE'" || {
    # What the loader did meanwhile (its log is started afresh by the next `up`).
    echo "    | workers now: $(pgrep -x xcargo-loader -P "$SUPERVISOR" | tr '\n' ' ')(was $WORKER); standby: $(pgrep -x xcargo-standby -P "$SUPERVISOR")"
    "$X" ls --to "$NODE" 2>&1 | tail -3 | sed 's/^/    | ls: /'
    grep -v 'closed without authenticating' "$LOG" | tail -15 | cut -c1-300 | sed 's/^/    | /'
  }
  down
fi

# One-sided reads over transports that emulate them in software: refused without the
# admin's statement that the network is trusted.
expect 2 'emulate one-sided access in software' -- env UCX_TLS=shm,tcp "$BIN/xcargo-loader" --listen 127.0.0.1:0 \
  --trust "$XCARGO_CLUSTER_DIR/trust" --allow-anyone --one-sided-regions
cat > one-sided.yaml <<YAML
one-sided-regions: true
YAML
expect 2 'hint: set trusted-network: true' -- env UCX_TLS=shm,tcp "$BIN/xcargo-loader" --config one-sided.yaml --listen 127.0.0.1:0 \
  --trust "$XCARGO_CLUSTER_DIR/trust" --allow-anyone

# With it, the loader says what that costs, and the attack tool sees the hole it opens (the
# test of the test: it reports what gets through).
up --one-sided-regions --trusted-network
eventually 30 "the loader warned" lines_at_least 1 'warning: one-sided-regions on a trusted network' "$LOG"
expect 1 'put-anywhere: GOT THROUGH' -- "$BIN/xcargo-memory-attack" --to "$NODE" --region chase --key "$XCARGO_IDENTITY"
down

finish
