#!/usr/bin/env bash
# The same-host door (format-spec/wire-protocol.md 2.4; loader/SECURITY.md, "The network"):
# clients of the loader's own user come in through it and use shared memory; a client that
# may not use shared memory is told why (no UCX listener); another user's process gets a refusal
# without a byte of it read; junk from the loader's own user, or an offer never claimed,
# ends only that connection; no worker restarts for any of it.
# usage: door_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
BIN=$(dirname "$X")
LOADER=$BIN/xcargo-loader
source "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
PY=/usr/bin/python3
export UCX_TLS=shm,tcp UCX_NET_DEVICES=lo

mkdir trust clients
"$X" keygen -o k >>"$DISCARD" && cp k.pub trust/
"$X" keygen -o me >>"$DISCARD" && cp me.pub clients/
export XCARGO_IDENTITY=$TMP/me
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k 2>>"$DISCARD"

"$LOADER" --listen 127.0.0.1:0 --ready-file node.addr --trust trust --clients clients 2> node.log &
SUPERVISOR=$!
pids+=($!)
disown $!
wait_file node.addr || echo "FAIL: the loader did not start: $(tail -3 node.log)"
diagnose node.log
NODE=$(head -1 node.addr)
eventually 10 "the loader serves" grep -q "listening on $NODE" node.log
WORKER=$(serving_worker "$SUPERVISOR")

# A door client: its connection is named by its process, not by a port.
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
eventually 10 "the client came in through the door" grep -Eq "accepted client from pid [0-9]+ on this host \(uid $(id -u)\)" node.log
# Without shared memory the door is of no use to a client, and the loader has no UCX
# listener (no trusted-network): told why. The listen port is held, not served.
expect 4 'hint: a loader on this host serves its user over shared memory \(sysv\), through its same-host door' -- \
  env UCX_TLS=tcp "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
check "the loader listens on no port" test -z "$(listening_on "$SUPERVISOR")"

# door.py NAME SEND HOLD_S (the script on stdin): connects to the door, sends SEND (hex), and prints what
# comes back (kind and body) and whether the loader closed the connection within HOLD_S.
cat > door.py <<'PY'
import socket, struct, sys, time
name, send, hold = sys.argv[1], bytes.fromhex(sys.argv[2]), float(sys.argv[3])
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(b"\0xcargo-door:" + name.encode())
try:
    s.sendall(send)
except (BrokenPipeError, ConnectionResetError):  # closed before this end wrote: fine
    pass
s.settimeout(10)
head = b""
while len(head) < 12:
    b = s.recv(12 - len(head))
    if not b:
        break
    head += b
if len(head) < 12 or head[:4] != b"XCDR":
    print("no frame")
    sys.exit(0)
kind, length = head[5], struct.unpack("<I", head[8:12])[0]
body = b""
while len(body) < length:
    body += s.recv(length - len(body))
print("kind %d: %s" % (kind, body.decode() if kind == 2 else "%d bytes" % length))
s.settimeout(hold)
try:
    print("closed by the loader" if s.recv(1) == b"" else "a byte came")
except ConnectionResetError:  # closed with what this end sent still unread
    print("closed by the loader")
except socket.timeout:
    print("still open")
PY

# Another user's process: refused, unread, and told where to go instead.
if [ "$(id -u)" = 0 ]; then
  measure OTHER "another user at the door" setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$PY" - "$NODE" "$(printf '00%.0s' {1..64})" 5 < door.py
  check "another user's process gets a refusal that says why" \
    grep -q "kind 2: this loader's same-host door serves only its own user (uid 0)" <<<"$OTHER"
  check "the refusal names the TLS front door" grep -q "no TLS front door for other users" <<<"$OTHER"
  check "and the connection is closed" grep -q "closed by the loader" <<<"$OTHER"
  eventually 10 "the refusal is logged with the user id" grep -q "same-host door: refused a process of uid 65534" node.log
  # Its client, with a key the loader authorizes, is told that the door is another user's
  # and where to go instead: UCX has no listener (no trusted-network), and shared memory is
  # for the loader's own user.
  mkdir other && chmod 755 "$TMP" && cp hello.xcargo other/ && chown -R 65534:65534 other
  cat > as_other <<SH
#!/bin/sh
cd '$TMP/other' && exec setpriv --reuid=65534 --regid=65534 --clear-groups env HOME='$TMP/other' XCARGO_IDENTITY='$TMP/other/id' "\$@"
SH
  chmod 755 as_other
  ./as_other "$X" keygen -o id >>"$DISCARD" && cp other/id.pub clients/other.pub
  expect 5 "the process at its same-host door runs as uid 0, not as this user \(uid 65534\)" -- \
    ./as_other "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
  expect 5 "hint: shared memory is for the loader's own user; reach another user's loader over TLS" -- \
    ./as_other "$X" ls --to "$NODE"
else
  echo "    (not root: the other-user checks are skipped)"
fi

# The loader's own user: a route first (wire-protocol.md 2.4: "XCDR", version 1, kind 3, a
# 32-byte key), then the offer; junk instead of a route is refused, saying why, and closed.
ROUTE="584344520103000020000000$(printf '00%.0s' {1..32})"
measure JUNK "junk at the door" "$PY" - "$NODE" "$(printf '00%.0s' {1..64})ffffffff" 30 < door.py
check "junk instead of a route is refused, saying why" grep -q "kind 2: the same-host door expected a route first: not a door frame" <<<"$JUNK"
check "a connection that sent junk is closed by the loader" grep -q "closed by the loader" <<<"$JUNK"
measure ROUTED "a route, then junk" "$PY" - "$NODE" "${ROUTE}ffffffff" 30 < door.py
check "a route gets the offer" grep -Eq "kind 1: [0-9]+ bytes" <<<"$ROUTED"
check "a byte after it on the lifeline ends the connection" grep -q "closed by the loader" <<<"$ROUTED"
# A silent one is refused once its route's time is up (2 s).
measure SILENT "a silent connection at the door" "$PY" - "$NODE" "" 30 < door.py
check "a connection that sends no route is refused" grep -q "kind 2: the same-host door expected a route first: none came in time" <<<"$SILENT"
# A routed one is closed once its offer goes unclaimed past the authentication deadline (10 s).
start=$(date +%s)
measure UNCLAIMED "an offer never claimed" "$PY" - "$NODE" "$ROUTE" 30 < door.py
check "an offer never claimed is closed by the loader" grep -q "closed by the loader" <<<"$UNCLAIMED"
check "at the authentication deadline, not before (after $(( $(date +%s) - start )) s)" test "$(( $(date +%s) - start ))" -ge 9

expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$NODE"
check "no worker restarted" test "$(serving_worker "$SUPERVISOR")" = "$WORKER"
check "nothing went wrong in the log" test -z "$(grep -E 'worker stopped|malformed|ERROR' node.log)"

# An address with no door is no loader of this user's: whatever listens there (a loader of
# any user, with trusted-network) is not tried unless the address says ucx:// on purpose
# (UCX would not prove who answers). Here a loader with a UCX listener and no door: tcp only.
UCX_TLS=tcp "$LOADER" --listen 127.0.0.1:0 --ready-file open.addr --trust trust --clients clients --trusted-network \
  --cache open-cache 2> open.log &
pids+=($!)
disown $!
wait_file open.addr || echo "FAIL: the trusted-network loader did not start: $(tail -3 open.log)"
OPEN=$(head -1 open.addr)
expect 4 "$OPEN: connection refused: no loader listens there on this host" -- "$X" ls --to "$OPEN"
expect 0 "hint: ucx://$OPEN reaches a loader's UCX listener \\(trusted-network\\), where no key proves who answers" -- \
  bash -c "'$X' ls --to '$OPEN' 2>&1; true"
check "nothing reached the listener" bash -c "! grep -q 'accepted client' open.log"
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "ucx://$OPEN"

finish
