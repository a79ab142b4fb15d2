#!/usr/bin/env bash
# The admin's view (issue 48): a loader with --metrics and --log-format json runs some
# invocations and a kernel that crashes; a scrape parsed by prometheus_client's own parser and
# `xcargo ls --json` show the same counts after the crash (they outlived the worker it
# ended); the endpoint answers hostile requests and only GET /metrics; every log line is JSON.
# usage: metrics_test.sh XCARGO SOURCE_DIR TLS   (TLS: the UCX_TLS value, e.g. tcp or shm,tcp)
X=$1
SRC=$2
export UCX_TLS=$3
export UCX_NET_DEVICES=lo
LOADER=$(dirname "$X")/xcargo-loader
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/lib.sh"
cd "$TMP"
PY=/usr/bin/python3
if ! $PY -c "import prometheus_client.parser" 2>>"$DISCARD"; then
  echo "FAIL: python3-prometheus-client is not installed (scripts/setup installs it)"
  exit 1
fi

mkdir trust clients
"$X" keygen -o me >>"$DISCARD" && cp me.pub clients/
export XCARGO_IDENTITY=$TMP/me
"$X" keygen -o k >>"$DISCARD" && cp k.pub trust/
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k 2>>"$DISCARD"
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key k 2>>"$DISCARD"

# Refused: a metrics address other hosts could reach, unless asked for.
expect 2 'metrics 0\.0\.0\.0:0: not a loopback address' -- "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --trust trust \
  --clients clients --metrics 0.0.0.0:0
expect 2 'log-format.*text or json' -- "$LOADER" --listen 127.0.0.1:0 --trust trust --clients clients --log-format yaml

M=unix:$TMP/metrics.sock
# A socket left by a loader that ended is replaced (one still served is refused, below).
$PY -c "import socket; socket.socket(socket.AF_UNIX).bind('$TMP/metrics.sock')"
"$LOADER" --listen 127.0.0.1:0 $(ucx_net) --ready-file node.addr --trust trust --clients clients --metrics "$M" \
  --timeout 4 --log-format json --log "$TMP/node.log" 2>>node.err &
pids+=($!)
diagnose node.log node.err
wait_file node.addr || echo "FAIL: the loader did not start: $(tail -3 node.err)"
node=$(head -1 node.addr)

for i in 1 2 3 4; do
  expect 0 "^$((i + 40))\$" -- "$X" run hello.xcargo --entry add --arg i64:$i --arg i64:40 --result i64 --to "$node"
done
expect 0 'no entry' -- bash -c "'$X' run hello.xcargo --entry nope --to '$node' 2>&1; true"
expect 0 'crash' -- bash -c "'$X' run faults.xcargo --entry segfault --to '$node' 2>&1; true"
# The worker that crashed is replaced: the next run is served by its successor.
expect 0 '^45$' -- "$X" run hello.xcargo --entry add --arg i64:5 --arg i64:40 --result i64 --to "$node"
# A kernel that spins: in flight while it runs, then timed out (the node's --timeout 4), and
# its worker replaced too.
"$X" run faults.xcargo --entry spin --to "$node" > spin.out 2>&1 &
spinner=$!
check "the spinning kernel is counted in flight while it runs" $PY -c "
import sys, time
sys.path.insert(0, '$HERE')
from scrape_metrics import scrape
deadline = time.time() + 30
while scrape('$M')['xcargo_invocations_in_flight'] != 1:
    assert time.time() < deadline, 'never 1 in flight'
    time.sleep(0.02)
"
for _ in $(seq 600); do kill -0 "$spinner" 2>>"$DISCARD" || break; sleep 0.1; done
wait "$spinner"
check "the spinning kernel was timed out" grep -q 'time limit' spin.out
expect 0 '^46$' -- "$X" run hello.xcargo --entry add --arg i64:6 --arg i64:40 --result i64 --to "$node"

check "the scrape parses with prometheus_client's text parser" bash -c "$PY '$HERE/scrape_metrics.py' '$M' > scrape.json"
"$X" ls --to "$node" --json > ls.json 2>>"$DISCARD"
check "the counts after the crash: invocations, failures by kind, crashes, restarts, per cargo, per client key" $PY -c "
import json
m = json.load(open('scrape.json'))
ok = lambda c, why: c or exit('%s: %s' % (why, json.dumps(m, indent=1)))
inv = m['xcargo_invocations_total']
ok(inv >= 9, 'invocations %s, at least 9 (6 ok, no_entry, crashed, timeout)' % inv)
ok(m['xcargo_invocations_failed_total{status=\"crashed\"}'] == 1, 'one crashed')
ok(m['xcargo_invocations_failed_total{status=\"no_entry\"}'] == 1, 'one no_entry')
ok(m['xcargo_invocations_failed_total{status=\"timeout\"}'] == 1, 'one timeout')
ok(m['xcargo_kernel_timeouts_total'] == 1, 'one time-out')
ok(m['xcargo_kernel_crashes_total'] == 1, 'one crash')
ok(m['xcargo_worker_restarts_total'] == 2, 'two restarts (the crash, the time-out)')
ok(m['xcargo_invocations_in_flight'] == 0, 'nothing in flight')
ok(m['xcargo_loader_uptime_seconds'] > 0, 'uptime')
ok(m['xcargo_input_bytes_total'] >= 5 * 16, 'input bytes')
ok(m['xcargo_output_bytes_total'] >= 5 * 8, 'output bytes')
hello = [v for k, v in m.items() if k.startswith('xcargo_cargo_invocations_total{') and 'cargo=\"hello\"' in k]
ok(hello and hello[0] >= 7, 'hello counted apart: %s' % hello)
crashed = [v for k, v in m.items() if k.startswith('xcargo_cargo_invocations_failed_total{') and 'cargo=\"faults\"' in k]
ok(crashed == [2], 'faults failed twice: %s' % crashed)
keys = [v for k, v in m.items() if k.startswith('xcargo_client_invocations_total{client=\"') and 'other' not in k]
ok(keys and max(keys) >= 9, 'the client key counted: %s' % keys)
ls = json.load(open('ls.json'))['stats']
ok(ls['invocations'] == inv, 'ls invocations %s, metrics %s' % (ls['invocations'], inv))
failed = sum(v for k, v in m.items() if k.startswith('xcargo_invocations_failed_total{'))
ok(ls['invocations_failed'] == failed, 'ls failed %s, metrics %s' % (ls['invocations_failed'], failed))
ok(ls['invocations_failed'] >= 3 and ls['kernel_crashes'] == 1 and ls['kernel_timeouts'] == 1 and ls['worker_restarts'] == 2, 'ls stats %s' % ls)
"
# Hostile requests: each answered and closed, and the endpoint still serves.
expect 0 '^HTTP/1.1 404' -- $PY "$HERE/scrape_metrics.py" "$M" 'GET /other HTTP/1.1\r\n\r\n'
expect 0 '^HTTP/1.1 405' -- $PY "$HERE/scrape_metrics.py" "$M" 'POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n'
expect 0 '^HTTP/1.1 400' -- $PY "$HERE/scrape_metrics.py" "$M" 'GET /metrics HTTP/1.1\r\nContent-Length: 9\r\n\r\n'
expect 0 '^HTTP/1.1 431' -- $PY "$HERE/scrape_metrics.py" "$M" "GET /metrics HTTP/1.1\r\nX: $(head -c 5000 /dev/zero | tr '\0' a)"
check "the endpoint serves after hostile requests" $PY "$HERE/scrape_metrics.py" "$M"
# Connections that never finish their request (40 held, more made as they are closed) do not
# keep a scrape out: a new connection replaces the oldest of them.
check "scrapes get through beside 40 connections that never finish their request" $PY -c "
import socket, subprocess, sys, threading, time
held, stop = [], time.time() + 6
def hold():
    while time.time() < stop:
        try:
            s = socket.socket(socket.AF_UNIX); s.settimeout(1); s.connect('$TMP/metrics.sock')
            s.sendall(b'GET /metrics HTTP/1.1\\r\\n'); held.append(s)
            while len([x for x in held if x.fileno() >= 0]) >= 40 and time.time() < stop: time.sleep(0.05)
        except OSError: time.sleep(0.02)
t = threading.Thread(target=hold); t.start(); time.sleep(1)
ok = all(subprocess.run([sys.executable, '$HERE/scrape_metrics.py', '$M'], capture_output=True, timeout=30).returncode == 0 for _ in range(3))
t.join(); sys.exit(0 if ok else 1)"
check "the endpoint is not the client's: the socket has mode 0660" bash -c "[ \$(stat -c %a '$TMP/metrics.sock') = 660 ]"
expect 2 'metrics unix:.*: another process serves it' -- "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --trust trust \
  --clients clients --metrics "$M"

kill -TERM "${pids[0]}"
for _ in $(seq 300); do kill -0 "${pids[0]}" 2>>"$DISCARD" || break; sleep 0.1; done
check "the socket is removed when the loader stops" test ! -e "$TMP/metrics.sock"
check "every log line is a JSON object with time, level, pid and message" $PY -c "
import json
n = crash = 0
for raw in open('node.log', 'rb'):
    o = json.loads(raw)
    assert {'time', 'level', 'pid', 'message'} <= set(o), o
    n += 1
    crash += o.get('status') == 'crashed' and o.get('entry') == 'segfault' and o['level'] == 'warning'
assert n >= 5, n
assert crash >= 1, 'no line with status crashed, entry segfault'
"
finish
