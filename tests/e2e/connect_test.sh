#!/usr/bin/env bash
# Failing fast (issue 48): a refused connection fails at once at a loopback address's
# same-host door and at a tls:// front door (both held by a loader's supervisor), and within
# 1.5 s over ucx:// (a worker's own listener, closed for a moment while it is replaced), with "connection refused" and a hint; --connect-timeout bounds the rest, against listeners this test makes on
# 127.0.0.1 that never answer (one that accepts nothing, one whose backlog is full, so
# that a connection's packets go unanswered). The ceilings are generous bounds (3 s, well
# under the 5 s default that --connect-timeout replaces), never measurements.
# usage: connect_test.sh XCARGO SOURCE_DIR
X=$1
SRC=$2
source "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
PY=/usr/bin/python3

"$X" keygen -o me >>"$DISCARD"
"$X" keygen -o node >>"$DISCARD"
"$X" keygen -o k >>"$DISCARD"
export XCARGO_IDENTITY=$TMP/me XCARGO_KNOWN_NODES=$TMP/known_nodes
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k 2>>"$DISCARD"

# Listeners that never answer: silent.port accepts nothing (the kernel completes TCP
# handshakes into its backlog, and nothing more happens); full.port's one-place backlog is
# filled first, so that the kernel drops a new connection's SYN, as a firewall would.
# refused.port is a port that was free a moment ago: nothing listens there.
"$PY" - <<'PY' &
import os, socket, time
def listener(backlog):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s
silent, full = listener(64), listener(0)
fillers = []
for _ in range(4):  # more than a backlog of 0 takes: the rest stay in SYN_SENT
    c = socket.socket()
    c.setblocking(False)
    c.connect_ex(full.getsockname())
    fillers.append(c)
free = socket.socket()
free.bind(("127.0.0.1", 0))
refused = free.getsockname()[1]
free.close()
for name, port in (("silent", silent.getsockname()[1]), ("full", full.getsockname()[1]), ("refused", refused)):
    open(name + ".port.tmp", "w").write(f"{port}\n")
for name in ("silent", "full", "refused"):
    os.rename(name + ".port.tmp", name + ".port")
time.sleep(300)
PY
pids+=($!)
disown $!
wait_file refused.port 10 || echo "FAIL: the listeners did not start"
SILENT=127.0.0.1:$(cat silent.port)
FULL=127.0.0.1:$(cat full.port)
REFUSED=127.0.0.1:$(cat refused.port)
for a in "$SILENT" "$FULL" "$REFUSED"; do "$X" known-nodes add "$a" node.pub >>"$DISCARD" 2>&1; done

export EXPECT_TIMEOUT=3  # a ceiling: a check that takes longer fails (exit 124)

# Refused: soon, whatever the transport and the verb.
expect 4 "error: $REFUSED: connection refused: no loader listens there on this host" -- "$X" ls --to "$REFUSED"
expect 4 "hint: is xcargo-loader running there, on this port\?" -- "$X" ls --to "$REFUSED"
expect 4 "error: $REFUSED: connection refused" -- "$X" ls --to "ucx://$REFUSED"
expect 4 "error: tls://$REFUSED: connection refused$" -- "$X" ls --to "tls://$REFUSED"
expect 4 "hint: is xcargo-loader running there with --tls-listen, on this port\?" -- "$X" ls --to "tls://$REFUSED"
expect 4 "connection refused" -- "$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --to "$REFUSED"
expect 4 "connection refused" -- "$X" run hello.xcargo --entry add --arg i64:1 --arg i64:2 --to "tls://$REFUSED"
expect 4 "connection refused" -- "$X" push hello.xcargo --to "ucx://$REFUSED"
expect 4 '"kind": "unreachable"' -- "$X" run hello.xcargo --entry add --to "$REFUSED" --json

# Nothing answers: --connect-timeout ends it, with a hint naming the option.
expect 4 "error: tls://$SILENT: no TLS handshake within 500 ms" -- "$X" ls --to "tls://$SILENT" --connect-timeout 0.5
expect 4 "hint: --connect-timeout SECONDS waits longer \(it was 0.5 s\)" -- "$X" ls --to "tls://$SILENT" --connect-timeout 0.5
expect 4 "error: $SILENT: no answer within the connect timeout \(500 ms\)" -- \
  "$X" ls --to "ucx://$SILENT" --connect-timeout 0.5
expect 4 "error: tls://$FULL: no answer within the connect timeout \(500 ms\)" -- \
  "$X" run hello.xcargo --entry add --to "tls://$FULL" --connect-timeout 0.5
expect 4 "no answer within the connect timeout" -- "$X" push hello.xcargo --to "ucx://$SILENT" --connect-timeout 0.5
expect 2 "connect-timeout" -- "$X" ls --to "$SILENT" --connect-timeout 0
expect 0 "--connect-timeout SECONDS" -- "$X" help push

finish
