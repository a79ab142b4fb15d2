#!/usr/bin/env bash
# The audit trail: a loader started with --log FILE records every push, run, refusal, crash,
# time-out and restart with its time, the client's address and key, and the cargo's digest and
# signer, across worker restarts; the file is rotated at --log-max-size; no worker holds it;
# under systemd (JOURNAL_STREAM) lines carry no time of their own.
# usage: audit_test.sh XCARGO SOURCE_DIR TLS   (TLS: the UCX_TLS value, e.g. tcp or shm,tcp)
X=$1
SRC=$2
export UCX_TLS=$3
export UCX_NET_DEVICES=lo
LOADER=$(dirname "$X")/xcargo-loader
BENCH=$(dirname "$X")/xcargo-load-bench
source "$(dirname "$0")/lib.sh"
cd "$TMP"

mkdir trust clients
me_id=$("$X" keygen -o me | awk '/^key id/ {print $3}') && cp me.pub clients/
export XCARGO_IDENTITY=$TMP/me
k_id=$("$X" keygen -o k | awk '/^key id/ {print $3}') && cp k.pub trust/
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key k 2>>"$DISCARD"
"$X" build "$SRC/examples/hello/hello.c" -o unsigned.xcargo --name hello2 2>>"$DISCARD"
"$X" build "$SRC/tests/kernels/faults.c" -o faults.xcargo --key k 2>>"$DISCARD"
hello=$("$X" inspect hello.xcargo --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"][:16])')
faults=$("$X" inspect faults.xcargo --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"][:16])')

# Nothing on stderr: every process's lines go to the file. A line per run (--log-every-run):
# the rotation below needs many lines.
"$LOADER" --listen 127.0.0.1:0 $(ucx_net) --ready-file node.addr --trust trust --clients clients --timeout 1 \
  --log "$TMP/node.log" --log-max-size 64K --log-every-run 2> stderr.txt &
sup=$!
pids+=($sup)
diagnose "$TMP/node.log" "$TMP/stderr.txt"
disown $sup
wait_file node.addr || echo "FAIL: the loader did not start: $(tail -3 node.log)"
node=$(cat node.addr)

TIME='20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z xcargo-loader\[[0-9]+\]: '
# A client is named by its address, or (through the same-host door, with shared memory) by
# its process.
WHO="from (127\.0\.0\.1:[0-9]+|pid [0-9]+ on this host \(uid [0-9]+\)) key $me_id \(me\)"
SIGNER="signed by $k_id[0-9a-f]* \(k\.pub\)"

expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$node"
expect 1 'not signed' -- "$X" push unsigned.xcargo --to "$node"
expect 3 'kernel_error|crashed' -- "$X" run faults.xcargo --entry segfault --to "$node"
expect 3 'timeout' -- "$X" run faults.xcargo --entry spin --to "$node"
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:40 --arg i64:2 --result i64 --to "$node"

# Each worker's lines reach the file through the supervisor's copier, in the background:
# every line is waited for (a crash's line was not there yet once, on a busy machine, when
# the supervisor's own line about it was). The log is the file and what rotated out of it.
in_log() { cat node.log.1 node.log 2>>"$DISCARD" | grep -Eq -- "$1"; }
eventually 10 "a push is logged with time, digest, signer, client address and key" \
  in_log "^${TIME}accepted push: hello 0\.1\.0 digest $hello .*, $SIGNER; $WHO$"
eventually 10 "a run is logged with digest, entry, signer, client address and key" \
  in_log "^${TIME}accepted invoke: $hello/add -> ok \([0-9.]+ us\), $SIGNER; $WHO$"
eventually 10 "a refusal is logged with the client's address and key" \
  in_log "^${TIME}refused push: not_signed: .*; $WHO$"
eventually 10 "a crash is logged with the cargo, its signer and the client" \
  in_log "^${TIME}failed invoke: the kernel crashed: signal 11 .*\(cargo $faults/segfault, $SIGNER, $WHO\); restarting the worker$" ||
  { ls -l node.log*; grep -n "crashed\|worker\|segfault\|accepted push" node.log.1 node.log; } 2>&1 | sed 's/^/    | /'  # what there was instead (a rare miss, not understood yet)
eventually 10 "the supervisor logs the restart and names the cargo" \
  in_log "^${TIME}worker stopped: (exited with status|killed by signal) [0-9]+.*; it reported: the kernel crashed: signal 11 .*\(cargo $faults/segfault, $SIGNER, $WHO\); (restarting it|replaced by its standby)$"
eventually 10 "a time-out is logged with the cargo and the client" \
  in_log "^${TIME}failed invoke: the kernel ran past the time limit .*\(cargo $faults/spin, $SIGNER, $WHO\)"
restarts_logged() { [ "$(cat node.log.1 node.log 2>>"$DISCARD" | grep -Ec -- "^${TIME}worker restarted; listening on")" -ge 2 ]; }
eventually 10 "two restarts are logged" restarts_logged ||
  { ls -l node.log*; cat node.log.1 node.log | sed -E 's/^[^]]*\]: //; s/[0-9]+/N/g' | sort | uniq -c | sort -rn | head -20; } 2>&1 | sed 's/^/    | /'
# The third worker batches its lines: waited for.
eventually 10 "runs after two restarts are logged, by a third worker" /usr/bin/python3 -c "
import re
lines = [l for f in ('node.log.1', 'node.log') for l in (open(f).read().splitlines() if __import__('os').path.exists(f) else [])]
pids = [re.search(r'\[(\d+)\]', l).group(1) for l in lines if 'accepted invoke: $hello/add' in l]
assert len(pids) == 2 and pids[0] != pids[1], pids"
check "the loader wrote nothing to its stderr" test ! -s stderr.txt

worker=$(serving_worker "$sup")
check "the worker holds no descriptor of the log file (a kernel could rewrite it)" \
  bash -c "[ -n '$worker' ] && ! ls -l /proc/$worker/fd | grep -q 'node.log'"
# Its stderr is a pipe of its own: reopened for reading through /proc/self/fd/2, it would
# give a kernel only its own process's lines, never the supervisor's or the compile service's.
compiler=$(pgrep -x xcargo-compiler -P "$sup" | head -1)
# (Looked up again each time: a worker may be taking over from another meanwhile.)
eventually 10 "the worker, the compile service and the supervisor each have a log pipe of their own" \
  bash -c "w=\$(pgrep -n -x xcargo-loader -P $sup); k=\$(pgrep -x xcargo-compiler -P \$w | head -1); [ -n \"\$k\" ] || k=\$(pgrep -x xcargo-compiler -P $sup | head -1)
           a=\$(readlink /proc/\$w/fd/2) b=\$(readlink /proc/\$k/fd/2) c=\$(readlink /proc/$sup/fd/2); [[ \$a == pipe:* && \$b == pipe:* && \$c == pipe:* && \$a != \$b && \$a != \$c && \$b != \$c ]]"

# The log copier reads no pipe blocking: a kernel that reopens its stderr pipe for reading
# and takes a byte the copier was told of leaves the copier copying everyone's lines, not
# waiting in read() for ever.
copier=$(pgrep -x xcargo-log -P "$sup" | head -1)
check "the log copier runs beside the workers" test -n "$copier"
check "the log copier reads every pipe without blocking" bash -c "
  n=0
  for fd in /proc/$copier/fd/*; do
    [ \${fd##*/} -ge 3 ] && [[ \$(readlink \$fd) == pipe:* ]] || continue  # 0 to 2: what it writes to
    n=\$((n + 1))
    flags=\$(awk '/^flags:/ {print \$2}' /proc/$copier/fdinfo/\${fd##*/})
    (( 8#\$flags & 04000 )) || exit 1
  done
  [ \$n -ge 3 ]"

# 64K holds a few hundred lines: 600 more runs fill it twice over.
"$BENCH" --to "$node" --cargo hello.xcargo --clients 1 -n 600 > bench.json 2>&1 ||
  echo "FAIL: the load bench failed: $(tail -3 bench.json)"
eventually 10 "the log is rotated to node.log.1" test -s node.log.1
# The runs' lines come in batches, and a rotation renames node.log before it opens a new one:
# the files are looked at once they have not changed for a second (an idle loader logs nothing).
settled() {
  local a b
  a=$(stat -c %s node.log node.log.1 2>&1)
  sleep 1
  b=$(stat -c %s node.log node.log.1 2>&1)
  [ "$a" = "$b" ]
}
eventually 30 "the log settles after the runs" settled
check "neither file is over the limit" bash -c '[ $(stat -c %s node.log) -le 65536 ] && [ $(stat -c %s node.log.1) -le 65536 ]'
check "every line of both files is whole and stamped" python3 -c "
import re
for f in ('node.log.1', 'node.log'):
    t = open(f).read()
    assert t.endswith('\n'), f
    for l in t.splitlines():
        assert re.match(r'$TIME', l), (f, l)"
check "both files hold the runs" bash -c "grep -q 'accepted invoke: $hello/add' node.log && grep -q 'accepted invoke: $hello/add' node.log.1"

kill -TERM "$sup"
for _ in $(seq 100); do kill -0 "$sup" 2>>"$DISCARD" || break; sleep 0.1; done
check "the loader stopped on SIGTERM" bash -c "! kill -0 $sup"
check "its last line, written as it stopped, is in the file" bash -c "tail -1 node.log | grep -Eq '^${TIME}stopped$'"

# Under systemd the journal stamps lines itself: no time and no pid in the loader's own text.
JOURNAL_STREAM=8:12345 "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --ready-file j.addr --trust trust --clients clients 2> journal.txt &
pids+=($!)
disown $!
wait_file j.addr || echo "FAIL: the loader did not start: $(tail -3 journal.txt)"
expect 0 '^42$' -- "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$(cat j.addr)"
eventually 10 "with JOURNAL_STREAM, lines are bare" grep -Eq "^xcargo-loader: accepted invoke: $hello/add -> ok .*; $WHO$" journal.txt
check "with JOURNAL_STREAM, no line carries a time" bash -c "! grep -Eq '^20[0-9]{2}-' journal.txt"

# By default a connection's first run of an entry has its line, and the runs after it are
# summed, a line a second: every run is counted, once.
"$BENCH" --to "$(cat j.addr)" --cargo hello.xcargo --clients 1 -n 600 > bench2.json 2>&1 ||
  echo "FAIL: the load bench failed: $(tail -3 bench2.json)"
cat > counted.py <<PY
import re, sys
full = summed = 0
for l in open('journal.txt'):
    if not l.startswith('xcargo-loader: accepted invoke: $hello/add -> '):
        continue
    m = re.search(r'-> (\\d+) more runs? in the last [0-9.]+ s: ok (\\d+) \\(kernel mean [0-9.]+ us, max [0-9.]+ us\\), signed by .*; from ', l)
    if m:
        assert m.group(1) == m.group(2), l
        summed += int(m.group(1))
    else:
        full += 1
want = tuple(int(a) for a in sys.argv[1:3])
sys.exit(0 if (full, summed) == want else f'{full} full lines and {summed} summed runs, not {want}')
PY
eventually 10 "600 runs on one connection: one line, then sums of the other 599" python3 counted.py 2 599

# Pipelined runs (--repeat, --inflight): every one answered, and every one counted.
"$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$(cat j.addr)" --repeat 2000 --inflight 32 \
  --json > repeat.json 2> repeat.err
check "2000 pipelined runs, 32 in flight, all ok" python3 -c "
import json
j = json.load(open('repeat.json'))
assert j['ok'] and j['runs'] == 2000 and j['failed_runs'] == 0 and j['value'] == 42 and j['inflight'] == 32, j"
eventually 10 "the loader counted the 2000 runs" python3 counted.py 3 2598

expect 2 "log-max-size 1000: below the smallest" -- "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --trust trust --clients clients --log x.log --log-max-size 1000
expect 2 "no-such-dir/x.log: cannot open the log file" -- "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --trust trust --clients clients --log no-such-dir/x.log
finish
