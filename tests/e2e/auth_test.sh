#!/usr/bin/env bash
# Client authentication (loader/SECURITY.md, "Clients"): nothing is served before a client
# proves an authorized key; proofs cannot be forged or replayed; keys get only their verbs;
# every accepted and refused client is logged; an open loader says so.
# usage: auth_test.sh XCARGO SOURCE_DIR TLS   (TLS: tcp or shm)
X=$1
SRC=$2
TLS=$3
BIN=$(dirname "$X")
source "$(dirname "$0")/lib.sh"
in_cluster_dir

expect 0 '1 loaders up' -- "$SRC/scripts/cluster" up 1 --tls "$TLS" --bin "$BIN" -- --spin-us 0
source "$XCARGO_CLUSTER_DIR/env"
NODE=$(awk '/address/ {print $2; exit}' "$XCARGO_CLUSTER_DIR/cluster.yaml")
LOG=$XCARGO_CLUSTER_DIR/node-0.log
diagnose "$LOG"  # a failure shows the node's last lines (why a worker stopped, say)
ME=$XCARGO_IDENTITY
"$X" keygen -o stranger >>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key "$XCARGO_CLUSTER_DIR/signer.key" 2>>"$DISCARD"

# The protocol-level attacks (requests first, unknown key, forged and replayed proofs, a
# second proof, an idle connection past the 10 s deadline).
expect 0 '' -- bash -c "'$BIN/xcargo-auth-attack' --to '$NODE' --key '$ME' --stranger stranger --idle-s 30 > attack.out 2>&1"
sed 's/^/    /' attack.out
for line in 'requests-first: refused: ls unauthenticated, stats unauthenticated, has unauthenticated, push unauthenticated, invoke unauthenticated, region_read unauthenticated' \
            'stranger: refused: unauthenticated: the key is not among' 'forged: refused: unauthenticated: the signature does not verify' \
            'control: own proof: ok; ls: served' 'second-proof: refused: no answer' 'unsealed: refused: dropped unanswered' 'control: after the second proof, ls: served' \
            'replay: refused: unauthenticated: the signature does not verify' 'idle: refused: closed by the node' \
            'stray-types: refused: the node still answers' 'flood: refused: [0-9]+ refusals, then the connection was closed' \
            'old-version: refused: hello: unsupported_version; proof after it: (connection closed|no answer|unauthenticated)'; do
  check "attack report: $line" grep -Eq "$line" attack.out
done

# The CLI: no identity, an unknown one, the right one.
expect 5 'serves only authenticated clients, and no identity was given' -- env -u XCARGO_IDENTITY HOME="$TMP" "$X" ls --to "$NODE"
expect 5 'refused identity [0-9a-f]{16} \(stranger\)' -- "$X" ls --to "$NODE" --identity stranger
expect 5 'refused identity' -- env XCARGO_IDENTITY=stranger "$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --to "$NODE"
expect 0 '^42$' -- "$X" --identity "$ME" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
# An encrypted identity (the same key, encrypted by openssl): its passphrase from the
# environment; a wrong one, and an identity file others may read, are refused before the proof.
openssl pkcs8 -topk8 -scrypt -in "$ME" -out me-enc -passout pass:id-horse && chmod 600 me-enc
expect 0 '^42$' -- env XCARGO_PASSPHRASE=id-horse "$X" --identity me-enc run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
expect 0 'hello' -- env ID_PASS=id-horse "$X" ls --to "$NODE" --identity me-enc --passphrase-env ID_PASS
expect 2 'identity: me-enc: wrong passphrase \(or damaged key\)' -- env XCARGO_PASSPHRASE=not-it "$X" ls --to "$NODE" --identity me-enc
cp "$ME" me-open && chmod 644 me-open
expect 2 'identity: me-open: private key permissions 0644 are too open' -- "$X" ls --to "$NODE" --identity me-open
expect 2 'hint: chmod 600 me-open' -- "$X" ls --to "$NODE" --identity me-open
mkdir -p "$TMP/home/.config/xcargo" && cp "$ME" "$TMP/home/.config/xcargo/identity"
expect 0 '^42$' -- env -u XCARGO_IDENTITY HOME="$TMP/home" "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
# A client's name: its address over tcp, its process through the same-host door (shm).
WHO='(127\.0\.0\.1:[0-9]+|pid [0-9]+ on this host \(uid [0-9]+\))'
eventually 30 "accepted clients are logged with address and key" lines_at_least 1 "accepted client from $WHO"': key [0-9a-f]{16} \(cluster-user\): may push,run,ls,read' "$LOG"
eventually 30 "refused clients are logged with address and key" lines_at_least 1 "refused client from $WHO"': key [0-9a-f]{16}: the key is not among' "$LOG"
eventually 30 "a connection that never authenticated is logged" lines_at_least 1 "closed the connection from $WHO"': not authenticated within 10 s' "$LOG"
check "no worker restarted" bash -c "! grep -q 'worker stopped' '$LOG'"

# One client cannot hold others up: while a push's data stops arriving, and 100 connections
# sit unauthenticated, other clients are served; the stalled transfer is dropped (10 s plus
# 10 MB/s: 16 s for its 64 MiB) and extra strangers' connections are refused.
# (Through the same-host door each idle connection is a UCX worker with shared memory: 30.)
idle=100
[ "$TLS" = tcp ] || idle=30
"$BIN/xcargo-staller" --to "$NODE" --key "$ME" --bytes 67108864 --hold-s 25 --idle $idle > staller.out 2>&1 &
staller=$!
pids+=($staller)
disown $staller
eventually 60 "the staller started its push" grep -q stalling staller.out
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
expect 0 'hello' -- "$X" ls --to "$NODE"
eventually 60 "the stalled push is dropped" lines_at_least 1 "dropped a request of type 3 from $WHO"': its 67108864 bytes did not arrive within 16 s' "$LOG" ||
  grep -E 'push|request of type 3' "$LOG" | tail -5 | sed 's/^/    | node: /'
eventually 60 "the staller is done" grep -q 'held 25 s' staller.out
check "the node closed the staller's connection" grep -q 'closed by the node: yes' staller.out ||
  sed 's/^/    | staller: /' staller.out
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
# More than 128 connections from one host that do not authenticate: the rest are refused.
# Over tcp only: one process cannot open that many shared-memory workers (about 100 here).
if [ "$TLS" = tcp ]; then
  expect 0 'held 0 s' -- "$BIN/xcargo-staller" --to "$NODE" --key "$ME" --bytes 1024 --hold-s 0 --idle 140
fi
# A stranger that keeps 200 connections open to the UCX listener and opens a new one each
# time the node closes or refuses one: the worker serves on (UCX 1.13's tcp connection manager
# aborted the process when connections it refused or closed early went away before their
# handshake was done). Over tcp only: without trusted-network there is no listener (the
# same-host door's own limit is door_keeper_test's).
if [ "$TLS" = tcp ]; then
  expect 0 'held 200 connections for 15 s' -- "$BIN/xcargo-conn-flood" --to "$NODE" --connections 200 --seconds 15
  # Its 200 connections open within milliseconds from one UCX worker, so past 128 of them wait
  # unauthenticated at once however slow the machine (the staller's 140, each its own worker,
  # took over 10 s, the node's deadline for them, beside busy cores): each newer one takes
  # the oldest one's place.
  eventually 30 "a host's connections past 128 unauthenticated ones make way, oldest first" lines_at_least 1 \
    'closing the oldest connection still to authenticate, from 127\.0\.0\.1:[0-9]+, for a new one from 127\.0\.0\.1: too many wait' "$LOG"
fi
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
check "no worker restarted under the connection flood" bash -c "! grep -q 'worker stopped' '$LOG'"
# Requests in flight: past 128 on one connection, or 512 over one key's connections, the
# rest are answered `limit` at once. Whether any is refused here depends on how fast the node
# drains them against how fast the senders fill (the machine's load), so these checks hold
# whatever the timing: every request is answered, a refusal names the right limit and is
# logged, and the node serves on. That the limits trip at exactly 128 and 512 is intake_test's.
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key "$XCARGO_CLUSTER_DIR/signer.key" 2>>"$DISCARD"
in_flight() {  # in_flight NAME LIMIT ARGS...: sends ARGS' requests; any refusal must be LIMIT's
  local name=$1 limit=$2
  shift 2
  timeout "${EXPECT_TIMEOUT:-60}" "$BIN/xcargo-in-flight" --to "$NODE" --key "$ME" --cargo faults.xcargo "$@" > "$name.out" 2>&1
  check "$name: every request answered (exit $?)" grep -Eq '^sent [0-9]+: [0-9]+ ok, [0-9]+ limit, 0 other, 0 missing$' "$name.out" ||
    sed 's/^/    | /' "$name.out" | head -12
  if grep -q '^first limit' "$name.out"; then
    check "$name: a refusal names the limit" grep -q "^first limit: $limit" "$name.out" || grep '^first limit' "$name.out" | sed 's/^/    | /'
    # Logged at most once a second (whichever limit came first in that second).
    eventually 30 "$name: requests past a limit in flight are logged" lines_at_least 1 \
      "refused a request from $WHO \(key [0-9a-f]{16} \(cluster-user\)\): this (connection|key) has [0-9]+ requests in flight" "$LOG"
  fi
  sed -n 's/^sent/    '"$name"': sent/p' "$name.out"
}
in_flight connection 'this connection has 128 requests in flight' --entry burn --u64 20 --count 300
in_flight key 'this key has 512 requests in flight' --entry burn --u64 10 --count 120 --connections 6
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
check "no worker restarted" bash -c "! grep -q 'worker stopped' '$LOG'"
check "refusals on one connection are logged at most 3 times" bash -c "[ \$(grep -c 'refused request type 9 from' '$LOG') -le 12 ]"

# Per-key verbs: a key that may only list.
printf 'verbs=ls %s lister\n' "$(sed -n 2p "$ME.pub")" > limited.txt
start() {  # start NAME ARGS...: a loader of its own; sets NAME to its address
  local name=$1
  shift
  "$BIN/xcargo-loader" --listen 127.0.0.1:0 $(ucx_net) --trust "$XCARGO_CLUSTER_DIR/trust" --ready-file "$name.addr" --spin-us 0 "$@" 2> "$name.log" &
  pids+=($!)
  disown $!
  wait_file "$name.addr" || echo "FAIL: loader $name did not start: $(tail -3 "$name.log")"
  printf -v "$name" '%s' "$(cat "$name.addr")"
}
start limited --clients limited.txt
expect 0 'nothing loaded' -- "$X" ls --to "$limited"
expect 5 'key [0-9a-f]{16} \(lister\) may ls, not push' -- "$X" push hello.xcargo --to "$limited"
expect 5 'may ls, not push,run' -- "$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --to "$limited"
# A client that does not take its replies: once its unread replies would pass twice the
# largest request or reply the node accepts (here 4 MiB each), its connection is closed.
start reader --clients "$XCARGO_CLUSTER_DIR/clients/clients.txt" --max-cargo 4194304 --max-input 4194304 --max-reply 4194304
# The client holds until the node has logged the close, however long its kernels took.
EXPECT_TIMEOUT=120 expect 0 'closed by the node: 1 of 1 connections' -- bash -c "
  '$BIN/xcargo-in-flight' --to '$reader' --key '$ME' --cargo faults.xcargo --entry sized_reply --u64 1048576 --count 40 --hold-until reader.closed &
  tool=\$!
  for _ in \$(seq 1200); do grep -q 'replies its client has not read' reader.log && break; sleep 0.05; done
  touch reader.closed
  wait \$tool"
eventually 30 "unread replies are logged" lines_at_least 1 "closing the connection from $WHO"' \(key [0-9a-f]{16} \(cluster-user\)\): this connection has [0-9]+ bytes of replies its client has not read' reader.log
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$reader"
check "the reader's loader did not restart" bash -c "! grep -q 'worker stopped' reader.log"

# The authorized clients are reloaded while the loader runs: a key added is accepted, a key
# removed is refused (on new connections), without a restart.
printf 'verbs=ls %s me\n' "$(sed -n 2p "$ME.pub")" > reload.txt
start reload --clients reload.txt
expect 0 'nothing loaded' -- "$X" ls --to "$reload"
expect 5 'refused identity' -- "$X" ls --to "$reload" --identity stranger
printf 'verbs=ls %s stranger\n' "$(sed -n 2p stranger.pub)" >> reload.txt
eventually 30 "a client key added is accepted without a restart" "$X" ls --to "$reload" --identity stranger
sed -i 1d reload.txt
eventually 30 "a client key removed is refused" bash -c "! '$X' ls --to '$reload' > removed.out 2>&1"
check "the reloads are logged" grep -q 'clients: reloaded 1 authorized keys' reload.log
printf 'verbs=ls,fly %s lister\n' "$(sed -n 2p "$ME.pub")" > bad-verbs.txt
expect 2 "bad-verbs.txt: line 1: unknown verb 'fly'" -- "$BIN/xcargo-loader" --listen 127.0.0.1:0 $(ucx_net) --trust "$XCARGO_CLUSTER_DIR/trust" --clients bad-verbs.txt
expect 2 'no authorized clients' -- "$BIN/xcargo-loader" --listen 127.0.0.1:0 $(ucx_net) --trust "$XCARGO_CLUSTER_DIR/trust"

# An open loader serves anyone, and says so: in its log and to every client.
start open --allow-anyone
expect 0 'warning: .* serves anyone who can reach it \(allow-anyone\)' -- env -u XCARGO_IDENTITY HOME="$TMP" "$X" ls --to "$open"
check "the open loader's log says so" grep -q 'WARNING: allow-anyone' open.log

finish
