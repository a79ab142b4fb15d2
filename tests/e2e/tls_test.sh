#!/usr/bin/env bash
# The TLS front door (format-spec/wire-protocol.md 2.3; loader/SECURITY.md, "The network"):
# clients reach a loader over TLS 1.3 with their identity, pinning the node's key; nothing
# of a request is readable on the wire; a stranger's key, a node with another key, junk
# bytes, a replayed or modified recording get nowhere, and no worker restarts for any of it.
# usage: tls_test.sh XCARGO SOURCE_DIR
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
"$X" keygen -o stranger >>"$DISCARD"
"$X" keygen -o node >>"$DISCARD"
"$X" keygen -o impostor >>"$DISCARD"
export XCARGO_IDENTITY=$TMP/me XCARGO_KNOWN_NODES=$TMP/known_nodes
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k 2>>"$DISCARD"
cat > shout.c <<'C'
#include <xcargo/kernel.h>
/* Replies with its input in capitals: the reply's bytes differ from the request's. */
XC_ENTRY int shout(xc_ctx *ctx, const void *in, size_t in_len) {
  char out[256];
  if (in_len > sizeof out) return 1;
  for (size_t i = 0; i < in_len; i++) {
    char c = ((const char *)in)[i];
    out[i] = c >= 'a' && c <= 'z' ? (char)(c - 32) : c;
  }
  return xc_reply(ctx, out, in_len);
}
C
"$X" build shout.c -o shout.xcargo --key k 2>>"$DISCARD"

"$LOADER" --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --ready-file node.addr --trust trust --clients clients \
  --node-key node 2> node.log &
SUPERVISOR=$!
pids+=($!)
disown $!
wait_file node.addr || echo "FAIL: the loader did not start: $(tail -3 node.log)"
diagnose node.log
NODE=$(sed -n 2p node.addr)  # tls://HOST:PORT
HOSTPORT=${NODE#tls://}
check "the ready file's second line is the front door" grep -Eq '^tls://127\.0\.0\.1:[0-9]+$' <<<"$NODE"
check "the first log line names both transports" grep -Eq "listening on 127\.0\.0\.1:[0-9]+ \(same-host door: UCX over shared memory for this user's processes \(uid [0-9]+\); no UCX port\) and $NODE \(TLS 1\.3 front door" node.log

# UCX trusts every peer that reaches it: without --trusted-network it opens no port at all
# (no listener, no tcp transport: this host's clients of its user come through the same-host
# door, over shared memory). The front door is the only port; the listen address is held
# (bound, not listening), so a TCP connection to it is refused by the kernel. An address
# that other hosts reach is refused, with the way to serve them.
measure PORTS "the ports the loader listens on" listening_on "$SUPERVISOR"
echo "$PORTS" | sed 's/^/    listening: /'
check "the loader listens on one port: its front door" test "$PORTS" = "$HOSTPORT"
UCXPORT=$(head -1 node.addr)
check "a TCP connection to the listen address is refused" \
  "$PY" -c "import socket,sys; h,p=sys.argv[1].rsplit(':',1); s=socket.socket(); s.settimeout(5)
try:
    s.connect((h,int(p))); sys.exit(1)
except ConnectionRefusedError:
    sys.exit(0)" "$UCXPORT"
expect 2 "listen $UCXPORT: cannot take the port: Address already in use" -- \
  "$LOADER" --listen "$UCXPORT" --trust trust --clients clients
expect 2 'listen 0\.0\.0\.0:0: without trusted-network the loader.s UCX serves only this host' -- \
  "$LOADER" --listen 0.0.0.0:0 --trust trust --clients clients
expect 2 'hint: serve other hosts through the TLS front door' -- "$LOADER" --listen 0.0.0.0:0 --trust trust --clients clients
expect 2 'UCX_TLS=tcp: without trusted-network the loader.s UCX serves only this host.s processes of its own user' -- \
  env UCX_TLS=tcp "$LOADER" --listen 127.0.0.1:0 --trust trust --clients clients

# A node whose key is not pinned is refused before anything is sent; pinned, it serves.
expect 5 "this node's key is not known" -- "$X" ls --to "$NODE"
expect 5 'hint: pin it' -- "$X" ls --to "$NODE"
# A bare address of another host is reached over TLS too (never UCX in clear): the same
# refusal, before any connection (10.255.255.1 is nowhere this test reaches).
expect 5 "tls://10\.255\.255\.1:7401: this node's key is not known" -- "$X" ls --to 10.255.255.1:7401
expect 5 'hint: 10\.255\.255\.1:7401 is not a loopback address: it is reached over TLS' -- "$X" ls --to 10.255.255.1:7401
expect 2 'http://127\.0\.0\.1:1: not an address a node serves' -- "$X" ls --to http://127.0.0.1:1
expect 0 "pinned to key" -- "$X" known-nodes add "$HOSTPORT" node.pub
expect 0 "$HOSTPORT" -- "$X" known-nodes list
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
expect 0 '^HELLO TLS$' -- "$X" run shout.xcargo --entry shout --arg "str:hello tls" --result str --to "$NODE"
expect 0 'hello' -- "$X" ls --to "$NODE"
eventually 30 "the client is logged with its key" lines_at_least 1 'accepted client from 127\.0\.0\.1:[0-9]+: key [0-9a-f]{16}' node.log

# Another key at a pinned address (an impostor, or a changed node): refused in the handshake.
expect 0 '' -- "$X" known-nodes --file other_known add "$HOSTPORT" impostor.pub
expect 5 'the node proved key [0-9a-f]{16}, not the expected' -- env XCARGO_KNOWN_NODES=other_known "$X" ls --to "$NODE"
# A client key the node does not know never gets past the handshake.
expect 5 "refused this client's key" -- "$X" ls --to "$NODE" --identity stranger
eventually 30 "the stranger's handshake is logged as refused" \
  lines_at_least 1 'refused a TLS connection from 127\.0\.0\.1:[0-9]+: .*not among the node.s authorized keys' node.log

# Bytes that are not TLS: zeros, an HTTP request, a megabyte of random bytes, a UCX tcp
# connection request. Without a route first the supervisor's keeper closes the connection;
# after one, the worker refuses the handshake. No worker restarts; the node serves on.
junk() {  # junk NAME [routed]: writes the bytes of NAME to the front door, then reads until it closes
  $PY - "$HOSTPORT" "$1" "${2:-}" <<'PY'
import os, socket, sys
host, port = sys.argv[1].rsplit(":", 1)
kind = sys.argv[2]
data = {"zeros": bytes(64), "http": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "random": os.urandom(1 << 20),
        "ucx": (0xCCCCCCCC).to_bytes(8, "little") + bytes(56) + b"\x07" * 64}[kind]
if sys.argv[3] == "routed":
    data = bytes.fromhex("584344520103000020000000") + bytes(32) + data
s = socket.create_connection((host, int(port)), timeout=20)
try:
    s.sendall(data)
    while s.recv(65536):
        pass
except OSError:
    pass
PY
}
for kind in zeros http random ucx; do
  check "junk ($kind) is answered by a closed connection" junk "$kind"
  check "so is junk ($kind) after a route" junk "$kind" routed
done

# Connections that send their route (wire-protocol.md 2.3) and then never say a word, more
# than a host may have waiting (128), held open and reopened as the node closes them: each
# newcomer takes the oldest one's place, so a client still gets in (the other users of a host
# share its loopback address).
$PY - "$HOSTPORT" 200 20 <<'PY' > silent.out 2>&1 &
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
n, seconds = int(sys.argv[2]), float(sys.argv[3])
ROUTE = bytes.fromhex("584344520103000020000000") + bytes(32)
def routed():
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(ROUTE)
    return s
conns, reopened, end = [], 0, time.time() + seconds
while len(conns) < n:
    conns.append(routed())
print("holding", n, flush=True)
while time.time() < end:
    for i, s in enumerate(conns):
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                raise ConnectionResetError
        except BlockingIOError:
            continue
        except OSError:
            s.close()
            conns[i] = routed()
            reopened += 1
    time.sleep(0.05)
print("reopened", reopened)
PY
silent=$!
pids+=($silent)
eventually 30 "200 silent connections are held" grep -q holding silent.out
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
eventually 30 "the oldest silent connections made way, logged" \
  lines_at_least 1 'closing the oldest connection still to authenticate, from 127\.0\.0\.1:[0-9]+, for a new one from 127\.0\.0\.1: too many wait' node.log
kill "$silent" 2>>"$DISCARD"
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
# One that sends no route at all never reaches a worker: the supervisor's keeper closes it.
measure NOROUTE "a connection without a route" "$PY" -c "
import socket, sys
s = socket.create_connection(('${HOSTPORT%:*}', ${HOSTPORT##*:}), timeout=10)
print('closed' if s.recv(1) == b'' else 'a byte came')"
check "a connection that sends no route is closed" grep -q closed <<<"$NOROUTE"
eventually 10 "that is logged" grep -q "the TLS front door closed a connection that sent no route" node.log
check "no worker restarted" bash -c "! grep -q 'worker stopped' node.log"

# What an on-path observer sees: a run through a recording relay. Neither the input, nor the
# reply, nor any part of the cargo is in the recording (the relay's address pinned too).
$PY "$SRC/tests/e2e/tcp_record.py" --to "$HOSTPORT" --port-file relay.addr --out rec --seconds 120 &
pids+=($!)
disown $!
wait_file relay.addr 10 || echo "FAIL: the relay did not start"
RELAY=$(cat relay.addr)
"$X" known-nodes add "$RELAY" node.pub >>"$DISCARD"
# A cargo this node has not seen: its push goes through the relay too.
{ cat shout.c; echo 'XC_ENTRY int quiet(xc_ctx *ctx, const void *in, size_t in_len) { return xc_reply(ctx, in, in_len); }'; } > shout2.c
"$X" build shout2.c -o shout2.xcargo --key k 2>>"$DISCARD"
expect 0 '^SECRET-INPUT-XYZZY-1234$' -- "$X" run shout2.xcargo --entry shout --arg "str:secret-input-xyzzy-1234" --result str --to "tls://$RELAY"
check "the recording holds the run (both ways)" test "$(stat -c %s rec.c2s)" -gt "$(stat -c %s shout2.xcargo)" -a -s rec.s2c
check "the recording holds no input" bash -c "! grep -aq 'secret-input-xyzzy' rec.c2s rec.s2c"
check "the recording holds no reply" bash -c "! grep -aq 'SECRET-INPUT-XYZZY' rec.c2s rec.s2c"
check "the recording holds no part of the cargo" $PY - shout2.xcargo rec.c2s <<'PY'
import sys
cargo, rec = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
sys.exit(any(cargo[i:i + 16] in rec for i in range(0, len(cargo) - 16, 16)))
PY
check "the recording holds no entry name" bash -c "! grep -aq 'shout' rec.c2s"

# A replay of the recorded client bytes, and a record modified in flight: closed, nothing runs.
runs_before=$("$X" ls --to "$NODE" --json | $PY -c 'import json,sys; print(sum(c["invocations"] for c in json.load(sys.stdin)["cargos"]))')
check "a replay of the recorded client gets nowhere" $PY - "$HOSTPORT" rec.c2s <<'PY'
import socket, sys
host, port = sys.argv[1].rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=20)
try:
    s.sendall(open(sys.argv[2], "rb").read())
    while s.recv(65536):
        pass
except OSError:
    pass
PY
$PY "$SRC/tests/e2e/tcp_record.py" --to "$HOSTPORT" --port-file relay2.addr --out rec2 --seconds 120 --corrupt-record 2 &
pids+=($!)
disown $!
wait_file relay2.addr 10 || echo "FAIL: the second relay did not start"
RELAY2=$(cat relay2.addr)
"$X" known-nodes add "$RELAY2" node.pub >>"$DISCARD"
expect 4 'lost the connection' -- "$X" run shout2.xcargo --entry shout --arg "str:modified" --result str --to "tls://$RELAY2"
runs_after=$("$X" ls --to "$NODE" --json | $PY -c 'import json,sys; print(sum(c["invocations"] for c in json.load(sys.stdin)["cargos"]))')
check "the replay and the modified record ran nothing ($runs_before, then $runs_after invocations)" test "$runs_before" = "$runs_after"
check "still no worker restarted" bash -c "! grep -q 'worker stopped' node.log"

# The front door's listening socket is the supervisor's (its TLS keeper passes each connection
# to the serving worker): a kernel that closes its worker's listening sockets finds none.
"$X" build "$SRC/tests/kernels/adversary.c" -o adv.xcargo --key k 2>>"$DISCARD"
SYSCALL=$(syscall_slot "$BIN/xcargo-loader")
expect 0 '^0$' -- "$X" run adv.xcargo --entry escape_deafen --arg "u64:$SYSCALL" --result i64 --to "$NODE"
# The listening socket's inode (/proc/net/tcp: state 0A, LISTEN), held by the supervisor and
# by no worker.
front_door_held() {
  local port inode w
  port=$(printf '%04X' "${NODE##*:}")
  inode=$(awk -v p=":$port" '$2 ~ p"$" && $4 == "0A" {print $10}' /proc/net/tcp)
  w=$(pgrep -n -x xcargo-loader -P "$SUPERVISOR")
  [ -n "$inode" ] && [ -n "$w" ] && ls -l "/proc/$SUPERVISOR/fd" | grep -q "socket:\[$inode\]" &&
    ! ls -l "/proc/$w/fd" | grep -q "socket:\[$inode\]"
}
check "the supervisor listens for the front door, no worker does" front_door_held
# One that shuts down its worker's channels (the TLS keeper's among them): the worker ends in
# order and its standby serves; new clients get in.
expect 0 '^[1-9][0-9]*$' -- "$X" run adv.xcargo --entry escape_cut_keys --arg "u64:$SYSCALL" --result i64 --to "$NODE"
eventually 30 "new clients are served again" "$X" run shout.xcargo --entry shout --arg str:again --result str --to "$NODE"

# A worker of another user (--user), without trusted-network: its UCX serves nobody (`self`
# only), its clients come through the front door, and nothing probes UCX it cannot reach (a
# probe that could not connect replaced the worker every 10 s).
if [ "$(id -u)" -eq 0 ] && id nobody > id.txt 2>&1; then
  mkdir ucache utrust uclients && chown nobody ucache && chmod 700 ucache && cp k.pub utrust/ && cp me.pub uclients/
  chmod o+x "$TMP" && chmod 755 utrust uclients  # the worker reads them as nobody
  UCX_LOG_LEVEL=error "$LOADER" --listen 127.0.0.1:0 --tls-listen 127.0.0.1:0 --ready-file user.addr --trust utrust --clients uclients \
    --node-key node --cache ucache --user nobody 2> user.log &
  pids+=($!)
  disown $!
  wait_file user.addr || echo "FAIL: the --user loader did not start: $(tail -3 user.log)"
  diagnose user.log
  USERNODE=$(sed -n 2p user.addr)
  "$X" known-nodes add "${USERNODE#tls://}" node.pub >>"$DISCARD"
  expect 0 '^HELLO$' -- "$X" run shout.xcargo --entry shout --arg "str:hello" --result str --to "$USERNODE"
  sleep 3  # a probe would have tried at 0.2 s and every 2 s since (UCX says why it cannot connect)
  expect 0 '^HI$' -- "$X" run shout.xcargo --entry shout --arg "str:hi" --result str --to "$USERNODE"
  check "the --user worker logged no UCX error and was not replaced" bash -c "! grep -Eq 'UCX +ERROR|worker stopped|restarting' user.log"
fi
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key k -t x86_64 2>>"$DISCARD"
# A kernel quick until now that runs long inline holds up the thread that takes newcomers:
# each such run is logged, and after two a worker runs no TLS client's kernel inline. Quick
# 20 times, then about 6 s long, it then delays no new client's handshake. (Spins are in
# cycle-counter ticks, from the CPU's nominal rate: within 2x of the time meant.)
mhz=$(awk -F: '/^cpu MHz/ {printf "%d", $2; exit}' /proc/cpuinfo)
for entry in ticks ticks_too; do
  expect 0 '' -- "$X" run faults.xcargo --entry $entry --arg u64:0 --repeat 20 --to "$NODE"
  expect 0 '' -- "$X" run faults.xcargo --entry $entry --arg "u64:$(( ${mhz:-2000} * 300000 ))" --to "$NODE"
done
eventually 10 "a quick kernel's long inline run is logged" \
  grep -Eq "faults/ticks_too, quick until now, ran [0-9.]+ ms in the thread that takes requests, holding them up meanwhile; it needs 16 quick runs" node.log
expect 0 '' -- "$X" run faults.xcargo --entry ticks --arg u64:0 --repeat 20 --to "$NODE"
"$X" run faults.xcargo --entry ticks --arg "u64:$(( ${mhz:-2000} * 6000000 ))" --to "$NODE" > long.txt 2>&1 &
long=$!
sleep 0.5
check "a new client's handshake is not held up by a kernel that was quick and now runs long" \
  "$X" ls --to "$NODE" --connect-timeout 3
wait $long
check "the long run ended well" grep -q 'ran on' long.txt
# Over TLS too (last: they restart the worker): --timeout is the request's own limit, and
# cancel_invoke() stops a kernel.
expect 3 "ran past the time limit of 1 s \\(its request's own" -- "$X" run faults.xcargo --entry spin --to "$NODE" --timeout 1
expect 3 '^cancelled: its client cancelled the kernel while it ran' -- "$(dirname "$X")/xcargo-invoke-only" "$NODE" faults.xcargo spin 300
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$NODE"
finish
