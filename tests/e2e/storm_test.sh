#!/usr/bin/env bash
# A kernel's failure costs only its own caller: node memory survives worker restarts, a
# kernel running beside the failed one is answered `interrupted`, and a second client's
# invocations during a storm of crashes and time-outs all come back right.
# usage: storm_test.sh XCARGO SOURCE_DIR TLS CRASHES TIMEOUTS   (TLS: the UCX_TLS value)
X=$1
SRC=$2
export UCX_TLS=$3
export UCX_NET_DEVICES=lo
CRASHES=${4:-100}
TIMEOUTS=${5:-20}
LOADER=$(dirname "$X")/xcargo-loader
BENCH=$(dirname "$X")/xcargo-load-bench
source "$(dirname "$0")/lib.sh"
cd "$TMP"

mkdir trust clients
"$X" keygen -o me > keygen.txt && cp me.pub clients/ && cp me.pub trust/
export XCARGO_IDENTITY=$TMP/me
"$X" build "$SRC/tests/kernels/memory.c" -o memory.xcargo --key me 2> build.txt
"$X" build "$SRC/examples/hello/hello.c" -o hello.xcargo --key me 2>> build.txt

# start NAME ARGS...: a loader whose address is in NAME.addr, its log in NAME.log.
start() {
  local name=$1
  shift
  "$LOADER" --listen 127.0.0.1:0 $(ucx_net) --ready-file "$name.addr" --trust trust --clients clients --log "$TMP/$name.log" "$@" 2> "$name.stderr" &
  pids+=($!)
  declare -g "pid_$name=$!"
  disown $!
  diagnose "$TMP/$name.log"
  wait_file "$name.addr" || echo "FAIL: the loader did not start: $(tail -n 3 "$name.stderr" "$name.log")"
}

# The user's view (issue 14): a region written, another entry crashes, the region is there.
start a --timeout 30
a=$(cat a.addr)
expect 0 '^4242$' -- "$X" run memory.xcargo --entry put --arg u64:4242 --result u64 --to "$a"
expect 0 '^4242$' -- "$X" run memory.xcargo --entry get --result u64 --to "$a"
expect 3 'crashed' -- "$X" run memory.xcargo --entry boom --to "$a"
pushes=$(grep -c 'accepted push' a.log)
expect 0 '^4242$' -- "$X" run memory.xcargo --entry get --result u64 --to "$a"
eventually 10 "the new worker says it kept the region" grep -q 'node memory: 1 regions kept from the previous worker' a.log
# The standby took over: it was started before the region existed, and opened node memory
# only when it took over.
eventually 10 "a standby worker replaced the crashed one" grep -q 'worker stopped: .*; replaced by its standby' a.log
eventually 10 "the standby listened on the same port" grep -q "worker restarted; listening on $a [0-9.]* ms after the last one began to end" a.log
# The cargo pushed to the crashed worker was kept for the next: 'xcargo run' found it there
# and did not push it again.
check "the new worker had the cargo pushed to the old one" test "$(grep -c 'accepted push' a.log)" = "$pushes"

# A kernel running in another executor when one crashes: its caller is told `interrupted`,
# not that its own kernel crashed, and at once (not at a time-out).
# `held` spins until its worker ends; held_state says once it runs.
"$X" run memory.xcargo --entry held --arg u64:77 --to "$a" > slow.txt 2>&1 &
slow=$!
eventually 30 "the held kernel runs" bash -c "test \"\$('$X' run memory.xcargo --entry held_state --result u64 --to '$a')\" = 77"
expect 3 'crashed' -- "$X" run memory.xcargo --entry boom --to "$a"
wait "$slow"
rc=$?
checks=$((checks + 1))
if [ "$rc" -ne 3 ] || ! grep -q 'interrupted: the kernel was running when another kernel' slow.txt; then
  echo "FAIL: a kernel running beside a crash is reported interrupted (exit $rc):"
  sed 's/^/    | /' slow.txt
  failures=$((failures + 1))
fi
# The line is written with the worker's buffered log, flushed as it ends: after the reply.
eventually 10 "the worker logged the interrupted run" grep -q 'interrupted invoke: .*/held' a.log
expect 0 '^4242$' -- "$X" run memory.xcargo --entry get --result u64 --to "$a"

# The storm: one client crashes its kernel CRASHES times and runs it past the limit TIMEOUTS
# times; the other invokes hello/add at least 10000 times meanwhile. Every result is right,
# the region reads back as written before the storm, and no request is lost.
start b --timeout 0.5
"$BENCH" --to "$(cat b.addr)" --cargo hello.xcargo --clients 1 -n 10000 --storm memory.xcargo \
  --crashes "$CRASHES" --timeouts "$TIMEOUTS" > storm.json 2> storm.err
rc=$?
cat storm.json
# The last line is the JSON object (UCX may write its own lines before it).
field() { python3 -c "import json; print(json.loads([l for l in open('storm.json') if l.startswith('{')][-1])['$1'])" 2>&1; }
checks=$((checks + 1))
[ "$rc" -eq 0 ] || { echo "FAIL: the storm bench failed (exit $rc): $(tail -3 storm.err)"; failures=$((failures + 1)); }
check "the storm crashed the kernel $CRASHES times" test "$(field storm_crashed)" = "$CRASHES"
check "the storm timed out $TIMEOUTS times" test "$(field storm_timed_out)" = "$TIMEOUTS"
check "the region written before the storm reads back unchanged" test "$(field region_after)" = 4242
check "the second client did at least 10000 invocations" test "$(field invocations)" -ge 10000
check "none of them was lost or wrong" test "$(field lost)-$(field mismatched)" = "0-0"
check "no client had to push its cargo again (each new worker loaded the kept ones)" test "$(field repushed)" = 0
# A synchronous client has one request out when a worker ends: at most one resend per end.
check "resends were at most one per worker that ended" \
  test "$(( $(field interrupted) + $(field unanswered) ))" -le "$(( CRASHES + TIMEOUTS ))"
eventually 10 "the supervisor replaced the worker each time" lines_at_least "$(( CRASHES + TIMEOUTS ))" 'worker restarted; listening on' b.log ||
  echo "    | $(grep -c 'worker restarted' b.log) restarts, $(grep -c 'worker stopped' b.log) stops, $(grep -c 'could not start' b.log) failed starts;" \
    "workers that failed more than one kernel: $(grep 'failed invoke' b.log | awk '{print $2}' | sort | uniq -d | tr '\n' ' ')"
eventually 10 "every new worker kept the region" lines_at_least "$(( CRASHES + TIMEOUTS ))" 'node memory: 1 regions kept' b.log
check "the loader still serves" "$X" run hello.xcargo --entry add --arg i64:2 --arg i64:40 --result i64 --to "$(cat b.addr)"
check "standby workers loaded the kept cargos before they were needed" grep -q 'kept cargos: [0-9]* loaded from earlier workers' b.log

# Without a standby (--no-standby), a new worker starts after the crash: the same guarantees.
start c --no-standby
c=$(cat c.addr)
expect 0 '^77$' -- "$X" run memory.xcargo --entry put --arg u64:77 --result u64 --to "$c"
expect 3 'crashed' -- "$X" run memory.xcargo --entry boom --to "$c"
expect 0 '^77$' -- "$X" run memory.xcargo --entry get --result u64 --to "$c"
eventually 10 "without a standby, the supervisor restarted the worker" grep -q 'worker stopped: .*; restarting it' c.log
check "without a standby, one worker runs" test "$(pgrep -c -P "$pid_c" -x xcargo-loader)" = 1

# Stopping a loader stops its standby too.
workers() { echo "$(pgrep -c -P "$pid_a" -x xcargo-loader) $(pgrep -c -P "$pid_a" -x xcargo-standby)"; }
eventually 20 "the loader runs a worker and a standby" test "$(workers)" = "1 1"
# A ready standby that dies (killed, say) is reaped and replaced at once, not found dead at the
# next takeover (it stayed a zombie, unlogged, until then).
standby_pid=$(pgrep -n -P "$pid_a" -x xcargo-standby)
kill -KILL "$standby_pid"
eventually 10 "a killed standby is logged" grep -q 'standby worker ended before it was needed (killed by signal 9' a.log
eventually 20 "a new standby replaces it" bash -c "p=\$(pgrep -n -P $pid_a -x xcargo-standby); [ -n \"\$p\" ] && [ \"\$p\" != $standby_pid ]"
kill -TERM "$pid_a"
eventually 20 "the loader stopped" bash -c "! kill -0 $pid_a"
# Processes of that loader still running (not zombies waiting for init): PID:STATE:NAME.
leftovers() {
  local p s
  for p in $(pgrep -f -- '--ready-file [a].addr'); do
    [ -r "/proc/$p/stat" ] && s=$(awk '{print $3}' "/proc/$p/stat") || continue
    [ -n "$s" ] && [ "$s" != Z ] && echo "$p:$s:$(cat "/proc/$p/comm")"
  done
}
eventually 10 "no worker outlived it" test -z "$(leftovers)" || echo "    | still running: $(leftovers)"
finish
