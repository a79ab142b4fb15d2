#!/usr/bin/env bash
# Tenants (tenants: per-key): one loader, clients that do not trust each other. Each key, or
# each group of keys with the same tenant= in the clients file, gets workers of its own on
# its first connection, with node memory, cargos, cache and a log tag of its own; a crash in
# one tenant's worker leaves the others' workers running; over the same-host door and TLS.
# usage: tenants_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
LOADER=$(dirname "$X")/xcargo-loader
source "$(dirname "$0")/lib.sh"
cd "$TMP"
mkdir -p trust etc/clients
"$X" keygen -o signer >>"$DISCARD" && cp signer.pub trust/
for who in alice bob carol dave; do "$X" keygen -o "$who" >>"$DISCARD"; done
key() { sed -n 2p "$1.pub"; }
{
  echo "$(key alice) alice"
  echo "$(key bob) bob"
  echo "tenant=lab $(key carol) carol"
  echo "tenant=lab verbs=run,ls $(key dave) dave"
} > etc/clients/clients.txt
"$X" build "$SRC/tests/kernels/memory.c" -o memory.xcargo --key signer -t x86_64 >>"$DISCARD" 2>&1
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key signer -t x86_64 >>"$DISCARD" 2>&1
"$X" keygen -o etc/node >>"$DISCARD"

# What per-key cannot serve is refused at start, saying why.
expect 2 'tenants: per-key needs clients' -- "$LOADER" --listen 127.0.0.1:0 --trust trust --allow-anyone --tenants per-key
expect 2 'tenants: per-key with trusted-network' -- \
  "$LOADER" --listen 127.0.0.1:0 --trust trust --clients etc/clients/clients.txt --tenants per-key --trusted-network
expect 2 "tenants some: must be per-key or single" -- "$LOADER" --listen 127.0.0.1:0 --trust trust --clients etc/clients/clients.txt --tenants some

"$LOADER" --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --trust trust --clients etc/clients/clients.txt --tenants per-key \
  --node-key etc/node --cache cache --ready-file addr 2> node.log &
SUPERVISOR=$!
pids+=($SUPERVISOR)
diagnose node.log
wait_file addr || echo "FAIL: the loader did not start: $(tail -3 node.log)"
NODE=$(head -1 addr)
TLS=$(sed -n 2p addr)
"$X" known-nodes --file known add "${TLS#tls://}" etc/node.pub >>"$DISCARD" 2>&1
export XCARGO_KNOWN_NODES=$TMP/known
eventually 10 "the loader says it serves 3 tenants" grep -q '3 tenants, each with workers of its own from its first connection' node.log
check "no worker runs before a tenant's first connection" test -z "$(pgrep -x xcargo-loader -P "$SUPERVISOR")"

# Node memory is each tenant's own: the same kernel counts apart for alice and for bob, and
# carol and dave (tenant lab) share theirs.
expect 0 '^5$' -- "$X" run memory.xcargo --entry add --arg u64:5 --result u64 --to "$NODE" --identity alice
expect 0 '^1$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$NODE" --identity bob
expect 0 '^7$' -- "$X" run memory.xcargo --entry add --arg u64:2 --result u64 --to "$NODE" --identity alice
expect 0 '^10$' -- "$X" run memory.xcargo --entry add --arg u64:10 --result u64 --to "$NODE" --identity carol
expect 0 '^11$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$TLS" --identity dave  # over TLS: the same tenant
eventually 10 "three tenants' workers serve" test "$(pgrep -x xcargo-loader -P "$SUPERVISOR" | wc -l)" -eq 3
# Cargos are each tenant's own: what alice pushed, bob's workers have not loaded.
expect 0 'pushed' -- "$X" push hello.xcargo --to "$NODE" --identity alice
measure BOBS "bob's list" "$X" ls --to "$NODE" --identity bob
check "bob's workers do not list alice's cargo" bash -c "! grep -q hello <<<'$BOBS'"
check "... only his own" grep -q memory <<<"$BOBS"
# Each tenant's log lines say whose they are, and its cache is a directory of its own.
ALICE=key-$(grep -o 'key [0-9a-f]\{16\} (alice)' node.log | head -1 | cut -d' ' -f2)
check "alice's lines are tagged with her tenant" grep -q "tenant $ALICE: accepted client from .* (alice)" node.log
check "lab's lines too" grep -q "tenant lab: accepted client from .* (dave)" node.log
check "each tenant has a cache directory of its own" test -d "cache/tenants/$ALICE" -a -d cache/tenants/lab

# A kernel of one tenant that scans its worker's memory (heap, stacks, anonymous and System V
# mappings) for another tenant's input, there at the same time, finds none of it; the same
# scan finds its own tenant's (the control). The input stays live in a kernel (hold) until
# the scan is done (release).
"$X" build "$SRC/tests/kernels/adversary.c" -o adv.xcargo --key signer -t x86_64 >>"$DISCARD" 2>&1
SLOT=$(syscall_slot "$LOADER")
/usr/bin/python3 - <<'PY'
import os
for who in ("alice", "bob"):  # 32 bytes each, new each run
    secret = b"secret-of-" + who.encode() + b"-" + os.urandom(16).hex().encode()[:31 - len(who) - 10]
    open(who + ".secret", "wb").write(secret * 4)
    open(who + ".masked", "wb").write(bytes(b ^ 0x5a for b in secret))
PY
# spy_on WHO: what alice's scan finds of WHO's secret while WHO's hold keeps it in WHO's worker.
spy_on() {
  "$X" run adv.xcargo --entry hold --input "$1.secret" --result i64 --to "$NODE" --identity "$1" > "hold-$1.out" 2>&1 &
  local h=$!
  eventually 30 "$1's kernel holds the secret" bash -c "'$X' run adv.xcargo --entry held --result i64 --to '$NODE' --identity $1 2>>'$DISCARD' | grep -qx 1"
  "$X" run adv.xcargo --entry escape_find_bytes --arg "u64:$SLOT" --input "$1.masked" --result i64 --to "$NODE" --identity alice 2>>"$DISCARD"
  "$X" run adv.xcargo --entry release --result i64 --to "$NODE" --identity "$1" >>"$DISCARD" 2>&1
  wait "$h"
}
measure OWN "alice's scan, beside her own input" spy_on alice
check "the scan finds alice's own input beside it (the control)" test "${OWN:-0}" -ge 1
measure OTHER "alice's scan, beside bob's input" spy_on bob
check "alice's kernel finds none of bob's input" test "$OTHER" = 0
check "bob's kernel ran and saw its input" grep -qx 128 hold-bob.out

# A crash in alice's worker replaces hers alone: bob's worker is the same process, serves on,
# and alice's node memory outlives her worker.
# worker_of NAME: the worker that accepted NAME's latest connection.
worker_of() { grep -o "xcargo-loader\[[0-9]*\]: tenant [a-z0-9-]*: accepted client from .* ($1)" node.log | tail -1 | grep -o '\[[0-9]*\]' | tr -d '[]'; }
bob_worker() { worker_of bob; }
BOB_PID=$(bob_worker)
check "bob's worker is known" test -n "$BOB_PID"
expect 3 'crashed' -- "$X" run memory.xcargo --entry boom --to "$NODE" --identity alice
eventually 30 "alice's worker is replaced" grep -q "tenant $ALICE: worker stopped: .*replaced by its standby\|tenant $ALICE: worker stopped: .*restarting it" node.log
check "bob's worker still runs" kill -0 "$BOB_PID"
expect 0 '^2$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$NODE" --identity bob
eventually 30 "alice is served again, her count kept" bash -c "\"$X\" run memory.xcargo --entry add --arg u64:1 --result u64 --to \"$NODE\" --identity alice | grep -qx 8"
check "bob was served by the same worker" test "$(bob_worker)" = "$BOB_PID"
# alice's kernel crashing her workers over and over (a crash loop) leaves bob served, every
# request answered right, by the same worker (scripts/bench-tenants measures his latency).
( for i in $(seq 15); do "$X" run memory.xcargo --entry boom --to "$NODE" --identity alice >>"$DISCARD" 2>&1; done ) &
LOOP=$!
for i in $(seq 20); do
  "$X" run memory.xcargo --entry add --arg u64:0 --result u64 --to "$NODE" --identity bob >> bob-during.out 2>&1 || echo "failed: $?" >> bob-during.out
done
wait "$LOOP"
check "bob's 20 requests during alice's crash loop were all answered" test "$(grep -cx 2 bob-during.out)" -eq 20
check "... by the same worker" test "$(bob_worker)" = "$BOB_PID"
check "alice's workers did crash meanwhile" test "$(grep -c "tenant $ALICE: worker stopped" node.log)" -ge 5

# A key that is no client is refused at the door, before any worker.
STRANGER=$("$X" keygen -o stranger | awk '/^key id/ {print $3}')
expect 5 "not among this loader's clients" -- "$X" ls --to "$NODE" --identity stranger
check "no worker was started for it" bash -c "! grep -q 'tenant key-$STRANGER' node.log"

# A connection's route picks the tenant's worker, and that worker accepts the tenant's keys
# alone: routed as alice, bob's proof is refused (and the usual attacks on authentication
# fail there too).
eventually 30 "alice is served after her crash loop" "$X" ls --to "$NODE" --identity alice
expect 0 '' -- bash -c "'$(dirname "$X")/xcargo-auth-attack' --to '$NODE' --key alice --stranger stranger --other-tenant bob --idle-s 30 > attack.out 2>&1"
check "bob's key is refused by alice's worker" grep -q '^other-tenant: refused: unauthenticated' attack.out
check "... where alice's own proof is served" grep -q '^control: own proof: ok; ls: served' attack.out

# Revocation ends the workers that ran what it revokes, and anything their kernels left in
# them; other tenants' workers serve on. A cargo revoked by digest: lab ran it, bob did not.
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE" --identity carol
LAB_PID=$(worker_of carol)
BOB_PID=$(bob_worker)
check "lab's and bob's workers are known" test -n "$LAB_PID" -a -n "$BOB_PID"
digest=$("$X" inspect hello.xcargo --json | /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["digest"])')
echo "sha256:$digest  # revoked by the test" > trust/revoked-cargos.txt
eventually 30 "lab's worker, which ran the revoked cargo, ends" bash -c "! kill -0 $LAB_PID 2>/dev/null"
check "its last line says why" grep -q "tenant lab: trust: 1 cargos that ran here are no longer trusted; ending this worker in order" node.log
expect 1 "revoked" -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --to "$NODE" --identity carol
expect 0 '^3$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$NODE" --identity bob
check "bob's worker, which never ran it, is the same process" test "$(bob_worker)" = "$BOB_PID"
rm trust/revoked-cargos.txt

# A key removed from the clients file: its tenant ends with its workers (and what its kernels
# left in them); its connections are refused at the door.
eventually 30 "alice is served" "$X" ls --to "$NODE" --identity alice
ALICE_PID=$(worker_of alice)
check "alice's worker is known, and runs" kill -0 "$ALICE_PID"
sed -i '/ alice$/d' etc/clients/clients.txt
eventually 30 "alice's worker ends when her key is removed" bash -c "! kill -0 $ALICE_PID 2>/dev/null"
eventually 30 "her tenant ends" grep -q "clients: tenant $ALICE has no key any more: its workers end" node.log
expect 5 "not among this loader's clients" -- "$X" ls --to "$NODE" --identity alice
expect 5 "not among this loader's clients" -- "$X" ls --to "$TLS" --identity alice
expect 0 '^4$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$NODE" --identity bob
check "bob's worker is still the same process" test "$(bob_worker)" = "$BOB_PID"
# One key of a group removed: the group's serving worker is replaced; its other key is served.
expect 0 '' -- "$X" ls --to "$NODE" --identity dave
LAB_PID=$(worker_of dave)
reloads=$(grep -c 'clients: reloaded; [0-9]* tenants' node.log)
sed -i '/ dave$/d' etc/clients/clients.txt
eventually 30 "lab's worker, which served dave, ends" bash -c "! kill -0 $LAB_PID 2>/dev/null"
eventually 30 "the loader rereads its tenants" lines_at_least $((reloads + 1)) 'clients: reloaded; [0-9]* tenants' node.log
expect 5 "not among this loader's clients" -- "$X" ls --to "$NODE" --identity dave
expect 0 '^12$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$NODE" --identity carol

# tenant-users: dynamic (a loader started as root): each tenant's workers and compile service
# under a uid and gid of their own, from 61184-65519, its cache theirs; no same-host door. A
# kernel then attaches no System V memory but what is open to everyone (the loader above,
# still running, has segments of root's).
# The control, and the limit loader/SECURITY.md states: tenants that share the loader's user
# share System V memory, which a kernel attaches by id (other tenants' workers' segments).
measure SHARED "what bob's kernel attaches with shared users" \
  "$X" run adv.xcargo --entry escape_sysv_attach --arg "u64:$SLOT" --result i64 --to "$NODE" --identity bob
check "with shared users a kernel attaches other segments (the probe works)" test "${SHARED:-0}" -ge 1
if [ "$(id -u)" = 0 ]; then
  expect 2 'tenant-users: dynamic is for tenants: per-key' -- "$LOADER" --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 \
    --trust trust --clients etc/clients/clients.txt --tenant-users dynamic
  expect 2 'tenant-users: dynamic needs tls-listen' -- "$LOADER" --listen 127.0.0.1:0 --trust trust \
    --clients etc/clients/clients.txt --tenants per-key --tenant-users dynamic
  chmod 755 "$TMP"  # the workers' users read the trust directory and the clients file
  { echo "$(key alice) alice"; echo "$(key bob) bob"; } > etc/clients/dynamic.txt
  "$LOADER" --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --trust trust --clients etc/clients/dynamic.txt --tenants per-key \
    --tenant-users dynamic --node-key etc/node --cache dcache --ready-file daddr 2> dnode.log &
  pids+=($!)
  diagnose dnode.log
  wait_file daddr || echo "FAIL: the loader did not start: $(tail -3 dnode.log)"
  DTLS=$(sed -n 2p daddr)
  "$X" known-nodes --file known add "${DTLS#tls://}" etc/node.pub >>"$DISCARD" 2>&1
  check "it says it has no same-host door" grep -q 'no same-host door; clients use the TLS front door' dnode.log
  expect 0 '^1$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$DTLS" --identity alice
  expect 0 '^1$' -- "$X" run memory.xcargo --entry add --arg u64:1 --result u64 --to "$DTLS" --identity bob
  # uid_of NAME: the uid of the worker that accepted NAME in dnode.log.
  uid_of() {
    local pid
    pid=$(grep -o "xcargo-loader\[[0-9]*\]: tenant [a-z0-9-]*: accepted client from .* ($1)" dnode.log | tail -1 | grep -o '\[[0-9]*\]' | tr -d '[]')
    [ -n "$pid" ] && awk '/^Uid:/ {print $2}' "/proc/$pid/status"
  }
  measure AUID "alice's worker's uid" uid_of alice
  measure BUID "bob's worker's uid" uid_of bob
  check "alice's and bob's workers run under uids of their own" test "$AUID" -ge 61184 -a "$AUID" -le 65519 -a "$BUID" -ge 61184 -a "$BUID" -le 65519 -a "$AUID" != "$BUID"
  check "their caches are theirs" test "$(stat -c %u "dcache/tenants/$ALICE")" = "$AUID"
  expect 0 '^0$' -- "$X" run adv.xcargo --entry escape_sysv_attach --arg "u64:$SLOT" --result i64 --to "$DTLS" --identity alice
fi
finish
